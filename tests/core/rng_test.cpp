// Counter-based RNG: known Philox answers, key separation, uniformity.
#include "tessel/core/rng.hpp"

#include <gtest/gtest.h>

#include <set>
#include <vector>

using namespace tessel;

TEST(Rng, PhiloxMatchesReferenceVectors) {
  // Known-answer tests from the Random123 distribution (philox4x32_10).
  auto r0 = rng::philox4x32({0, 0, 0, 0}, {0, 0});
  EXPECT_EQ(r0, (std::array<std::uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  auto r1 = rng::philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                            {0xffffffffu, 0xffffffffu});
  EXPECT_EQ(r1, (std::array<std::uint32_t, 4>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  auto r2 = rng::philox4x32({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                            {0xa4093822u, 0x299f31d0u});
  EXPECT_EQ(r2, (std::array<std::uint32_t, 4>{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Rng, SameKeySameDrawsDifferentKeysDiffer) {
  rng::Key a{42, rng::Stream::sampling, 1, 2, 0};
  rng::Key b = a;
  EXPECT_EQ(a.u64(17, 3), b.u64(17, 3));
  std::set<std::uint64_t> seen;
  for (std::uint32_t e = 0; e < 4; ++e)
    for (std::uint32_t s = 0; s < 4; ++s)
      for (std::uint32_t l = 0; l < 3; ++l) {
        rng::Key k{42, rng::Stream::sampling, e, s, l};
        seen.insert(k.u64(17, 0));
      }
  EXPECT_EQ(seen.size(), 48u);
  rng::Key d{42, rng::Stream::dropout, 1, 2, 0};
  EXPECT_NE(a.u64(17, 3), d.u64(17, 3));
}

TEST(Rng, BelowIsUniform) {
  rng::Key k{7, rng::Stream::shuffle};
  constexpr int kBins = 10, kDraws = 100000;
  std::vector<int> count(kBins, 0);
  for (int i = 0; i < kDraws; ++i) ++count[k.below(static_cast<std::uint64_t>(i), 0, kBins)];
  double chi2 = 0;
  const double expect = static_cast<double>(kDraws) / kBins;
  for (int c : count) chi2 += (c - expect) * (c - expect) / expect;
  EXPECT_LT(chi2, 33.7);  // chi-square, 9 dof, p = 1e-4
}

TEST(Rng, SequenceNormalHasUnitVariance) {
  rng::Sequence seq({3, rng::Stream::init}, 0);
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = seq.next_normal();
    sum += x;
    sq += x * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.02);
}

TEST(Rng, BatchedBlocksEqualSingleBlocks) {
  const rng::Key key{0x123456789ABCDEFull, rng::Stream::dropout, 7, 3, 1};
  for (std::uint64_t node : {0ull, 5ull, 1ull << 33}) {
    for (std::uint32_t first : {0u, 13u}) {
      for (std::uint32_t count : {1u, 16u, 37u}) {
        std::vector<std::uint32_t> out(4 * count);
        key.blocks(node, first, count, out.data());
        for (std::uint32_t i = 0; i < count; ++i) {
          const auto b = key.block(node, first + i);
          for (int w = 0; w < 4; ++w) ASSERT_EQ(out[4 * i + w], b[w]) << node << " " << first + i;
        }
      }
    }
  }
}
