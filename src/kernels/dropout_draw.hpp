// The dropout draw for (node, column), shared by the CPU and CUDA twins so both keep the same bits.
#pragma once

#include "tessel/core/rng.hpp"
#include "tessel/core/types.hpp"

#include <array>
#include <cstdint>

namespace tessel::kernels::detail {

// Column j of a node has a 16-bit draw u_j and is kept iff u_j >= threshold (drop probability
// threshold / 65536). The draws are stored bit-sliced: j lies in 128-column chunk q = j / 128,
// 32-column word k = (j % 128) / 32, at bit i = j % 32, and bit 15 - s of u_j (level s, s = 0
// the most significant) is bit i of word k of key.block(node, 16 q + s). One Philox block thus
// holds one level of 128 columns, and the compare u_j >= threshold reads the levels from the
// most significant down only as far as the threshold's lowest set bit: p = 0.5 needs one block
// per 128 columns, p = 0.25 two, and any p at most 16 (one per 8 columns). The draw stays a pure
// function of (key, node, column), never of row order or rank count.
constexpr std::int64_t kDropoutChunkColumns = 128;
constexpr int kDropoutLevels = 16;

// Bytes per row of a dropout mask (one bit per column, column j is bit j % 8 of byte j / 8).
// Bits past the last column are 0.
TESSEL_HD constexpr std::int64_t dropout_mask_row_bytes(std::int64_t columns) {
  return (columns + 7) / 8;
}

// Column is kept iff its 16-bit draw >= threshold: drop probability threshold / 65536.
TESSEL_HD inline std::uint32_t dropout_threshold(float p) {
  const float t = p * 65536.0f + 0.5f;
  return t >= 65536.0f ? 65536u : static_cast<std::uint32_t>(t);
}

// The levels the compare against `threshold` reads: down to its lowest set bit. 0 when nothing
// is drawn: threshold 0 keeps every column, 65536 none.
TESSEL_HD inline int dropout_levels(std::uint32_t threshold) {
  if (threshold == 0 || threshold > 0xFFFFu) return 0;
  int zeros = 0;
  while (((threshold >> zeros) & 1u) == 0) ++zeros;
  return kDropoutLevels - zeros;
}

// One level of the bit-sliced compare u >= threshold over 32 columns at once: `r` holds bit
// 15 - s of their draws. `greater` gathers the columns already known to be above the threshold,
// `equal` those whose levels so far equal its bits; after the last level kept = greater | equal
// (the threshold's lower bits are 0). Works on any unsigned word width (the vector paths run it
// on 64-bit lanes whose upper halves they ignore).
template <class Word>
TESSEL_HD inline void dropout_compare_level(std::uint32_t threshold, int s, Word r, Word& greater,
                                            Word& equal) {
  if ((threshold >> (kDropoutLevels - 1 - s)) & 1u) {
    equal &= r;
  } else {
    greater |= equal & r;
    equal &= ~r;
  }
}

// The keep bits of columns 32 word .. 32 word + 31 of `node` (bit i for column 32 word + i).
TESSEL_HD inline std::uint32_t dropout_keep_word(const rng::Key& key, std::uint64_t node,
                                                 std::int64_t word, std::uint32_t threshold) {
  if (threshold > 0xFFFFu) return 0;
  const int levels = dropout_levels(threshold);
  const auto first = static_cast<std::uint32_t>(word / 4 * kDropoutLevels);
  const auto k = static_cast<int>(word % 4);
  const auto philox_key = key.philox_key();
  std::uint32_t greater = 0, equal = ~0u;
  for (int s = 0; s < levels; ++s) {
    const auto words =
        rng::philox4x32(key.counter(node, first + static_cast<std::uint32_t>(s)), philox_key);
    dropout_compare_level(threshold, s, words[k], greater, equal);
  }
  return greater | equal;
}

// The reference: u_j assembled from all 16 levels, as the layout above defines it.
TESSEL_HD inline std::uint32_t dropout_draw16(const rng::Key& key, NodeId node,
                                              std::int64_t column) {
  const std::int64_t q = column / kDropoutChunkColumns, k = (column % kDropoutChunkColumns) / 32;
  const auto bit = static_cast<int>(column % 32);
  std::uint32_t u = 0;
  for (int s = 0; s < kDropoutLevels; ++s) {
    const auto words = key.block(static_cast<std::uint64_t>(node),
                                 static_cast<std::uint32_t>(q * kDropoutLevels + s));
    u |= ((words[k] >> bit) & 1u) << (kDropoutLevels - 1 - s);
  }
  return u;
}

TESSEL_HD inline bool dropout_keep(const rng::Key& key, NodeId node, std::int64_t column,
                                   std::uint32_t threshold) {
  return dropout_draw16(key, node, column) >= threshold;
}

}  // namespace tessel::kernels::detail
