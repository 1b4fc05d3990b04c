// CUDA twins of the GCN and mean edge-weight ops (a thread per row).
#include "cuda_ops.hpp"
#include "resources.cuh"

namespace tessel::kernels::cuda {

namespace {

__global__ void gcn_edge_weights_kernel(std::int64_t rows, const EdgeId* __restrict__ indptr,
                                        const LocalId* __restrict__ indices,
                                        const std::int64_t* __restrict__ row_degree,
                                        const std::int64_t* __restrict__ col_degree,
                                        float* __restrict__ values) {
  for (std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < rows;
       v += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const double dv = static_cast<double>(row_degree[v]) + 1.0;
    for (EdgeId e = indptr[v]; e < indptr[v + 1]; ++e) {
      const double du = static_cast<double>(col_degree[indices[e]]) + 1.0;
      values[e] = static_cast<float>(1.0 / sqrt(dv * du));
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

void gcn_edge_weights(Resources& r, std::int64_t rows, const EdgeId* indptr, const LocalId* indices,
                      const std::int64_t* row_degree, const std::int64_t* col_degree,
                      float* values) {
  if (rows == 0) return;
  gcn_edge_weights_kernel<<<blocks_for(rows), kThreads, 0, r.stream>>>(
      rows, indptr, indices, row_degree, col_degree, values);
  TESSEL_CHECK_LAUNCH();
}

void mean_edge_weights(Resources& r, std::int64_t rows, const EdgeId* indptr, float* values) {
  if (rows == 0) return;
  mean_edge_weights_kernel<<<blocks_for(rows), kThreads, 0, r.stream>>>(rows, indptr, values);
  TESSEL_CHECK_LAUNCH();
}

} // namespace tessel::kernels::cuda
