// CUDA twins of the GCN aggregation matrix and the mean edge-weight op (a thread per row).
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
    // The same double-precision formula as the CPU twin, so both round to the same float.
    const double dv = static_cast<double>(degree[v]) + 1.0;
    const auto sampled = static_cast<double>(end - begin);
    const double scale = sampled > 0 ? static_cast<double>(degree[v]) / sampled : 0.0;
    out_indices[out] = static_cast<LocalId>(v);
    out_values[out++] = static_cast<float>(1.0 / dv);
    for (EdgeId e = begin; e < end; ++e, ++out) {
      const LocalId u = indices[e];
      const double du = static_cast<double>(degree[u]) + 1.0;
      out_indices[out] = u;
      out_values[out] = static_cast<float>(scale / sqrt(du * dv));
    }
  }
}

__global__ void mean_edge_weights_kernel(std::int64_t rows, const EdgeId* __restrict__ indptr,
                                         float* __restrict__ values) {
  for (std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < rows;
       v += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const EdgeId count = indptr[v + 1] - indptr[v];
    const float w = count > 0 ? static_cast<float>(1.0 / static_cast<double>(count)) : 0.0f;
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
