// CPU twins of ReLU and dropout (masks drawn per (node id, column) with Philox).
#include "cpu_ops.hpp"

#include "../dropout_draw.hpp"

#include <bit>
#include <cstring>
#include <vector>

namespace tessel::kernels::cpu {

void relu_forward(std::int64_t count, const float* x, float* y) {
#pragma omp parallel for schedule(static) if (parallel_worth(count))
  for (std::int64_t i = 0; i < count; ++i)
    y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

// The backward loops load grad_y unconditionally and select: a load under the condition
// compiles to a branch, which mispredicts on half of the elements (measured: these two loops
// ran 6x slower than relu_forward over the same rows).
void relu_backward(std::int64_t count, const float* grad_y, const float* y, float* grad_x) {
#pragma omp parallel for schedule(static) if (parallel_worth(count))
  for (std::int64_t i = 0; i < count; ++i) {
    const float g = grad_y[i];
    grad_x[i] = y[i] > 0.0f ? g : 0.0f;
  }
}

void dropout_forward(std::int64_t n, std::int64_t f, const float* x, const NodeId* row_ids,
                     const rng::Key& key, float p, float* y, std::uint8_t* mask) {
  const float keep_scale = 1.0f / (1.0f - p);
  const std::uint32_t threshold = detail::dropout_threshold(p);
  const std::int64_t groups = (f + detail::kDropoutColumnsPerBlock - 1) / detail::kDropoutColumnsPerBlock;
#pragma omp parallel if (parallel_worth(n * f))
  {
    // A whole row's Philox blocks at once (rng::Key::blocks runs them as SIMD lanes). Column
    // 8g + k draws half k of block g's words, which on a little-endian host is simply the
    // (8g + k)-th 16-bit value of the block array: copy once, then a branch-free loop.
    std::vector<std::uint32_t> words(static_cast<std::size_t>(groups) * 4);
    std::vector<std::uint16_t> draws(static_cast<std::size_t>(groups) * detail::kDropoutColumnsPerBlock);
    static_assert(std::endian::native == std::endian::little, "dropout draws assume little-endian");
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      key.blocks(static_cast<std::uint64_t>(row_ids[i]), 0, static_cast<std::uint32_t>(groups),
                 words.data());
      std::memcpy(draws.data(), words.data(), draws.size() * sizeof(std::uint16_t));
      const float* xr = x + i * f;
      float* yr = y + i * f;
      const std::uint16_t* dr = draws.data();
      // Arithmetic instead of branches: half the draws go each way, so a branch mispredicts.
      if (mask) {
        std::uint8_t* mr = mask + i * f;
        for (std::int64_t j = 0; j < f; ++j) {
          const std::uint8_t keep = dr[j] >= threshold;
          mr[j] = keep;
          yr[j] = xr[j] * (static_cast<float>(keep) * keep_scale);
        }
      } else {
        for (std::int64_t j = 0; j < f; ++j)
          yr[j] = xr[j] * (static_cast<float>(dr[j] >= threshold) * keep_scale);
      }
    }
  }
}

void dropout_backward(std::int64_t count, const float* grad_y, const std::uint8_t* mask, float p,
                      float* grad_x) {
  const float keep_scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static) if (parallel_worth(count))
  for (std::int64_t i = 0; i < count; ++i) {
    // Dropped elements become +0 through a bit mask (also when grad_y is not finite).
    const float g = grad_y[i] * keep_scale;
    const std::uint32_t keep_bits = 0u - static_cast<std::uint32_t>(mask[i] != 0);
    grad_x[i] = std::bit_cast<float>(std::bit_cast<std::uint32_t>(g) & keep_bits);
  }
}

void relu_dropout_forward(std::int64_t n, std::int64_t f, const float* x, const NodeId* row_ids,
                          const rng::Key& key, float p, float* y, std::uint8_t* bits) {
  const float keep_scale = 1.0f / (1.0f - p);
  const std::uint32_t threshold = detail::dropout_threshold(p);
  const std::int64_t groups = (f + detail::kDropoutColumnsPerBlock - 1) / detail::kDropoutColumnsPerBlock;
  const std::int64_t row_bytes = (f + 7) / 8;
#pragma omp parallel if (parallel_worth(n * f))
  {
    std::vector<std::uint32_t> words(static_cast<std::size_t>(groups) * 4);
    std::vector<std::uint16_t> draws(static_cast<std::size_t>(groups) * detail::kDropoutColumnsPerBlock);
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      if (p > 0.0f) {
        key.blocks(static_cast<std::uint64_t>(row_ids[i]), 0, static_cast<std::uint32_t>(groups),
                   words.data());
        std::memcpy(draws.data(), words.data(), draws.size() * sizeof(std::uint16_t));
      }
      const float* xr = x + i * f;
      float* yr = y + i * f;
      std::uint8_t* br = bits + i * row_bytes;
      std::memset(br, 0, static_cast<std::size_t>(row_bytes));
      for (std::int64_t j = 0; j < f; ++j) {
        const bool kept = p == 0.0f || draws[static_cast<std::size_t>(j)] >= threshold;
        const float v = xr[j] > 0.0f && kept ? xr[j] * keep_scale : 0.0f;
        yr[j] = v;
        br[j >> 3] |= static_cast<std::uint8_t>((v > 0.0f ? 1u : 0u) << (j & 7));
      }
    }
  }
}

void relu_dropout_backward(std::int64_t n, std::int64_t f, const float* grad_y,
                           const std::uint8_t* bits, float p, float* grad_x) {
  const float keep_scale = 1.0f / (1.0f - p);
  const std::int64_t row_bytes = (f + 7) / 8;
#pragma omp parallel for schedule(static) if (parallel_worth(n * f))
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint8_t* br = bits + i * row_bytes;
    for (std::int64_t j = 0; j < f; ++j) {
      // Cleared elements become +0 through a bit mask (also when grad_y is not finite).
      const float g = grad_y[i * f + j] * keep_scale;
      const std::uint32_t keep_bits = 0u - ((br[j >> 3] >> (j & 7)) & 1u);
      grad_x[i * f + j] = std::bit_cast<float>(std::bit_cast<std::uint32_t>(g) & keep_bits);
    }
  }
}

} // namespace tessel::kernels::cpu
