// Graphs and simulated partitions shared by the sampling tests.
#pragma once

#include "tessel/core/csr.hpp"
#include "tessel/core/rng.hpp"
#include "tessel/sampling/neighbor_sampler.hpp"

#include "test_support.hpp"

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

namespace tessel::test {

// Undirected graph with skewed degrees (endpoint = floor(n * u^2)), a few isolated nodes and one
// hub of degree >= hub_degree so that both sampler paths (sorted insertion, bitmap) are hit.
inline Csr skewed_graph(NodeId n, std::int64_t edges, std::int64_t hub_degree, std::uint64_t seed) {
  rng::Sequence draw(rng::Key{seed, rng::Stream::synthetic}, 0);
  std::set<std::pair<NodeId, NodeId>> unique;
  for (std::int64_t k = 0; k < edges; ++k) {
    const double a = draw.next_double(), b = draw.next_double();
    NodeId u = static_cast<NodeId>(static_cast<double>(n - 3) * a * a);
    NodeId v = static_cast<NodeId>(static_cast<double>(n - 3) * b * b);
    if (u == v) continue;
    unique.emplace(std::min(u, v), std::max(u, v));
  }
  const NodeId hub = n / 2; // nodes n-3.. n-1 stay isolated
  for (NodeId v = 0; v < std::min<NodeId>(hub_degree + 1, n - 3); ++v)
    if (v != hub) unique.emplace(std::min(v, hub), std::max(v, hub));
  return symmetric_csr(n, {unique.begin(), unique.end()});
}

// A random permutation of [0, n).
inline std::vector<NodeId> random_permutation(NodeId n, std::uint64_t seed) {
  std::vector<NodeId> p(static_cast<std::size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  rng::Sequence draw(rng::Key{seed, rng::Stream::shuffle}, 0);
  for (NodeId i = n - 1; i > 0; --i)
    std::swap(p[i], p[draw.next_below(static_cast<std::uint64_t>(i) + 1)]);
  return p;
}

// One simulated partition of a whole graph whose ids are the original ids: owned nodes get local
// ids [0, owned) in a scrambled order, halo nodes follow; rows are stored scrambled and then put
// in canonical order with sort_rows_by_key, as a loader would.
struct SimPart {
  std::vector<NodeId> orig_id;   // local -> original
  std::vector<LocalId> local_of; // original -> local, -1 if absent
  std::int64_t num_owned = 0;
  LocalCsr graph;
};

// owner[v] = part of v. Returns one SimPart per part.
inline std::vector<SimPart> simulate_parts(const Csr& whole, const std::vector<int>& owner,
                                           int num_parts, std::uint64_t seed) {
  const NodeId n = whole.num_rows;
  const auto scramble = random_permutation(n, seed);
  std::vector<SimPart> parts(static_cast<std::size_t>(num_parts));
  for (int p = 0; p < num_parts; ++p) {
    SimPart& part = parts[static_cast<std::size_t>(p)];
    part.local_of.assign(static_cast<std::size_t>(n), -1);
    for (NodeId v : scramble)
      if (owner[v] == p) {
        part.local_of[v] = static_cast<LocalId>(part.orig_id.size());
        part.orig_id.push_back(v);
      }
    part.num_owned = static_cast<std::int64_t>(part.orig_id.size());
    for (std::int64_t i = 0; i < part.num_owned; ++i)
      for (EdgeId e = whole.indptr[part.orig_id[i]]; e < whole.indptr[part.orig_id[i] + 1]; ++e) {
        const NodeId u = whole.indices[e];
        if (part.local_of[u] < 0) {
          part.local_of[u] = static_cast<LocalId>(part.orig_id.size());
          part.orig_id.push_back(u);
        }
      }
    LocalCsr& g = part.graph;
    g.num_rows = part.num_owned;
    g.num_cols = static_cast<std::int64_t>(part.orig_id.size());
    g.indptr.assign(1, 0);
    rng::Sequence draw(rng::Key{seed + 1 + static_cast<std::uint64_t>(p), rng::Stream::shuffle}, 0);
    for (std::int64_t i = 0; i < part.num_owned; ++i) {
      const NodeId v = part.orig_id[i];
      const auto start = g.indices.size();
      for (EdgeId e = whole.indptr[v]; e < whole.indptr[v + 1]; ++e)
        g.indices.push_back(part.local_of[whole.indices[e]]);
      for (auto k = g.indices.size() - 1; k > start; --k) // scramble the stored row order
        std::swap(g.indices[k], g.indices[start + draw.next_below(k - start + 1)]);
      g.indptr.push_back(static_cast<EdgeId>(g.indices.size()));
    }
    sampling::sort_rows_by_key(g, part.orig_id);
  }
  return parts;
}

} // namespace tessel::test
