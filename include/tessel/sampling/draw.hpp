// The neighbor draw shared by the CPU and CUDA samplers: which positions of a row are chosen.
#pragma once

#include "tessel/core/rng.hpp"
#include "tessel/core/types.hpp"

#include <cstdint>

namespace tessel::sampling {

// Fanout meaning "take every neighbor".
constexpr int kAllNeighbors = -1;

// How many neighbors a row of in-degree `degree` contributes: min(fanout, degree), or all of
// them for a negative fanout.
TESSEL_HD inline std::int64_t sample_count(std::int64_t degree, int fanout) {
  return (fanout < 0 || fanout >= degree) ? degree : static_cast<std::int64_t>(fanout);
}

// Chooses `count` distinct positions of [0, degree) uniformly (every count-subset equally
// likely) and writes them ascending to pos[0, count). Requires 0 < count < degree and room for
// `count` entries of T (T must hold values up to degree - 1).
//
// Floyd's algorithm: step i (j = degree - count + i) draws t in [0, j] and takes t, or j if t is
// already taken. The draws are a pure function of (key, node_key, i) — never of the row's
// storage order, the thread or the device — so the chosen *set* is reproducible anywhere, and
// emitting it ascending makes the output order reproducible too. Draw i uses 64-bit half
// (i & 1) of Philox block (node_key, i / 2), so one Philox call serves two draws.
//
// Membership is a binary search in the sorted prefix; a fresh t is inserted in place. Because
// j exceeds every position taken before step i, the "already taken" case simply appends j.
// Cost O(count log count + count^2 / 4 moves): meant for fanouts up to a few hundred; the CPU
// sampler switches to a bitmap above that, drawing the same t values.
template <class T>
TESSEL_HD inline void floyd_sorted_positions(const rng::Key& key, std::uint64_t node_key,
                                             std::int64_t degree, std::int64_t count, T* pos) {
  std::uint32_t block[4] = {0, 0, 0, 0};
  std::int64_t size = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    if ((i & 1) == 0) {
      const auto b = key.block(node_key, static_cast<std::uint32_t>(i >> 1));
      block[0] = b[0];
      block[1] = b[1];
      block[2] = b[2];
      block[3] = b[3];
    }
    const int h = static_cast<int>(i & 1) * 2;
    const std::uint64_t bits = (static_cast<std::uint64_t>(block[h]) << 32) | block[h + 1];
    const std::uint64_t bound = static_cast<std::uint64_t>(degree - count + i) + 1;  // j + 1
    const T t = static_cast<T>((static_cast<unsigned __int128>(bits) * bound) >> 64);
    std::int64_t lo = 0, hi = size;
    while (lo < hi) {
      const std::int64_t mid = (lo + hi) >> 1;
      if (pos[mid] < t) lo = mid + 1;
      else hi = mid;
    }
    if (lo < size && pos[lo] == t) {
      pos[size++] = static_cast<T>(bound - 1);
    } else {
      for (std::int64_t k = size; k > lo; --k) pos[k] = pos[k - 1];
      pos[lo] = t;
      ++size;
    }
  }
}

// Draw i of Floyd's algorithm for `node_key`, t in [0, bound): the same bits the sorted
// variant above uses, for samplers that keep membership elsewhere (a bitmap).
TESSEL_HD inline std::uint64_t floyd_draw(const rng::Key& key, std::uint64_t node_key,
                                          std::int64_t i, std::uint64_t bound) {
  const auto b = key.block(node_key, static_cast<std::uint32_t>(i >> 1));
  const int h = static_cast<int>(i & 1) * 2;
  const std::uint64_t bits = (static_cast<std::uint64_t>(b[h]) << 32) | b[h + 1];
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(bits) * bound) >> 64);
}

}  // namespace tessel::sampling
