// CUDA twins of the GCN aggregation matrix and the mean edge-weight op (a thread per row).
#include "../edge_weight_formula.hpp"
#include "cuda_ops.hpp"
#include "resources.cuh"

namespace tessel::kernels::cuda {

namespace {

__global__ void gcn_matrix_kernel(std::int64_t rows, const EdgeId* __restrict__ indptr,
                                  const LocalId* __restrict__ indices,
                                  const std::int64_t* __restrict__ degree,
                                  EdgeId* __restrict__ out_indptr,
                                  LocalId* __restrict__ out_indices,
                                  float* __restrict__ out_values) {
  for (std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v <= rows;
       v += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    out_indptr[v] = indptr[v] + v;
    if (v == rows) continue;
    const EdgeId begin = indptr[v], end = indptr[v + 1];
    EdgeId out = begin + v;
    // The CPU twin's formula (edge_weight_formula.hpp), so both round to the same float.
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

__global__ void mean_edge_weights_kernel(std::int64_t rows, const EdgeId* __restrict__ indptr,
                                         float* __restrict__ values) {
  for (std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < rows;
       v += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const EdgeId count = indptr[v + 1] - indptr[v];
    const float w = detail::mean_edge_weight(count);
    for (EdgeId e = indptr[v]; e < indptr[v + 1]; ++e)
      values[e] = w;
  }
}

} // namespace

void gcn_matrix(Resources& r, std::int64_t rows, const EdgeId* indptr, const LocalId* indices,
                const std::int64_t* degree, EdgeId* out_indptr, LocalId* out_indices,
                float* out_values) {
  gcn_matrix_kernel<<<blocks_for(rows + 1), kThreads, 0, r.stream>>>(
      rows, indptr, indices, degree, out_indptr, out_indices, out_values);
  TESSEL_CHECK_LAUNCH();
}

void mean_edge_weights(Resources& r, std::int64_t rows, const EdgeId* indptr, float* values) {
  if (rows == 0) return;
  mean_edge_weights_kernel<<<blocks_for(rows), kThreads, 0, r.stream>>>(rows, indptr, values);
  TESSEL_CHECK_LAUNCH();
}

} // namespace tessel::kernels::cuda
