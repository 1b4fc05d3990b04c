// Feature cache: policy ranking, budgets, lookups, gathers with hit statistics, presample counts.
#include "tessel/sampling/block.hpp"
#include "tessel/sampling/feature_cache.hpp"

#include "sampling_graphs.hpp"

#include <gtest/gtest.h>

using namespace tessel;
using namespace tessel::sampling;

TEST(FeatureCache, RankingIsByScoreThenId) {
  const std::vector<NodeId> candidates{40, 10, 30, 20, 50};
  const std::vector<std::int64_t> degree{3, 9, 3, 1, 9};
  EXPECT_EQ(rank_candidates(candidates, degree), (std::vector<NodeId>{10, 50, 30, 40, 20}));
  const std::vector<std::int64_t> short_score{1};
  EXPECT_THROW(rank_candidates(candidates, short_score), InputError);
}

TEST(FeatureCache, BudgetInRowsFromMegabytesOrRatio) {
  const std::int64_t row_bytes = 100 * 4;
  EXPECT_EQ((CacheBudget{}).capacity_rows(1000, row_bytes), 0);
  EXPECT_EQ((CacheBudget{.size_mb = 1.0}).capacity_rows(100000, row_bytes), 1048576 / 400);
  EXPECT_EQ((CacheBudget{.size_mb = 1000.0}).capacity_rows(100, row_bytes), 100);
  EXPECT_EQ((CacheBudget{.ratio = 0.3}).capacity_rows(1000, row_bytes), 300);
  EXPECT_EQ((CacheBudget{.ratio = 0.0}).capacity_rows(1000, row_bytes), 0);
  EXPECT_THROW((CacheBudget{.size_mb = 1, .ratio = 0.5}).capacity_rows(10, row_bytes), InputError);
  EXPECT_THROW((CacheBudget{.ratio = 1.5}).capacity_rows(10, row_bytes), InputError);
  EXPECT_EQ(option_value<CachePolicy>("degree"), CachePolicy::degree);
  EXPECT_EQ(option_value<CachePolicy>("presample"), CachePolicy::presample);
  EXPECT_THROW(option_value<CachePolicy>("lru"), InputError);
  EXPECT_EQ(option_word(CachePolicy::presample), "presample");
}

TEST(FeatureCache, DefaultDeviceBudgetIsAShareOfFreeMemory) {
  // 8 GiB free: a quarter, in MiB.
  const CacheBudget b = default_device_budget(std::int64_t{8} << 30);
  EXPECT_DOUBLE_EQ(b.size_mb, kDefaultDeviceCacheFraction * 8192.0);
  EXPECT_LT(b.ratio, 0);  // a size budget, not a ratio
  EXPECT_EQ(b.capacity_rows(std::int64_t{1} << 40, 400),
            static_cast<std::int64_t>(kDefaultDeviceCacheFraction * 8192.0 * 1048576.0 / 400));
  EXPECT_DOUBLE_EQ(default_device_budget(-5).size_mb, 0.0);
}

TEST(FeatureCache, DefaultHostBudgetIsHalfTheOwnedFeatureBytes) {
  // 100000 owned rows of 128 floats (48.8 MiB): half of them in MiB, so 50000 rows of that size.
  const std::int64_t owned_bytes = std::int64_t{100000} * 128 * 4;
  const CacheBudget b = default_host_budget(owned_bytes);
  EXPECT_DOUBLE_EQ(b.size_mb, 0.5 * static_cast<double>(owned_bytes) / 1048576.0);
  EXPECT_LT(b.ratio, 0);
  EXPECT_EQ(b.capacity_rows(std::int64_t{1} << 40, 128 * 4), 50000);
  EXPECT_EQ(b.capacity_rows(1000, 128 * 4), 1000);  // never more than the candidates
  EXPECT_DOUBLE_EQ(default_host_budget(-1).size_mb, 0.0);
}

TEST(FeatureCache, DeviceCacheSplitKeepsTheAdmissionShareOfTheBudget) {
  const std::int64_t row_bytes = 400;
  // 1 MiB = 2621 rows: a quarter (655) for admissions, the rest (1966) for hot rows.
  CacheBudget b{.size_mb = 1.0};
  b.admit_fraction = 0.25;
  DeviceCacheSplit s = split_device_cache(b, 100000, row_bytes);
  EXPECT_EQ(s.admit_rows, 655);
  EXPECT_EQ(s.hot_rows, 2621 - 655);
  // Few candidates: the hot rows stop at the candidates, the admission slots do not.
  s = split_device_cache(b, 100, row_bytes);
  EXPECT_EQ(s.hot_rows, 100);
  EXPECT_EQ(s.admit_rows, 655);
  // A ratio budget counts the candidates; no admission share gives capacity_rows' answer.
  CacheBudget r{.ratio = 0.5};
  s = split_device_cache(r, 1000, row_bytes);
  EXPECT_EQ(s.admit_rows, 0);
  EXPECT_EQ(s.hot_rows, r.capacity_rows(1000, row_bytes));
  r.admit_fraction = 1.0;
  s = split_device_cache(r, 1000, row_bytes);
  EXPECT_EQ(s.admit_rows, 500);
  EXPECT_EQ(s.hot_rows, 0);
  r.admit_fraction = 1.5;
  EXPECT_THROW(split_device_cache(r, 1000, row_bytes), InputError);
  EXPECT_EQ(split_device_cache(CacheBudget{}, 1000, row_bytes).hot_rows, 0);
}

TEST(FeatureCache, BuildKeepsTheTopRowsAndLooksThemUp) {
  const std::vector<NodeId> candidates{40, 10, 30, 20, 50};
  const std::vector<std::int64_t> degree{3, 9, 3, 1, 9};
  const FeatureCache cache = FeatureCache::build(candidates, degree, CacheBudget{.ratio = 0.6}, 2);
  ASSERT_EQ(cache.size(), 3);
  EXPECT_EQ(std::vector<NodeId>(cache.ids().begin(), cache.ids().end()),
            (std::vector<NodeId>{10, 50, 30}));
  EXPECT_EQ(cache.lookup(10), 0);
  EXPECT_EQ(cache.lookup(50), 1);
  EXPECT_EQ(cache.lookup(30), 2);
  EXPECT_EQ(cache.lookup(40), -1);
  EXPECT_EQ(cache.lookup(20), -1);
  EXPECT_EQ(cache.lookup(7), -1);
  EXPECT_EQ(cache.bytes(), 3 * 2 * 4);
  const FeatureCache empty = FeatureCache::build(candidates, degree, CacheBudget{}, 2);
  EXPECT_EQ(empty.size(), 0);
  EXPECT_EQ(empty.lookup(10), -1);
}

TEST(FeatureCache, GatherCopiesHitsReportsMissesAndCounts) {
  FeatureCache cache({100, 200, 300}, 2);
  cache.fill(std::vector<float>{1, 2, 3, 4, 5, 6});
  cache.set_row(2, std::vector<float>{7, 8});
  EXPECT_EQ(cache.row(1)[1], 4.0f);
  const std::vector<NodeId> needed{300, 5, 100, 6, 100};
  std::vector<float> out(needed.size() * 2, -1.0f);
  std::vector<std::int64_t> misses;
  cache.gather(needed, out, misses);
  EXPECT_EQ(misses, (std::vector<std::int64_t>{1, 3}));
  EXPECT_EQ(out, (std::vector<float>{7, 8, -1, -1, 1, 2, -1, -1, 1, 2}));
  EXPECT_EQ(cache.stats().hits, 3);
  EXPECT_EQ(cache.stats().misses, 2);
  EXPECT_DOUBLE_EQ(cache.stats().hit_rate(), 0.6);
  EXPECT_EQ(cache.stats().bytes_saved(), 3 * 8);
  EXPECT_EQ(cache.stats().bytes_fetched(), 2 * 8);
  cache.reset_stats();
  EXPECT_EQ(cache.stats().hits, 0);
  EXPECT_THROW(cache.fill(std::vector<float>{1}), InputError);
  EXPECT_THROW(cache.set_row(3, std::vector<float>{1, 2}), InputError);
  std::vector<float> small(3);
  EXPECT_THROW(cache.gather(needed, small, misses), InputError);
  EXPECT_THROW(FeatureCache({1, 1}, 2), InputError);
}

// locate() points at the cached rows where gather() would copy them: same hits, same misses.
TEST(FeatureCache, LocatePointsAtTheRowsGatherCopies) {
  FeatureCache cache({100, 200, 300}, 2);
  cache.fill(std::vector<float>{1, 2, 3, 4, 5, 6});
  const std::vector<NodeId> needed{300, 5, 100, 6, 200};
  const std::vector<std::int64_t> at{4, 0, 2, 1, 3};  // where each lands among the rows
  std::vector<const float*> rows(6, nullptr);
  std::vector<std::int64_t> misses;
  cache.locate(needed, rows, at, misses);
  EXPECT_EQ(misses, (std::vector<std::int64_t>{1, 3}));
  EXPECT_EQ(rows[4], cache.row(2).data());
  EXPECT_EQ(rows[2], cache.row(0).data());
  EXPECT_EQ(rows[3], cache.row(1).data());
  EXPECT_EQ(rows[0], nullptr);
  EXPECT_EQ(rows[1], nullptr);
  EXPECT_EQ(rows[5], nullptr);
  EXPECT_EQ(cache.stats().hits, 3);
  EXPECT_EQ(cache.stats().misses, 2);
  EXPECT_THROW(cache.locate(needed, rows, std::vector<std::int64_t>{0}, misses), InputError);
  // An empty cache misses everything.
  FeatureCache none({}, 2);
  none.locate(needed, rows, at, misses);
  EXPECT_EQ(misses.size(), needed.size());
}

TEST(FeatureCache, PresampleCountsFavourFrequentInputsAndBeatNothing) {
  // Presample a few "epochs" of batches; remote candidates = the upper half of the ids. The most
  // counted candidate must be a frequently drawn (high-degree) node, and a cache ranked by the
  // counts must hit more than a cache of the same size holding the least counted nodes.
  const Csr g = test::skewed_graph(4000, 30000, 400, 31);
  std::vector<NodeId> candidates;
  for (NodeId v = g.num_rows / 2; v < g.num_rows; ++v)
    candidates.push_back(v);
  AccessCounter counter(candidates);
  BlockSampler sampler(g);
  std::vector<Block> blocks;
  const auto perm = test::random_permutation(g.num_rows / 2, 6);
  const std::vector<int> fanouts{5, 5};
  for (std::uint32_t epoch = 0; epoch < 3; ++epoch)
    for (std::uint32_t step = 0; step < 10; ++step) {
      const std::span<const NodeId> seeds(perm.data() + step * 64, 64);
      sampler.sample(seeds, fanouts, rng::Key{3, rng::Stream::cache, epoch, step}, blocks);
      counter.add(blocks.front().src);
    }
  const auto& counts = counter.counts();
  ASSERT_EQ(counts.size(), candidates.size());
  const auto top = rank_candidates(candidates, counts).front();
  EXPECT_GT(counts[static_cast<std::size_t>(top - g.num_rows / 2)], 0);
  EXPECT_EQ(top, g.num_rows / 2); // the hub of skewed_graph, drawn by nearly every batch

  FeatureCache hot = FeatureCache::build(candidates, counts, CacheBudget{.ratio = 0.1}, 4);
  std::vector<std::int64_t> negated(counts.size());
  for (std::size_t i = 0; i < counts.size(); ++i)
    negated[i] = -counts[i];
  FeatureCache cold = FeatureCache::build(candidates, negated, CacheBudget{.ratio = 0.1}, 4);
  std::vector<float> out;
  std::vector<std::int64_t> misses;
  for (std::uint32_t step = 10; step < 20; ++step) { // fresh batches, not the presampled ones
    const std::span<const NodeId> seeds(perm.data() + step * 64, 64);
    sampler.sample(seeds, fanouts, rng::Key{3, rng::Stream::sampling, 0, step}, blocks);
    std::vector<NodeId> remote;
    for (NodeId v : blocks.front().src)
      if (v >= g.num_rows / 2) remote.push_back(v);
    out.resize(remote.size() * 4);
    hot.gather(remote, out, misses);
    cold.gather(remote, out, misses);
  }
  EXPECT_GT(hot.stats().hit_rate(), 0.0);
  EXPECT_GT(hot.stats().hits, cold.stats().hits);

  const std::vector<NodeId> twice{1, 1};
  EXPECT_THROW(AccessCounter{twice}, InputError);
}
