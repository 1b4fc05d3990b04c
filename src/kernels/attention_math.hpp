// The per-edge formulas of the attention ops, shared by the CPU and CUDA twins so both compute
// the same logits and draw the same dropout.
#pragma once

#include "tessel/core/rng.hpp"
#include "tessel/core/types.hpp"
#include "tessel/kernels/attention.hpp"

#include <cstdint>

namespace tessel::kernels::detail {

// Where a fused attention op reads the graph, for both twins: see attention.hpp.
struct AttentionArgs {
  std::int64_t rows = 0, cols = 0;
  const EdgeId* indptr = nullptr;
  const LocalId* indices = nullptr;
  int heads = 1;
  std::int64_t f = 0;    // columns per head
  bool average = false;  // output heads averaged, else concatenated
};

// e = LeakyReLU(s + t) and its derivative with respect to s + t.
TESSEL_HD inline float attention_logit(float s, float t) {
  const float x = s + t;
  return x > 0.0f ? x : kAttentionSlope * x;
}
TESSEL_HD inline float attention_logit_grad(float s, float t) {
  return s + t > 0.0f ? 1.0f : kAttentionSlope;
}

// The keep draw of coefficient (dst, src, head): 24 bits of a Philox block whose counter is
// (dst, src, head / 4, step) under the key's Philox key, word head % 4; kept iff the draw, as a
// uniform in [0, 1), is at least p. Ids enter by their low 32 bits. attention_draws gives the
// block of heads [4 group, 4 group + 4) at once, attention_kept one head's decision from it.
TESSEL_HD inline std::array<std::uint32_t, 4> attention_draws(const rng::Key& key,
                                                              std::int64_t dst, std::int64_t src,
                                                              int group) {
  const std::array<std::uint32_t, 4> counter = {
      static_cast<std::uint32_t>(dst), static_cast<std::uint32_t>(src),
      static_cast<std::uint32_t>(group), key.step};
  return rng::philox4x32(counter, key.philox_key());
}
TESSEL_HD inline bool attention_kept(std::uint32_t word, float p) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f) >= p;
}
TESSEL_HD inline bool attention_keep(const rng::Key& key, std::int64_t dst, std::int64_t src,
                                     int head, float p) {
  return attention_kept(attention_draws(key, dst, src, head / 4)[head % 4], p);
}

// The factor kept coefficients are scaled by: 1 / (1 - p).
TESSEL_HD inline float attention_keep_scale(float p) {
  return p > 0.0f ? 1.0f / (1.0f - p) : 1.0f;
}

// A stored coefficient (negative: dropped) as the weight the aggregation applies.
TESSEL_HD inline float attention_weight(float stored, float scale) {
  return stored > 0.0f ? stored * scale : 0.0f;
}

} // namespace tessel::kernels::detail
