// CUDA twin of GEMM: cublasSgemm on row-major operands (computed as the column-major C^T).
#include "cuda_ops.hpp"
#include "resources.cuh"

#include <limits>

namespace tessel::kernels::cuda {

namespace {
__global__ void scale_kernel(std::int64_t count, float beta, float* __restrict__ c) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    c[i] = beta == 0.0f ? 0.0f : beta * c[i];
}
} // namespace

void gemm(Resources& r, bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n,
          std::int64_t k, float alpha, const float* a, std::int64_t lda, const float* b,
          std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // cuBLAS may skip beta scaling when k == 0; the result is beta c (rows are contiguous).
    scale_kernel<<<blocks_for(m * ldc), kThreads, 0, r.stream>>>(m * ldc, beta, c);
    TESSEL_CHECK_LAUNCH();
    return;
  }
  constexpr std::int64_t kMax = std::numeric_limits<int>::max();
  TESSEL_EXPECTS(m <= kMax && n <= kMax && k <= kMax, "gemm (cuBLAS): {}x{}x{} exceeds int", m, n,
                 k);
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  TESSEL_CHECK_CUBLAS(cublasSgemm(
      r.cublas, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b,
      static_cast<int>(ldb > 0 ? ldb : 1), a, static_cast<int>(lda > 0 ? lda : 1), &beta, c,
      static_cast<int>(ldc > 0 ? ldc : 1)));
}

} // namespace tessel::kernels::cuda
