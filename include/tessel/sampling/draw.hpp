// The neighbor draw shared by the CPU and CUDA samplers: which positions of a row are chosen.
#pragma once

#include "tessel/core/rng.hpp"
#include "tessel/core/types.hpp"

#include <array>
#include <cstdint>

namespace tessel::sampling {

// Fanout meaning "take every neighbor".
constexpr int kAllNeighbors = -1;

// How many neighbors a row of in-degree `degree` contributes: min(fanout, degree), or all of
// them for a negative fanout.
TESSEL_HD inline std::int64_t sample_count(std::int64_t degree, int fanout) {
  return (fanout < 0 || fanout >= degree) ? degree : static_cast<std::int64_t>(fanout);
}

// The draws of one node: draw i (i = 0, 1, 2, ... in order) is uniform in [0, bound) for any
// 1 <= bound < 2^32. Draw i reads 32-bit word (i & 3) of Philox block (node_key, i / 4), so one
// Philox call serves four draws, and maps it with Lemire's multiply-shift; the rare word that
// would bias the result (probability < bound / 2^32) is rejected and replaced by words of the
// blocks (node_key, 2^31 + 8 i + r / 4), r = 0, 1, ... — so every draw is exactly uniform and
// still a pure function of (key, node_key, i, bound). This is the contract every sampler twin
// follows: same key, node and bound sequence, same positions.
class NodeDraws {
public:
  TESSEL_HD NodeDraws(const rng::Key& key, std::uint64_t node_key) : key_(key), node_(node_key) {}

  TESSEL_HD std::uint32_t next(std::uint32_t i, std::uint32_t bound) {
    if ((i & 3u) == 0) block_ = key_.block(node_, i >> 2);
    std::uint64_t m = static_cast<std::uint64_t>(block_[i & 3u]) * bound;
    if (static_cast<std::uint32_t>(m) < bound) {
      const std::uint32_t threshold = (0u - bound) % bound; // 2^32 mod bound
      for (std::uint32_t r = 0; static_cast<std::uint32_t>(m) < threshold; ++r) {
        const auto extra = key_.block(node_, 0x80000000u + 8u * i + (r >> 2));
        m = static_cast<std::uint64_t>(extra[r & 3u]) * bound;
      }
    }
    return static_cast<std::uint32_t>(m >> 32);
  }

private:
  rng::Key key_;
  std::uint64_t node_;
  std::array<std::uint32_t, 4> block_{};
};

// Chooses `count` distinct positions of [0, degree) uniformly (every count-subset equally
// likely) and writes them to pos[0, count) in draw order. Requires 0 < count < degree < 2^32
// and room for `count` entries of T (T must hold values up to degree - 1).
//
// Floyd's algorithm: step i (j = degree - count + i) draws t in [0, j] (NodeDraws, bound j + 1)
// and takes t, or j if t is already taken. The draws are a pure function of (key, node_key, i)
// and whether t was taken depends only on earlier draws, so the positions *and their order* are
// the same on every rank, thread and device — no sort needed.
//
// Membership: a 256-bit filter of (position mod 256) answers exactly for rows of degree <= 256
// and rules out most non-members of longer rows; only a filter hit on a long row scans the
// positions taken so far. Cost O(count) draws plus rare O(count) scans; the CPU sampler switches
// to a bitmap for long draws — the same draws, so the same choices.
template <class T>
TESSEL_HD inline void floyd_positions(const rng::Key& key, std::uint64_t node_key,
                                      std::int64_t degree, std::int64_t count, T* pos) {
  NodeDraws draws(key, node_key);
  std::uint64_t seen[4] = {0, 0, 0, 0};
  const bool filter_is_exact = degree <= 256;
  for (std::int64_t i = 0; i < count; ++i) {
    const auto bound = static_cast<std::uint32_t>(degree - count + i + 1); // j + 1
    const T t = static_cast<T>(draws.next(static_cast<std::uint32_t>(i), bound));
    const auto bit = static_cast<std::uint32_t>(t) & 255u;
    bool taken = ((seen[bit >> 6] >> (bit & 63u)) & 1u) != 0;
    if (taken && !filter_is_exact) {
      taken = false;
      for (std::int64_t k = 0; k < i; ++k)
        taken |= (pos[k] == t);
    }
    const T pick = taken ? static_cast<T>(bound - 1) : t;
    const auto pick_bit = static_cast<std::uint32_t>(pick) & 255u;
    seen[pick_bit >> 6] |= std::uint64_t{1} << (pick_bit & 63u);
    pos[i] = pick;
  }
}

} // namespace tessel::sampling
