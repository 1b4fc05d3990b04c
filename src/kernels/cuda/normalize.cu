// CUDA twins of row normalization (a warp per row) and axpy.
#include "cuda_ops.hpp"
#include "resources.cuh"

namespace tessel::kernels::cuda {

namespace {

__global__ void normalize_rows_kernel(std::int64_t n, std::int64_t f, float* __restrict__ x) {
  const std::int64_t row = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (row >= n) return; // uniform per warp
  float* row_data = x + row * f;
  double sum = 0.0;
  for (std::int64_t j = lane; j < f; j += 32)
    sum += fabs(static_cast<double>(row_data[j]));
  for (int offset = 16; offset > 0; offset /= 2)
    sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (sum == 0.0) return;
  const auto inverse = static_cast<float>(1.0 / sum);
  for (std::int64_t j = lane; j < f; j += 32)
    row_data[j] *= inverse;
}

__global__ void axpy_kernel(std::int64_t count, float alpha, const float* __restrict__ x,
                            float* __restrict__ y) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    y[i] += alpha * x[i];
}

} // namespace

void normalize_rows(Resources& r, std::int64_t n, std::int64_t f, float* x) {
  if (n * f == 0) return;
  const auto blocks = static_cast<unsigned int>((n * 32 + kThreads - 1) / kThreads);
  normalize_rows_kernel<<<blocks, kThreads, 0, r.stream>>>(n, f, x);
  TESSEL_CHECK_LAUNCH();
}

void axpy(Resources& r, std::int64_t count, float alpha, const float* x, float* y) {
  if (count == 0) return;
  axpy_kernel<<<blocks_for(count), kThreads, 0, r.stream>>>(count, alpha, x, y);
  TESSEL_CHECK_LAUNCH();
}

} // namespace tessel::kernels::cuda
