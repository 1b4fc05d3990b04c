// Tests of the partitioner's steps: graph cleaning, random and METIS assignment, relabeling,
// building one part in memory.
#include "steps.hpp"

#include "partition_testing.hpp"
#include "tessel/core/error.hpp"
#include "tessel/datasets/dataset.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <set>

namespace tessel::partition {
namespace {

using detail::GraphCsr;

// Rows of a cleaned graph as (src, dst) pairs.
std::vector<std::pair<NodeId, NodeId>> edges_of(const GraphCsr& g) {
  std::vector<std::pair<NodeId, NodeId>> edges;
  for (NodeId v = 0; v < g.num_rows; ++v)
    for (auto e = g.indptr[v]; e < g.indptr[v + 1]; ++e)
      edges.emplace_back(g.indices[e], v);
  std::sort(edges.begin(), edges.end());
  return edges;
}

TEST(CleanGraph, SymmetrizesDropsSelfLoopsAndDuplicates) {
  // Edges 0->1, 1->2 (twice), 2->2 (self-loop), 3->0, 1->0.
  const Csr g = [] {
    Csr c = Csr::from_edges(4, 4, {0, 1, 1, 2, 3, 1}, {1, 2, 2, 2, 0, 0});
    c.sort_rows();
    return c;
  }();
  const GraphCsr sym = detail::clean_graph(g, true);
  sym.validate("sym");
  const std::vector<std::pair<NodeId, NodeId>> want_sym = {{0, 1}, {0, 3}, {1, 0},
                                                           {1, 2}, {2, 1}, {3, 0}};
  EXPECT_EQ(edges_of(sym), want_sym);
  const GraphCsr directed = detail::clean_graph(g, false);
  const std::vector<std::pair<NodeId, NodeId>> want_directed = {{0, 1}, {1, 0}, {1, 2}, {3, 0}};
  EXPECT_EQ(edges_of(directed), want_directed);
  // Rows come out sorted, and cleaning a 32-bit graph gives the same result.
  for (NodeId v = 0; v < sym.num_rows; ++v)
    EXPECT_TRUE(std::is_sorted(sym.indices.begin() + sym.indptr[v],
                               sym.indices.begin() + sym.indptr[v + 1]));
  EXPECT_EQ(edges_of(detail::clean_graph(directed, true)), want_sym);
}

TEST(CleanGraph, MatchesPlainSetComputationOnSyntheticGraph) {
  test::PlantedOptions o;
  o.num_nodes = 3000;
  o.avg_degree = 12;
  const auto data = test::planted_dataset(o);
  for (bool symmetrize : {true, false}) {
    const GraphCsr g = detail::clean_graph(data.graph, symmetrize);
    g.validate("clean");
    EXPECT_EQ(edges_of(g), test::expected_edges(data, symmetrize));
  }
}

TEST(CleanGraph, RefusesTooManyNodes) {
  const Csr g = test::symmetric_csr(10, test::path_edges(10));
  try {
    detail::clean_graph(g, true, 9);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("10 nodes"), std::string::npos) << e.what();
  }
}

// partition_store's path: the store's graph read in blocks of a few edges gives the graph that
// cleaning the whole graph in memory gives, row for row (blocks of 1 edge: one row per block).
TEST(CleanStoreGraph, BlocksOfAnySizeGiveTheInMemoryResult) {
  test::PlantedOptions o;
  o.num_nodes = 2000;
  o.avg_degree = 9;
  const auto data = test::planted_dataset(o);
  const test::TempDir dir("clean-store");
  const auto store = dir / "g.h5";
  datasets::write_store(data, store);
  for (bool symmetrize : {true, false}) {
    const GraphCsr want = detail::clean_graph(data.graph, symmetrize);
    for (std::int64_t block_edges : {std::int64_t{1}, std::int64_t{7}, std::int64_t{1} << 23}) {
      const GraphCsr got = detail::clean_store_graph(store, data.num_nodes, data.num_edges(),
                                                     symmetrize, 1 << 30, block_edges);
      EXPECT_EQ(got.num_rows, want.num_rows);
      EXPECT_EQ(got.indptr, want.indptr) << "symmetrize " << symmetrize << ", " << block_edges;
      EXPECT_EQ(got.indices, want.indices) << "symmetrize " << symmetrize << ", " << block_edges;
    }
  }
}

// A column out of range in the file stops the read with the file, the row and the value.
TEST(CleanStoreGraph, ABadColumnInTheFileNamesItsRow) {
  const Csr g = test::symmetric_csr(10, test::path_edges(10));
  datasets::Dataset data = test::planted_dataset({.num_nodes = 10});
  data.graph = g;
  const test::TempDir dir("clean-store-bad");
  const auto store = dir / "g.h5";
  datasets::write_store(data, store);
  // Row 4's first in-neighbor (position indptr[4]) becomes node 99 of 10, in place.
  {
    const hid_t f = H5Fopen(store.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    const hid_t d = H5Dopen2(f, "/graph/indices", H5P_DEFAULT);
    ASSERT_GE(d, 0);
    const hid_t space = H5Dget_space(d);
    const hsize_t at = static_cast<hsize_t>(g.indptr[4]), one = 1;
    H5Sselect_hyperslab(space, H5S_SELECT_SET, &at, nullptr, &one, nullptr);
    const hid_t mem = H5Screate_simple(1, &one, nullptr);
    const std::int64_t bad = 99;
    EXPECT_GE(H5Dwrite(d, H5T_NATIVE_INT64, mem, space, H5P_DEFAULT, &bad), 0);
    H5Sclose(mem);
    H5Sclose(space);
    H5Dclose(d);
    H5Fclose(f);
  }
  // As a file of another writer (no checksum header: its magic blanked), so that what stops the
  // read is the graph's own check, not the whole-file checksum.
  {
    std::fstream file(store, std::ios::in | std::ios::out | std::ios::binary);
    const char zeros[8] = {};
    file.write(zeros, sizeof zeros);
  }
  for (std::int64_t block_edges : {std::int64_t{3}, std::int64_t{1} << 23}) {
    try {
      detail::clean_store_graph(store, 10, g.num_edges(), true, 1 << 30, block_edges);
      FAIL() << "expected an InputError";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("g.h5 /graph: row 4: index 99"), std::string::npos) << what;
    }
  }
}

TEST(AssignRandom, BalancedSeededAndDeterministic) {
  const auto a = detail::assign_random(1003, 8, 42);
  const auto b = detail::assign_random(1003, 8, 42);
  const auto c = detail::assign_random(1003, 8, 43);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::vector<int> size(8, 0);
  for (auto p : a)
    ++size[p];
  EXPECT_LE(
      *std::max_element(size.begin(), size.end()) - *std::min_element(size.begin(), size.end()), 1);
  // Not just contiguous blocks of ids.
  EXPECT_FALSE(std::is_sorted(a.begin(), a.end()));
}

TEST(FillEmptyParts, MovesOneNodeIntoEachEmptyPart) {
  std::vector<std::int32_t> part = {0, 0, 0, 0, 2, 2};
  EXPECT_EQ(detail::fill_empty_parts(part, 4), 2);
  std::vector<int> size(4, 0);
  for (auto p : part)
    ++size[p];
  for (int p = 0; p < 4; ++p)
    EXPECT_GE(size[p], 1);
}

TEST(Relabel, ContiguousRangesInOriginalOrder) {
  const auto r = detail::relabel({1, 0, 1, 2, 0, 1}, 3);
  EXPECT_EQ(r.offsets, (std::vector<NodeId>{0, 2, 5, 6}));
  EXPECT_EQ(r.orig_of, (std::vector<std::int32_t>{1, 4, 0, 2, 5, 3}));
  for (std::int32_t v = 0; v < 6; ++v)
    EXPECT_EQ(r.orig_of[r.new_id[v]], v);
}

TEST(AssignMetis, SplitsTwoCliquesAtTheirBridge) {
  const Csr g = test::symmetric_csr(20, test::two_cliques_edges(10));
  const GraphCsr sym = detail::clean_graph(g, true);
  std::vector<std::uint8_t> is_train(20, 0);
  for (int v = 0; v < 20; v += 3)
    is_train[v] = 1;
  const auto result = detail::assign_metis(sym, sym, is_train, Balance{}, 2, 1, 0.03, 1 << 30);
  EXPECT_EQ(result.objval, 1);
  EXPECT_EQ(test::directed_cut(sym, result.part), 2);
  EXPECT_EQ(result.constraints, (std::vector<std::string>{"nodes", "train", "edges"}));
}

TEST(AssignMetis, DropsConstraintsWithZeroWeight) {
  const Csr g = test::symmetric_csr(12, test::cycle_edges(12));
  const GraphCsr sym = detail::clean_graph(g, true);
  const std::vector<std::uint8_t> no_train(12, 0);
  const auto result = detail::assign_metis(sym, sym, no_train, Balance{}, 3, 0, 0.03, 1 << 30);
  EXPECT_EQ(result.constraints, (std::vector<std::string>{"nodes", "edges"}));
  std::vector<int> size(3, 0);
  for (auto p : result.part)
    ++size[p];
  for (int p = 0; p < 3; ++p)
    EXPECT_EQ(size[p], 4);
}

TEST(AssignMetis, SameSeedSameAnswer) {
  test::PlantedOptions o;
  o.num_nodes = 2000;
  const auto data = test::planted_dataset(o);
  const GraphCsr sym = detail::clean_graph(data.graph, true);
  std::vector<std::uint8_t> is_train(2000, 0);
  for (auto v : data.train)
    is_train[v] = 1;
  const auto a = detail::assign_metis(sym, sym, is_train, Balance{}, 4, 5, 0.03, 1 << 30);
  const auto b = detail::assign_metis(sym, sym, is_train, Balance{}, 4, 5, 0.03, 1 << 30);
  EXPECT_EQ(a.part, b.part);
}

TEST(AssignMetis, RefusesGraphsBeyond32BitIndexBeforeBuildingArrays) {
  const Csr g = test::symmetric_csr(50, test::cycle_edges(50));
  const GraphCsr sym = detail::clean_graph(g, true);
  const std::vector<std::uint8_t> is_train(50, 0);
  // 100 directed edges against a limit of 99: the edge check fires.
  try {
    detail::assign_metis(sym, sym, is_train, Balance{}, 2, 0, 0.03, 99);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("32-bit idx_t"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("100 directed edges"), std::string::npos) << e.what();
  }
  try {
    detail::assign_metis(sym, sym, is_train, Balance{}, 2, 0, 0.03, 49);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("50 nodes"), std::string::npos) << e.what();
  }
}

TEST(AssignMetis, CutsPlantedPartitionFarBelowRandom) {
  test::PlantedOptions o;
  o.num_nodes = 4000;
  o.blocks = 8;
  o.avg_degree = 16;
  o.inside = 0.9;
  const auto data = test::planted_dataset(o);
  const GraphCsr sym = detail::clean_graph(data.graph, true);
  std::vector<std::uint8_t> is_train(static_cast<std::size_t>(o.num_nodes), 0);
  for (auto v : data.train)
    is_train[v] = 1;
  for (int k : {2, 4, 8}) {
    const auto metis = detail::assign_metis(sym, sym, is_train, Balance{}, k, 0, 0.03, 1 << 30);
    const auto random = detail::assign_random(o.num_nodes, k, 0);
    const auto metis_cut = test::directed_cut(sym, metis.part);
    const auto random_cut = test::directed_cut(sym, random);
    EXPECT_EQ(metis_cut, 2 * metis.objval);
    EXPECT_LT(2 * metis_cut, random_cut) << "k = " << k;
  }
}

TEST(BuildPart, HaloSortedByOwnerAndRowsSorted) {
  test::PlantedOptions o;
  o.num_nodes = 500;
  const auto data = test::planted_dataset(o);
  GraphCsr sym = detail::clean_graph(data.graph, true);
  const auto r = detail::relabel(detail::assign_random(500, 4, 3), 4);
  detail::relabel_columns(sym, r);
  detail::BuildScratch scratch;
  for (int p = 0; p < 4; ++p) {
    const Part part = detail::build_part(p, sym, r, data, scratch);
    part.graph.validate("part");
    for (std::int64_t h = 1; h < part.num_halo; ++h)
      EXPECT_LT(std::pair(part.halo_owner[h - 1], part.halo_owner_local[h - 1]),
                std::pair(part.halo_owner[h], part.halo_owner_local[h]));
    for (std::int64_t i = 0; i < part.num_owned; ++i)
      EXPECT_TRUE(std::is_sorted(part.graph.indices.begin() + part.graph.indptr[i],
                                 part.graph.indices.begin() + part.graph.indptr[i + 1]));
    EXPECT_TRUE(std::all_of(scratch.is_halo.begin(), scratch.is_halo.end(),
                            [](std::uint8_t x) { return x == 0; }));
  }
}

TEST(FeatureSource, GatherReadsRequestedRows) {
  std::vector<float> rows(10 * 3);
  for (std::size_t i = 0; i < rows.size(); ++i)
    rows[i] = static_cast<float>(i);
  detail::MemoryFeatures source(rows, 3);
  const std::vector<std::int32_t> ids = {1, 4, 9};
  std::vector<float> out(9);
  source.gather(ids, out.data());
  EXPECT_EQ(out, (std::vector<float>{3, 4, 5, 12, 13, 14, 27, 28, 29}));
}

// A 40 x 40 grid whose node ids are a random permutation: every locality order puts grid
// neighbours near each other again, which the shuffled ids do not; each is a permutation.
TEST(LocalOrder, OrdersPutTheNeighboursOfAShuffledGridNearEachOther) {
  constexpr std::int32_t side = 40, n = side * side;
  std::vector<std::int32_t> id(n);
  std::iota(id.begin(), id.end(), 0);
  std::uint64_t state = 12345;
  for (std::int32_t i = n - 1; i > 0; --i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    std::swap(id[i], id[static_cast<std::int32_t>((state >> 33) % static_cast<std::uint64_t>(i + 1))]);
  }
  std::vector<std::vector<std::int32_t>> rows(n);
  for (std::int32_t r = 0; r < side; ++r)
    for (std::int32_t c = 0; c < side; ++c) {
      const std::int32_t v = id[r * side + c];
      if (c + 1 < side) rows[v].push_back(id[r * side + c + 1]), rows[id[r * side + c + 1]].push_back(v);
      if (r + 1 < side) rows[v].push_back(id[(r + 1) * side + c]), rows[id[(r + 1) * side + c]].push_back(v);
    }
  detail::LocalGraph g;
  g.n = n;
  for (auto& row : rows) {
    std::sort(row.begin(), row.end());
    g.adj.insert(g.adj.end(), row.begin(), row.end());
    g.xadj.push_back(static_cast<EdgeId>(g.adj.size()));
  }
  // Mean |position(u) - position(v)| over the edges.
  const auto mean_gap = [&](const std::vector<std::int32_t>& order) {
    std::vector<std::int32_t> pos(n, -1);
    for (std::int32_t k = 0; k < n; ++k) pos[order[k]] = k;
    double sum = 0;
    for (std::int32_t v = 0; v < n; ++v)
      for (EdgeId e = g.xadj[v]; e < g.xadj[v + 1]; ++e) sum += std::abs(pos[v] - pos[g.adj[e]]);
    return sum / static_cast<double>(g.adj.size());
  };
  const double shuffled = mean_gap(detail::local_order(g, Order::none, 0));
  EXPECT_GT(shuffled, n / 4.0);
  for (const Order order : {Order::rcm, Order::bfs, Order::community}) {
    const auto perm = detail::local_order(g, order, 3);
    ASSERT_EQ(perm.size(), static_cast<std::size_t>(n)) << to_string(order);
    EXPECT_TRUE(std::is_permutation(perm.begin(), perm.end(),
                                    detail::local_order(g, Order::none, 0).begin()))
        << to_string(order);
    // A breadth-first order of a grid keeps neighbours within about two diagonals (~2 sides).
    EXPECT_LT(mean_gap(perm), 2.0 * side) << to_string(order) << ", shuffled " << shuffled;
  }
  // Two components and an isolated node: all are placed.
  detail::LocalGraph two;
  two.n = 5;
  two.xadj = {0, 1, 2, 3, 4, 4};
  two.adj = {1, 0, 3, 2};
  for (const Order order : {Order::rcm, Order::bfs, Order::community}) {
    auto perm = detail::local_order(two, order, 0);
    std::sort(perm.begin(), perm.end());
    EXPECT_EQ(perm, (std::vector<std::int32_t>{0, 1, 2, 3, 4})) << to_string(order);
  }
}

} // namespace
} // namespace tessel::partition
