// CPU twins of softmax cross-entropy (loss and gradient) and argmax accuracy.
#include "cpu_ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace tessel::kernels::cpu {

double softmax_cross_entropy(std::int64_t n, std::int64_t c, const float* logits, std::int64_t k,
                             const LocalId* rows, const std::int64_t* labels, double scale,
                             float* grad) {
  if (n * c > 0) std::memset(grad, 0, static_cast<std::size_t>(n * c) * sizeof(float));
  // Per-row losses are summed afterwards in row order: the total does not depend on threads.
  std::vector<double> row_loss(static_cast<std::size_t>(k));
#pragma omp parallel for schedule(static) if (parallel_worth(k * c))
  for (std::int64_t i = 0; i < k; ++i) {
    const float* z = logits + static_cast<std::int64_t>(rows[i]) * c;
    float* g = grad + static_cast<std::int64_t>(rows[i]) * c;
    double max_z = z[0];
    for (std::int64_t j = 1; j < c; ++j)
      max_z = std::max(max_z, static_cast<double>(z[j]));
    double sum = 0.0;
    for (std::int64_t j = 0; j < c; ++j)
      sum += std::exp(static_cast<double>(z[j]) - max_z);
    const double log_sum = std::log(sum) + max_z;
    row_loss[static_cast<std::size_t>(i)] = log_sum - static_cast<double>(z[labels[i]]);
    for (std::int64_t j = 0; j < c; ++j) {
      const double prob = std::exp(static_cast<double>(z[j]) - log_sum);
      g[j] = static_cast<float>(scale * (prob - (j == labels[i] ? 1.0 : 0.0)));
    }
  }
  double total = 0.0;
  for (double l : row_loss)
    total += l;
  return total;
}

std::int64_t count_correct(std::int64_t c, const float* logits, std::int64_t k, const LocalId* rows,
                           const std::int64_t* labels) {
  std::int64_t correct = 0;
#pragma omp parallel for schedule(static) reduction(+ : correct) if (parallel_worth(k * c))
  for (std::int64_t i = 0; i < k; ++i) {
    const float* z = logits + static_cast<std::int64_t>(rows[i]) * c;
    std::int64_t best = 0;
    for (std::int64_t j = 1; j < c; ++j)
      if (z[j] > z[best]) best = j;
    correct += best == labels[i] ? 1 : 0;
  }
  return correct;
}

} // namespace tessel::kernels::cpu
