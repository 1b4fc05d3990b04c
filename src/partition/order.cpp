// Locality orders of a part's owned nodes (--order): reverse Cuthill-McKee, BFS, and a
// community order (size-capped label propagation clusters, the clusters in reverse
// Cuthill-McKee order of the cluster graph). The order only renumbers: the relabeling keeps
// every node in its part, and every output is written by source id.
#include "steps.hpp"

#include "tessel/core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace tessel::partition {

Order parse_order(const std::string& name) {
  if (name == "none") return Order::none;
  if (name == "rcm") return Order::rcm;
  if (name == "bfs") return Order::bfs;
  if (name == "community") return Order::community;
  TESSEL_FAIL("unknown node order \"{}\" (expected none, rcm, bfs or community)", name);
}

std::string to_string(Order order) {
  switch (order) {
  case Order::none: return "none";
  case Order::rcm: return "rcm";
  case Order::bfs: return "bfs";
  case Order::community: return "community";
  }
  return "none";
}

namespace detail {

namespace {

using Ids = std::vector<std::int32_t>;

// Breadth-first levels from `start` over unvisited nodes (visited is restored afterwards):
// the last level's nodes and the number of levels.
struct Sweep {
  std::int32_t far_min_degree = -1; // a node of least degree in the last level
  int levels = 0;
};
Sweep sweep(const LocalGraph& g, std::int32_t start, std::vector<std::uint8_t>& visited,
            Ids& queue) {
  queue.clear();
  queue.push_back(start);
  visited[start] = 1;
  Sweep s;
  std::size_t level_begin = 0;
  while (level_begin < queue.size()) {
    const std::size_t level_end = queue.size();
    ++s.levels;
    std::int32_t best = -1;
    for (std::size_t q = level_begin; q < level_end; ++q) {
      const std::int32_t v = queue[q];
      if (best < 0 || g.degree(v) < g.degree(best)) best = v;
      for (EdgeId e = g.xadj[v]; e < g.xadj[v + 1]; ++e) {
        const std::int32_t u = g.adj[e];
        if (!visited[u]) {
          visited[u] = 1;
          queue.push_back(u);
        }
      }
    }
    s.far_min_degree = best;
    level_begin = level_end;
  }
  for (const std::int32_t v : queue)
    visited[v] = 0;
  return s;
}

// Cuthill-McKee: every component from a pseudo-peripheral node of least degree (George and
// Liu's search, a few sweeps), neighbours appended in increasing degree; reversed for RCM.
Ids cuthill_mckee(const LocalGraph& g, bool reverse) {
  const std::int64_t n = g.n;
  Ids by_degree(static_cast<std::size_t>(n));
  std::iota(by_degree.begin(), by_degree.end(), 0);
  std::stable_sort(by_degree.begin(), by_degree.end(),
                   [&](std::int32_t a, std::int32_t b) { return g.degree(a) < g.degree(b); });
  std::vector<std::uint8_t> visited(static_cast<std::size_t>(n), 0);
  Ids order, queue, next;
  order.reserve(static_cast<std::size_t>(n));
  for (const std::int32_t seed : by_degree) {
    if (visited[seed]) continue;
    std::int32_t start = seed;
    Sweep s = sweep(g, start, visited, queue);
    for (int round = 0; round < 4; ++round) {
      const Sweep t = sweep(g, s.far_min_degree, visited, queue);
      if (t.levels <= s.levels) break;
      start = s.far_min_degree;
      s = t;
    }
    std::size_t head = order.size();
    order.push_back(start);
    visited[start] = 1;
    while (head < order.size()) {
      const std::int32_t v = order[head++];
      next.clear();
      for (EdgeId e = g.xadj[v]; e < g.xadj[v + 1]; ++e)
        if (!visited[g.adj[e]]) {
          visited[g.adj[e]] = 1;
          next.push_back(g.adj[e]);
        }
      std::stable_sort(next.begin(), next.end(),
                       [&](std::int32_t a, std::int32_t b) { return g.degree(a) < g.degree(b); });
      order.insert(order.end(), next.begin(), next.end());
    }
  }
  if (reverse) std::reverse(order.begin(), order.end());
  return order;
}

// BFS from the unvisited node of highest degree, neighbours in stored (increasing) order.
Ids bfs_order(const LocalGraph& g) {
  const std::int64_t n = g.n;
  Ids by_degree(static_cast<std::size_t>(n));
  std::iota(by_degree.begin(), by_degree.end(), 0);
  std::stable_sort(by_degree.begin(), by_degree.end(),
                   [&](std::int32_t a, std::int32_t b) { return g.degree(a) > g.degree(b); });
  std::vector<std::uint8_t> visited(static_cast<std::size_t>(n), 0);
  Ids order;
  order.reserve(static_cast<std::size_t>(n));
  for (const std::int32_t seed : by_degree) {
    if (visited[seed]) continue;
    std::size_t head = order.size();
    order.push_back(seed);
    visited[seed] = 1;
    while (head < order.size()) {
      const std::int32_t v = order[head++];
      for (EdgeId e = g.xadj[v]; e < g.xadj[v + 1]; ++e)
        if (!visited[g.adj[e]]) {
          visited[g.adj[e]] = 1;
          order.push_back(g.adj[e]);
        }
    }
  }
  return order;
}

// Clusters of at most kCommunityNodes nodes by label propagation; clusters placed in RCM order
// of the cluster graph, each cluster's nodes in their RCM order of the whole part.
constexpr std::int64_t kCommunityNodes = 512;

Ids community_order(const LocalGraph& g, std::uint64_t seed) {
  const std::int64_t n = g.n;
  WeightedGraph w;
  w.num_nodes = n;
  w.ncon = 1;
  w.xadj = g.xadj;
  w.adjncy = g.adj;
  w.vwgt.assign(static_cast<std::size_t>(n), 1);
  const std::int64_t limit[] = {kCommunityNodes};
  Ids cluster = cluster_label_propagation(w, limit, seed, /*level=*/0);
  WeightedGraph coarse = contract(w, cluster);
  w = WeightedGraph{};
  const LocalGraph cg{coarse.num_nodes, std::move(coarse.xadj), std::move(coarse.adjncy)};
  const Ids cluster_order = cuthill_mckee(cg, /*reverse=*/true);
  Ids rank(static_cast<std::size_t>(cg.n));
  for (std::size_t k = 0; k < cluster_order.size(); ++k)
    rank[cluster_order[k]] = static_cast<std::int32_t>(k);
  // Inside a cluster, nodes in their RCM order of the whole part.
  Ids order = cuthill_mckee(g, /*reverse=*/true);
  std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return rank[cluster[a]] < rank[cluster[b]];
  });
  return order;
}

} // namespace

std::vector<std::int32_t> local_order(const LocalGraph& graph, Order order, std::uint64_t seed) {
  switch (order) {
  case Order::none: {
    Ids identity(static_cast<std::size_t>(graph.n));
    std::iota(identity.begin(), identity.end(), 0);
    return identity;
  }
  case Order::rcm: return cuthill_mckee(graph, /*reverse=*/true);
  case Order::bfs: return bfs_order(graph);
  case Order::community: return community_order(graph, seed);
  }
  TESSEL_ASSERT(false, "local_order: unknown order");
  return {};
}

LocalGraph owned_subgraph(const GraphCsr& graph, const Relabeling& r, int p, bool symmetrize) {
  const NodeId lo = r.offsets[p], hi = r.offsets[p + 1];
  const std::int64_t n = hi - lo;
  LocalGraph g;
  g.n = n;
  g.xadj.assign(static_cast<std::size_t>(n) + 1, 0);
  // In-neighbours owned by p, as local positions (relabeled id - lo).
  const auto inside = [&](std::int32_t u) { return r.part[u] == p; };
  for (std::int64_t i = 0; i < n; ++i) {
    const auto v = r.orig_of[lo + i];
    EdgeId count = 0;
    for (EdgeId e = graph.indptr[v]; e < graph.indptr[v + 1]; ++e)
      count += inside(graph.indices[e]) ? 1 : 0;
    g.xadj[i + 1] = g.xadj[i] + count;
  }
  g.adj.resize(static_cast<std::size_t>(g.xadj[n]));
#pragma omp parallel for schedule(dynamic, 1024)
  for (std::int64_t i = 0; i < n; ++i) {
    const auto v = r.orig_of[lo + i];
    EdgeId out = g.xadj[i];
    for (EdgeId e = graph.indptr[v]; e < graph.indptr[v + 1]; ++e) {
      const std::int32_t u = graph.indices[e];
      if (inside(u)) g.adj[out++] = static_cast<std::int32_t>(r.new_id[u] - lo);
    }
  }
  if (!symmetrize) return g;
  // A directed graph: each edge both ways, once.
  std::vector<EdgeId> count(static_cast<std::size_t>(n) + 1, 0);
  for (std::int64_t i = 0; i < n; ++i)
    for (EdgeId e = g.xadj[i]; e < g.xadj[i + 1]; ++e) {
      ++count[i + 1];
      ++count[g.adj[e] + 1];
    }
  for (std::int64_t i = 0; i < n; ++i)
    count[i + 1] += count[i];
  Ids both(static_cast<std::size_t>(count[n]));
  std::vector<EdgeId> at(count.begin(), count.end() - 1);
  for (std::int64_t i = 0; i < n; ++i)
    for (EdgeId e = g.xadj[i]; e < g.xadj[i + 1]; ++e) {
      both[at[i]++] = g.adj[e];
      both[at[g.adj[e]]++] = static_cast<std::int32_t>(i);
    }
  LocalGraph s;
  s.n = n;
  s.xadj.assign(static_cast<std::size_t>(n) + 1, 0);
  for (std::int64_t i = 0; i < n; ++i) {
    auto begin = both.begin() + count[i], end = both.begin() + count[i + 1];
    std::sort(begin, end);
    end = std::unique(begin, end);
    s.adj.insert(s.adj.end(), begin, end);
    s.xadj[i + 1] = static_cast<EdgeId>(s.adj.size());
  }
  return s;
}

void reorder_parts(Relabeling& r, const GraphCsr& graph, Order order, std::uint64_t seed,
                   bool symmetric) {
  if (order == Order::none) return;
  for (int p = 0; p < r.num_parts; ++p) {
    const NodeId lo = r.offsets[p], hi = r.offsets[p + 1];
    const LocalGraph g = owned_subgraph(graph, r, p, /*symmetrize=*/!symmetric);
    const Ids perm = local_order(g, order, seed + static_cast<std::uint64_t>(p));
    TESSEL_ASSERT(static_cast<std::int64_t>(perm.size()) == hi - lo,
                  "reorder_parts: an order of {} nodes for part {} of {}", perm.size(), p,
                  hi - lo);
    // Position k of the part now holds the node that was at position perm[k].
    Ids old(r.orig_of.begin() + lo, r.orig_of.begin() + hi);
    std::vector<std::uint8_t> seen(old.size(), 0);
    for (std::size_t k = 0; k < perm.size(); ++k) {
      const std::int32_t from = perm[k];
      TESSEL_ASSERT(from >= 0 && from < hi - lo && !seen[from],
                    "reorder_parts: the order of part {} is not a permutation", p);
      seen[from] = 1;
      const std::int32_t v = old[from];
      r.orig_of[lo + static_cast<NodeId>(k)] = v;
      r.new_id[v] = static_cast<std::int32_t>(lo + static_cast<NodeId>(k));
    }
  }
}

} // namespace detail
} // namespace tessel::partition
