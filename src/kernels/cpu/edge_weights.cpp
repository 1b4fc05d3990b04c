// CPU twins of the GCN aggregation matrix and the mean edge-weight op.
#include "cpu_ops.hpp"
#include "../edge_weight_formula.hpp"

namespace tessel::kernels::cpu {

void gcn_matrix(std::int64_t rows, const EdgeId* indptr, const LocalId* indices,
                const std::int64_t* degree, EdgeId* out_indptr, LocalId* out_indices,
                float* out_values) {
  // Each row gains one entry in front, so the new offsets need no scan.
#pragma omp parallel for schedule(static) if (parallel_worth(rows))
  for (std::int64_t v = 0; v <= rows; ++v)
    out_indptr[v] = indptr[v] + v;
#pragma omp parallel for schedule(dynamic, 1024) if (parallel_worth(indptr[rows] + rows))
  for (std::int64_t v = 0; v < rows; ++v) {
    const EdgeId begin = indptr[v], end = indptr[v + 1];
    EdgeId out = begin + v;
    const double dv = detail::gcn_degree_term(degree[v]);
    const double scale = detail::gcn_row_scale(degree[v], end - begin);
    out_indices[out] = static_cast<LocalId>(v);
    out_values[out++] = detail::gcn_self_weight(dv);
    for (EdgeId e = begin; e < end; ++e, ++out) {
      const LocalId u = indices[e];
      out_indices[out] = u;
      out_values[out] = detail::gcn_edge_weight(scale, detail::gcn_degree_term(degree[u]), dv);
    }
  }
}

void mean_edge_weights(std::int64_t rows, const EdgeId* indptr, float* values) {
#pragma omp parallel for schedule(dynamic, 1024) if (parallel_worth(indptr[rows] + rows))
  for (std::int64_t v = 0; v < rows; ++v) {
    const EdgeId count = indptr[v + 1] - indptr[v];
    const float w = detail::mean_edge_weight(count);
    for (EdgeId e = indptr[v]; e < indptr[v + 1]; ++e)
      values[e] = w;
  }
}

} // namespace tessel::kernels::cpu
