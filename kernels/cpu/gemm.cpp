// CPU twin of GEMM: OpenBLAS cblas_sgemm (its OpenMP build shares the engine's thread pool).
#include "cpu_ops.hpp"

#include <cblas.h>

#include <cstring>

namespace tessel::kernels::cpu {

void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k,
          float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
          float beta, float* c, std::int64_t ldc) {
  if (k == 0) {
    // BLAS may return early without applying beta; the result is beta c.
    for (std::int64_t i = 0; i < m; ++i) {
      float* row = c + i * ldc;
      if (beta == 0.0f) std::memset(row, 0, static_cast<std::size_t>(n) * sizeof(float));
      else
        for (std::int64_t j = 0; j < n; ++j) row[j] *= beta;
    }
    return;
  }
  // Leading dimensions of zero-width operands must still be >= 1.
  cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans,
              transpose_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda > 0 ? lda : 1), b, static_cast<blasint>(ldb > 0 ? ldb : 1),
              beta, c, static_cast<blasint>(ldc > 0 ? ldc : 1));
}

}  // namespace tessel::kernels::cpu
