// The dropout draw for (node, column), shared by the CPU and CUDA twins so both keep the same bits.
#pragma once

#include "tessel/core/rng.hpp"
#include "tessel/core/types.hpp"

#include <array>
#include <cstdint>

namespace tessel::kernels::detail {

// One Philox block (four 32-bit words) serves 8 columns with 16 bits each: columns 8g .. 8g+7
// of a node use block g of key.block(node, g), column 8g + k the half (k & 1) of word k / 2.
// The draw stays a pure function of (key, node, column) — never of row order or rank count.
constexpr std::int64_t kDropoutColumnsPerBlock = 8;

// Bytes per row of a dropout mask (one bit per column, column j is bit j % 8 of byte j / 8):
// one byte per Philox block. Bits past the last column are 0.
TESSEL_HD constexpr std::int64_t dropout_mask_row_bytes(std::int64_t columns) {
  return (columns + kDropoutColumnsPerBlock - 1) / kDropoutColumnsPerBlock;
}

// Column is kept iff its 16-bit draw >= threshold: drop probability threshold / 65536.
TESSEL_HD inline std::uint32_t dropout_threshold(float p) {
  const float t = p * 65536.0f + 0.5f;
  return t >= 65536.0f ? 65536u : static_cast<std::uint32_t>(t);
}

// The draw of column 8g + k from block g's words.
TESSEL_HD inline std::uint32_t dropout_draw16(const std::uint32_t* words, std::int64_t k) {
  const std::uint32_t w = words[k >> 1];
  return (k & 1) ? (w >> 16) : (w & 0xFFFFu);
}

// The keep bits of columns 8g .. 8g + 7 from block g's words: bit k is column 8g + k.
TESSEL_HD inline std::uint32_t dropout_keep_byte(const std::uint32_t* words,
                                                 std::uint32_t threshold) {
  std::uint32_t byte = 0;
  for (int k = 0; k < kDropoutColumnsPerBlock; ++k)
    byte |= (dropout_draw16(words, k) >= threshold ? 1u : 0u) << k;
  return byte;
}

TESSEL_HD inline bool dropout_keep(const rng::Key& key, NodeId node, std::int64_t column,
                                   std::uint32_t threshold) {
  const auto words = key.block(static_cast<std::uint64_t>(node),
                               static_cast<std::uint32_t>(column / kDropoutColumnsPerBlock));
  return dropout_draw16(words.data(), column % kDropoutColumnsPerBlock) >= threshold;
}

}  // namespace tessel::kernels::detail
