// Data-centric distributed sampling: one hop on the host (hop and its steps): the frontier routed
// to owners, their draws answered and merged in frontier order.
#include "tessel/dist/distributed_sampler.hpp"

#include "hop_route.hpp"
#include "sample_phase.hpp"
#include "tessel/core/error.hpp"
#include "tessel/sampling/neighbor_sampler.hpp"

#include <algorithm>
#include <numeric>

namespace tessel::dist {
namespace {

// Above this many draws a hop packs and merges them on every thread.
constexpr std::int64_t kParallelDraws = std::int64_t{1} << 17;

}  // namespace

// One hop's exchange as hop() goes through its steps: the frontier's routing to owners, the
// requests sent and received, and where the draws answering them are.
struct DistributedSampler::HopExchange {
  std::span<const NodeId> frontier;
  HopDraws* draws = nullptr;
  int num_ranks = 0;
  int me = 0;
  std::int64_t n = 0; // frontier nodes
  // Routed positions [own_begin, own_end) are this rank's own nodes; the rest are requests.
  std::int64_t own_begin = 0, own_end = 0, num_own = 0;
  // A reply is the draw count (with draws), then the original id and degree (if flagged).
  std::int64_t count_values = 0;
  // Requests in routed order (a flagged one is the id's complement), per owner sent and flagged.
  std::vector<NodeId> requests;
  std::vector<std::int64_t> send_counts, flagged_per_rank;
  // Requests other ranks sent this rank, per rank.
  std::vector<NodeId> incoming;
  std::vector<std::int64_t> incoming_counts;
  std::int64_t num_incoming = 0;
  // Reply values and (with draws) answer ids this rank sends each rank.
  std::vector<std::int64_t> reply_counts, answer_ids_per_rank;
  const EdgeId* row_offsets = nullptr; // draws of row r: [row_offsets[r], row_offsets[r + 1])
};

// One hop. Frontier nodes owned elsewhere go to their owners, which draw their neighbors from
// the local CSR and answer with the drawn nodes' global ids, one per draw, and the draw count
// per request. What the requester needs beyond that is, per block source, its original id
// (dropout keys) and its degree (GCN normalization): once per node, not once per draw, and
// never for drawing (owners key draws by their own nodes' original ids). The part has them for
// owned and halo nodes; for any other node the request carries a flag (the id's complement) and
// the owner adds the two to its reply. Every block source is a frontier node of the next hop,
// so this costs no extra message except for the input block's sources (draws == nullptr: a hop
// that draws nothing and only asks owners about the nodes the part lacks). This rank's own
// frontier nodes are drawn in the same call as the requests it serves, and their draws are
// written straight into frontier order: at one rank nothing is packed, exchanged or merged.
// Every draw depends only on the key and the node's original id, so where it is drawn does not
// matter.
void DistributedSampler::hop(std::span<const NodeId> frontier, int fanout, const rng::Key& key,
                             PhaseTimes& phases, HopDraws* draws,
                             std::vector<NodeId>& frontier_orig,
                             std::vector<std::int64_t>& frontier_degree) {
  HopExchange x;
  x.frontier = frontier;
  x.draws = draws;
  x.num_ranks = comm_.size();
  x.me = comm_.rank();
  x.n = static_cast<std::int64_t>(frontier.size());
  route_requests(x, frontier_orig, frontier_degree);
  {
    ScopedPhase t(phases, "communicate");
    x.incoming = comm_.alltoallv<NodeId>(x.requests, x.send_counts, &x.incoming_counts);
  }
  x.count_values = draws ? 1 : 0;
  {
    SamplePhase t(phases, sample_cpu_seconds_);
    answer_requests(x, fanout, key);
  }
  {
    ScopedPhase t(phases, "communicate");
    return_replies(x);
  }
  SamplePhase t(phases, sample_cpu_seconds_);
  fill_frontier_info(x, frontier_orig, frontier_degree);
  if (!draws) return;
  counters_.answer_ids += back_start_.back();
  merge_draws(x);
}

// Routes the frontier by owner and lists the requests: a node the part knows gets its original
// id and degree here, and one it does not is sent flagged. Without draws only the flagged ones
// are sent.
void DistributedSampler::route_requests(HopExchange& x, std::vector<NodeId>& frontier_orig,
                                        std::vector<std::int64_t>& frontier_degree) {
  std::vector<int> owners(x.frontier.size());
  for (std::int64_t i = 0; i < x.n; ++i)
    owners[i] = manifest_.owner_of(x.frontier[i]);
  sampling::route_by_owner(owners, x.num_ranks, routing_);
  const std::vector<std::int64_t>& order = routing_.order;
  x.own_begin = routing_.displs[x.me];
  x.own_end = routing_.displs[x.me + 1];
  x.num_own = x.own_end - x.own_begin;
  frontier_orig.resize(static_cast<std::size_t>(x.n));
  frontier_degree.resize(static_cast<std::size_t>(x.n));
  x.send_counts.assign(static_cast<std::size_t>(x.num_ranks), 0);
  x.flagged_per_rank.assign(static_cast<std::size_t>(x.num_ranks), 0);
  std::vector<NodeId>& requests = x.requests;
  std::vector<std::int64_t>& request_pos = request_pos_;  // frontier position of each request
  requests.reserve(static_cast<std::size_t>(x.n - x.num_own));
  request_pos.clear();
  for (int r = 0; r < x.num_ranks; ++r) {
    if (r == x.me) continue;
    for (std::int64_t k = routing_.displs[r]; k < routing_.displs[r + 1]; ++k) {
      const auto i = static_cast<std::size_t>(order[k]);
      const std::int32_t h = halo_local_.find(x.frontier[i]);
      if (h != sampling::PositionIndex::kAbsent) {
        const auto halo = static_cast<std::size_t>(part_.num_owned + h);
        frontier_orig[i] = part_.orig_id[halo];
        frontier_degree[i] = part_.degree[halo];
        if (!x.draws) continue;
        requests.push_back(x.frontier[i]);
      } else {
        requests.push_back(~x.frontier[i]);
        ++x.flagged_per_rank[r];
      }
      request_pos.push_back(static_cast<std::int64_t>(i));
      ++x.send_counts[r];
    }
  }
  const auto num_requests = static_cast<std::int64_t>(requests.size());
  counters_.remote_requests += num_requests;
  counters_.sample_bytes += num_requests * static_cast<std::int64_t>(sizeof(NodeId));
}

// The owner's side: draws for the requests other ranks sent (and with draws for this rank's own
// frontier nodes), packed into the replies and answer ids sent back.
void DistributedSampler::answer_requests(HopExchange& x, int fanout, const rng::Key& key) {
  x.num_incoming = static_cast<std::int64_t>(x.incoming.size());
  x.reply_counts.assign(static_cast<std::size_t>(x.num_ranks), 0);
  x.answer_ids_per_rank.assign(static_cast<std::size_t>(x.num_ranks), 0);
  // Rows: the requests other ranks sent, then (with draws) this rank's own frontier nodes.
  std::vector<LocalId> rows(static_cast<std::size_t>(x.num_incoming + (x.draws ? x.num_own : 0)));
  std::vector<NodeId> row_keys(rows.size());
  const std::int64_t num_flagged = request_rows(x, rows, row_keys);
  // Answers and their replies live in members: their capacity is reused by every hop of every
  // step, so the large id arrays are neither zero-filled nor faulted in again.
  replies_.resize(static_cast<std::size_t>(x.count_values * x.num_incoming + 2 * num_flagged));
  if (x.draws && device_graph_) {
    // The GPU draws and writes the answers of every row, own nodes' too; they come back in
    // row order, requests first as below.
    device_graph_->sample(rows, fanout, key, device_offsets_, answer_ids_);
    x.row_offsets = device_offsets_.data();
  } else if (x.draws) {
    draw_rows(x, rows, row_keys, fanout, key);
  }
  pack_replies(x, rows);
  if (x.draws) counters_.sampled_edges += x.row_offsets[x.num_incoming + x.num_own];
}

// The local rows of the requests (checked: this rank owns them) and, with draws, of this rank's
// own frontier nodes, with their draw keys (original ids); returns how many requests are flagged.
std::int64_t DistributedSampler::request_rows(const HopExchange& x, std::span<LocalId> rows,
                                              std::span<NodeId> row_keys) const {
  std::int64_t num_flagged = 0;
  for (std::int64_t i = 0; i < x.num_incoming; ++i) {
    const bool flagged = x.incoming[i] < 0;
    const NodeId g = flagged ? ~x.incoming[i] : x.incoming[i];
    const NodeId l = g - part_.offset;
    TESSEL_EXPECTS(l >= 0 && l < part_.num_owned,
                   "part {}: a sampling request names node {}, which it does not own",
                   part_.part_id, g);
    rows[i] = static_cast<LocalId>(l);
    row_keys[i] = part_.orig_id[l];
    num_flagged += flagged ? 1 : 0;
  }
  if (x.draws)
    for (std::int64_t j = 0; j < x.num_own; ++j) {
      const NodeId l = x.frontier[routing_.order[x.own_begin + j]] - part_.offset;
      rows[x.num_incoming + j] = static_cast<LocalId>(l);
      row_keys[x.num_incoming + j] = part_.orig_id[l];
    }
  return num_flagged;
}

// Draws every row on the CPU into sampled_ and writes the requests' answers (global ids) into
// answer_ids_.
void DistributedSampler::draw_rows(HopExchange& x, std::span<const LocalId> rows,
                                   std::span<const NodeId> row_keys, int fanout,
                                   const rng::Key& key) {
  sampling::sample_neighbors(part_.graph, rows, row_keys, fanout, key, sampled_);
  // Each request's answer lands at its draws' offset, so requests are packed in parallel
  // with the result of a serial pass. Small hops stay on one thread: on shared cores a
  // team's barrier can cost more than the packing.
  // Grow-only: shrinking and growing again would zero-fill the ids on every hop.
  x.row_offsets = sampled_.offsets.data();
  const EdgeId* row_offsets = x.row_offsets;
  const std::int64_t num_incoming = x.num_incoming;
  const auto num_answer_ids = static_cast<std::size_t>(row_offsets[num_incoming]);
  if (answer_ids_.size() < num_answer_ids) answer_ids_.resize(num_answer_ids);
#pragma omp parallel for schedule(dynamic, 256) if (row_offsets[num_incoming] >= kParallelDraws)
  for (std::int64_t request = 0; request < num_incoming; ++request) {
    NodeId* out = answer_ids_.data() + row_offsets[request];
    for (const LocalId u : sampled_.of(request))
      *out++ = global_of(u);
  }
}

// Each request's reply values (its draw count, then the original id and degree if flagged), and
// per rank how many reply values and answer ids go back to it.
void DistributedSampler::pack_replies(HopExchange& x, std::span<const LocalId> rows) {
  std::int64_t request = 0, value = 0;
  for (int r = 0; r < x.num_ranks; ++r) {
    const std::int64_t first_value = value;
    const std::int64_t end = request + x.incoming_counts[r];
    if (x.draws) x.answer_ids_per_rank[r] = x.row_offsets[end] - x.row_offsets[request];
    for (; request < end; ++request) {
      const LocalId row = rows[request];
      if (x.draws) {
        replies_[value++] = x.row_offsets[request + 1] - x.row_offsets[request];
        counters_.remote_adjacency += part_.graph.degree(row) + 1;
      }
      if (x.incoming[request] < 0) {
        replies_[value++] = part_.orig_id[row];
        replies_[value++] = part_.degree[row];
      }
    }
    x.reply_counts[r] = value - first_value;
  }
}

// The replies back to the requesters (into back_replies_), with where each starts, then (with
// draws) the answers' ids (into back_ids_). Collective.
void DistributedSampler::return_replies(const HopExchange& x) {
  const auto num_requests = static_cast<std::int64_t>(x.requests.size());
  std::vector<std::int64_t> back_reply_counts(static_cast<std::size_t>(x.num_ranks), 0);
  for (int r = 0; r < x.num_ranks; ++r)
    back_reply_counts[r] = x.count_values * x.send_counts[r] + 2 * x.flagged_per_rank[r];
  const std::int64_t num_back_values =
      std::accumulate(back_reply_counts.begin(), back_reply_counts.end(), std::int64_t{0});
  back_replies_.resize(static_cast<std::size_t>(num_back_values));
  comm_.alltoallv(replies_.data(), x.reply_counts, back_replies_.data(), back_reply_counts,
                  DType::i64);
  counters_.sample_bytes += num_back_values * static_cast<std::int64_t>(sizeof(std::int64_t));
  // Where each reply starts, and (with draws) where each answer starts in back_ids: what each
  // owner answers is the sum of its answers' counts, so no count exchange is needed.
  back_reply_start_.resize(static_cast<std::size_t>(num_requests) + 1);
  back_start_.resize(static_cast<std::size_t>(num_requests) + 1);
  back_reply_start_[0] = 0;
  back_start_[0] = 0;
  std::vector<std::int64_t> back_ids_per_rank(static_cast<std::size_t>(x.num_ranks), 0);
  std::int64_t k = 0;
  for (int r = 0; r < x.num_ranks; ++r)
    for (const std::int64_t end = k + x.send_counts[r]; k < end; ++k) {
      const std::int64_t at = back_reply_start_[k];
      const std::int64_t count = x.draws ? back_replies_[at] : 0;
      back_reply_start_[k + 1] = at + x.count_values + (x.requests[k] < 0 ? 2 : 0);
      back_ids_per_rank[r] += count;
      back_start_[k + 1] = back_start_[k] + count;
    }
  if (x.draws) {
    const auto total = static_cast<std::size_t>(back_start_.back());
    if (back_ids_.size() < total) back_ids_.resize(total);
    comm_.alltoallv(answer_ids_.data(), x.answer_ids_per_rank, back_ids_.data(), back_ids_per_rank,
                    DType::i64);
    counters_.sample_bytes += static_cast<std::int64_t>(total * sizeof(NodeId));
  }
}

// The rest of the frontier's original ids and degrees: an own node's are in part_, a flagged
// one's came with its reply.
void DistributedSampler::fill_frontier_info(const HopExchange& x,
                                            std::vector<NodeId>& frontier_orig,
                                            std::vector<std::int64_t>& frontier_degree) const {
  const std::vector<std::int64_t>& order = routing_.order;
  for (std::int64_t k = x.own_begin; k < x.own_end; ++k) {
    const auto i = static_cast<std::size_t>(order[k]);
    const NodeId l = x.frontier[i] - part_.offset;
    frontier_orig[i] = part_.orig_id[l];
    frontier_degree[i] = part_.degree[l];
  }
  const auto num_requests = static_cast<std::int64_t>(x.requests.size());
  for (std::int64_t k = 0; k < num_requests; ++k)
    if (x.requests[k] < 0) {
      const std::int64_t* info = back_replies_.data() + back_reply_start_[k] + x.count_values;
      const auto i = static_cast<std::size_t>(request_pos_[k]);
      frontier_orig[i] = info[0];
      frontier_degree[i] = info[1];
    }
}

// The draws in frontier order (into *x.draws): own nodes' from the row offsets, the others' as
// their owners answered them.
void DistributedSampler::merge_draws(const HopExchange& x) {
  const std::vector<std::int64_t>& order = routing_.order;
  const std::int64_t n = x.n, own_begin = x.own_begin, own_end = x.own_end;
  const std::int64_t num_own = x.num_own, num_incoming = x.num_incoming;
  // Frontier offsets: an answer's size came with it, an own node's is in the row offsets.
  // With draws every remote frontier node was requested, so routed position k maps to request
  // k (before this rank's group) or k - num_own (after it).
  std::vector<EdgeId>& offsets = x.draws->offsets;
  offsets.resize(static_cast<std::size_t>(n) + 1);
  offsets[0] = 0;
  const EdgeId* own_offsets = x.row_offsets + num_incoming - own_begin;
  for (std::int64_t k = 0; k < n; ++k) {
    const bool own = k >= own_begin && k < own_end;
    const std::int64_t answer = k < own_begin ? k : k - num_own;
    offsets[order[k] + 1] = own ? own_offsets[k + 1] - own_offsets[k]
                                : back_start_[answer + 1] - back_start_[answer];
  }
  for (std::int64_t i = 0; i < n; ++i)
    offsets[i + 1] += offsets[i];
  const auto num_draws = static_cast<std::size_t>(offsets[n]);
  std::vector<NodeId>& ids_out = x.draws->ids;
  if (ids_out.size() < num_draws) ids_out.resize(num_draws);
  // Own draws are local ids (global ids from global_of) on the CPU, global ids where the GPU
  // answered them; answers are copied whole.
#pragma omp parallel for schedule(dynamic, 256) if (num_draws >= kParallelDraws)
  for (std::int64_t k = 0; k < n; ++k) {
    NodeId* ids = ids_out.data() + offsets[order[k]];
    if (k >= own_begin && k < own_end && !device_graph_) {
      for (const LocalId u : sampled_.of(num_incoming + k - own_begin))
        *ids++ = global_of(u);
      continue;
    }
    const NodeId* in = nullptr;
    const NodeId* end = nullptr;
    if (k >= own_begin && k < own_end) {
      in = answer_ids_.data() + own_offsets[k];
      end = answer_ids_.data() + own_offsets[k + 1];
    } else {
      const std::int64_t answer = k < own_begin ? k : k - num_own;
      in = back_ids_.data() + back_start_[answer];
      end = back_ids_.data() + back_start_[answer + 1];
    }
    std::copy(in, end, ids);
  }
}

// The host route's steps of run_hops: hop() with draws into draws_ and the sources' original ids
// and degrees into src_orig_ / src_degree_, then the block into blocks_.
void DistributedSampler::HostRoute::start(std::span<const NodeId> seed_ids, int layers) {
  s_.blocks_.resize(static_cast<std::size_t>(layers));
  s_.draws_.resize(static_cast<std::size_t>(layers));
  s_.src_orig_.resize(static_cast<std::size_t>(layers));
  s_.src_degree_.resize(static_cast<std::size_t>(layers));
  frontier_ = seed_ids;
}

void DistributedSampler::HostRoute::draw(int l, int layers, int fanout, const rng::Key& key,
                                         PhaseTimes& phases) {
  HopDraws& draws = s_.draws_[l];
  const bool sources_of_next = l + 1 < layers;
  s_.hop(frontier_, fanout, key, phases, &draws,
         sources_of_next ? s_.src_orig_[l + 1] : s_.seed_orig_,
         sources_of_next ? s_.src_degree_[l + 1] : s_.seed_degree_);
  SamplePhase t(phases, s_.sample_cpu_seconds_);
  sampling::Block& block = s_.blocks_[l];
  const std::span<const NodeId> ids(draws.ids.data(),
                                    static_cast<std::size_t>(draws.offsets.back()));
  s_.builder_.build(frontier_, draws.offsets, ids, block);
  frontier_ = block.src;
}

void DistributedSampler::HostRoute::finish(PhaseTimes& phases) {
  s_.hop(frontier_, 0, rng::Key{}, phases, nullptr, s_.src_orig_[0], s_.src_degree_[0]);
  frontier_ = {};
}

}  // namespace tessel::dist
