// CPU twins of row normalization (input features) and axpy.
#include "cpu_ops.hpp"

#include <cmath>

namespace tessel::kernels::cpu {

void normalize_rows(std::int64_t n, std::int64_t f, float* x) {
#pragma omp parallel for schedule(static) if (parallel_worth(n * f))
  for (std::int64_t i = 0; i < n; ++i) {
    float* __restrict row = x + i * f;
    double sum = 0.0;
    for (std::int64_t j = 0; j < f; ++j)
      sum += std::fabs(row[j]);
    if (sum == 0.0) continue;
    const auto inverse = static_cast<float>(1.0 / sum);
    for (std::int64_t j = 0; j < f; ++j)
      row[j] *= inverse;
  }
}

void axpy(std::int64_t count, float alpha, const float* x, float* y) {
#pragma omp parallel for schedule(static) if (parallel_worth(count))
  for (std::int64_t i = 0; i < count; ++i)
    y[i] += alpha * x[i];
}

} // namespace tessel::kernels::cpu
