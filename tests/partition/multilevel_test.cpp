// Tests of multilevel partitioning: label-propagation clustering, contraction, k-way refinement,
// and the whole coarsen / METIS / project-and-refine path against METIS on the fine graph.
#include "steps.hpp"

#include "partition_testing.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>

namespace tessel::partition {
namespace {

using detail::GraphCsr;
using detail::WeightedGraph;

// The cleaned, symmetrized graph of a planted dataset and its training mask.
struct Planted {
  GraphCsr graph;
  std::vector<std::uint8_t> is_train;
};

Planted planted(std::int64_t n, int blocks, double avg_degree, double inside, std::uint64_t seed) {
  test::PlantedOptions o;
  o.num_nodes = n;
  o.blocks = blocks;
  o.avg_degree = avg_degree;
  o.inside = inside;
  o.seed = seed;
  const auto data = test::planted_dataset(o);
  Planted p;
  p.graph = detail::clean_graph(data.graph, true);
  p.is_train.assign(static_cast<std::size_t>(n), 0);
  for (auto v : data.train)
    p.is_train[v] = 1;
  return p;
}

// The graph as a WeightedGraph with unit edge weights and the pipeline's vertex weights.
WeightedGraph weighted(const Planted& p) {
  const auto w = detail::vertex_weights(p.graph, p.is_train, Balance{});
  WeightedGraph g;
  g.num_nodes = p.graph.num_rows;
  g.ncon = w.ncon;
  g.xadj = p.graph.indptr;
  g.adjncy.assign(p.graph.indices.begin(), p.graph.indices.end());
  g.adjwgt.assign(g.adjncy.size(), 1);
  g.vwgt = w.values;
  return g;
}

std::vector<std::int64_t> totals(const WeightedGraph& g) {
  std::vector<std::int64_t> t(static_cast<std::size_t>(g.ncon), 0);
  for (std::int64_t v = 0; v < g.num_nodes; ++v)
    for (int c = 0; c < g.ncon; ++c)
      t[c] += g.vwgt[v * g.ncon + c];
  return t;
}

// Part weights per constraint: [part][constraint].
std::vector<std::vector<std::int64_t>> part_weights(const WeightedGraph& g,
                                                    const std::vector<std::int32_t>& part, int k) {
  std::vector<std::vector<std::int64_t>> w(static_cast<std::size_t>(k),
                                           std::vector<std::int64_t>(g.ncon, 0));
  for (std::int64_t v = 0; v < g.num_nodes; ++v)
    for (int c = 0; c < g.ncon; ++c)
      w[part[v]][c] += g.vwgt[v * g.ncon + c];
  return w;
}

std::int64_t undirected_cut(const GraphCsr& g, const std::vector<std::int32_t>& part) {
  return test::directed_cut(g, part) / 2;
}

// Runs f with OpenMP limited to `threads`, restoring the previous setting.
template <class F> auto with_threads(int threads, F&& f) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  auto result = f();
  omp_set_num_threads(before);
  return result;
}

TEST(Contract, PreservesWeightsAndMatchesBruteForce) {
  const auto p = planted(3000, 6, 10, 0.8, 3);
  auto g = weighted(p);
  // Random edge weights (kept symmetric: the weight of {u, v} from a hash of the pair).
  for (std::int64_t v = 0; v < g.num_nodes; ++v)
    for (auto e = g.xadj[v]; e < g.xadj[v + 1]; ++e) {
      const auto u = g.adjncy[e];
      const auto lo = std::min<std::int64_t>(u, v), hi = std::max<std::int64_t>(u, v);
      g.adjwgt[e] = 1 + static_cast<std::int32_t>((lo * 7919 + hi * 104729) % 5);
    }
  std::mt19937 gen(5);
  std::vector<std::int32_t> cluster(static_cast<std::size_t>(g.num_nodes));
  for (auto& c : cluster)
    c = static_cast<std::int32_t>(gen() % 400); // labels need not be members' ids
  const auto labels = cluster;
  const auto coarse = detail::contract(g, cluster);

  // Coarse ids are dense, in order of first member, and consistent with the labels.
  std::map<std::int32_t, std::int32_t> id_of_label;
  std::int32_t next = 0;
  for (std::int64_t v = 0; v < g.num_nodes; ++v) {
    auto [it, fresh] = id_of_label.emplace(labels[v], next);
    if (fresh) ++next;
    EXPECT_EQ(cluster[v], it->second);
  }
  ASSERT_EQ(coarse.num_nodes, next);

  // Vertex weights add up per cluster.
  std::vector<std::int64_t> expect_vwgt(static_cast<std::size_t>(next) * g.ncon, 0);
  for (std::int64_t v = 0; v < g.num_nodes; ++v)
    for (int c = 0; c < g.ncon; ++c)
      expect_vwgt[cluster[v] * g.ncon + c] += g.vwgt[v * g.ncon + c];
  for (std::size_t i = 0; i < expect_vwgt.size(); ++i)
    EXPECT_EQ(coarse.vwgt[i], expect_vwgt[i]);

  // Edge weights: brute-force sum of fine edges between clusters, none inside one.
  std::map<std::pair<std::int32_t, std::int32_t>, std::int64_t> expect;
  for (std::int64_t v = 0; v < g.num_nodes; ++v)
    for (auto e = g.xadj[v]; e < g.xadj[v + 1]; ++e)
      if (cluster[g.adjncy[e]] != cluster[v])
        expect[{cluster[v], cluster[g.adjncy[e]]}] += g.adjwgt[e];
  std::map<std::pair<std::int32_t, std::int32_t>, std::int64_t> got;
  ASSERT_EQ(coarse.xadj.size(), static_cast<std::size_t>(next) + 1);
  for (std::int32_t c = 0; c < next; ++c)
    for (auto e = coarse.xadj[c]; e < coarse.xadj[c + 1]; ++e) {
      EXPECT_NE(coarse.adjncy[e], c) << "self-loop at " << c;
      const bool fresh = got.emplace(std::pair{c, coarse.adjncy[e]}, coarse.adjwgt[e]).second;
      EXPECT_TRUE(fresh) << "duplicate edge " << c << " -> " << coarse.adjncy[e];
    }
  EXPECT_EQ(got, expect);
}

TEST(ClusterLabelPropagation, RespectsLimitsAndFindsBlocks) {
  // Dense blocks with few edges between them: clusters should stay inside blocks.
  const auto p = planted(4000, 8, 12, 0.97, 4);
  const auto g = weighted(p);
  const auto total = totals(g);
  std::vector<std::int64_t> limit(static_cast<std::size_t>(g.ncon));
  for (int c = 0; c < g.ncon; ++c)
    limit[c] = std::max<std::int64_t>(total[c] / 200, 1);
  // Heaviest node per constraint: a cluster may exceed a limit only by being that one node.
  std::vector<std::int64_t> heaviest(static_cast<std::size_t>(g.ncon), 0);
  for (std::int64_t v = 0; v < g.num_nodes; ++v)
    for (int c = 0; c < g.ncon; ++c)
      heaviest[c] = std::max<std::int64_t>(heaviest[c], g.vwgt[v * g.ncon + c]);

  const auto labels = detail::cluster_label_propagation(g, limit, 1, 0);
  std::map<std::int32_t, std::vector<std::int64_t>> weight;
  std::map<std::int32_t, std::int64_t> size;
  for (std::int64_t v = 0; v < g.num_nodes; ++v) {
    auto& w = weight[labels[v]];
    w.resize(static_cast<std::size_t>(g.ncon), 0);
    for (int c = 0; c < g.ncon; ++c)
      w[c] += g.vwgt[v * g.ncon + c];
    ++size[labels[v]];
  }
  for (const auto& [label, w] : weight) {
    if (size[label] == 1) continue;
    for (int c = 0; c < g.ncon; ++c)
      EXPECT_LE(w[c], limit[c]) << "cluster " << label << " constraint " << c;
  }
  // Shrinks the graph well (at least 4x) ...
  EXPECT_LT(static_cast<std::int64_t>(weight.size()) * 4, g.num_nodes);
  // ... and most edges end up inside clusters that lie within one planted block, so a coarse
  // graph keeps far fewer edges than the fine one.
  auto copy = labels;
  const auto coarse = detail::contract(g, copy);
  EXPECT_LT(coarse.num_edges() * 2, g.num_edges());

  // Deterministic: same seed, any thread count.
  const auto one =
      with_threads(1, [&] { return detail::cluster_label_propagation(g, limit, 1, 0); });
  const auto two =
      with_threads(2, [&] { return detail::cluster_label_propagation(g, limit, 1, 0); });
  EXPECT_EQ(one, labels);
  EXPECT_EQ(two, labels);
  EXPECT_NE(detail::cluster_label_propagation(g, limit, 2, 0), labels); // the seed matters
}

TEST(ClusterLabelPropagation, MergesIsolatedNodes) {
  WeightedGraph g;
  g.num_nodes = 100;
  g.ncon = 1;
  g.xadj.assign(101, 0); // no edges at all
  g.vwgt.assign(100, 1);
  const std::vector<std::int64_t> limit{10};
  const auto labels = detail::cluster_label_propagation(g, limit, 0, 0);
  std::map<std::int32_t, int> size;
  for (auto l : labels)
    ++size[l];
  EXPECT_EQ(size.size(), 10u); // ten clusters of exactly the limit
  for (const auto& [label, count] : size)
    EXPECT_EQ(count, 10);
}

TEST(RefineKway, LowersCutAndKeepsBalance) {
  const auto p = planted(6000, 4, 10, 0.9, 5);
  const auto g = weighted(p);
  const int k = 4;
  // Start from a balanced random partition.
  auto part = detail::assign_random(g.num_nodes, k, 3);
  const auto total = totals(g);
  std::vector<std::int64_t> limit(static_cast<std::size_t>(g.ncon));
  for (int c = 0; c < g.ncon; ++c)
    limit[c] = static_cast<std::int64_t>(1.05 * static_cast<double>(total[c]) / k);
  const auto start = part_weights(g, part, k);
  const auto before = detail::weighted_cut(g, part);
  const auto moves = detail::refine_kway(g, part, k, limit, 7, 0);
  const auto after = detail::weighted_cut(g, part);
  EXPECT_GT(moves, 0);
  EXPECT_EQ(after, undirected_cut(p.graph, part));
  EXPECT_LT(after, before * 9 / 10) << "before " << before;
  // No move puts a part over a limit: a part ends within it or no heavier than it started.
  const auto pw = part_weights(g, part, k);
  for (int q = 0; q < k; ++q)
    for (int c = 0; c < g.ncon; ++c)
      EXPECT_LE(pw[q][c], std::max(limit[c], start[q][c])) << "part " << q << " constraint " << c;
}

TEST(RefineKway, RelievesAnOverloadedPart) {
  const auto p = planted(3000, 3, 8, 0.9, 6);
  auto g = weighted(p);
  g.ncon = 1; // nodes only
  g.vwgt.assign(static_cast<std::size_t>(g.num_nodes), 1);
  const int k = 3;
  // Everything in part 0 but a few nodes.
  std::vector<std::int32_t> part(static_cast<std::size_t>(g.num_nodes), 0);
  for (std::int64_t v = 0; v < 30; ++v)
    part[v] = static_cast<std::int32_t>(1 + v % 2);
  const std::vector<std::int64_t> limit{1100};
  detail::refine_kway(g, part, k, limit, 1, 0);
  const auto pw = part_weights(g, part, k);
  // Moves out of the overloaded part happen at a loss while it stays above the limit; only
  // boundary nodes move, so a few passes leave it far lighter.
  EXPECT_LT(pw[0][0], 2900);
  for (int q = 1; q < k; ++q)
    EXPECT_LE(pw[q][0], 1100);
}

TEST(FitWeightColumn, ScalesTotalsUnderTheLimitKeepingOrderAndZeros) {
  // Column 1 of a two-column table: column 0 must stay untouched.
  std::vector<std::int32_t> w = {7, 5, 7, 0, 7, 3, 7, 1000000, 7, 1};
  detail::fit_weight_column(w.data() + 1, 5, 2, 100);
  std::int64_t total = 0;
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(w[2 * i], 7);
    total += w[2 * i + 1];
  }
  EXPECT_LE(total, 100);
  EXPECT_EQ(w[3], 0);    // zero stays zero
  EXPECT_GE(w[9], 1);    // positive stays positive
  EXPECT_LE(w[9], w[5]); // order kept: 1 <= 3 <= 5 <= 1000000
  EXPECT_LE(w[5], w[1]);
  EXPECT_LE(w[1], w[7]);
  EXPECT_GE(2 * w[7], total); // the heavy one keeps most of the total
  // Below the number of positive weights the floor is one each.
  std::vector<std::int32_t> many(10, 50);
  detail::fit_weight_column(many.data(), 10, 1, 4);
  EXPECT_EQ(many, std::vector<std::int32_t>(10, 1));
  // A column that fits is left alone.
  std::vector<std::int32_t> small = {1, 2, 3};
  detail::fit_weight_column(small.data(), 3, 1, 6);
  EXPECT_EQ(small, (std::vector<std::int32_t>{1, 2, 3}));
}

// A coarse level is built only within a share of the fine graph's memory; the others are visited
// through the nearest built level below and the maps. Every share gives the same coarse sizes,
// METIS input and partition, node for node: none built, some built (over a built base), all.
TEST(PartitionMultilevel, ImplicitLevelsGiveTheBuiltLevelsResult) {
  const auto p = planted(80000, 16, 12, 0.9, 8);
  const auto weights = detail::vertex_weights(p.graph, p.is_train, Balance{});
  for (int k : {2, 5}) {
    const auto built =
        detail::partition_multilevel(p.graph, weights, k, 3, 0.03, 5000, 1 << 30, 1e300);
    ASSERT_GE(built.levels.size(), 3u) << "k = " << k;
    for (const auto& level : built.levels)
      EXPECT_TRUE(level.built);
    // Shares that hold one level: the first (the second is then visited through it, with its
    // edge weights) or the second (the first is then visited through the fine graph).
    const double fine_bytes = static_cast<double>(p.graph.num_rows) * 8 +
                              static_cast<double>(p.graph.num_edges()) * 4;
    const auto level_bytes = [&](std::size_t l) {
      return static_cast<double>(built.levels[l].nodes + 1) * 8 +
             static_cast<double>(built.levels[l].edges) * 8;
    };
    ASSERT_LT(level_bytes(1) + 1, level_bytes(0));
    const std::pair<double, int> cases[] = {
        {0.0, -1}, {(level_bytes(0) + 1) / fine_bytes, 0}, {(level_bytes(1) + 1) / fine_bytes, 1}};
    for (const auto& [share, held] : cases) {
      const auto r = detail::partition_multilevel(p.graph, weights, k, 3, 0.03, 5000, 1 << 30,
                                                  share);
      ASSERT_EQ(r.levels.size(), built.levels.size()) << "share " << share;
      for (std::size_t l = 0; l < built.levels.size(); ++l) {
        EXPECT_EQ(r.levels[l].nodes, built.levels[l].nodes) << "level " << l;
        EXPECT_EQ(r.levels[l].edges, built.levels[l].edges) << "level " << l;
        const bool last = l + 1 == built.levels.size();
        EXPECT_EQ(r.levels[l].built, last || static_cast<int>(l) == held)
            << "level " << l << ", share " << share;
      }
      EXPECT_EQ(r.objval, built.objval) << "k = " << k << ", share " << share;
      EXPECT_EQ(r.moved, built.moved) << "k = " << k << ", share " << share;
      EXPECT_EQ(r.refined_cut, built.refined_cut) << "k = " << k << ", share " << share;
      EXPECT_EQ(r.part, built.part) << "k = " << k << ", share " << share;
    }
  }
}

TEST(PartitionMultilevel, CloseToMetisBalancedAndDeterministic) {
  const auto p = planted(20000, 16, 12, 0.9, 8);
  const auto weights = detail::vertex_weights(p.graph, p.is_train, Balance{});
  for (int k : {4, 8}) {
    const auto direct =
        detail::assign_metis(p.graph, p.graph, p.is_train, Balance{}, k, 0, 0.03, 1 << 30);
    const auto random = detail::assign_random(p.graph.num_rows, k, 0);
    // An edge budget far below the graph's 2 x 120k directed edges: several levels.
    const auto ml =
        detail::assign_metis(p.graph, p.graph, p.is_train, Balance{}, k, 0, 0.03, 1 << 30, 40000);
    ASSERT_GE(ml.levels.size(), 2u) << "k = " << k;
    EXPECT_LE(ml.levels.back().edges, 40000);
    EXPECT_EQ(ml.constraints, direct.constraints);
    const auto cut = undirected_cut(p.graph, ml.part);
    std::printf("k = %d: multilevel cut %lld (METIS on the coarsest %lld), METIS alone %lld\n", k,
                static_cast<long long>(cut), static_cast<long long>(ml.objval),
                static_cast<long long>(direct.objval));
    EXPECT_EQ(cut, ml.refined_cut);
    EXPECT_LE(ml.refined_cut, ml.objval) << "refinement made the cut worse";
    EXPECT_LT(2 * cut, undirected_cut(p.graph, random)) << "k = " << k;
    EXPECT_LT(cut, undirected_cut(p.graph, direct.part) * 11 / 10)
        << "k = " << k << ": multilevel cut " << cut << " vs METIS " << direct.objval;

    WeightedGraph g;
    g.num_nodes = p.graph.num_rows;
    g.ncon = weights.ncon;
    g.vwgt = weights.values;
    const auto pw = part_weights(g, ml.part, k);
    const auto total = totals(g);
    for (int q = 0; q < k; ++q)
      for (int c = 0; c < g.ncon; ++c)
        EXPECT_LE(static_cast<double>(pw[q][c]) * k / static_cast<double>(total[c]), 1.05)
            << "k = " << k << " part " << q << " constraint " << weights.names[c];

    // The same answer with one thread and with two.
    const auto one = with_threads(1, [&] {
      return detail::assign_metis(p.graph, p.graph, p.is_train, Balance{}, k, 0, 0.03, 1 << 30,
                                  40000);
    });
    const auto two = with_threads(2, [&] {
      return detail::assign_metis(p.graph, p.graph, p.is_train, Balance{}, k, 0, 0.03, 1 << 30,
                                  40000);
    });
    EXPECT_EQ(one.part, ml.part);
    EXPECT_EQ(two.part, ml.part);
  }
}

// A 2-D grid: the geometric kind of graph where METIS's matching coarsening is at its best.
TEST(PartitionMultilevel, GridCutCloseToMetis) {
  const std::int32_t side = 160;
  std::vector<NodeId> src, dst;
  for (std::int32_t r = 0; r < side; ++r)
    for (std::int32_t c = 0; c < side; ++c) {
      const NodeId v = r * side + c;
      if (c + 1 < side) src.push_back(v), dst.push_back(v + 1);
      if (r + 1 < side) src.push_back(v), dst.push_back(v + side);
    }
  const auto n = static_cast<std::int64_t>(side) * side;
  const GraphCsr g = detail::clean_graph(Csr::from_edges(n, n, src, dst), true);
  const std::vector<std::uint8_t> is_train(static_cast<std::size_t>(n), 0);
  for (int k : {4, 8}) {
    const auto direct = detail::assign_metis(g, g, is_train, Balance{}, k, 0, 0.03, 1 << 30);
    const auto ml = detail::assign_metis(g, g, is_train, Balance{}, k, 0, 0.03, 1 << 30, 10000);
    ASSERT_FALSE(ml.levels.empty());
    std::printf("grid k = %d: multilevel cut %lld (%zu levels, METIS on the coarsest %lld), METIS "
                "alone %lld\n",
                k, static_cast<long long>(ml.refined_cut), ml.levels.size(),
                static_cast<long long>(ml.objval), static_cast<long long>(direct.objval));
    EXPECT_LT(ml.refined_cut, direct.objval * 5 / 4) << "k = " << k;
  }
}

} // namespace
} // namespace tessel::partition
