// CPU twins of ReLU and dropout (masks drawn per (node id, column) with Philox).
#include "cpu_ops.hpp"

#include "../dropout_draw.hpp"

namespace tessel::kernels::cpu {

void relu_forward(std::int64_t count, const float* x, float* y) {
#pragma omp parallel for schedule(static) if (parallel_worth(count))
  for (std::int64_t i = 0; i < count; ++i)
    y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void relu_backward(std::int64_t count, const float* grad_y, const float* y, float* grad_x) {
#pragma omp parallel for schedule(static) if (parallel_worth(count))
  for (std::int64_t i = 0; i < count; ++i)
    grad_x[i] = y[i] > 0.0f ? grad_y[i] : 0.0f;
}

void dropout_forward(std::int64_t n, std::int64_t f, const float* x, const NodeId* row_ids,
                     const rng::Key& key, float p, float* y, std::uint8_t* mask) {
  const float keep_scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static) if (parallel_worth(n * f))
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t q = 0; q * 4 < f; ++q) {
      const auto words = detail::dropout_block(key, row_ids[i], q);
      for (std::int64_t j = q * 4; j < f && j < q * 4 + 4; ++j) {
        const bool keep = detail::dropout_keep_word(words[j & 3], p);
        mask[i * f + j] = keep ? 1 : 0;
        y[i * f + j] = keep ? x[i * f + j] * keep_scale : 0.0f;
      }
    }
  }
}

void dropout_backward(std::int64_t count, const float* grad_y, const std::uint8_t* mask, float p,
                      float* grad_x) {
  const float keep_scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static) if (parallel_worth(count))
  for (std::int64_t i = 0; i < count; ++i)
    grad_x[i] = mask[i] ? grad_y[i] * keep_scale : 0.0f;
}

} // namespace tessel::kernels::cpu
