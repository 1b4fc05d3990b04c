// Synthetic planted-partition datasets and the independent partition verifier used by the tests.
#include "partition_testing.hpp"

#include "tessel/core/rng.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <numeric>
#include <set>
#include <sstream>

namespace tessel::test {

datasets::Dataset planted_dataset(const PlantedOptions& o) {
  const std::int64_t n = o.num_nodes;
  rng::Sequence draws(rng::Key{o.seed, rng::Stream::synthetic}, 0);
  // Shuffled community membership.
  std::vector<NodeId> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  for (std::int64_t i = n - 1; i > 0; --i)
    std::swap(order[i], order[draws.next_below(static_cast<std::uint64_t>(i) + 1)]);
  std::vector<int> block(static_cast<std::size_t>(n));
  std::vector<std::vector<NodeId>> members(static_cast<std::size_t>(o.blocks));
  for (std::int64_t i = 0; i < n; ++i) {
    block[order[i]] = static_cast<int>(i * o.blocks / n);
    members[block[order[i]]].push_back(order[i]);
  }

  std::vector<NodeId> src, dst;
  const auto per_node =
      std::max<std::int64_t>(1, static_cast<std::int64_t>(o.avg_degree / 2 + 0.5));
  for (NodeId u = 0; u < n; ++u) {
    for (std::int64_t d = 0; d < per_node; ++d) {
      NodeId v;
      if (draws.next_double() < o.inside) {
        const auto& same = members[block[u]];
        v = same[draws.next_below(same.size())];
      } else {
        v = static_cast<NodeId>(draws.next_below(static_cast<std::uint64_t>(n)));
      }
      if (v == u && !o.self_loops_and_duplicates) continue;
      // Undirected datasets store each edge once, as (smaller -> larger).
      const NodeId a = o.directed ? u : std::min(u, v), b = o.directed ? v : std::max(u, v);
      src.push_back(a);
      dst.push_back(b);
    }
    if (o.self_loops_and_duplicates && u % 17 == 0) {
      src.push_back(u); // a self-loop
      dst.push_back(u);
      const std::size_t earlier = src.size() / 2; // and a duplicate of an earlier edge
      const NodeId a = src[earlier], b = dst[earlier];
      src.push_back(a);
      dst.push_back(b);
    }
  }
  datasets::Dataset data;
  data.name = o.name;
  data.num_nodes = n;
  data.num_classes = o.num_classes;
  data.feature_dim = o.feature_dim;
  data.directed = o.directed;
  data.graph = Csr::from_edges(n, n, src, dst);
  data.graph.sort_rows();
  data.features.resize(static_cast<std::size_t>(n * o.feature_dim));
  for (auto& x : data.features)
    x = draws.next_normal();
  data.labels.resize(static_cast<std::size_t>(n));
  for (NodeId v = 0; v < n; ++v)
    data.labels[v] = v % 11 == 5 ? -1 : block[v] % o.num_classes;
  for (NodeId v = 0; v < n; ++v) {
    const auto r = v % 10;
    if (r < 3)
      data.train.push_back(v);
    else if (r == 3)
      data.valid.push_back(v);
    else if (r < 6)
      data.test.push_back(v);
  }
  return data;
}

std::vector<std::pair<NodeId, NodeId>> expected_edges(const datasets::Dataset& data,
                                                      bool symmetrized) {
  std::vector<std::pair<NodeId, NodeId>> edges;
  for (NodeId v = 0; v < data.graph.num_rows; ++v) {
    for (auto e = data.graph.indptr[v]; e < data.graph.indptr[v + 1]; ++e) {
      const NodeId u = data.graph.indices[e];
      if (u == v) continue;
      edges.emplace_back(u, v);
      if (symmetrized) edges.emplace_back(v, u);
    }
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  return edges;
}

void verify_partition(const std::filesystem::path& dir, const datasets::Dataset& source,
                      bool symmetrized, std::int64_t* cut_out) {
  const auto m = partition::read_manifest(dir);
  const std::int64_t n = source.num_nodes, f = source.feature_dim;
  ASSERT_EQ(m.num_nodes, n);
  ASSERT_EQ(m.feature_dim, f);
  ASSERT_EQ(m.symmetrized, symmetrized);
  const int k = m.num_parts;
  ASSERT_EQ(static_cast<int>(m.offsets.size()), k + 1);

  std::vector<partition::Part> parts;
  for (int p = 0; p < k; ++p)
    parts.push_back(partition::load_part(dir, p, m));

  // Every node owned exactly once, at its relabeled position.
  std::vector<int> owner(static_cast<std::size_t>(n), -1);
  std::vector<std::int64_t> owner_local(static_cast<std::size_t>(n), -1);
  for (int p = 0; p < k; ++p) {
    const auto& part = parts[p];
    ASSERT_EQ(part.num_owned, m.offsets[p + 1] - m.offsets[p]);
    ASSERT_GT(part.num_owned, 0) << "part " << p << " is empty";
    for (std::int64_t i = 0; i < part.num_owned; ++i) {
      const NodeId v = part.orig_id[i];
      ASSERT_TRUE(v >= 0 && v < n);
      ASSERT_EQ(owner[v], -1) << "node " << v << " owned twice";
      owner[v] = p;
      owner_local[v] = i;
      ASSERT_EQ(part.global_id(static_cast<LocalId>(i), m), m.offsets[p] + i);
      ASSERT_EQ(m.owner_of(m.offsets[p] + i), p);
    }
  }
  for (NodeId v = 0; v < n; ++v)
    ASSERT_NE(owner[v], -1) << "node " << v << " not owned";

  // Local edges mapped back to source ids are exactly the training edges, each once.
  const auto expected = expected_edges(source, symmetrized);
  std::vector<std::pair<NodeId, NodeId>> got;
  for (const auto& part : parts)
    for (std::int64_t i = 0; i < part.num_owned; ++i)
      for (auto e = part.graph.indptr[i]; e < part.graph.indptr[i + 1]; ++e)
        got.emplace_back(part.orig_id[part.graph.indices[e]], part.orig_id[i]);
  std::sort(got.begin(), got.end());
  ASSERT_EQ(got.size(), expected.size());
  ASSERT_TRUE(got == expected) << "edge sets differ";
  EXPECT_EQ(m.num_edges, static_cast<std::int64_t>(expected.size()));

  // Halo = exactly the non-owned in-neighbors of owned nodes, with the right owners.
  std::vector<std::set<NodeId>> halo_expected(static_cast<std::size_t>(k));
  std::vector<std::int64_t> in_degree(static_cast<std::size_t>(n), 0);
  std::int64_t cut = 0;
  for (const auto& [u, v] : expected) {
    ++in_degree[v];
    if (owner[u] != owner[v]) {
      halo_expected[owner[v]].insert(u);
      ++cut;
    }
  }
  for (int p = 0; p < k; ++p) {
    const auto& part = parts[p];
    std::set<NodeId> halo_got(part.orig_id.begin() + part.num_owned, part.orig_id.end());
    EXPECT_EQ(static_cast<std::int64_t>(halo_got.size()), part.num_halo) << "duplicate halo";
    EXPECT_TRUE(halo_got == halo_expected[p]) << "part " << p << " halo differs";
    for (std::int64_t h = 0; h < part.num_halo; ++h) {
      const NodeId u = part.orig_id[part.num_owned + h];
      EXPECT_EQ(part.halo_owner[h], owner[u]);
      EXPECT_EQ(part.halo_owner_local[h], owner_local[u]);
      EXPECT_EQ(part.global_id(static_cast<LocalId>(part.num_owned + h), m),
                m.offsets[owner[u]] + owner_local[u]);
    }
    for (std::int64_t l = 0; l < part.num_local(); ++l)
      EXPECT_EQ(part.degree[l], in_degree[part.orig_id[l]]);
  }
  EXPECT_EQ(m.raw["edge_cut"]["edges"].get<std::int64_t>(), cut);
  if (cut_out) *cut_out = cut;

  // Owned features, labels and splits are the source rows.
  std::set<NodeId> train(source.train.begin(), source.train.end());
  std::set<NodeId> valid(source.valid.begin(), source.valid.end());
  std::set<NodeId> test(source.test.begin(), source.test.end());
  for (int p = 0; p < k; ++p) {
    const auto& part = parts[p];
    ASSERT_EQ(static_cast<std::int64_t>(part.features.size()), part.num_owned * f);
    for (std::int64_t i = 0; i < part.num_owned; ++i) {
      const NodeId v = part.orig_id[i];
      ASSERT_TRUE(std::equal(part.features.begin() + i * f, part.features.begin() + (i + 1) * f,
                             source.features.begin() + v * f))
          << "features of node " << v;
      ASSERT_EQ(part.labels[i], source.labels[v]);
    }
    const std::pair<const std::vector<LocalId>*, const std::set<NodeId>*> splits[] = {
        {&part.train, &train}, {&part.valid, &valid}, {&part.test, &test}};
    for (const auto& [local, whole] : splits) {
      std::set<NodeId> got_split, want_split;
      for (const LocalId l : *local)
        got_split.insert(part.orig_id[l]);
      EXPECT_EQ(got_split.size(), local->size());
      for (const NodeId v : *whole)
        if (owner[v] == p) want_split.insert(v);
      EXPECT_TRUE(got_split == want_split) << "part " << p << " split differs";
    }
  }
}

std::string file_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::int64_t directed_cut(const CsrT<std::int32_t>& g, const std::vector<std::int32_t>& part) {
  std::int64_t cut = 0;
  for (std::int64_t v = 0; v < g.num_rows; ++v)
    for (auto e = g.indptr[v]; e < g.indptr[v + 1]; ++e)
      cut += part[g.indices[e]] != part[v];
  return cut;
}

} // namespace tessel::test
