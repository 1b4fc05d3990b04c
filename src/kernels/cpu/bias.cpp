// CPU twins of bias addition and column sums (the bias gradient).
#include "cpu_ops.hpp"

#include <omp.h>

#include <algorithm>
#include <vector>

namespace tessel::kernels::cpu {

void add_bias(std::int64_t n, std::int64_t f, const float* bias, float* y) {
#pragma omp parallel for schedule(static) if (parallel_worth(n * f))
  for (std::int64_t i = 0; i < n; ++i) {
    float* __restrict row = y + i * f;
    for (std::int64_t j = 0; j < f; ++j)
      row[j] += bias[j];
  }
}

void column_sums(std::int64_t n, std::int64_t f, const float* x, float* out, bool accumulate) {
  // Fixed row blocks summed in block order: the result does not depend on the thread count,
  // so runs with different --threads agree bit for bit.
  constexpr std::int64_t kBlockRows = 4096;
  const std::int64_t blocks = (n + kBlockRows - 1) / kBlockRows;
  std::vector<double> partial(static_cast<std::size_t>(blocks * f), 0.0);
#pragma omp parallel for schedule(static) if (parallel_worth(n * f))
  for (std::int64_t b = 0; b < blocks; ++b) {
    double* __restrict sum = partial.data() + b * f;
    const std::int64_t end = std::min(n, (b + 1) * kBlockRows);
    for (std::int64_t i = b * kBlockRows; i < end; ++i) {
      const float* __restrict row = x + i * f;
      for (std::int64_t j = 0; j < f; ++j)
        sum[j] += row[j];
    }
  }
  for (std::int64_t j = 0; j < f; ++j) {
    double total = accumulate ? out[j] : 0.0;
    for (std::int64_t b = 0; b < blocks; ++b)
      total += partial[b * f + j];
    out[j] = static_cast<float>(total);
  }
}

} // namespace tessel::kernels::cpu
