// Multilevel k-way partitioning of graphs larger than METIS should see in one piece.
//
// METIS 5 keeps every level of its coarsening in memory, and its heavy-edge matching at most
// halves the node count per level while edges merge only where matched pairs share neighbors:
// on a graph with little clustering the edge count stays near the fine graph's for five or six
// levels, about 50-60 bytes per directed edge in all. Tessel therefore coarsens large graphs
// itself with size-constrained label propagation (Raghavan et al. 2007; the size constraint as
// in Meyerhenke, Sanders and Schulz 2014), which shrinks the node count up to sixteenfold per
// level, hands METIS only the coarsest graph, then projects METIS's partition back level by level
// and improves it at each with a balance-respecting k-way label-propagation refinement.
//
// Both label-propagation loops run in sub-rounds: a chunk of nodes (in a seeded random order)
// chooses its move in parallel against the state frozen at the start of the chunk, then the
// moves are applied in order, each re-checked against the weight limits. The result is the same
// for any number of threads.
#include "steps.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/progress.hpp"
#include "tessel/core/rng.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

namespace tessel::partition::detail {

namespace {

// Edges ahead whose endpoint's entry is prefetched (the per-node arrays are far larger than L2).
constexpr EdgeId kPrefetch = 16;

// A read-only view of one level: the fine graph (int64 offsets, unit edge weights), a coarse
// WeightedGraph, or a coarse level that is not built (implicit): its node v stands for the fine
// nodes members[first[v], first[v + 1]), and each fine edge (m, u) of those with level_of[u] != v
// is an edge (v, level_of[u]) of weight 1. An implicit level's edges are its fine edges mapped on
// the fly, so that no coarse level but the coarsest is ever held: on a graph with little
// clustering the coarse levels keep most of the fine graph's edges (with a weight each), and
// holding them would take several times the fine graph's memory.
struct LevelView {
  std::int64_t n = 0;
  const EdgeId* xadj = nullptr;
  const std::int32_t* adjncy = nullptr;
  const std::int32_t* adjwgt = nullptr; // null: every edge weighs 1
  const std::int32_t* vwgt = nullptr;   // [n * ncon]
  int ncon = 1;
  // Implicit levels only.
  const EdgeId* first = nullptr;
  const std::int32_t* members = nullptr;
  const std::int32_t* level_of = nullptr;
  const EdgeId* fine_xadj = nullptr;     // the base level's (the fine graph or a built level)
  const std::int32_t* fine_adjncy = nullptr;
  const std::int32_t* fine_adjwgt = nullptr; // null: every base edge weighs 1
  std::int64_t implicit_edges = 0; // its directed edges, once contracted

  bool implicit() const { return members != nullptr; }
  std::int64_t edges() const { return implicit() ? implicit_edges : xadj[n]; }
  const std::int32_t* node_weight(std::int64_t v) const { return vwgt + v * ncon; }
  // At least the number of distinct neighbors of v (sizes a rating table).
  std::int64_t degree_bound(std::int64_t v) const {
    if (!implicit()) return xadj[v + 1] - xadj[v];
    std::int64_t d = 0;
    for (EdgeId i = first[v]; i < first[v + 1]; ++i)
      d += fine_xadj[members[i] + 1] - fine_xadj[members[i]];
    return std::min(d, n);
  }
  // fn(u, w) for every edge (v, u) of weight w; an implicit level gives a coarse edge once per
  // fine edge under it (weight 1 each), in the order a built level's first-seen adjacency has.
  // ahead(u) is called for the edge kPrefetch ahead (a prefetch of u's entries).
  template <class Fn, class Ahead>
  void for_each_edge(std::int64_t v, Fn&& fn, Ahead&& ahead) const {
    if (!implicit()) {
      const EdgeId end = xadj[v + 1];
      for (EdgeId e = xadj[v]; e < end; ++e) {
        if (e + kPrefetch < end) ahead(adjncy[e + kPrefetch]);
        fn(adjncy[e], adjwgt ? adjwgt[e] : 1);
      }
      return;
    }
    for (EdgeId i = first[v]; i < first[v + 1]; ++i) {
      const std::int32_t m = members[i];
      const EdgeId end = fine_xadj[m + 1];
      for (EdgeId e = fine_xadj[m]; e < end; ++e) {
        if (e + kPrefetch < end) __builtin_prefetch(&level_of[fine_adjncy[e + kPrefetch]]);
        const std::int32_t u = level_of[fine_adjncy[e]];
        if (u != v) fn(u, fine_adjwgt ? fine_adjwgt[e] : 1);
      }
    }
  }
  template <class Fn> void for_each_edge(std::int64_t v, Fn&& fn) const {
    for_each_edge(v, fn, [](std::int32_t) {});
  }
};

LevelView view_of(const WeightedGraph& g) {
  return {g.num_nodes,     g.xadj.data(),
          g.adjncy.data(), g.adjwgt.empty() ? nullptr : g.adjwgt.data(),
          g.vwgt.data(),   g.ncon};
}

// A seeded pseudo-random order of the nodes (the same for every thread count).
std::vector<std::int32_t> visit_order(std::int64_t n, std::uint64_t seed, std::uint32_t salt) {
  const std::uint32_t key =
      rng::Key::mix(static_cast<std::uint32_t>(seed) ^
                    rng::Key::mix(salt ^ static_cast<std::uint32_t>(seed >> 32)));
  std::vector<std::uint64_t> keyed(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(static)
  for (std::int64_t v = 0; v < n; ++v)
    keyed[v] =
        (static_cast<std::uint64_t>(rng::Key::mix(static_cast<std::uint32_t>(v) ^ key)) << 32) |
        static_cast<std::uint64_t>(v);
  std::sort(keyed.begin(), keyed.end());
  std::vector<std::int32_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    order[i] = static_cast<std::int32_t>(keyed[i] & 0xffffffffu);
  return order;
}

// Nodes per sub-round: small enough that neighbors rarely choose in the same chunk, large
// enough to amortize the fork/join.
std::int64_t chunk_size(std::int64_t n) {
  return std::clamp<std::int64_t>(n / 128, 256, 1 << 15);
}

// Tie-breaking among equally good candidates, deterministic and without a bias to low ids.
std::uint32_t tie_key(std::int32_t candidate, std::uint32_t salt) {
  return rng::Key::mix(static_cast<std::uint32_t>(candidate) ^ salt);
}

// Weight tables are int64 for parts and int32 for clusters (a cluster never holds more than its
// limit, which fits in 32 bits, or one node): the sums are made in 64 bits either way.
template <class W>
bool fits(const W* weight, const std::int32_t* add, const std::int64_t* limit, int ncon) {
  for (int c = 0; c < ncon; ++c)
    if (static_cast<std::int64_t>(weight[c]) + add[c] > limit[c]) return false;
  return true;
}

// Moves a node's weight w from group `from` to group `to` of a [groups x ncon] weight table.
template <class W>
void transfer(std::vector<W>& weight, std::int32_t from, std::int32_t to, const std::int32_t* w,
              int ncon) {
  for (int c = 0; c < ncon; ++c) {
    weight[static_cast<std::size_t>(from) * ncon + c] -= w[c];
    weight[static_cast<std::size_t>(to) * ncon + c] += w[c];
  }
}

// Per-thread scratch: ratings (sums of edge weights) of candidates at one node, with the list of
// candidates in first-seen order. A node with few neighbors uses a small open-addressing table
// that stays in L1 (a dense array over millions of clusters would cost a cache miss per edge); a
// node with many uses a dense array over the candidates where there are few of them (parts), and
// a table sized to its degree where there are many (clusters: a dense array per thread would be
// 8 bytes a node of the graph). The ratings and their order are the same either way.
class Ratings {
public:
  explicit Ratings(std::int64_t size)
      : dense_(size <= kMaxDense ? static_cast<std::size_t>(size) : 0, 0) {}

  // Prepares for a node with `degree` edges.
  void start(std::int64_t degree) {
    small_ = degree <= kMaxSmall || dense_.empty();
    if (!small_) return;
    bits_ = 4;
    while ((std::int64_t{1} << bits_) < 2 * degree)
      ++bits_;
    if (keys_.size() < (std::size_t{1} << bits_)) {
      keys_.assign(std::size_t{1} << bits_, -1);
      values_.assign(std::size_t{1} << bits_, 0);
    }
  }
  void add(std::int32_t c, std::int64_t w) {
    if (!small_) {
      if (dense_[c] == 0) touched_.push_back(c);
      dense_[c] += w;
      return;
    }
    std::uint32_t slot = hash(c);
    const std::uint32_t mask = (1u << bits_) - 1;
    while (keys_[slot] != c) {
      if (keys_[slot] < 0) {
        keys_[slot] = c;
        touched_.push_back(c);
        break;
      }
      slot = (slot + 1) & mask;
    }
    values_[slot] += w;
  }
  std::int64_t rating(std::int32_t c) const {
    if (!small_) return dense_[c];
    std::uint32_t slot = hash(c);
    const std::uint32_t mask = (1u << bits_) - 1;
    while (keys_[slot] >= 0) {
      if (keys_[slot] == c) return values_[slot];
      slot = (slot + 1) & mask;
    }
    return 0;
  }
  const std::vector<std::int32_t>& touched() const { return touched_; }
  void clear() {
    if (small_) {
      const std::size_t size = std::size_t{1} << bits_;
      std::fill_n(keys_.begin(), size, -1);
      std::fill_n(values_.begin(), size, 0);
    } else {
      for (auto c : touched_)
        dense_[c] = 0;
    }
    touched_.clear();
  }

private:
  static constexpr std::int64_t kMaxSmall = 1024;
  static constexpr std::int64_t kMaxDense = std::int64_t{1} << 16;
  std::uint32_t hash(std::int32_t c) const {
    return (static_cast<std::uint32_t>(c) * 0x9E3779B1u) >> (32 - bits_);
  }
  std::vector<std::int64_t> dense_;
  std::vector<std::int32_t> keys_;
  std::vector<std::int64_t> values_;
  std::vector<std::int32_t> touched_;
  bool small_ = false;
  int bits_ = 4;
};

// A node's chosen move: its new cluster or part (-1: none) and the gain that justified it.
struct Move {
  std::int32_t to = -1;
  std::int64_t gain = 0;
};

// One pass of sub-round label propagation over `order`, in chunks of moves.size() nodes: before
// each chunk, before_chunk(); then choose(v, ratings) for every node of the chunk, in parallel,
// against the state as it was at the chunk's start; then apply(v, move) in order, which makes
// the move if it still fits and returns whether it did. Returns the number of moves made.
template <class BeforeChunk, class Choose, class Apply>
std::int64_t subround_pass(const std::vector<std::int32_t>& order, std::vector<Ratings>& scratch,
                           std::vector<Move>& moves, BeforeChunk&& before_chunk, Choose&& choose,
                           Apply&& apply) {
  const auto n = static_cast<std::int64_t>(order.size());
  const auto chunk = static_cast<std::int64_t>(moves.size());
  std::int64_t made = 0;
  for (std::int64_t begin = 0; begin < n; begin += chunk) {
    const std::int64_t end = std::min(n, begin + chunk);
    before_chunk();
#pragma omp parallel
    {
      Ratings& r = scratch[static_cast<std::size_t>(omp_get_thread_num())];
#pragma omp for schedule(dynamic, 64)
      for (std::int64_t i = begin; i < end; ++i)
        moves[i - begin] = choose(order[i], r);
    }
    for (std::int64_t i = begin; i < end; ++i)
      made += apply(order[i], moves[i - begin]) ? 1 : 0;
  }
  return made;
}

std::vector<Ratings> thread_scratch(std::int64_t size) {
  const int threads = omp_get_max_threads();
  std::vector<Ratings> scratch;
  scratch.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t)
    scratch.emplace_back(size);
  return scratch;
}

// ---- Size-constrained label propagation clustering ------------------------------------------

constexpr int kClusterPasses = 3;
// Target node-count reduction per coarsening level.
constexpr std::int64_t kCoarsenShrink = 16;

std::vector<std::int32_t> cluster_level(const LevelView& g, std::span<const std::int64_t> limit,
                                        std::uint64_t seed, int level) {
  const std::int64_t n = g.n;
  const int ncon = g.ncon;
  std::vector<std::int32_t> cluster(static_cast<std::size_t>(n));
  std::iota(cluster.begin(), cluster.end(), 0);
  for (int c = 0; c < ncon; ++c)
    TESSEL_ASSERT(limit[c] <= std::numeric_limits<std::int32_t>::max(),
                  "cluster_level: weight limit {} does not fit in 32 bits", limit[c]);
  std::vector<std::int32_t> cweight(static_cast<std::size_t>(n) * ncon);
  std::vector<std::int32_t> csize(static_cast<std::size_t>(n), 1);
  for (std::int64_t v = 0; v < n; ++v)
    for (int c = 0; c < ncon; ++c)
      cweight[v * ncon + c] = g.vwgt[v * ncon + c];

  const auto order = visit_order(n, seed, 0x1000u + static_cast<std::uint32_t>(level));
  std::vector<Move> moves(static_cast<std::size_t>(chunk_size(n)));
  auto scratch = thread_scratch(n);
  const std::uint32_t salt = rng::Key::mix(static_cast<std::uint32_t>(seed) + 77u * level);

  for (int pass = 0; pass < kClusterPasses; ++pass) {
    const std::uint32_t pass_salt = salt ^ static_cast<std::uint32_t>(pass);
    const auto choose = [&](std::int32_t v, Ratings& r) {
      const std::int32_t own = cluster[v];
      r.start(g.degree_bound(v));
      g.for_each_edge(
          v, [&](std::int32_t u, std::int32_t w) { r.add(cluster[u], w); },
          [&](std::int32_t u) { __builtin_prefetch(&cluster[u]); });
      Move best{own, r.rating(own)};
      std::uint32_t best_tie = 0;
      for (const std::int32_t c : r.touched()) {
        if (c == own) continue;
        const std::int64_t rating = r.rating(c);
        if (rating < best.gain) continue;
        const std::uint32_t tie = tie_key(c, pass_salt);
        // Staying wins ties; among others the tie key decides. The weight check (a cache miss)
        // comes last, only for a candidate that would win.
        if (rating == best.gain && (best.to == own || tie <= best_tie)) continue;
        if (!fits(&cweight[static_cast<std::size_t>(c) * ncon], g.node_weight(v), limit.data(),
                  ncon))
          continue;
        best = {c, rating};
        best_tie = tie;
      }
      r.clear();
      return best;
    };
    const auto apply = [&](std::int32_t v, const Move& m) {
      const std::int32_t from = cluster[v];
      const std::int32_t* w = g.node_weight(v);
      if (m.to == from ||
          !fits(&cweight[static_cast<std::size_t>(m.to) * ncon], w, limit.data(), ncon))
        return false;
      transfer(cweight, from, m.to, w, ncon);
      --csize[from];
      ++csize[m.to];
      cluster[v] = m.to;
      return true;
    };
    const std::int64_t moved = subround_pass(
        order, scratch, moves, [] {}, choose, apply);
    if (moved * 100 < n) break; // fewer than 1% of the nodes moved: converged
  }

  // Nodes still alone (their neighbors' clusters are full, or they have no neighbors) would
  // stall the coarsening: those whose favorite cluster is the same are merged with each other
  // (two-hop clustering), within the limit; isolated nodes are merged with each other.
  std::vector<std::int32_t> favorite(static_cast<std::size_t>(n), -1);
#pragma omp parallel
  {
    Ratings& r = scratch[static_cast<std::size_t>(omp_get_thread_num())];
#pragma omp for schedule(dynamic, 1024)
    for (std::int64_t v = 0; v < n; ++v) {
      if (csize[cluster[v]] != 1) continue;
      const std::int32_t own = cluster[v];
      r.start(g.degree_bound(v));
      g.for_each_edge(v, [&](std::int32_t u, std::int32_t w) { r.add(cluster[u], w); });
      std::int32_t best = -1;
      std::int64_t best_rating = 0;
      for (const std::int32_t c : r.touched()) {
        const std::int64_t rating = r.rating(c);
        if (c != own && (rating > best_rating || (rating == best_rating && c < best))) {
          best = c;
          best_rating = rating;
        }
      }
      r.clear();
      favorite[v] = best < 0 ? static_cast<std::int32_t>(n) : best; // n: no neighbor cluster
    }
  }
  scratch.clear();
  // leader[f]: the cluster that singletons favoring f currently join (-1: none yet).
  std::vector<std::int32_t> leader(static_cast<std::size_t>(n) + 1, -1);
  for (std::int64_t v = 0; v < n; ++v) {
    const std::int32_t f = favorite[v];
    if (f < 0) continue;
    const std::int32_t own = cluster[v];
    const std::int32_t* w = g.node_weight(v);
    const std::int32_t lead = leader[f];
    if (lead >= 0 && lead != own &&
        fits(&cweight[static_cast<std::size_t>(lead) * ncon], w, limit.data(), ncon)) {
      transfer(cweight, own, lead, w, ncon);
      cluster[v] = lead;
    } else {
      leader[f] = own;
    }
  }
  return cluster;
}

// ---- Contraction ----------------------------------------------------------------------------

// Contracts g by `cluster` (rewritten to coarse ids in order of each cluster's first node). The
// result always has the coarse nodes, their weights and the offsets of their rows (so xadj[cn]
// is the coarse edge count); its edges and their weights only when keep_edges(nodes, edges) says
// so, after the counting pass.
template <class KeepEdges>
WeightedGraph contract_level(const LevelView& g, std::vector<std::int32_t>& cluster,
                             KeepEdges&& keep_edges) {
  const std::int64_t n = g.n;
  const int ncon = g.ncon;
  // Coarse ids in order of each cluster's first node: deterministic.
  std::vector<std::int32_t> coarse_of(static_cast<std::size_t>(n), -1);
  std::int32_t cn = 0;
  for (std::int64_t v = 0; v < n; ++v) {
    auto& id = coarse_of[cluster[v]];
    if (id < 0) id = cn++;
    cluster[v] = id;
  }
  coarse_of.clear();
  coarse_of.shrink_to_fit();

  WeightedGraph out;
  out.num_nodes = cn;
  out.ncon = ncon;
  // Members of each coarse node, by counting sort.
  std::vector<EdgeId> first(static_cast<std::size_t>(cn) + 1, 0);
  for (std::int64_t v = 0; v < n; ++v)
    ++first[static_cast<std::size_t>(cluster[v]) + 1];
  for (std::int32_t c = 0; c < cn; ++c)
    first[c + 1] += first[c];
  std::vector<std::int32_t> members(static_cast<std::size_t>(n));
  {
    std::vector<EdgeId> cursor(first.begin(), first.end() - 1);
    for (std::int64_t v = 0; v < n; ++v)
      members[cursor[cluster[v]]++] = static_cast<std::int32_t>(v);
  }
  out.vwgt.assign(static_cast<std::size_t>(cn) * ncon, 0);
  std::vector<std::int64_t> vsum(static_cast<std::size_t>(ncon));
  for (std::int32_t c = 0; c < cn; ++c) {
    std::fill(vsum.begin(), vsum.end(), 0);
    for (EdgeId i = first[c]; i < first[c + 1]; ++i)
      for (int k = 0; k < ncon; ++k)
        vsum[k] += g.vwgt[static_cast<std::int64_t>(members[i]) * ncon + k];
    for (int k = 0; k < ncon; ++k) {
      TESSEL_EXPECTS(vsum[k] <= std::numeric_limits<std::int32_t>::max(),
                     "partition: a coarse node's weight {} does not fit in 32 bits", vsum[k]);
      out.vwgt[static_cast<std::size_t>(c) * ncon + k] = static_cast<std::int32_t>(vsum[k]);
    }
  }

  // Two passes over the coarse nodes: count distinct neighbors, then write them. A thread-local
  // slot array maps a coarse neighbor to its position in the row being written; slots are
  // reset from the row itself.
  out.xadj.assign(static_cast<std::size_t>(cn) + 1, 0);
  const int threads = omp_get_max_threads();
  std::vector<std::vector<std::int64_t>> slots(static_cast<std::size_t>(threads));
#pragma omp parallel
  {
    auto& slot = slots[static_cast<std::size_t>(omp_get_thread_num())];
    slot.assign(static_cast<std::size_t>(cn), -1);
#pragma omp for schedule(dynamic, 64)
    for (std::int32_t c = 0; c < cn; ++c) {
      std::int64_t count = 0;
      for (EdgeId i = first[c]; i < first[c + 1]; ++i)
        g.for_each_edge(members[i], [&](std::int32_t x, std::int32_t) {
          const std::int32_t d = cluster[x];
          if (d == c || slot[d] == c) return;
          slot[d] = c; // marks d as seen in row c
          ++count;
        });
      out.xadj[static_cast<std::size_t>(c) + 1] = count;
    }
  }
  for (std::int32_t c = 0; c < cn; ++c)
    out.xadj[c + 1] += out.xadj[c];
  if (!keep_edges(static_cast<std::int64_t>(cn), out.xadj[cn])) return out;
  out.adjncy.resize(static_cast<std::size_t>(out.xadj[cn]));
  out.adjwgt.resize(static_cast<std::size_t>(out.xadj[cn]));
  bool overflow = false;
#pragma omp parallel reduction(|| : overflow)
  {
    auto& slot = slots[static_cast<std::size_t>(omp_get_thread_num())];
    std::fill(slot.begin(), slot.end(), -1);
    std::vector<std::int64_t> sum;
#pragma omp for schedule(dynamic, 64)
    for (std::int32_t c = 0; c < cn; ++c) {
      const EdgeId row = out.xadj[c];
      std::int64_t len = 0;
      sum.clear();
      for (EdgeId i = first[c]; i < first[c + 1]; ++i)
        g.for_each_edge(members[i], [&](std::int32_t x, std::int32_t w) {
          const std::int32_t d = cluster[x];
          if (d == c) return;
          if (slot[d] < 0) {
            slot[d] = len++;
            out.adjncy[row + slot[d]] = d;
            sum.push_back(0);
          }
          sum[static_cast<std::size_t>(slot[d])] += w;
        });
      for (std::int64_t j = 0; j < len; ++j) {
        slot[out.adjncy[row + j]] = -1;
        overflow = overflow || sum[j] > std::numeric_limits<std::int32_t>::max();
        out.adjwgt[row + j] = static_cast<std::int32_t>(sum[j]);
      }
    }
  }
  TESSEL_EXPECTS(!overflow, "partition: a coarse edge weight does not fit in 32 bits");
  return out;
}

// ---- K-way refinement -----------------------------------------------------------------------

constexpr int kRefinePasses = 6;

// Cut weight (each undirected edge once) of `part` on g.
std::int64_t cut_of(const LevelView& g, const std::vector<std::int32_t>& part) {
  std::int64_t cut = 0;
#pragma omp parallel for schedule(dynamic, 4096) reduction(+ : cut)
  for (std::int64_t v = 0; v < g.n; ++v)
    g.for_each_edge(v, [&](std::int32_t u, std::int32_t w) {
      if (part[u] != part[v]) cut += w;
    });
  return cut / 2;
}

std::int64_t refine_level(const LevelView& g, std::vector<std::int32_t>& part, int num_parts,
                          std::span<const std::int64_t> limit, std::uint64_t seed, int level) {
  const std::int64_t n = g.n;
  const int ncon = g.ncon;
  std::vector<std::int64_t> pweight(static_cast<std::size_t>(num_parts) * ncon, 0);
  for (std::int64_t v = 0; v < n; ++v)
    for (int c = 0; c < ncon; ++c)
      pweight[static_cast<std::size_t>(part[v]) * ncon + c] += g.vwgt[v * ncon + c];
  const auto overloaded = [&](std::int32_t p) {
    for (int c = 0; c < ncon; ++c)
      if (pweight[static_cast<std::size_t>(p) * ncon + c] > limit[c]) return true;
    return false;
  };

  const auto order = visit_order(n, seed, 0x2000u + static_cast<std::uint32_t>(level));
  std::vector<Move> moves(static_cast<std::size_t>(chunk_size(n)));
  auto scratch = thread_scratch(num_parts);
  std::vector<std::uint8_t> heavy(static_cast<std::size_t>(num_parts));
  const std::uint32_t salt = rng::Key::mix(static_cast<std::uint32_t>(seed) + 131u * level);
  std::int64_t total_moved = 0;

  // A part's load: the sum over constraints of its weight relative to the limit. Moves that cut
  // no more edges are made when they even out the load (the destination stays lighter than the
  // source was): that frees room for moves that do cut fewer edges, and as the sum of squared
  // loads falls with every such move, they cannot cycle.
  std::vector<double> inverse_limit(static_cast<std::size_t>(ncon));
  for (int c = 0; c < ncon; ++c)
    inverse_limit[c] = 1.0 / static_cast<double>(std::max<std::int64_t>(limit[c], 1));
  const auto load_of = [&](const std::int64_t* weight) {
    double load = 0;
    for (int c = 0; c < ncon; ++c)
      load += static_cast<double>(weight[c]) * inverse_limit[c];
    return load;
  };
  const auto part_load = [&](std::int32_t p) {
    return load_of(&pweight[static_cast<std::size_t>(p) * ncon]);
  };
  const auto node_load = [&](const std::int32_t* w) {
    double load = 0;
    for (int c = 0; c < ncon; ++c)
      load += static_cast<double>(w[c]) * inverse_limit[c];
    return load;
  };
  const auto evens_out = [&](std::int32_t from, std::int32_t to, const std::int32_t* w) {
    return part_load(to) + node_load(w) < part_load(from);
  };

  for (int pass = 0; pass < kRefinePasses; ++pass) {
    const std::uint32_t pass_salt = salt ^ static_cast<std::uint32_t>(pass);
    const auto before_chunk = [&] {
      for (std::int32_t p = 0; p < num_parts; ++p)
        heavy[p] = overloaded(p) ? 1 : 0;
    };
    const auto choose = [&](std::int32_t v, Ratings& r) {
      const std::int32_t own = part[v];
      const std::int32_t* w = g.node_weight(v);
      bool boundary = false;
      r.start(std::numeric_limits<std::int64_t>::max()); // num_parts entries: dense
      g.for_each_edge(v, [&](std::int32_t u, std::int32_t weight) {
        const std::int32_t q = part[u];
        boundary = boundary || q != own;
        r.add(q, weight);
      });
      Move best;
      double best_load = 0;
      std::uint32_t best_tie = 0;
      if (boundary) {
        const std::int64_t stay = r.rating(own);
        for (const std::int32_t q : r.touched()) {
          if (q == own ||
              !fits(&pweight[static_cast<std::size_t>(q) * ncon], w, limit.data(), ncon))
            continue;
          const std::int64_t gain = r.rating(q) - stay;
          const double load = part_load(q);
          const std::uint32_t tie = tie_key(q, pass_salt);
          // The largest gain; among equal gains the lightest part, then the tie key.
          if (best.to < 0 || gain > best.gain ||
              (gain == best.gain && (load < best_load || (load == best_load && tie > best_tie)))) {
            best = {q, gain};
            best_load = load;
            best_tie = tie;
          }
        }
        // A move must cut fewer edges, or as many while evening out the load, unless it
        // relieves an overloaded part.
        if (best.to >= 0 && !heavy[own] &&
            (best.gain < 0 || (best.gain == 0 && !evens_out(own, best.to, w))))
          best = {};
      }
      r.clear();
      return best;
    };
    const auto apply = [&](std::int32_t v, const Move& m) {
      const std::int32_t from = part[v];
      const std::int32_t* w = g.node_weight(v);
      if (m.to < 0 || !fits(&pweight[static_cast<std::size_t>(m.to) * ncon], w, limit.data(), ncon))
        return false;
      if (!overloaded(from) && (m.gain < 0 || (m.gain == 0 && !evens_out(from, m.to, w))))
        return false;
      transfer(pweight, from, m.to, w, ncon);
      part[v] = m.to;
      return true;
    };
    const std::int64_t moved = subround_pass(order, scratch, moves, before_chunk, choose, apply);
    total_moved += moved;
    if (moved * 1000 < n) break; // fewer than 0.1% of the nodes moved: converged
  }
  return total_moved;
}

// Per-constraint limit for one part: (1 + imbalance) times its share, but never below the share
// plus the level's heaviest node (at coarse levels a single node may outweigh the tolerance).
std::vector<std::int64_t> part_limits(const LevelView& g, int num_parts, double imbalance) {
  std::vector<std::int64_t> limit(static_cast<std::size_t>(g.ncon));
  for (int c = 0; c < g.ncon; ++c) {
    std::int64_t total = 0, heaviest = 0;
    for (std::int64_t v = 0; v < g.n; ++v) {
      total += g.vwgt[v * g.ncon + c];
      heaviest = std::max<std::int64_t>(heaviest, g.vwgt[v * g.ncon + c]);
    }
    const auto share = static_cast<double>(total) / num_parts;
    limit[c] = std::max(static_cast<std::int64_t>(std::floor((1.0 + imbalance) * share)),
                        static_cast<std::int64_t>(std::ceil(share)) + heaviest);
  }
  return limit;
}

// The base level's nodes grouped by the nodes of a coarser level that is not built (LevelView's
// implicit form); the base is the fine graph (level 0) or the nearest built level below. For each
// base node its node at that level, and the base nodes listed by that node, in the order a built
// level's rows would visit them (each coarser grouping a stable regrouping of the finer one).
// Three int32 and one int64 per base node at most, while a built level holds two int32 per
// coarse edge.
class ImplicitLevel {
public:
  int level() const { return level_; }
  int base() const { return base_; }
  bool active() const { return level_ > base_; }
  LevelView view(const WeightedGraph& coarse, const LevelView& base) const {
    TESSEL_ASSERT(!base.implicit() && active(), "an implicit level needs a built base level");
    LevelView v;
    v.n = coarse.num_nodes;
    v.vwgt = coarse.vwgt.data();
    v.ncon = coarse.ncon;
    v.first = first_.data();
    v.members = members_.data();
    v.level_of = level_of_.data();
    v.fine_xadj = base.xadj;
    v.fine_adjncy = base.adjncy;
    v.fine_adjwgt = base.adjwgt;
    v.implicit_edges = coarse.xadj.back();
    return v;
  }
  // No grouping: the current level is the built level `base`.
  void reset(int base) {
    *this = {};
    base_ = level_ = base;
  }
  // One level up: map takes the current level's nodes (at the base, the base's nodes) to the
  // coarse_nodes nodes of the next.
  void advance(const std::vector<std::int32_t>& map, std::int64_t coarse_nodes) {
    const bool at_base = level_ == base_;
    const auto n = at_base ? static_cast<std::int64_t>(map.size())
                           : static_cast<std::int64_t>(level_of_.size());
    if (at_base) {
      level_of_ = map;
    } else {
#pragma omp parallel for schedule(static)
      for (std::int64_t u = 0; u < n; ++u)
        level_of_[u] = map[level_of_[u]];
    }
    // Stable counting sort of the previous order (the base ids at the base) by the new node.
    first_.assign(static_cast<std::size_t>(coarse_nodes) + 1, 0);
    for (std::int64_t u = 0; u < n; ++u)
      ++first_[static_cast<std::size_t>(level_of_[u]) + 1];
    for (std::int64_t c = 0; c < coarse_nodes; ++c)
      first_[c + 1] += first_[c];
    std::vector<std::int32_t> regrouped(static_cast<std::size_t>(n));
    std::vector<EdgeId> cursor(first_.begin(), first_.end() - 1);
    for (std::int64_t i = 0; i < n; ++i) {
      const auto u = at_base ? static_cast<std::int32_t>(i) : members_[i];
      regrouped[cursor[level_of_[u]]++] = u;
    }
    members_ = std::move(regrouped);
    ++level_;
  }
  // The grouping of level `level` over the built level `base` again, from the maps between.
  void rebuild(const std::vector<std::vector<std::int32_t>>& maps,
               const std::vector<WeightedGraph>& levels, int base, int level) {
    reset(base);
    for (int l = base; l < level; ++l)
      advance(maps[l], levels[l].num_nodes);
  }

private:
  int base_ = 0, level_ = 0;
  std::vector<std::int32_t> level_of_, members_;
  std::vector<EdgeId> first_;
};

} // namespace

// ---- Public steps ---------------------------------------------------------------------------

// METIS adds vertex weights (per constraint) and edge weights in 32-bit idx_t. A column whose
// total exceeds max_total is divided by the smallest divisor (doubled until the rounded total
// fits) that brings it under, rounding up so that no positive weight becomes 0; as each positive
// weight stays at least 1, a column cannot go below its count of positive weights, which is
// then the target instead.
void fit_weight_column(std::int32_t* w, std::int64_t count, int stride, std::int64_t max_total) {
  std::int64_t total = 0, positive = 0;
  std::int32_t heaviest = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    total += w[i * stride];
    positive += w[i * stride] > 0 ? 1 : 0;
    heaviest = std::max(heaviest, w[i * stride]);
  }
  const std::int64_t target = std::max(max_total, positive);
  if (total <= target) return;
  const auto total_with = [&](std::int64_t d) {
    std::int64_t sum = 0;
    for (std::int64_t i = 0; i < count; ++i)
      sum += (w[i * stride] + d - 1) / d;
    return sum;
  };
  // At d >= heaviest every positive weight becomes 1 and the total is `positive`.
  std::int64_t d = std::min<std::int64_t>((total + target - 1) / target, heaviest);
  while (d < heaviest && total_with(d) > target)
    d = std::min<std::int64_t>(2 * d, heaviest);
  for (std::int64_t i = 0; i < count; ++i)
    w[i * stride] = static_cast<std::int32_t>((w[i * stride] + d - 1) / d);
}

std::vector<std::int32_t> cluster_label_propagation(const WeightedGraph& graph,
                                                    std::span<const std::int64_t> max_weight,
                                                    std::uint64_t seed, int level) {
  TESSEL_ASSERT(static_cast<int>(max_weight.size()) == graph.ncon,
                "cluster: {} limits for {} "
                "constraints",
                max_weight.size(), graph.ncon);
  return cluster_level(view_of(graph), max_weight, seed, level);
}

WeightedGraph contract(const WeightedGraph& graph, std::vector<std::int32_t>& cluster) {
  return contract_level(view_of(graph), cluster, [](std::int64_t, std::int64_t) { return true; });
}

std::int64_t refine_kway(const WeightedGraph& graph, std::vector<std::int32_t>& part, int num_parts,
                         std::span<const std::int64_t> max_part_weight, std::uint64_t seed,
                         int level) {
  return refine_level(view_of(graph), part, num_parts, max_part_weight, seed, level);
}

std::int64_t weighted_cut(const WeightedGraph& graph, const std::vector<std::int32_t>& part) {
  return cut_of(view_of(graph), part);
}

MetisResult partition_multilevel(const GraphCsr& symmetric, const VertexWeights& weights,
                                 int num_parts, std::uint64_t seed, double imbalance,
                                 std::int64_t metis_max_edges, std::int64_t max_index,
                                 double built_share) {
  const std::int64_t n = symmetric.num_rows;
  const int ncon = weights.ncon;
  const LevelView fine{n,       symmetric.indptr.data(), symmetric.indices.data(),
                       nullptr, weights.values.data(),   ncon};
  MetisResult result;
  Stopwatch watch;

  // Per-constraint totals and heaviest node, for the cluster weight limits.
  std::vector<std::int64_t> total(static_cast<std::size_t>(ncon), 0);
  std::vector<std::int64_t> heaviest(static_cast<std::size_t>(ncon), 0);
  for (std::int64_t v = 0; v < n; ++v)
    for (int c = 0; c < ncon; ++c) {
      total[c] += weights.values[v * ncon + c];
      heaviest[c] = std::max<std::int64_t>(heaviest[c], weights.values[v * ncon + c]);
    }

  // Coarsening: levels[i] is level i + 1; maps[i] takes level i's nodes to level i + 1's. A
  // level is built (its edges held) when it is the coarsest (METIS's input), or while the built
  // levels stay within built_share of the fine graph's bytes; the others are implicit: visited
  // through the nearest built level below (the base) and the grouping of its nodes.
  std::vector<WeightedGraph> levels;
  std::vector<std::vector<std::int32_t>> maps;
  const auto is_built = [&](std::size_t level) { // level >= 1
    const WeightedGraph& g = levels[level - 1];
    return !g.adjncy.empty() || g.xadj.back() == 0;
  };
  const double fine_bytes = static_cast<double>(n) * sizeof(EdgeId) +
                            static_cast<double>(fine.edges()) * sizeof(std::int32_t);
  double built_bytes = 0;
  ImplicitLevel grouping;
  const auto view_at = [&](int level) {
    if (level == 0) return fine;
    const WeightedGraph& g = levels[static_cast<std::size_t>(level) - 1];
    if (is_built(static_cast<std::size_t>(level))) return view_of(g);
    TESSEL_ASSERT(grouping.level() == level, "level {} has no grouping", level);
    return grouping.view(g, grouping.base() == 0 ? fine : view_of(levels[grouping.base() - 1]));
  };
  const auto current = [&] { return view_at(static_cast<int>(levels.size())); };
  const std::int64_t min_nodes = std::max<std::int64_t>(64, 32 * std::int64_t{num_parts});
  // Whether coarsening goes on from a level of n nodes and m directed edges: below min_nodes
  // it stops (METIS balances better with more, smaller nodes) unless METIS could not take the
  // graph at all.
  const auto goes_on = [&](std::int64_t nodes, std::int64_t edges) {
    return edges > metis_max_edges && (nodes > min_nodes || edges > max_index);
  };
  std::optional<ProgressLine> coarsen_progress;
  if (goes_on(fine.n, fine.edges())) coarsen_progress.emplace("partition: coarsen", 0);
  while (goes_on(current().n, current().edges())) {
    const LevelView g = current();
    const std::int64_t target = std::max(min_nodes, g.n / kCoarsenShrink);
    std::vector<std::int64_t> limit(static_cast<std::size_t>(ncon));
    for (int c = 0; c < ncon; ++c) {
      // About 1.5x the average weight of a target-size cluster, at most 1/16 of a part's
      // share, never below the heaviest node.
      const auto average = 1.5 * static_cast<double>(total[c]) / static_cast<double>(target);
      const auto cap = static_cast<double>(total[c]) / (16.0 * num_parts);
      limit[c] =
          std::max(heaviest[c], static_cast<std::int64_t>(std::ceil(std::min(average, cap))));
    }
    auto cluster = cluster_level(g, limit, seed, static_cast<int>(levels.size()));
    bool stalled = false;
    WeightedGraph coarse =
        contract_level(g, cluster, [&](std::int64_t nodes, std::int64_t edges) {
          stalled = nodes * 10 > g.n * 9; // less than 10% fewer nodes
          const double bytes = static_cast<double>(nodes + 1) * sizeof(EdgeId) +
                               2.0 * static_cast<double>(edges) * sizeof(std::int32_t);
          if (stalled || !goes_on(nodes, edges)) return true;
          if (built_bytes + bytes > built_share * fine_bytes) return false;
          built_bytes += bytes;
          return true;
        });
    log::info("partition: coarsened level {}: {} nodes, {} edges -> {} nodes, {} edges ({})",
              levels.size(), g.n, g.edges(), coarse.num_nodes, coarse.xadj.back(),
              !coarse.adjncy.empty() || coarse.xadj.back() == 0 ? "built" : "implicit");
    // The level below is not needed any more but for its map (and its weights, when built:
    // the refinement's); a built level is the base of the levels above it.
    levels.push_back(std::move(coarse));
    maps.push_back(std::move(cluster));
    if (is_built(levels.size()))
      grouping.reset(static_cast<int>(levels.size()));
    else
      grouping.advance(maps.back(), levels.back().num_nodes);
    if (stalled) {
      log::warn("partition: coarsening stalled at {} nodes, {} edges", levels.back().num_nodes,
                levels.back().xadj.back());
      break;
    }
  }
  coarsen_progress.reset();
  for (std::size_t l = 1; l <= levels.size(); ++l)
    result.levels.push_back({levels[l - 1].num_nodes, levels[l - 1].xadj.back(), is_built(l)});
  result.coarsen_seconds = watch.seconds();

  // METIS on the coarsest level.
  watch.reset();
  const LevelView top = current();
  TESSEL_EXPECTS(top.edges() <= max_index,
                 "graph has {} directed edges after coarsening; METIS (32-bit idx_t) takes at "
                 "most {}",
                 top.edges(), max_index);
  // Weight totals METIS can add up without overflow (with room for its own doubling).
  const std::int64_t max_total = max_index / 4;
  std::vector<std::int32_t> vwgt(top.vwgt, top.vwgt + top.n * ncon);
  for (int c = 0; c < ncon; ++c)
    fit_weight_column(vwgt.data() + c, top.n, ncon, max_total);
  std::vector<std::int32_t> adjwgt;
  if (top.adjwgt != nullptr) {
    adjwgt.assign(top.adjwgt, top.adjwgt + top.edges());
    fit_weight_column(adjwgt.data(), top.edges(), 1, max_total);
  }
  std::int64_t metis_objval = 0;
  std::vector<std::int32_t> part =
      run_metis(top.n, top.xadj, top.adjncy, adjwgt.empty() ? nullptr : adjwgt.data(), vwgt.data(),
                ncon, num_parts, seed, imbalance, &metis_objval);
  result.objval = cut_of(top, part); // exact, whatever scaling METIS saw
  result.metis_seconds = watch.seconds();
  if (levels.empty()) { // too few nodes to coarsen: METIS's answer as it is
    result.part = std::move(part);
    return result;
  }

  // Uncoarsening: refine at the coarsest level, then project and refine at each finer one.
  watch.reset();
  ProgressLine refine_progress("partition: refine levels",
                               static_cast<std::int64_t>(levels.size()) + 1);
  for (std::int64_t i = static_cast<std::int64_t>(levels.size()); i >= 0; --i) {
    if (i < static_cast<std::int64_t>(levels.size())) {
      // Project level i + 1's partition onto level i, then free level i + 1.
      const auto& map = maps[i];
      std::vector<std::int32_t> finer(map.size());
#pragma omp parallel for schedule(static)
      for (std::int64_t v = 0; v < static_cast<std::int64_t>(map.size()); ++v)
        finer[v] = part[map[v]];
      part = std::move(finer);
      maps[i] = {};
      levels.resize(static_cast<std::size_t>(i));
    }
    // A level that was not built gets its grouping of its base's nodes again, from the maps.
    if (i > 0 && !is_built(static_cast<std::size_t>(i)) && grouping.level() != i) {
      int base = static_cast<int>(i) - 1;
      while (base > 0 && !is_built(static_cast<std::size_t>(base)))
        --base;
      grouping.rebuild(maps, levels, base, static_cast<int>(i));
    }
    const LevelView g = view_at(static_cast<int>(i));
    const auto limit = part_limits(g, num_parts, imbalance);
    result.moved += refine_level(g, part, num_parts, limit, seed, static_cast<int>(i));
    refine_progress.update(static_cast<std::int64_t>(levels.size()) + 1 - i);
  }
  refine_progress.finish();
  result.refine_seconds = watch.seconds();
  result.refined_cut = cut_of(fine, part);
  result.part = std::move(part);
  return result;
}

} // namespace tessel::partition::detail
