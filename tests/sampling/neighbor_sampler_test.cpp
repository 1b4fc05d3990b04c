// Neighbor sampler: validity, exact counts, determinism, rank/order invariance and uniformity.
#include "tessel/sampling/neighbor_sampler.hpp"

#include "sampling_graphs.hpp"

#include <gtest/gtest.h>
#include <omp.h>

#include <map>
#include <set>

using namespace tessel;
using namespace tessel::sampling;

namespace {

rng::Key sampling_key(std::uint32_t epoch = 0, std::uint32_t step = 0, std::uint32_t layer = 0) {
  return rng::Key{2024, rng::Stream::sampling, epoch, step, layer};
}

std::vector<NodeId> all_nodes(const Csr& g) {
  std::vector<NodeId> v(static_cast<std::size_t>(g.num_rows));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

} // namespace

TEST(NeighborSampler, DrawsAreDistinctRealNeighborsOfExactCount) {
  const Csr g = test::skewed_graph(600, 3000, 400, 1);
  const auto rows = all_nodes(g);
  for (int fanout : {0, 1, 2, 5, 15, 64, 65, 300, kAllNeighbors}) {
    const auto out = sample_neighbors(g, rows, rows, fanout, sampling_key());
    ASSERT_EQ(out.num_requests(), g.num_rows);
    for (NodeId v = 0; v < g.num_rows; ++v) {
      const auto drawn = out.of(v);
      const std::int64_t want =
          fanout < 0 ? g.degree(v) : std::min<std::int64_t>(fanout, g.degree(v));
      ASSERT_EQ(static_cast<std::int64_t>(drawn.size()), want)
          << "node " << v << " fanout " << fanout;
      const std::set<NodeId> row(g.indices.begin() + g.indptr[v],
                                 g.indices.begin() + g.indptr[v + 1]);
      for (NodeId u : drawn)
        EXPECT_TRUE(row.count(u)) << u << " is not an in-neighbor of " << v;
      EXPECT_EQ(std::set<NodeId>(drawn.begin(), drawn.end()).size(), drawn.size())
          << "repeated draw for node " << v << " fanout " << fanout;
    }
  }
}

TEST(NeighborSampler, WholeRowAndEmptyFanout) {
  const Csr g = test::symmetric_csr(6, test::cycle_edges(6));
  const std::vector<NodeId> rows{0, 3, 3};
  const auto all = sample_neighbors(g, rows, rows, kAllNeighbors, sampling_key());
  EXPECT_EQ(all.offsets, (std::vector<EdgeId>{0, 2, 4, 6}));
  EXPECT_EQ(all.neighbors, (std::vector<NodeId>{1, 5, 2, 4, 2, 4}));
  const auto none = sample_neighbors(g, rows, rows, 0, sampling_key());
  EXPECT_EQ(none.offsets, (std::vector<EdgeId>{0, 0, 0, 0}));
  const std::vector<NodeId> no_rows;
  EXPECT_EQ(sample_neighbors(g, no_rows, no_rows, 3, sampling_key()).num_requests(), 0);
}

TEST(NeighborSampler, SameKeySameDrawsOtherKeysDiffer) {
  const Csr g = test::skewed_graph(500, 4000, 200, 2);
  const auto rows = all_nodes(g);
  const auto a = sample_neighbors(g, rows, rows, 5, sampling_key(1, 2, 0));
  const auto b = sample_neighbors(g, rows, rows, 5, sampling_key(1, 2, 0));
  EXPECT_EQ(a.neighbors, b.neighbors);
  for (const rng::Key other : {sampling_key(2, 2, 0), sampling_key(1, 3, 0), sampling_key(1, 2, 1),
                               rng::Key{2025, rng::Stream::sampling, 1, 2, 0}}) {
    const auto c = sample_neighbors(g, rows, rows, 5, other);
    EXPECT_EQ(a.offsets, c.offsets);
    EXPECT_NE(a.neighbors, c.neighbors);
  }
  // A repeated request with the same row key draws the same neighbors.
  const std::vector<NodeId> twice{g.num_rows / 2, g.num_rows / 2};
  const auto t = sample_neighbors(g, twice, twice, 7, sampling_key());
  EXPECT_TRUE(std::equal(t.of(0).begin(), t.of(0).end(), t.of(1).begin(), t.of(1).end()));
}

TEST(NeighborSampler, ThreadCountDoesNotChangeDraws) {
  const Csr g = test::skewed_graph(3000, 20000, 500, 3);
  const auto rows = all_nodes(g);
  const int saved = omp_get_max_threads();
  std::vector<std::vector<NodeId>> results;
  for (int threads : {1, 2, 3, 5}) {
    omp_set_num_threads(threads);
    results.push_back(sample_neighbors(g, rows, rows, 10, sampling_key()).neighbors);
    results.push_back(sample_neighbors(g, rows, rows, 200, sampling_key()).neighbors);
  }
  omp_set_num_threads(saved);
  for (std::size_t i = 2; i < results.size(); ++i)
    EXPECT_EQ(results[i], results[i % 2]);
}

TEST(NeighborSampler, BitmapPathDrawsWhatLinearFloydDraws) {
  // Above 64 draws the CPU switches to a bitmap; the choices (and their order) must not change.
  // Rows longer than 256 also exercise the filter's scan in floyd_positions.
  const Csr g = test::skewed_graph(3000, 6000, 2500, 4);
  const NodeId hub = g.num_rows / 2;
  ASSERT_GE(g.degree(hub), 2500);
  const std::vector<NodeId> rows{hub};
  for (int fanout : {60, 64, 65, 129, 1000, 2400}) {
    const auto got = sample_neighbors(g, rows, rows, fanout, sampling_key());
    std::vector<EdgeId> pos(static_cast<std::size_t>(fanout));
    floyd_positions(sampling_key(), static_cast<std::uint64_t>(hub), g.degree(hub), fanout,
                    pos.data());
    std::vector<NodeId> want;
    for (EdgeId p : pos)
      want.push_back(g.indices[g.indptr[hub] + p]);
    EXPECT_EQ(got.neighbors, want) << "fanout " << fanout;
  }
}

TEST(NeighborSampler, InvariantUnderRowOrderRelabelingAndPartitioning) {
  // The draws for a node, mapped to original ids, must be the same whatever rank holds it, how
  // its local ids are numbered and how its row was stored before the canonical sort.
  const Csr whole = test::skewed_graph(2000, 12000, 300, 5);
  const auto nodes = all_nodes(whole);
  for (int fanout : {3, 10, 150, kAllNeighbors}) {
    const auto reference = sample_neighbors(whole, nodes, nodes, fanout, sampling_key(3, 7, 1));
    for (int num_parts : {1, 2, 4}) {
      std::vector<int> owner(static_cast<std::size_t>(whole.num_rows));
      const auto perm = test::random_permutation(whole.num_rows, 10 + num_parts);
      for (NodeId v = 0; v < whole.num_rows; ++v)
        owner[v] = static_cast<int>(perm[v] % num_parts);
      const auto parts = test::simulate_parts(whole, owner, num_parts, 20 + num_parts);
      for (const auto& part : parts) {
        ASSERT_TRUE(rows_sorted_by_key(part.graph, part.orig_id));
        std::vector<LocalId> rows(static_cast<std::size_t>(part.num_owned));
        std::iota(rows.begin(), rows.end(), 0);
        std::vector<NodeId> keys(part.orig_id.begin(), part.orig_id.begin() + part.num_owned);
        const auto local = sample_neighbors(part.graph, rows, keys, fanout, sampling_key(3, 7, 1));
        std::vector<NodeId> mapped;
        map_ids(local.neighbors, part.orig_id, mapped);
        for (std::int64_t i = 0; i < part.num_owned; ++i) {
          const NodeId v = part.orig_id[i];
          const auto want = reference.of(v);
          ASSERT_TRUE(std::equal(want.begin(), want.end(), mapped.begin() + local.offsets[i],
                                 mapped.begin() + local.offsets[i + 1]))
              << "node " << v << " P=" << num_parts << " fanout " << fanout;
        }
      }
    }
  }
}

TEST(NeighborSampler, EachNeighborAndPairIsChosenUniformly) {
  // A node of degree 20, fanout 5, over 20000 keys: each neighbor should be drawn 5000 times and
  // each pair C(18,3)/C(20,5) * 20000 ~ 1052.6 times. Chi-square thresholds are far in the tail
  // (19 dof: p ~ 1e-5 at 46; 189 dof: p ~ 1e-5 at ~270), so the fixed seed passes with margin.
  std::vector<std::pair<NodeId, NodeId>> star;
  for (NodeId u = 1; u <= 20; ++u)
    star.emplace_back(0, u);
  const Csr g = test::symmetric_csr(21, star);
  const std::vector<NodeId> rows{0};
  constexpr int kKeys = 20000;
  std::vector<double> single(21, 0);
  std::map<std::pair<NodeId, NodeId>, double> pairs;
  SampledGlobalNeighbors out;
  for (int s = 0; s < kKeys; ++s) {
    sample_neighbors(g, rows, rows, 5, sampling_key(0, static_cast<std::uint32_t>(s)), out);
    for (std::size_t a = 0; a < out.neighbors.size(); ++a) {
      single[out.neighbors[a]] += 1;
      for (std::size_t b = a + 1; b < out.neighbors.size(); ++b)
        pairs[std::minmax(out.neighbors[a], out.neighbors[b])] += 1;
    }
  }
  double chi_single = 0;
  for (NodeId u = 1; u <= 20; ++u)
    chi_single += (single[u] - 5000.0) * (single[u] - 5000.0) / 5000.0;
  std::printf("chi-square per neighbor %.2f (19 dof)\n", chi_single);
  EXPECT_LT(chi_single, 46.0);
  ASSERT_EQ(pairs.size(), 190u);
  const double pair_expect = kKeys * 816.0 / 15504.0;
  double chi_pairs = 0;
  for (const auto& [pair, count] : pairs)
    chi_pairs += (count - pair_expect) * (count - pair_expect) / pair_expect;
  std::printf("chi-square per pair %.2f (189 dof)\n", chi_pairs);
  EXPECT_LT(chi_pairs, 270.0);
}

TEST(NeighborSampler, BitmapPathIsUniformToo) {
  std::vector<std::pair<NodeId, NodeId>> star;
  for (NodeId u = 1; u <= 400; ++u)
    star.emplace_back(0, u);
  const Csr g = test::symmetric_csr(401, star);
  const std::vector<NodeId> rows{0};
  std::vector<double> count(401, 0);
  SampledGlobalNeighbors out;
  constexpr int kKeys = 4000;
  for (int s = 0; s < kKeys; ++s) {
    sample_neighbors(g, rows, rows, 200, sampling_key(1, static_cast<std::uint32_t>(s)), out);
    for (NodeId u : out.neighbors)
      count[u] += 1;
  }
  const double expect = kKeys * 200.0 / 400.0;
  double chi = 0;
  for (NodeId u = 1; u <= 400; ++u)
    chi += (count[u] - expect) * (count[u] - expect) / expect;
  // 399 dof; draws without replacement only shrink the variance. p ~ 1e-5 near 530.
  std::printf("chi-square per neighbor, bitmap path %.2f (399 dof)\n", chi);
  EXPECT_LT(chi, 530.0);
}

TEST(NeighborSampler, NodeDrawsAreInRangeDeterministicAndUnbiasedNearTheRejectionLimit) {
  // bound = 2^31 + 1 rejects about half of the raw words, exercising the fallback blocks.
  const rng::Key key = sampling_key(4, 4, 4);
  constexpr std::uint32_t kBound = (1u << 31) + 1u;
  NodeDraws a(key, 99), b(key, 99);
  double sum = 0;
  std::set<std::uint32_t> distinct;
  constexpr std::uint32_t kDraws = 20000;
  for (std::uint32_t i = 0; i < kDraws; ++i) {
    const std::uint32_t x = a.next(i, kBound);
    ASSERT_LT(x, kBound);
    ASSERT_EQ(x, b.next(i, kBound));
    sum += x;
    distinct.insert(x);
  }
  const double mean = sum / kDraws / kBound; // ~0.5, standard error ~0.002
  EXPECT_NEAR(mean, 0.5, 0.01);
  EXPECT_GT(distinct.size(), kDraws - 5);
  // Small bounds: every value reachable, nothing outside.
  NodeDraws c(key, 5);
  std::vector<int> hits(7, 0);
  for (std::uint32_t i = 0; i < 7000; ++i)
    ++hits[c.next(i, 7)];
  for (int h : hits)
    EXPECT_GT(h, 850);
}

TEST(NeighborSampler, SortRowsByKeyCarriesValuesAndChecksSizes) {
  LocalCsr g;
  g.num_rows = 2;
  g.num_cols = 4;
  g.indptr = {0, 3, 4};
  g.indices = {0, 1, 2, 3};
  g.values = {0.f, 1.f, 2.f, 3.f};
  const std::vector<NodeId> key{30, 10, 20, 5};
  EXPECT_FALSE(rows_sorted_by_key(g, key));
  sort_rows_by_key(g, key);
  EXPECT_EQ(g.indices, (std::vector<LocalId>{1, 2, 0, 3}));
  EXPECT_EQ(g.values, (std::vector<float>{1.f, 2.f, 0.f, 3.f}));
  EXPECT_TRUE(rows_sorted_by_key(g, key));
  const std::vector<NodeId> short_key{1, 2};
  EXPECT_THROW(sort_rows_by_key(g, short_key), InputError);
}

TEST(NeighborSampler, BadArgumentsAreInputErrors) {
  const Csr g = test::symmetric_csr(4, test::path_edges(4));
  const std::vector<NodeId> out_of_range{1, 4};
  const std::vector<NodeId> negative{-1};
  const std::vector<NodeId> one{1};
  const std::vector<NodeId> two_keys{1, 2};
  EXPECT_THROW(sample_neighbors(g, out_of_range, out_of_range, 2, sampling_key()), InputError);
  EXPECT_THROW(sample_neighbors(g, negative, negative, 2, sampling_key()), InputError);
  EXPECT_THROW(sample_neighbors(g, one, two_keys, 2, sampling_key()), InputError);
  EXPECT_THROW(sample_neighbors(g, one, one, -2, sampling_key()), InputError);
  try {
    sample_neighbors(g, out_of_range, out_of_range, 2, sampling_key());
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("sample_neighbors"), std::string::npos) << e.what();
  }
  std::vector<NodeId> mapped;
  const std::vector<LocalId> ids{0, 3};
  const std::vector<NodeId> table{7, 8, 9};
  EXPECT_THROW(map_ids(ids, table, mapped), InputError);
}
