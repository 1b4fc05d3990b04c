// The dropout draw for (node, column), shared by the CPU and CUDA twins so both keep the same bits.
#pragma once

#include "tessel/core/rng.hpp"
#include "tessel/core/types.hpp"

#include <array>
#include <cstdint>

namespace tessel::kernels::detail {

// One Philox block gives four 32-bit words, so columns 4q..4q+3 share draw q of the node;
// this quarters the Philox work while staying a pure function of (key, node, column).
TESSEL_HD inline bool dropout_keep_word(std::uint32_t word, float p) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f) >= p;
}

// The four words for columns 4q .. 4q+3 of `node`.
TESSEL_HD inline std::array<std::uint32_t, 4> dropout_block(const rng::Key& key, NodeId node,
                                                            std::int64_t q) {
  return key.block(static_cast<std::uint64_t>(node), static_cast<std::uint32_t>(q));
}

TESSEL_HD inline bool dropout_keep(const rng::Key& key, NodeId node, std::int64_t column, float p) {
  return dropout_keep_word(dropout_block(key, node, column >> 2)[column & 3], p);
}

} // namespace tessel::kernels::detail
