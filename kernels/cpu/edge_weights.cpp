// CPU twins of the GCN and mean edge-weight ops.
#include "cpu_ops.hpp"

#include <cmath>

namespace tessel::kernels::cpu {

void gcn_edge_weights(std::int64_t rows, const EdgeId* indptr, const LocalId* indices,
                      const std::int64_t* row_degree, const std::int64_t* col_degree,
                      float* values) {
#pragma omp parallel for schedule(dynamic, 1024) if (parallel_worth(indptr[rows] + rows))
  for (std::int64_t v = 0; v < rows; ++v) {
    const double dv = static_cast<double>(row_degree[v]) + 1.0;
    for (EdgeId e = indptr[v]; e < indptr[v + 1]; ++e) {
      const double du = static_cast<double>(col_degree[indices[e]]) + 1.0;
      values[e] = static_cast<float>(1.0 / std::sqrt(dv * du));
    }
  }
}

void mean_edge_weights(std::int64_t rows, const EdgeId* indptr, float* values) {
#pragma omp parallel for schedule(dynamic, 1024) if (parallel_worth(indptr[rows] + rows))
  for (std::int64_t v = 0; v < rows; ++v) {
    const EdgeId count = indptr[v + 1] - indptr[v];
    const float w = count > 0 ? static_cast<float>(1.0 / static_cast<double>(count)) : 0.0f;
    for (EdgeId e = indptr[v]; e < indptr[v + 1]; ++e)
      values[e] = w;
  }
}

} // namespace tessel::kernels::cpu
