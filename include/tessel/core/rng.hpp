// Counter-based random numbers (Philox4x32-10): a draw depends only on its key and counter.
#pragma once

#include "tessel/core/types.hpp"

#include <array>
#include <cstdint>

namespace tessel::rng {

// Philox4x32 with 10 rounds (Salmon et al., SC'11). Pure function of (counter, key); usable
// from host and device code.
TESSEL_HD inline std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 4> ctr,
                                                         std::array<std::uint32_t, 2> key) {
  constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(kM0) * ctr[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(kM1) * ctr[2];
    const std::uint32_t hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const std::uint32_t hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
    key[0] += kW0;
    key[1] += kW1;
  }
  return ctr;
}

// Streams separate independent uses of one seed, so dropout never reuses sampling bits.
enum class Stream : std::uint32_t {
  init = 1, dropout = 2, sampling = 3, shuffle = 4, synthetic = 5, partition = 6, cache = 7,
  boundary = 8,  // full-batch boundary-node sampling (--boundary-sampling)
  link_split = 9,  // --edge-split: the permutation of edges and the stored negatives
  negatives = 10   // --task link: training negatives, keyed by edge id
};

// A key names *what* is being drawn: (seed, stream, epoch, step, layer). Draws for a node are
// at(node, i) for i = 0, 1, ...: the same on every rank and for every process count.
struct Key {
  std::uint64_t seed = 0;
  Stream stream = Stream::init;
  std::uint32_t epoch = 0;
  std::uint32_t step = 0;
  std::uint32_t layer = 0;

  // Four 32-bit words for draw index `i` of item `node` (e.g. a node id).
  TESSEL_HD std::array<std::uint32_t, 4> block(std::uint64_t node, std::uint32_t i) const {
    return philox4x32(counter(node, i), philox_key());
  }
  // The Philox key of block(): seed mixed with (stream, layer) and with epoch. The same for
  // every (node, i), so loops over many blocks derive it once.
  TESSEL_HD std::array<std::uint32_t, 2> philox_key() const {
    return {static_cast<std::uint32_t>(seed) ^
                mix(static_cast<std::uint32_t>(stream) * 0x10001u + layer),
            static_cast<std::uint32_t>(seed >> 32) ^ mix(epoch ^ 0xA5A5A5A5u)};
  }
  // The Philox counter of block(node, i): node's low and high words, the draw index, the step.
  TESSEL_HD std::array<std::uint32_t, 4> counter(std::uint64_t node, std::uint32_t i) const {
    return {static_cast<std::uint32_t>(node), static_cast<std::uint32_t>(node >> 32), i, step};
  }
  // A bijective 32-bit mixer (lowbias32) so nearby (stream, layer, epoch) give distant keys.
  TESSEL_HD static std::uint32_t mix(std::uint32_t x) {
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    return x;
  }
  // Blocks i = first .. first + count - 1 of `node` into out[4 * (i - first) + w], equal to
  // block(node, i)[w]. Host only: the rounds run across 16 counters at once in structure-of-
  // arrays form, which the compiler turns into SIMD (vpmuludq) — several times faster than
  // calling block() per counter when a run of draws is needed. (The CPU dropout kernels keep
  // their draws in registers instead and do not come through here.)
  void blocks(std::uint64_t node, std::uint32_t first, std::uint32_t count, std::uint32_t* out) const;

  TESSEL_HD std::uint32_t u32(std::uint64_t node, std::uint32_t i) const { return block(node, i)[0]; }
  TESSEL_HD std::uint64_t u64(std::uint64_t node, std::uint32_t i) const {
    const auto b = block(node, i);
    return (static_cast<std::uint64_t>(b[0]) << 32) | b[1];
  }
  // Uniform float in [0, 1) with 24 random bits.
  TESSEL_HD float uniform(std::uint64_t node, std::uint32_t i) const {
    return static_cast<float>(u32(node, i) >> 8) * (1.0f / 16777216.0f);
  }
  // Uniform integer in [0, n) for n >= 1 (Lemire's multiply-shift on 64 random bits).
  TESSEL_HD std::uint64_t below(std::uint64_t node, std::uint32_t i, std::uint64_t n) const {
    const unsigned __int128 m = static_cast<unsigned __int128>(u64(node, i)) * n;
    return static_cast<std::uint64_t>(m >> 64);
  }
};

// Sequential generator on top of Philox for places where order is fixed (synthetic data,
// initialization): draws counter values 0, 1, 2, ... of one (key, item).
class Sequence {
 public:
  TESSEL_HD Sequence(Key key, std::uint64_t item) : key_(key), item_(item) {}
  TESSEL_HD std::uint32_t next_u32() {
    if (used_ == 4) {
      buf_ = key_.block(item_, counter_++);
      used_ = 0;
    }
    return buf_[used_++];
  }
  TESSEL_HD std::uint64_t next_u64() {
    const std::uint64_t hi = next_u32();
    return (hi << 32) | next_u32();
  }
  TESSEL_HD float next_uniform() { return static_cast<float>(next_u32() >> 8) * (1.0f / 16777216.0f); }
  TESSEL_HD double next_double() {
    return static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0);
  }
  TESSEL_HD std::uint64_t next_below(std::uint64_t n) {
    const unsigned __int128 m = static_cast<unsigned __int128>(next_u64()) * n;
    return static_cast<std::uint64_t>(m >> 64);
  }
  // Standard normal (Box-Muller).
  TESSEL_HD float next_normal();

 private:
  Key key_;
  std::uint64_t item_;
  std::uint32_t counter_ = 0;
  std::array<std::uint32_t, 4> buf_{};
  int used_ = 4;
};

}  // namespace tessel::rng

#include <cmath>
namespace tessel::rng {

TESSEL_HD inline float Sequence::next_normal() {
  double u1 = next_double();
  const double u2 = next_double();
  if (u1 < 1e-300) u1 = 1e-300;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}
}  // namespace tessel::rng
