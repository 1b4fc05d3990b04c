// Pre- and auto-aggregation of halos: the bipartite cover per pair of ranks and the matrices on
// both sides of each cut.
#include "tessel/dist/halo_aggregation.hpp"

#include "tessel/core/error.hpp"

#include <limits>
#include <numeric>

namespace tessel::dist {

namespace {

constexpr std::int64_t unreached = std::numeric_limits<std::int64_t>::max();

// Hopcroft-Karp: phases of a BFS layering from the free left vertices and depth-first
// augmentation along it (iterative, so long paths need no deep stack).
struct Matching {
  std::vector<std::int64_t> left, right;  // partner, or -1
};

Matching maximum_matching(std::int64_t num_left, std::int64_t num_right,
                          std::span<const std::int64_t> indptr,
                          std::span<const std::int32_t> right) {
  Matching m{std::vector<std::int64_t>(static_cast<std::size_t>(num_left), -1),
             std::vector<std::int64_t>(static_cast<std::size_t>(num_right), -1)};
  std::vector<std::int64_t> dist(static_cast<std::size_t>(num_left)), next(dist.size());
  std::vector<std::int64_t> queue, stack, took;
  for (;;) {
    queue.clear();
    for (std::int64_t l = 0; l < num_left; ++l) {
      dist[l] = m.left[l] < 0 ? 0 : unreached;
      if (m.left[l] < 0) queue.push_back(l);
    }
    bool found = false;
    for (std::size_t q = 0; q < queue.size(); ++q) {
      const std::int64_t l = queue[q];
      for (std::int64_t e = indptr[l]; e < indptr[l + 1]; ++e) {
        const std::int64_t w = m.right[right[e]];
        if (w < 0) found = true;
        else if (dist[w] == unreached) {
          dist[w] = dist[l] + 1;
          queue.push_back(w);
        }
      }
    }
    if (!found) return m;
    for (std::int64_t l = 0; l < num_left; ++l) next[l] = indptr[l];
    for (std::int64_t root = 0; root < num_left; ++root) {
      if (m.left[root] >= 0 || dist[root] != 0) continue;
      stack.assign(1, root);
      took.assign(1, -1);
      while (!stack.empty()) {
        const std::int64_t l = stack.back();
        if (next[l] == indptr[l + 1]) {  // a dead end: no path through l in this phase
          dist[l] = unreached;
          stack.pop_back();
          took.pop_back();
          continue;
        }
        const std::int64_t r = right[next[l]++];
        const std::int64_t w = m.right[r];
        took.back() = r;
        if (w < 0) {  // a free right vertex: flip the path
          for (std::size_t i = 0; i < stack.size(); ++i) {
            m.left[stack[i]] = took[i];
            m.right[took[i]] = stack[i];
          }
          break;
        }
        if (dist[w] == dist[l] + 1) {
          stack.push_back(w);
          took.push_back(-1);
        }
      }
    }
  }
}

}  // namespace

BipartiteCover min_vertex_cover(std::int64_t num_left, std::int64_t num_right,
                                std::span<const std::int64_t> indptr,
                                std::span<const std::int32_t> right) {
  TESSEL_ASSERT(static_cast<std::int64_t>(indptr.size()) == num_left + 1,
                "cover: {} offsets for {} left vertices", indptr.size(), num_left);
  const Matching m = maximum_matching(num_left, num_right, indptr, right);
  // König: Z = what alternating paths from the free left vertices reach; the cover is the left
  // vertices outside Z and the right ones inside it.
  std::vector<char> left_seen(static_cast<std::size_t>(num_left), 0);
  std::vector<char> right_seen(static_cast<std::size_t>(num_right), 0);
  std::vector<std::int64_t> queue;
  for (std::int64_t l = 0; l < num_left; ++l)
    if (m.left[l] < 0) {
      left_seen[l] = 1;
      queue.push_back(l);
    }
  for (std::size_t q = 0; q < queue.size(); ++q) {
    const std::int64_t l = queue[q];
    for (std::int64_t e = indptr[l]; e < indptr[l + 1]; ++e) {
      const std::int64_t r = right[e];
      if (right_seen[r] || m.left[l] == r) continue;
      right_seen[r] = 1;
      const std::int64_t w = m.right[r];  // matched: else the matching were not maximum
      if (w >= 0 && !left_seen[w]) {
        left_seen[w] = 1;
        queue.push_back(w);
      }
    }
  }
  BipartiteCover cover;
  cover.left.resize(left_seen.size());
  cover.right = right_seen;
  for (std::int64_t l = 0; l < num_left; ++l) cover.left[l] = left_seen[l] ? 0 : 1;
  for (const char c : cover.left) cover.size += c;
  for (const char c : cover.right) cover.size += c;
  return cover;
}

namespace {

// The cut edges from one peer into this part: its halo nodes [halo_begin, halo_end) on the left,
// this part's owned nodes that read them on the right (right_node: their local ids, ascending).
struct PeerCut {
  std::int64_t halo_begin = 0, halo_end = 0;
  std::vector<LocalId> right_node;
  std::vector<std::int64_t> indptr{0};
  std::vector<std::int32_t> right;
  std::vector<char> post, pre;  // the cover: halo rows sent as they are, nodes given a partial
};

std::vector<PeerCut> peer_cuts(const partition::Part& part, const LocalCsr& weighted) {
  const std::int64_t n = part.num_owned;
  std::vector<PeerCut> cuts(static_cast<std::size_t>(part.num_parts));
  // Halo nodes come sorted by (owner, owner-local id): each peer's are one range.
  for (std::int64_t h = part.num_halo - 1; h >= 0; --h) cuts[part.halo_owner[h]].halo_begin = h;
  for (std::int64_t h = 0; h < part.num_halo; ++h) cuts[part.halo_owner[h]].halo_end = h + 1;
  std::vector<std::vector<std::int32_t>> left_edges(static_cast<std::size_t>(part.num_halo));
  for (std::int64_t v = 0; v < n; ++v)
    for (EdgeId e = weighted.indptr[v]; e < weighted.indptr[v + 1]; ++e) {
      const LocalId c = weighted.indices[e];
      if (c < n) continue;
      PeerCut& cut = cuts[part.halo_owner[c - n]];
      if (cut.right_node.empty() || cut.right_node.back() != v) cut.right_node.push_back(v);
      left_edges[c - n].push_back(static_cast<std::int32_t>(cut.right_node.size() - 1));
    }
  for (PeerCut& cut : cuts)
    for (std::int64_t h = cut.halo_begin; h < cut.halo_end; ++h) {
      cut.right.insert(cut.right.end(), left_edges[h].begin(), left_edges[h].end());
      cut.indptr.push_back(static_cast<std::int64_t>(cut.right.size()));
    }
  return cuts;
}

void choose_cover(PeerCut& cut, HaloAggregation how) {
  const std::int64_t left = cut.halo_end - cut.halo_begin;
  const auto right = static_cast<std::int64_t>(cut.right_node.size());
  if (how == HaloAggregation::pre) {
    cut.post.assign(static_cast<std::size_t>(left), 0);
    cut.pre.assign(static_cast<std::size_t>(right), 1);
    return;
  }
  BipartiteCover cover = min_vertex_cover(left, right, cut.indptr, cut.right);
  cut.post = std::move(cover.left);
  cut.pre = std::move(cover.right);
}

// What this part asks one peer for, as two lists: ids = [post rows, partial rows, then for each
// partial row its count and the peer-local ids it sums], weights = those sums' weights.
struct Request {
  std::vector<std::int64_t> ids;
  std::vector<float> weights;
};

// Where the aggregation reads each row it receives: the column of each halo row that still
// travels as it is (-1: summed into partial rows), and of each (node, peer) partial row.
struct ReceivedColumns {
  std::vector<LocalId> halo;                 // [halo]
  std::vector<std::vector<LocalId>> partial; // [peer][node of the cut]
  std::int64_t end = 0;                      // one past the last column
};

// What this part asks peer r for once the cut's cover is chosen: its post rows, then one partial
// row per covered node (the node's edges from r that no post row carries). Assigns the columns
// these rows arrive at.
Request request_of_peer(const partition::Part& part, const LocalCsr& weighted, const PeerCut& cut,
                        int r, ReceivedColumns& columns) {
  const std::int64_t n = part.num_owned;
  std::vector<LocalId>& halo_column = columns.halo;
  std::int64_t& column = columns.end;
  Request req;
  req.ids = {0, 0};
  for (std::int64_t h = cut.halo_begin; h < cut.halo_end; ++h)
    if (cut.post[h - cut.halo_begin]) {
      halo_column[h] = static_cast<LocalId>(column++);
      req.ids.push_back(part.halo_owner_local[h]);
      ++req.ids[0];
    }
  std::vector<LocalId>& partial_column = columns.partial[r];
  partial_column.assign(cut.right_node.size(), -1);
  for (std::size_t k = 0; k < cut.right_node.size(); ++k) {
    if (!cut.pre[k]) continue;
    // The node's edges from r that no post row carries: their sum is one partial row.
    const LocalId v = cut.right_node[k];
    const std::size_t count_at = req.ids.size();
    req.ids.push_back(0);
    for (EdgeId e = weighted.indptr[v]; e < weighted.indptr[v + 1]; ++e) {
      const LocalId c = weighted.indices[e];
      if (c < n || part.halo_owner[c - n] != r || halo_column[c - n] >= 0) continue;
      req.ids.push_back(part.halo_owner_local[c - n]);
      req.weights.push_back(weighted.values[e]);
      ++req.ids[count_at];
    }
    if (req.ids[count_at] == 0) { // every edge already travels as a post row
      req.ids.pop_back();
      continue;
    }
    partial_column[k] = static_cast<LocalId>(column++);
    ++req.ids[1];
  }
  return req;
}

// The aggregation here: owned columns as they are, post rows at their columns, and one
// weight-1 entry per partial row after the row's own entries.
LocalCsr local_aggregation(const LocalCsr& weighted, const std::vector<PeerCut>& cuts,
                           const ReceivedColumns& columns, std::int64_t n) {
  const auto num_ranks = static_cast<int>(cuts.size());
  LocalCsr local;
  local.num_rows = n;
  local.num_cols = columns.end;
  local.indptr.assign(static_cast<std::size_t>(n + 1), 0);
  std::vector<std::size_t> cursor(static_cast<std::size_t>(num_ranks), 0);
  for (std::int64_t v = 0; v < n; ++v) {
    for (EdgeId e = weighted.indptr[v]; e < weighted.indptr[v + 1]; ++e) {
      const LocalId c = weighted.indices[e];
      const LocalId to = c < n ? c : columns.halo[c - n];
      if (to < 0) continue;  // summed into a partial row
      local.indices.push_back(to);
      local.values.push_back(weighted.values[e]);
    }
    for (int r = 0; r < num_ranks; ++r) {
      const PeerCut& cut = cuts[r];
      std::size_t& k = cursor[r];
      if (k < cut.right_node.size() && cut.right_node[k] == v) {
        if (columns.partial[r][k] >= 0) {
          local.indices.push_back(columns.partial[r][k]);
          local.values.push_back(1.0f);
        }
        ++k;
      }
    }
    local.indptr[v + 1] = static_cast<EdgeId>(local.indices.size());
  }
  return local;
}

LocalId owned_row(const partition::Part& part, std::int64_t id) {
  TESSEL_EXPECTS(id >= 0 && id < part.num_owned, "part {}: a peer asked for owned row {} of {}",
                 part.part_id, id, part.num_owned);
  return static_cast<LocalId>(id);
}

// The rows this part sends its peers, from what they asked (`asked`, ids_from[q] values from
// peer q, and the partial rows' weights): one row of `combine` per post or partial row.
void build_combine(const partition::Part& part, const std::vector<std::int64_t>& asked,
                   const std::vector<float>& asked_weights,
                   const std::vector<std::int64_t>& ids_from, HaloAggregationPlan& plan) {
  const int num_ranks = part.num_parts;
  plan.combine.num_cols = part.num_owned;
  plan.send_per_peer.assign(static_cast<std::size_t>(num_ranks), 0);
  std::size_t at = 0, w = 0;
  for (int q = 0; q < num_ranks; ++q) {
    const std::size_t end = at + static_cast<std::size_t>(ids_from[q]);
    if (end == at) continue;
    const std::int64_t posts = asked[at], partials = asked[at + 1];
    at += 2;
    for (std::int64_t k = 0; k < posts; ++k) {
      plan.combine.indices.push_back(owned_row(part, asked[at++]));
      plan.combine.values.push_back(1.0f);
      plan.combine.indptr.push_back(static_cast<EdgeId>(plan.combine.indices.size()));
    }
    for (std::int64_t k = 0; k < partials; ++k) {
      const std::int64_t count = asked[at++];
      for (std::int64_t i = 0; i < count; ++i) {
        plan.combine.indices.push_back(owned_row(part, asked[at++]));
        plan.combine.values.push_back(asked_weights[w++]);
      }
      plan.combine.indptr.push_back(static_cast<EdgeId>(plan.combine.indices.size()));
    }
    TESSEL_EXPECTS(at == end, "part {}: a malformed halo aggregation request from part {}",
                   part.part_id, q);
    plan.send_per_peer[q] = posts + partials;
  }
  plan.combine.num_rows = static_cast<std::int64_t>(plan.combine.indptr.size()) - 1;
}

} // namespace

HaloAggregationPlan plan_halo_aggregation(const partition::Part& part, const LocalCsr& weighted,
                                          HaloAggregation how, comm::Communicator& comm) {
  TESSEL_EXPECTS(how != HaloAggregation::post, "halo aggregation plan: post needs none");
  TESSEL_EXPECTS(weighted.num_rows == part.num_owned && weighted.num_cols == part.num_local() &&
                     weighted.values.size() == weighted.indices.size(),
                 "halo aggregation plan: a {}x{} matrix for part {} ({} owned, {} halo)",
                 weighted.num_rows, weighted.num_cols, part.part_id, part.num_owned, part.num_halo);
  const std::int64_t n = part.num_owned;
  const int num_ranks = part.num_parts;
  std::vector<PeerCut> cuts = peer_cuts(part, weighted);
  HaloAggregationPlan plan;
  plan.recv_per_peer.assign(static_cast<std::size_t>(num_ranks), 0);
  ReceivedColumns columns;
  columns.halo.assign(static_cast<std::size_t>(part.num_halo), -1);
  columns.partial.resize(static_cast<std::size_t>(num_ranks));
  columns.end = n;
  std::vector<Request> requests(static_cast<std::size_t>(num_ranks));
  for (int r = 0; r < num_ranks; ++r) {
    choose_cover(cuts[r], how);
    requests[r] = request_of_peer(part, weighted, cuts[r], r, columns);
    const Request& req = requests[r];
    plan.post_rows += req.ids[0];
    plan.pre_rows += req.ids[1];
    plan.recv_per_peer[r] = req.ids[0] + req.ids[1];
  }
  plan.local = local_aggregation(weighted, cuts, columns, n);
  // Each owner learns what its peers ask of it and builds the rows it sends.
  std::vector<std::int64_t> id_counts(static_cast<std::size_t>(num_ranks)),
      weight_counts(id_counts.size());
  std::vector<std::int64_t> ids;
  std::vector<float> weights;
  for (int r = 0; r < num_ranks; ++r) {
    id_counts[r] = static_cast<std::int64_t>(requests[r].ids.size());
    weight_counts[r] = static_cast<std::int64_t>(requests[r].weights.size());
    ids.insert(ids.end(), requests[r].ids.begin(), requests[r].ids.end());
    weights.insert(weights.end(), requests[r].weights.begin(), requests[r].weights.end());
  }
  std::vector<std::int64_t> ids_from, weights_from;
  const std::vector<std::int64_t> asked = comm.alltoallv<std::int64_t>(ids, id_counts, &ids_from);
  const std::vector<float> asked_weights =
      comm.alltoallv<float>(weights, weight_counts, &weights_from);
  build_combine(part, asked, asked_weights, ids_from, plan);
  return plan;
}

}  // namespace tessel::dist
