// Tests of the synthetic generator: determinism (seed, thread count), shape, and proxies for
// "a GNN can learn it" and "a good partitioner beats random".
#include "tessel/core/error.hpp"
#include "tessel/datasets/dataset.hpp"
#include "tessel/datasets/synthetic.hpp"

#include "test_support.hpp"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace tessel {
namespace {

using datasets::Dataset;
using datasets::SyntheticOptions;

SyntheticOptions options(std::int64_t n = 20000) {
  SyntheticOptions o;
  o.num_nodes = n;
  o.avg_degree = 12;
  o.num_classes = 8;
  o.feature_dim = 32;
  o.seed = 42;
  return o;
}

bool same(const Dataset& a, const Dataset& b) {
  return a.graph.indptr == b.graph.indptr && a.graph.indices == b.graph.indices &&
         a.features == b.features && a.labels == b.labels && a.train == b.train &&
         a.valid == b.valid && a.test == b.test;
}

// Accuracy of the nearest class centroid (centroids from the training nodes) on test nodes.
double centroid_accuracy(const Dataset& d, const std::vector<float>& x) {
  const std::int64_t f = d.feature_dim, c = d.num_classes;
  std::vector<double> centroid(static_cast<std::size_t>(c * f), 0.0);
  std::vector<double> count(static_cast<std::size_t>(c), 0.0);
  for (NodeId v : d.train) {
    const auto y = d.labels[v];
    count[y] += 1;
    for (std::int64_t j = 0; j < f; ++j)
      centroid[y * f + j] += x[v * f + j];
  }
  for (std::int64_t k = 0; k < c; ++k)
    for (std::int64_t j = 0; j < f; ++j)
      centroid[k * f + j] /= std::max(1.0, count[k]);
  std::int64_t right = 0;
  for (NodeId v : d.test) {
    std::int64_t best = 0;
    double best_d = 1e300;
    for (std::int64_t k = 0; k < c; ++k) {
      double dist = 0;
      for (std::int64_t j = 0; j < f; ++j)
        dist += std::pow(x[v * f + j] - centroid[k * f + j], 2);
      if (dist < best_d) best_d = dist, best = k;
    }
    right += best == d.labels[v];
  }
  return static_cast<double>(right) / static_cast<double>(d.test.size());
}

TEST(Synthetic, SameSeedSameDataDifferentSeedDifferent) {
  const Dataset a = datasets::make_synthetic(options());
  const Dataset b = datasets::make_synthetic(options());
  EXPECT_TRUE(same(a, b));
  auto o = options();
  o.seed = 43;
  EXPECT_FALSE(same(a, datasets::make_synthetic(o)));
}

TEST(Synthetic, ThreadCountDoesNotMatter) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const Dataset one = datasets::make_synthetic(options());
  omp_set_num_threads(3);
  const Dataset three = datasets::make_synthetic(options());
  omp_set_num_threads(saved);
  EXPECT_TRUE(same(one, three));
}

TEST(Synthetic, ValidShapeAndSizes) {
  const auto o = options();
  const Dataset d = datasets::make_synthetic(o);
  EXPECT_NO_THROW(d.validate("synthetic"));
  EXPECT_FALSE(d.directed);
  const double mean_degree =
      2.0 * static_cast<double>(d.num_edges()) / static_cast<double>(d.num_nodes);
  EXPECT_GT(mean_degree, 0.75 * o.avg_degree);
  EXPECT_LT(mean_degree, 1.1 * o.avg_degree);
  // Each undirected edge once, as u -> v with u < v, no repeats.
  for (NodeId v = 0; v < d.num_nodes; ++v)
    for (EdgeId e = d.graph.indptr[v]; e < d.graph.indptr[v + 1]; ++e) {
      ASSERT_LT(d.graph.indices[e], v);
      if (e > d.graph.indptr[v]) {
        ASSERT_LT(d.graph.indices[e - 1], d.graph.indices[e]);
      }
    }
  const double n = static_cast<double>(d.num_nodes);
  EXPECT_NEAR(static_cast<double>(d.train.size()) / n, 0.1, 0.02);
  EXPECT_NEAR(static_cast<double>(d.valid.size()) / n, 0.1, 0.02);
  EXPECT_EQ(d.train.size() + d.valid.size() + d.test.size(), static_cast<std::size_t>(d.num_nodes));
}

TEST(Synthetic, PowerLawishDegrees) {
  const Dataset d = datasets::make_synthetic(options(50000));
  const auto s = datasets::degree_stats(datasets::symmetrize(d.graph));
  EXPECT_GT(static_cast<double>(s.max), 6 * s.mean) << "no hubs";
  EXPECT_LT(s.min, s.mean / 2) << "no low-degree nodes";
}

TEST(Synthetic, LearnableWellAboveChance) {
  const Dataset d = datasets::make_synthetic(options());
  const double chance = 1.0 / static_cast<double>(d.num_classes);
  // Homophily: most edges join nodes of the same class.
  std::int64_t same_class = 0;
  for (NodeId v = 0; v < d.num_nodes; ++v)
    for (EdgeId e = d.graph.indptr[v]; e < d.graph.indptr[v + 1]; ++e)
      same_class += d.labels[d.graph.indices[e]] == d.labels[v];
  EXPECT_GT(static_cast<double>(same_class) / static_cast<double>(d.num_edges()), 0.7);
  // Features alone: far above chance, far from perfect.
  const double raw = centroid_accuracy(d, d.features);
  EXPECT_GT(raw, 2.5 * chance);
  EXPECT_LT(raw, 0.9);
  // One round of mean aggregation over the symmetric graph (what a GCN layer does) helps a lot.
  const Csr sym = datasets::symmetrize(d.graph);
  const std::int64_t f = d.feature_dim;
  std::vector<float> agg(d.features.size());
  for (NodeId v = 0; v < d.num_nodes; ++v) {
    const double k = static_cast<double>(sym.degree(v) + 1);
    for (std::int64_t j = 0; j < f; ++j) {
      double s = d.features[v * f + j];
      for (EdgeId e = sym.indptr[v]; e < sym.indptr[v + 1]; ++e)
        s += d.features[sym.indices[e] * f + j];
      agg[v * f + j] = static_cast<float>(s / k);
    }
  }
  const double smoothed = centroid_accuracy(d, agg);
  EXPECT_GT(smoothed, raw + 0.2) << "raw " << raw << " smoothed " << smoothed;
}

TEST(Synthetic, CommunityPartitionCutsFarFewerEdgesThanRandom) {
  const Dataset d = datasets::make_synthetic(options());
  const int parts = 4;
  std::int64_t cut_class = 0, cut_random = 0;
  for (NodeId v = 0; v < d.num_nodes; ++v)
    for (EdgeId e = d.graph.indptr[v]; e < d.graph.indptr[v + 1]; ++e) {
      const NodeId u = d.graph.indices[e];
      cut_class += d.labels[u] % parts != d.labels[v] % parts;
      cut_random += (u * 2654435761u >> 7) % parts != (v * 2654435761u >> 7) % parts;
    }
  EXPECT_LT(static_cast<double>(cut_class), 0.4 * static_cast<double>(cut_random));
}

// Shuffled ids: the same dataset up to a permutation. Every node's degree, label, feature row
// and split, and the multiset of (label, label) over edges, survive; the ids do not.
TEST(Synthetic, ShuffledIdsAreARelabelling) {
  SyntheticOptions o = options(3000);
  const Dataset plain = datasets::make_synthetic(o);
  o.shuffle_ids = true;
  const Dataset shuffled = datasets::make_synthetic(o);
  shuffled.validate("shuffled");
  ASSERT_EQ(shuffled.num_edges(), plain.num_edges());
  ASSERT_NE(shuffled.graph.indices, plain.graph.indices);
  // Match nodes by feature row (continuous Gaussian rows are unique).
  std::map<std::vector<float>, std::int64_t> new_id;
  const std::int64_t f = o.feature_dim;
  for (std::int64_t v = 0; v < shuffled.num_nodes; ++v)
    new_id[std::vector<float>(shuffled.features.begin() + v * f,
                              shuffled.features.begin() + (v + 1) * f)] = v;
  ASSERT_EQ(static_cast<std::int64_t>(new_id.size()), plain.num_nodes);
  std::vector<std::int64_t> perm(static_cast<std::size_t>(plain.num_nodes));
  std::int64_t moved = 0;
  for (std::int64_t v = 0; v < plain.num_nodes; ++v) {
    perm[v] = new_id.at(std::vector<float>(plain.features.begin() + v * f,
                                           plain.features.begin() + (v + 1) * f));
    EXPECT_EQ(shuffled.labels[perm[v]], plain.labels[v]);
    moved += perm[v] != v;
  }
  EXPECT_GT(moved, plain.num_nodes / 2);
  std::multiset<std::pair<std::int64_t, std::int64_t>> edges_plain, edges_shuffled;
  for (std::int64_t v = 0; v < plain.num_nodes; ++v)
    for (auto e = plain.graph.indptr[v]; e < plain.graph.indptr[v + 1]; ++e) {
      const std::int64_t a = perm[plain.graph.indices[e]], b = perm[v];
      edges_plain.insert({std::min(a, b), std::max(a, b)});
    }
  for (std::int64_t v = 0; v < shuffled.num_nodes; ++v)
    for (auto e = shuffled.graph.indptr[v]; e < shuffled.graph.indptr[v + 1]; ++e) {
      ASSERT_LT(shuffled.graph.indices[e], v) << "stored once as u < v";
      edges_shuffled.insert({shuffled.graph.indices[e], v});
    }
  EXPECT_EQ(edges_plain, edges_shuffled);
  std::vector<std::int64_t> train;
  for (auto v : plain.train)
    train.push_back(perm[v]);
  std::sort(train.begin(), train.end());
  EXPECT_EQ(std::vector<std::int64_t>(shuffled.train.begin(), shuffled.train.end()), train);
}

TEST(Synthetic, RejectsBadOptions) {
  auto o = options();
  o.num_nodes = 1;
  EXPECT_THROW((void)datasets::make_synthetic(o), InputError);
  o = options();
  o.train_frac = 0.8;
  o.valid_frac = 0.3;
  EXPECT_THROW((void)datasets::make_synthetic(o), InputError);
  o = options();
  o.num_classes = 0;
  EXPECT_THROW((void)datasets::make_synthetic(o), InputError);
  o = options();
  o.degree_exponent = 1.5;
  EXPECT_THROW((void)datasets::make_synthetic(o), InputError);
  // A signal whose centroids overflow float32 wrote a store of infinities every reader refused.
  o = options();
  o.feature_signal = 1e300;
  const std::string what = test::input_error([&] { (void)datasets::make_synthetic(o); });
  EXPECT_NE(what.find("--feature-signal must be in [0, 1e6]"), std::string::npos) << what;
  o.feature_signal = 1e6;
  const auto data = datasets::make_synthetic(o);
  EXPECT_TRUE(std::all_of(data.features.begin(), data.features.end(),
                          [](float v) { return std::isfinite(v); }));
}


TEST(Synthetic, UniformInDegreeGivesExactlyKInNeighbors) {
  datasets::SyntheticOptions o;
  o.num_nodes = 500;
  o.num_classes = 4;
  o.feature_dim = 8;
  o.uniform_in_degree = 7;
  const datasets::Dataset d = datasets::make_synthetic(o);
  EXPECT_TRUE(d.directed);
  ASSERT_EQ(d.graph.num_rows, 500);
  ASSERT_EQ(d.graph.num_edges(), 500 * 7);
  std::int64_t same_class = 0;
  for (std::int64_t v = 0; v < 500; ++v) {
    ASSERT_EQ(d.graph.degree(v), 7) << "node " << v;
    for (EdgeId e = d.graph.indptr[v]; e < d.graph.indptr[v + 1]; ++e) {
      const NodeId u = d.graph.indices[e];
      ASSERT_NE(u, v) << "self-loop at " << v;
      ASSERT_TRUE(u >= 0 && u < 500);
      same_class += d.labels[u] == d.labels[v];
    }
  }
  // Homophily 0.8 plus the 1/4 of uniform draws that land in the class: about 85%.
  EXPECT_GT(same_class, 3500 * 0.8);
  EXPECT_LT(same_class, 3500 * 0.9);
  // Deterministic from the seed.
  EXPECT_EQ(datasets::make_synthetic(o).graph.indices, d.graph.indices);
}

TEST(SyntheticPreset, ProductsHasOgbnProductsShape) {
  const datasets::SyntheticOptions o = datasets::synthetic_preset("products");
  EXPECT_EQ(o.num_nodes, 2449029);
  EXPECT_EQ(o.num_classes, 47);
  EXPECT_EQ(o.feature_dim, 100);
  EXPECT_EQ(o.uniform_in_degree, 0);  // power-law degrees, undirected
  // About 62M undirected edges: nodes * avg_degree / 2 draws before duplicates are dropped.
  const double draws = static_cast<double>(o.num_nodes) * o.avg_degree / 2;
  EXPECT_GT(draws, 60e6);
  EXPECT_LT(draws, 80e6);
  EXPECT_THROW(datasets::synthetic_preset("Products"), InputError);
}

TEST(SyntheticPreset, Papers100mHasItsShapeAtEveryScale) {
  const datasets::SyntheticOptions full = datasets::synthetic_preset("papers100m");
  EXPECT_EQ(full.num_nodes, 111059956);
  EXPECT_EQ(full.num_classes, 172);
  EXPECT_EQ(full.feature_dim, 128);
  EXPECT_EQ(full.name, "synthetic-papers100m");
  EXPECT_NEAR(full.train_frac * 111059956, 1207179, 0.5);
  EXPECT_NEAR(full.valid_frac * 111059956, 125265, 0.5);
  EXPECT_NEAR(full.test_frac * 111059956, 214338, 0.5);
  const datasets::SyntheticOptions small = datasets::synthetic_preset("papers100m", 0.0002);
  EXPECT_EQ(small.num_nodes, 22212);
  EXPECT_EQ(small.avg_degree, full.avg_degree);
  EXPECT_EQ(small.name, "synthetic-papers100m-x0.0002");
  const Dataset d = datasets::make_synthetic_graph(small);
  EXPECT_TRUE(d.features.empty());
  EXPECT_EQ(d.feature_dim, 128);
  // About 1.6 B edges times the scale (repeated pairs dropped), so a mean degree near 29.
  EXPECT_GT(d.num_edges(), 0.85 * 1615685872 * 0.0002);
  EXPECT_LT(d.num_edges(), 1.15 * 1615685872 * 0.0002);
  // The split fractions, and most nodes in no split.
  const auto n = static_cast<double>(d.num_nodes);
  EXPECT_NEAR(static_cast<double>(d.train.size()) / n, full.train_frac, 0.003);
  EXPECT_NEAR(static_cast<double>(d.test.size()) / n, full.test_frac, 0.001);
  EXPECT_LT(static_cast<double>(d.train.size() + d.valid.size() + d.test.size()) / n, 0.03);
  EXPECT_THROW(datasets::synthetic_preset("papers100m", 0), InputError);
  EXPECT_THROW(datasets::synthetic_preset("papers100m", -1), InputError);
}

// The store written with features in row blocks (a few rows each, so many blocks) reads back
// as the in-memory dataset, bit for bit, with and without shuffled ids.
TEST(SyntheticStore, StreamedFeaturesEqualTheInMemoryDataset) {
  test::TempDir dir;
  for (const bool shuffle : {false, true}) {
    SyntheticOptions o = options(3000);
    o.feature_dim = 7; // odd: the last Box-Muller pair is cut
    o.shuffle_ids = shuffle;
    o.test_frac = 0.3;
    const auto path = dir / (shuffle ? "s.h5" : "p.h5");
    const auto summary = datasets::write_synthetic_store(o, path, 7 * 4 * 11);
    EXPECT_EQ(summary.feature_block_rows, 11);
    const Dataset expected = datasets::make_synthetic(o);
    const Dataset got = datasets::read_store(path);
    EXPECT_TRUE(same(expected, got)) << "shuffle " << shuffle;
    EXPECT_EQ(summary.num_edges, expected.num_edges());
    EXPECT_EQ(summary.num_test, static_cast<std::int64_t>(expected.test.size()));
    // test_frac 0.3 leaves about 50% of the nodes unsplit.
    EXPECT_NEAR(static_cast<double>(expected.train.size() + expected.valid.size() +
                                    expected.test.size()) / 3000.0, 0.5, 0.05);
  }
}

} // namespace
} // namespace tessel
