// CPU twin of the Hadamard link head: scores of node pairs and their backward pass.
#include "cpu_ops.hpp"

#include <vector>

namespace tessel::kernels::cpu {

void link_scores(std::int64_t pairs, std::int64_t h, const float* z, const LocalId* src,
                 const LocalId* dst, const float* w, const float* b, float* scores) {
  const float bias = b[0];
#pragma omp parallel for schedule(static) if (parallel_worth(pairs * h))
  for (std::int64_t j = 0; j < pairs; ++j) {
    const float* a = z + static_cast<std::int64_t>(src[j]) * h;
    const float* c = z + static_cast<std::int64_t>(dst[j]) * h;
    float s = 0;
    for (std::int64_t k = 0; k < h; ++k)
      s += w[k] * a[k] * c[k];
    scores[j] = s + bias;
  }
}

void link_scores_backward(std::int64_t pairs, std::int64_t h, const float* z, const LocalId* src,
                          const LocalId* dst, const float* w, const float* grad_scores,
                          float* grad_z, float* grad_w, float* grad_b) {
  // Double accumulators: a sum over millions of pairs.
  std::vector<double> gw(static_cast<std::size_t>(h), 0.0);
  double gb = 0;
  // Pairs share rows in any pattern, so the scatter into grad_z stays on one thread.
  for (std::int64_t j = 0; j < pairs; ++j) {
    const float gj = grad_scores[j];
    if (gj == 0.0f) continue;
    const std::int64_t u = src[j], v = dst[j];
    const float* a = z + u * h;
    const float* c = z + v * h;
    float* ga = grad_z + u * h;
    float* gc = grad_z + v * h;
    for (std::int64_t k = 0; k < h; ++k) {
      const float ak = a[k], ck = c[k];
      ga[k] += gj * w[k] * ck;
      gc[k] += gj * w[k] * ak;
      gw[static_cast<std::size_t>(k)] += static_cast<double>(gj) * ak * ck;
    }
    gb += gj;
  }
  for (std::int64_t k = 0; k < h; ++k)
    grad_w[k] += static_cast<float>(gw[static_cast<std::size_t>(k)]);
  grad_b[0] += static_cast<float>(gb);
}

} // namespace tessel::kernels::cpu
