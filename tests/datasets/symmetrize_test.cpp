// Tests of symmetrize and degree statistics against a straightforward reference.
#include "tessel/core/error.hpp"
#include "tessel/core/rng.hpp"
#include "tessel/datasets/dataset.hpp"

#include "test_support.hpp"

#include <gtest/gtest.h>
#include <omp.h>

#include <set>

namespace tessel {
namespace {

Csr reference_symmetrize(const Csr& g) {
  std::vector<std::set<NodeId>> rows(static_cast<std::size_t>(g.num_rows));
  for (NodeId v = 0; v < g.num_rows; ++v)
    for (EdgeId e = g.indptr[v]; e < g.indptr[v + 1]; ++e) {
      const NodeId u = g.indices[e];
      if (u == v) continue;
      rows[v].insert(u);
      rows[u].insert(v);
    }
  Csr out;
  out.num_rows = out.num_cols = g.num_rows;
  for (const auto& r : rows) {
    out.indices.insert(out.indices.end(), r.begin(), r.end());
    out.indptr.push_back(static_cast<EdgeId>(out.indices.size()));
  }
  return out;
}

Csr random_graph(NodeId n, std::int64_t m, std::uint64_t seed) {
  rng::Key key{seed, rng::Stream::init};
  std::vector<NodeId> src, dst;
  for (std::int64_t e = 0; e < m; ++e) {
    // Skewed endpoints give hubs, repeats and self-loops.
    src.push_back(static_cast<NodeId>(key.below(e, 0, key.below(e, 1, n) + 1)));
    dst.push_back(static_cast<NodeId>(key.below(e, 2, n)));
  }
  return Csr::from_edges(n, n, src, dst);
}

TEST(Symmetrize, PathBecomesBothDirections) {
  Csr path = Csr::from_edges(4, 4, {0, 1, 2}, {1, 2, 3});
  const Csr s = datasets::symmetrize(path);
  EXPECT_EQ(s.indptr, (std::vector<EdgeId>{0, 1, 3, 5, 6}));
  EXPECT_EQ(s.indices, (std::vector<NodeId>{1, 0, 2, 1, 3, 2}));
}

TEST(Symmetrize, DropsSelfLoopsAndDuplicates) {
  Csr g = Csr::from_edges(3, 3, {0, 0, 1, 1, 2, 2}, {1, 1, 0, 1, 2, 0});
  const Csr s = datasets::symmetrize(g);
  EXPECT_EQ(s.indptr, (std::vector<EdgeId>{0, 2, 3, 4}));
  EXPECT_EQ(s.indices, (std::vector<NodeId>{1, 2, 0, 0}));
  EXPECT_NO_THROW(s.validate("symmetrized"));
}

TEST(Symmetrize, MatchesReferenceForAnyThreadCount) {
  const Csr g = random_graph(2000, 30000, 11);
  const Csr expect = reference_symmetrize(g);
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    const Csr s = datasets::symmetrize(g);
    EXPECT_EQ(s.indptr, expect.indptr) << threads;
    EXPECT_EQ(s.indices, expect.indices) << threads;
  }
  omp_set_num_threads(saved);
}

TEST(Symmetrize, Idempotent) {
  const Csr once = datasets::symmetrize(random_graph(500, 4000, 3));
  const Csr twice = datasets::symmetrize(once);
  EXPECT_EQ(once.indptr, twice.indptr);
  EXPECT_EQ(once.indices, twice.indices);
}

TEST(Symmetrize, EmptyAndNonSquare) {
  Csr empty;
  EXPECT_EQ(datasets::symmetrize(empty).num_edges(), 0);
  Csr rect = Csr::from_edges(2, 3, {2}, {1});
  EXPECT_THROW((void)datasets::symmetrize(rect), InputError);
}

TEST(DegreeStats, MinMeanMaxZero) {
  const Csr g = Csr::from_edges(4, 4, {0, 1, 2, 0}, {1, 1, 1, 3});
  const auto s = datasets::degree_stats(g);
  EXPECT_EQ(s.min, 0);
  EXPECT_EQ(s.max, 3);
  EXPECT_DOUBLE_EQ(s.mean, 1.0);
  EXPECT_EQ(s.zero, 2);
}

} // namespace
} // namespace tessel
