// Batched Philox blocks, compiled for AVX-512, AVX2 and baseline x86-64 and picked at load time
// (the SIMD form is what makes a long run of draws cheap).
#include "tessel/core/rng.hpp"

namespace tessel::rng {
namespace {

// Eight counters per vector, one per 64-bit lane holding a 32-bit word: the 32x32 -> 64-bit
// products Philox needs are then single vpmuludq / pmuludq instructions.
using Lanes = std::uint64_t __attribute__((vector_size(64)));
constexpr std::uint32_t kLanes = 8;

}  // namespace

// Clang 14 emits the clones of a member function but not the symbol that dispatches to them
// (the link fails), so clang builds (the fuzz targets) take the portable code.
#if defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void Key::blocks(std::uint64_t node, std::uint32_t first, std::uint32_t count,
                 std::uint32_t* out) const {
  constexpr std::uint64_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  const auto [key0, key1] = philox_key();
  const Lanes low = Lanes{} + 0xFFFFFFFFull;
  const Lanes lane_index = {0, 1, 2, 3, 4, 5, 6, 7};
  for (std::uint32_t base = 0; base < count; base += kLanes) {
    Lanes c0 = Lanes{} + static_cast<std::uint32_t>(node);
    Lanes c1 = Lanes{} + static_cast<std::uint32_t>(node >> 32);
    Lanes c2 = ((Lanes{} + (first + base)) + lane_index) & low;
    Lanes c3 = Lanes{} + step;
    std::uint64_t k0 = key0, k1 = key1;
    for (int round = 0; round < 10; ++round) {
      const Lanes p0 = c0 * kM0;  // lanes hold 32-bit values: exact 64-bit products
      const Lanes p1 = c2 * kM1;
      const Lanes n0 = (p1 >> 32) ^ c1 ^ k0;
      const Lanes n2 = (p0 >> 32) ^ c3 ^ k1;
      c1 = p1 & low;
      c3 = p0 & low;
      c0 = n0;
      c2 = n2;
      k0 = static_cast<std::uint32_t>(k0 + kW0);
      k1 = static_cast<std::uint32_t>(k1 + kW1);
    }
    const std::uint32_t n = count - base < kLanes ? count - base : kLanes;
    for (std::uint32_t l = 0; l < n; ++l) {
      std::uint32_t* o = out + 4 * (base + l);
      o[0] = static_cast<std::uint32_t>(c0[l]);
      o[1] = static_cast<std::uint32_t>(c1[l]);
      o[2] = static_cast<std::uint32_t>(c2[l]);
      o[3] = static_cast<std::uint32_t>(c3[l]);
    }
  }
}

}  // namespace tessel::rng
