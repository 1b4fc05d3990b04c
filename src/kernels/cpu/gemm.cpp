// CPU twin of GEMM: oneDNN's dnnl_sgemm when the build found it, else OpenBLAS's cblas_sgemm
// (both run on the engine's OpenMP thread pool).
#include "cpu_ops.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"

#include <cblas.h>
#include <omp.h>
#ifdef TESSEL_GEMM_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

#include <cstring>
#include <mutex>
#include <string>

namespace tessel::kernels::cpu {

namespace {

#ifndef TESSEL_GEMM_ONEDNN
// OpenBLAS's DYNAMIC_ARCH picks its kernels by CPU model at load time; a release that does
// not know the CPU (Debian 12's 0.3.21 on Sapphire Rapids) falls back to its SSE3 "Prescott"
// kernels, several times slower. Only OPENBLAS_CORETYPE, read at load, can change that, so
// say so once instead of running slow silently. (Builds with oneDNN do not have the problem:
// oneDNN dispatches on CPU features.)
void warn_if_blas_kernels_are_narrow() {
#if defined(__x86_64__) && defined(__GNUC__)
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string core = openblas_get_corename();
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2")) return;
    for (const char* narrow : {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom",
                               "Sandybridge", "generic", "Generic"}) {
      if (core == narrow) {
        log::write(log::Level::warn, false,
                   "OpenBLAS uses its " + core + " kernels on a CPU with " +
                       (__builtin_cpu_supports("avx512f") ? "AVX-512" : "AVX2") +
                       ": dense layers run several times slower than they could; install "
                       "oneDNN (libdnnl-dev) and rebuild, or set OPENBLAS_CORETYPE=" +
                       (__builtin_cpu_supports("avx512f") ? "SkylakeX" : "Haswell") +
                       " in the environment (mpirun -x OPENBLAS_CORETYPE=...)");
        return;
      }
    }
  });
#endif
}
#endif

} // namespace

const char* gemm_backend() {
#ifdef TESSEL_GEMM_ONEDNN
  return "onednn";
#else
  return "openblas";
#endif
}

void set_threads(int threads) {
  omp_set_num_threads(threads);
  // oneDNN's OpenMP build reads omp_get_max_threads() at each call; OpenBLAS keeps its own
  // count, used by the fallback GEMM.
  openblas_set_num_threads(threads);
}

void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k,
          float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
          float beta, float* c, std::int64_t ldc) {
  if (k == 0) {
    // BLAS may return early without applying beta; the result is beta c.
    for (std::int64_t i = 0; i < m; ++i) {
      float* row = c + i * ldc;
      if (beta == 0.0f)
        std::memset(row, 0, static_cast<std::size_t>(n) * sizeof(float));
      else
        for (std::int64_t j = 0; j < n; ++j)
          row[j] *= beta;
    }
    return;
  }
  // Leading dimensions of zero-width operands must still be >= 1.
  lda = lda > 0 ? lda : 1;
  ldb = ldb > 0 ? ldb : 1;
  ldc = ldc > 0 ? ldc : 1;
#ifdef TESSEL_GEMM_ONEDNN
  // dnnl_sgemm takes row-major operands, like cblas with CblasRowMajor.
  const dnnl_status_t status = dnnl_sgemm(transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N', m, n,
                                          k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success)
    TESSEL_LIB_FAIL("dnnl_sgemm failed with status {} (m {}, n {}, k {}, lda {}, ldb {}, ldc {})",
                    static_cast<int>(status), m, n, k, lda, ldb, ldc);
#else
  warn_if_blas_kernels_are_narrow();
  cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans,
              transpose_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
              static_cast<blasint>(ldc));
#endif
}

} // namespace tessel::kernels::cpu
