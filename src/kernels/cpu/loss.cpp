// CPU twins of softmax cross-entropy (loss and gradient), argmax accuracy, squared error and
// binary cross-entropy with logits.
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

double squared_error(std::int64_t n, const float* pred, const float* target, double scale,
                     float* grad) {
  // Terms in double, added in element order (the CUDA twin adds the same terms on the host).
  double total = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double diff = static_cast<double>(pred[i]) - static_cast<double>(target[i]);
    total += diff * diff;
    if (grad) grad[i] = static_cast<float>(2.0 * scale * diff);
  }
  return total;
}

double binary_cross_entropy(std::int64_t n, const float* scores, const float* labels, double scale,
                            float* grad) {
  std::vector<double> term(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(static) if (parallel_worth(n))
  for (std::int64_t j = 0; j < n; ++j) {
    const double x = scores[j], y = labels[j];
    // softplus(x) = max(x, 0) + log1p(exp(-|x|)): no overflow for large |x|.
    term[static_cast<std::size_t>(j)] =
        std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))) - y * x;
    if (grad) {
      const double sigmoid =
          x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
      grad[j] = static_cast<float>(scale * (sigmoid - y));
    }
  }
  double total = 0.0;
  for (double t : term)
    total += t;
  return total;
}

} // namespace tessel::kernels::cpu
