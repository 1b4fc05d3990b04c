// Data-centric distributed sampling: routing frontier nodes to owners, answering with local
// draws, building blocks, and fetching remote feature rows through the cache.
#include "tessel/train/distributed_sampler.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/sampling/neighbor_sampler.hpp"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <unordered_map>

namespace tessel::train {
namespace {

// The "sample" phase in wall seconds, and in process CPU seconds added to `cpu_seconds`.
class SamplePhase {
 public:
  SamplePhase(PhaseTimes& phases, double& cpu_seconds)
      : wall_(phases, "sample"), cpu_seconds_(cpu_seconds), start_(process_cpu_seconds()) {}
  ~SamplePhase() { cpu_seconds_ += process_cpu_seconds() - start_; }
  SamplePhase(const SamplePhase&) = delete;
  SamplePhase& operator=(const SamplePhase&) = delete;

 private:
  ScopedPhase wall_;
  double& cpu_seconds_;
  double start_;
};

}  // namespace

DistributedSampler::DistributedSampler(partition::Part& part, const partition::Manifest& manifest,
                                       comm::Communicator& comm, std::uint64_t seed,
                                       std::vector<int> fanouts, std::int64_t batch_size)
    : part_(part), manifest_(manifest), comm_(comm), seed_(seed), fanouts_(std::move(fanouts)),
      batch_size_(batch_size), builder_(manifest.num_nodes) {
  TESSEL_EXPECTS(!fanouts_.empty(), "sampled mode needs one fanout per layer");
  TESSEL_EXPECTS(batch_size_ > 0, "--batch-size must be positive, got {}", batch_size_);
  // Canonical row order makes every rank draw the same neighbors for a node.
  if (!sampling::rows_sorted_by_key(part_.graph, part_.orig_id))
    sampling::sort_rows_by_key(part_.graph, part_.orig_id);
  local_global_.resize(static_cast<std::size_t>(part_.num_local()));
  for (std::int64_t l = 0; l < part_.num_owned; ++l) local_global_[l] = part_.offset + l;
  for (std::int64_t h = 0; h < part_.num_halo; ++h)
    local_global_[part_.num_owned + h] =
        manifest_.offsets[part_.halo_owner[h]] + part_.halo_owner_local[h];
  // An owner's answer for a drawn neighbor is these three ids side by side: one cache line
  // read per draw instead of three scattered ones.
  answer_of_.resize(static_cast<std::size_t>(part_.num_local()) * 3);
  for (std::int64_t l = 0; l < part_.num_local(); ++l) {
    answer_of_[3 * l] = local_global_[l];
    answer_of_[3 * l + 1] = part_.orig_id[l];
    answer_of_[3 * l + 2] = part_.degree[l];
  }
  cache_ = sampling::FeatureCache({}, part_.feature_dim);
  cache_.reset_stats();
}

void DistributedSampler::sample_on_device(Device device, const std::string& placement) {
  std::vector<NodeId> owned_keys(part_.orig_id.begin(), part_.orig_id.begin() + part_.num_owned);
  const LocalCsr& owned = part_.graph;  // rows: the owned nodes, in canonical order
  const std::int64_t bytes =
      static_cast<std::int64_t>(owned.indptr.size() * sizeof(EdgeId) +
                                owned.indices.size() * sizeof(LocalId) +
                                (owned_keys.size() + answer_of_.size()) * sizeof(NodeId));
  std::string reason;
  const sampling::GraphPlacement where =
      sampling::choose_graph_placement(placement, bytes, device, reason);
  device_graph_ = std::make_unique<sampling::DeviceGraph>(owned, owned_keys, answer_of_, device,
                                                          where);
  log::info("GPU sampling on {}: {}", device.str(), reason);
}

sampling::GraphPlacement DistributedSampler::graph_placement() const {
  TESSEL_EXPECTS(device_graph_ != nullptr, "graph_placement: sampling runs on the CPU");
  return device_graph_->placement();
}

void DistributedSampler::reset_counters() {
  counters_ = {};
  sample_cpu_seconds_ = 0;
  cache_.reset_stats();
  if (device_store_) device_store_->reset_counters();
}

void DistributedSampler::setup_device_store(const std::string& policy,
                                            const sampling::CacheBudget& budget, Device device) {
  const std::int64_t f = part_.feature_dim;
  const bool enabled = policy != "none" && (budget.size_mb > 0 || budget.ratio > 0);
  std::vector<NodeId> hot;
  if (enabled) {
    std::vector<NodeId> candidates;
    std::vector<std::int64_t> score;
    if (policy == "degree") {
      // Every row a step may need, owned or halo: hubs are drawn most often.
      candidates = local_global_;
      score.assign(part_.degree.begin(), part_.degree.begin() + part_.num_local());
    } else {
      presampled_inputs(false, candidates, score);
    }
    const std::int64_t capacity =
        budget.capacity_rows(static_cast<std::int64_t>(candidates.size()), f * 4);
    hot = sampling::rank_candidates(candidates, score);
    hot.resize(static_cast<std::size_t>(capacity));
  }
  // Owned hot rows are copied here, remote ones come from their owners (every rank takes part
  // in the exchange, with or without a cache).
  std::vector<float> rows(hot.size() * static_cast<std::size_t>(f));
  std::vector<NodeId> remote;
  std::vector<std::int64_t> remote_pos;
  for (std::size_t k = 0; k < hot.size(); ++k) {
    const NodeId l = hot[k] - part_.offset;
    if (l >= 0 && l < part_.num_owned) {
      std::copy_n(part_.features.begin() + l * f, f,
                  rows.begin() + static_cast<std::int64_t>(k) * f);
    } else {
      remote.push_back(hot[k]);
      remote_pos.push_back(static_cast<std::int64_t>(k));
    }
  }
  fetch_remote_rows(remote, part_.features, rows.data(), remote_pos);
  device_store_ = std::make_unique<sampling::DeviceFeatureStore>(part_.features, part_.num_owned, f,
                                                                 part_.offset, hot, rows, device);
  const auto total_rows = comm_.allreduce_value<std::int64_t>(device_store_->cache_rows());
  log::info("GPU feature store ({}): owned rows in pinned host memory (read over UVA), {} hot "
            "rows in device memory on all ranks ({:.1f} MiB on rank 0)",
            enabled ? policy : "no cache", total_rows,
            static_cast<double>(device_store_->cache_bytes()) / (1 << 20));
}

Tensor DistributedSampler::fetch_features_device(std::span<const NodeId> nodes,
                                                 PhaseTimes& phases) {
  ScopedPhase t(phases, "fetch");
  TESSEL_ASSERT(device_store_ != nullptr, "fetch_features_device before setup_device_store");
  device_store_->plan(nodes, network_ids_);
  const NodeId begin = part_.offset, end = part_.offset + part_.num_owned;
  std::int64_t remote = 0;
  for (const NodeId g : nodes)
    remote += (g < begin || g >= end) ? 1 : 0;
  const auto k = static_cast<std::int64_t>(network_ids_.size());
  counters_.input_rows += static_cast<std::int64_t>(nodes.size());
  counters_.remote_input_rows += remote;
  counters_.cache_hits += remote - k;
  network_rows_.resize(static_cast<std::size_t>(k * part_.feature_dim));
  fetch_remote_rows(network_ids_, part_.features, network_rows_.data(), {});
  counters_.fetched_rows += k;
  return device_store_->gather(network_rows_);
}

void DistributedSampler::assign_steps(int epoch, std::vector<std::vector<LocalId>>& step_seeds,
                                      std::vector<std::int64_t>& step_counts, PhaseTimes& phases) {
  const std::int64_t global_batch = batch_size_ * comm_.size();
  const std::int64_t num_steps = std::max<std::int64_t>(
      1, (manifest_.num_train + global_batch - 1) / global_batch);
  step_seeds.assign(static_cast<std::size_t>(num_steps), {});
  const rng::Key shuffle{seed_, rng::Stream::shuffle, static_cast<std::uint32_t>(epoch)};
  for (LocalId v : part_.train)
    step_seeds[shuffle.below(static_cast<std::uint64_t>(part_.orig_id[v]), 0,
                             static_cast<std::uint64_t>(num_steps))]
        .push_back(v);
  step_counts.resize(static_cast<std::size_t>(num_steps));
  for (std::int64_t s = 0; s < num_steps; ++s) {
    auto& seeds = step_seeds[s];
    std::sort(seeds.begin(), seeds.end(),
              [&](LocalId a, LocalId b) { return part_.orig_id[a] < part_.orig_id[b]; });
    step_counts[s] = static_cast<std::int64_t>(seeds.size());
  }
  ScopedPhase t(phases, "communicate");
  comm_.allreduce(std::span<std::int64_t>(step_counts));
}

void DistributedSampler::sample(int epoch, std::uint32_t step, std::span<const LocalId> seeds,
                                PhaseTimes& phases) {
  const int layers = static_cast<int>(fanouts_.size());
  blocks_.resize(static_cast<std::size_t>(layers));
  draws_.resize(static_cast<std::size_t>(layers));
  src_orig_.resize(static_cast<std::size_t>(layers));
  src_degree_.resize(static_cast<std::size_t>(layers));
  std::vector<NodeId> seed_ids(seeds.size()), seed_orig(seeds.size());
  std::vector<std::int64_t> seed_degree(seeds.size());
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    TESSEL_ASSERT(seeds[i] >= 0 && seeds[i] < part_.num_owned, "seed {} is not owned", seeds[i]);
    seed_ids[i] = part_.offset + seeds[i];
    seed_orig[i] = part_.orig_id[seeds[i]];
    seed_degree[i] = part_.degree[seeds[i]];
  }
  // From the output layer back to the input: blocks_[l] feeds layer l, and its destinations are
  // the sources of block l + 1 (the seeds for the last block).
  std::span<const NodeId> frontier = seed_ids;
  std::span<const NodeId> frontier_orig = seed_orig;
  std::span<const std::int64_t> frontier_degree = seed_degree;
  for (int l = layers - 1; l >= 0; --l) {
    const rng::Key key{seed_, rng::Stream::sampling, static_cast<std::uint32_t>(epoch), step,
                       static_cast<std::uint32_t>(l)};
    HopDraws& draws = draws_[l];
    hop(frontier, frontier_orig, fanouts_[l], key, phases, draws);
    SamplePhase t(phases, sample_cpu_seconds_);
    sampling::Block& block = blocks_[l];
    const std::span<const NodeId> ids(draws.ids.data(),
                                      static_cast<std::size_t>(draws.offsets.back()));
    builder_.build(frontier, draws.offsets, ids, block, &first_seen_);
    // Sources are the destinations, then each new neighbor where it was first drawn: an owned
    // node's original id and degree are in its answer_of_ row (one cache line, fetched ahead),
    // another rank's came with its draw.
    auto& orig = src_orig_[l];
    auto& degree = src_degree_[l];
    const std::size_t num_src = frontier.size() + first_seen_.size();
    orig.resize(num_src);
    degree.resize(num_src);
    std::copy(frontier_orig.begin(), frontier_orig.end(), orig.begin());
    std::copy(frontier_degree.begin(), frontier_degree.end(), degree.begin());
    NodeId* orig_out = orig.data() + frontier.size();
    std::int64_t* degree_out = degree.data() + frontier.size();
    const auto num_new = static_cast<std::int64_t>(first_seen_.size());
    const NodeId* answer_of = answer_of_.data();
    constexpr std::int64_t kPrefetchDistance = 16;
    for (std::int64_t k = 0; k < num_new; ++k) {
      if (k + kPrefetchDistance < num_new) {
        const NodeId ahead = ids[first_seen_[k + kPrefetchDistance]] - part_.offset;
        if (ahead >= 0 && ahead < part_.num_owned) __builtin_prefetch(answer_of + 3 * ahead + 1);
      }
      const EdgeId e = first_seen_[k];
      const NodeId local = ids[e] - part_.offset;
      const NodeId* from = local >= 0 && local < part_.num_owned ? answer_of + 3 * local + 1
                                                                 : draws.info.data() + 2 * e;
      *orig_out++ = from[0];
      *degree_out++ = from[1];
    }
    frontier = block.src;
    frontier_orig = orig;
    frontier_degree = degree;
  }
}

// One hop. Frontier nodes owned elsewhere go to their owners, which draw their neighbors from
// the local CSR and answer (global id, original id, degree) per draw. This rank's own frontier
// nodes are drawn in the same call as the requests it serves, and their draws are written
// straight into frontier order: at one rank nothing is packed, exchanged or merged. Every draw
// depends only on the key and the node's original id, so where it is drawn does not matter.
void DistributedSampler::hop(std::span<const NodeId> frontier,
                             std::span<const NodeId> frontier_orig, int fanout,
                             const rng::Key& key, PhaseTimes& phases, HopDraws& draws) {
  const int num_ranks = comm_.size();
  const int me = comm_.rank();
  const auto n = static_cast<std::int64_t>(frontier.size());
  std::vector<int> owners(frontier.size());
  for (std::int64_t i = 0; i < n; ++i)
    owners[i] = manifest_.owner_of(frontier[i]);
  sampling::route_by_owner(owners, num_ranks, routing_);
  const std::vector<std::int64_t>& order = routing_.order;
  // Routed positions [own_begin, own_end) are this rank's own nodes; the rest are requests.
  const std::int64_t own_begin = routing_.displs[me], own_end = routing_.displs[me + 1];
  const std::int64_t num_own = own_end - own_begin;
  std::vector<std::int64_t> send_counts(routing_.counts);
  send_counts[me] = 0;
  std::vector<NodeId> requests(static_cast<std::size_t>(n - num_own));
  for (std::int64_t k = 0, out = 0; k < n; ++k)
    if (k < own_begin || k >= own_end) requests[out++] = frontier[order[k]];
  counters_.remote_requests += n - num_own;

  std::vector<std::int64_t> incoming_counts;
  std::vector<NodeId> incoming;
  {
    ScopedPhase t(phases, "communicate");
    incoming = comm_.alltoallv<NodeId>(requests, send_counts, &incoming_counts);
  }
  // Answers and their replies live in members: their capacity is reused by every hop of every
  // step, so the large id arrays are neither zero-filled nor faulted in again.
  std::vector<std::int64_t>& answer_counts = answer_counts_;
  std::vector<NodeId>& answer_ids = answer_ids_;
  const auto num_incoming = static_cast<std::int64_t>(incoming.size());
  answer_counts.resize(incoming.size());
  std::vector<std::int64_t> answer_ids_per_rank(static_cast<std::size_t>(num_ranks), 0);
  constexpr std::int64_t kParallelDraws = std::int64_t{1} << 17;
  {
    SamplePhase t(phases, sample_cpu_seconds_);
    // Rows: the requests other ranks sent, then this rank's own frontier nodes.
    std::vector<LocalId> rows(static_cast<std::size_t>(num_incoming + num_own));
    std::vector<NodeId> row_keys(rows.size());
    for (std::int64_t i = 0; i < num_incoming; ++i) {
      const NodeId l = incoming[i] - part_.offset;
      TESSEL_EXPECTS(l >= 0 && l < part_.num_owned,
                     "part {}: a sampling request names node {}, which it does not own",
                     part_.part_id, incoming[i]);
      rows[i] = static_cast<LocalId>(l);
      row_keys[i] = part_.orig_id[l];
    }
    for (std::int64_t j = 0; j < num_own; ++j) {
      const std::int64_t i = order[own_begin + j];
      rows[num_incoming + j] = static_cast<LocalId>(frontier[i] - part_.offset);
      row_keys[num_incoming + j] = frontier_orig[i];
    }
    const EdgeId* draw_offsets = nullptr;
    if (device_graph_) {
      // The GPU draws and writes the answers of every row, own nodes' too; they come back in
      // row order, requests first as below.
      device_graph_->sample(rows, fanout, key, device_offsets_, answer_ids);
      draw_offsets = device_offsets_.data();
      for (std::int64_t request = 0; request < num_incoming; ++request)
        answer_counts[request] = 3 * (draw_offsets[request + 1] - draw_offsets[request]);
    } else {
      sampling::sample_neighbors(part_.graph, std::span<const LocalId>(rows), row_keys, fanout,
                                 key, sampled_);
      // Each request's answer lands at three times its draws' offset, so requests are packed in
      // parallel with the result of a serial pass. Small hops stay on one thread: on shared
      // cores a team's barrier can cost more than the packing.
      // Grow-only: shrinking and growing again would zero-fill the ids on every hop.
      draw_offsets = sampled_.offsets.data();
      const auto num_answer_ids = static_cast<std::size_t>(draw_offsets[num_incoming]) * 3;
      if (answer_ids.size() < num_answer_ids) answer_ids.resize(num_answer_ids);
#pragma omp parallel for schedule(dynamic, 256) if (draw_offsets[num_incoming] >= kParallelDraws)
      for (std::int64_t request = 0; request < num_incoming; ++request) {
        NodeId* out = answer_ids.data() + 3 * draw_offsets[request];
        for (const LocalId u : sampled_.of(request)) {
          const NodeId* answer = answer_of_.data() + 3 * static_cast<std::int64_t>(u);
          *out++ = answer[0];
          *out++ = answer[1];
          *out++ = answer[2];
        }
        answer_counts[request] = 3 * (draw_offsets[request + 1] - draw_offsets[request]);
      }
    }
    std::int64_t request = 0;
    for (int r = 0; r < num_ranks; ++r) {
      const std::int64_t end = request + incoming_counts[r];
      answer_ids_per_rank[r] = 3 * (draw_offsets[end] - draw_offsets[request]);
      for (; request < end; ++request)
        counters_.remote_adjacency += part_.graph.degree(rows[request]) + 1;
    }
    counters_.sampled_edges += draw_offsets[num_incoming + num_own];
  }
  std::vector<std::int64_t>& back_counts = back_counts_;
  std::vector<NodeId>& back_ids = back_ids_;
  {
    ScopedPhase t(phases, "communicate");
    back_counts.resize(requests.size());
    comm_.alltoallv(answer_counts.data(), incoming_counts, back_counts.data(), send_counts,
                    DType::i64);
    // What each owner answers is the sum of its answers' counts: no count exchange needed.
    std::vector<std::int64_t> back_ids_per_rank(static_cast<std::size_t>(num_ranks), 0);
    back_start_.resize(requests.size() + 1);
    back_start_[0] = 0;
    std::int64_t k = 0;
    for (int r = 0; r < num_ranks; ++r)
      for (const std::int64_t end = k + send_counts[r]; k < end; ++k) {
        back_ids_per_rank[r] += back_counts[k];
        back_start_[k + 1] = back_start_[k] + back_counts[k];
      }
    const auto total = static_cast<std::size_t>(back_start_.back());
    if (back_ids.size() < total) back_ids.resize(total);
    comm_.alltoallv(answer_ids.data(), answer_ids_per_rank, back_ids.data(), back_ids_per_rank,
                    DType::i64);
  }
  SamplePhase t(phases, sample_cpu_seconds_);
  counters_.answer_ids += back_start_.back() / 3;
  // Frontier offsets: an answer's size came with it, an own node's is in sampled_.
  std::vector<EdgeId>& offsets = draws.offsets;
  offsets.resize(static_cast<std::size_t>(n) + 1);
  offsets[0] = 0;
  const EdgeId* row_offsets = device_graph_ ? device_offsets_.data() : sampled_.offsets.data();
  const EdgeId* own_offsets = row_offsets + num_incoming - own_begin;
  for (std::int64_t k = 0; k < n; ++k) {
    const bool own = k >= own_begin && k < own_end;
    const std::int64_t answer = k < own_begin ? k : k - num_own;
    offsets[order[k] + 1] = own ? own_offsets[k + 1] - own_offsets[k]
                                : (back_start_[answer + 1] - back_start_[answer]) / 3;
  }
  for (std::int64_t i = 0; i < n; ++i)
    offsets[i + 1] += offsets[i];
  const auto num_draws = static_cast<std::size_t>(offsets[n]);
  if (draws.ids.size() < num_draws) draws.ids.resize(num_draws);
  if (draws.info.size() < 2 * num_draws) draws.info.resize(2 * num_draws);
  // Own draws are local ids: global ids from local_global_, and the original id and degree only
  // for halo nodes (an owned node's are in part_). Answers, and own draws the GPU answered, are
  // copied whole.
  const LocalId num_owned = static_cast<LocalId>(part_.num_owned);
  const NodeId* global_of = local_global_.data();
  const NodeId* answer_of = answer_of_.data();
#pragma omp parallel for schedule(dynamic, 256) if (num_draws >= kParallelDraws)
  for (std::int64_t k = 0; k < n; ++k) {
    NodeId* ids = draws.ids.data() + offsets[order[k]];
    NodeId* info = draws.info.data() + 2 * offsets[order[k]];
    const NodeId* in = nullptr;
    const NodeId* end = nullptr;
    if (k >= own_begin && k < own_end) {
      if (device_graph_) {
        in = answer_ids.data() + 3 * own_offsets[k];
        end = answer_ids.data() + 3 * own_offsets[k + 1];
      } else {
        for (const LocalId u : sampled_.of(num_incoming + k - own_begin)) {
          *ids++ = global_of[u];
          if (u >= num_owned) {
            info[0] = answer_of[3 * static_cast<std::int64_t>(u) + 1];
            info[1] = answer_of[3 * static_cast<std::int64_t>(u) + 2];
          }
          info += 2;
        }
      }
    } else {
      const std::int64_t answer = k < own_begin ? k : k - num_own;
      in = back_ids.data() + back_start_[answer];
      end = back_ids.data() + back_start_[answer + 1];
    }
    for (; in != end; in += 3) {
      *ids++ = in[0];
      *info++ = in[1];
      *info++ = in[2];
    }
  }
}

Tensor DistributedSampler::fetch_features(std::span<const NodeId> nodes,
                                          std::span<const float> owned_features,
                                          PhaseTimes& phases) {
  ScopedPhase t(phases, "fetch");
  const std::int64_t f = part_.feature_dim;
  const auto n = static_cast<std::int64_t>(nodes.size());
  const auto row_bytes = static_cast<std::size_t>(f) * sizeof(float);
  Tensor x = Tensor::empty({n, f}, DType::f32);
  float* out = x.data<float>();
  // Owned rows are copied in parallel; remote ones are listed (in row order) for the cache and
  // the owners.
  const NodeId begin = part_.offset, end = part_.offset + part_.num_owned;
#pragma omp parallel for schedule(static) if (n * f > 32768)
  for (std::int64_t i = 0; i < n; ++i)
    if (nodes[i] >= begin && nodes[i] < end)
      std::memcpy(out + i * f, owned_features.data() + (nodes[i] - begin) * f, row_bytes);
  std::vector<NodeId> remote_ids;
  std::vector<std::int64_t> remote_pos;
  for (std::int64_t i = 0; i < n; ++i)
    if (nodes[i] < begin || nodes[i] >= end) {
      remote_ids.push_back(nodes[i]);
      remote_pos.push_back(i);
    }
  counters_.input_rows += n;
  counters_.remote_input_rows += static_cast<std::int64_t>(remote_ids.size());
  // Cached rows land in `staged`; the misses are fetched from their owners.
  std::vector<float> staged(remote_ids.size() * static_cast<std::size_t>(f));
  std::vector<std::int64_t> misses;
  cache_.gather(remote_ids, staged, misses);
  counters_.cache_hits += static_cast<std::int64_t>(remote_ids.size() - misses.size());
  std::vector<NodeId> miss_ids(misses.size());
  for (std::size_t k = 0; k < misses.size(); ++k) miss_ids[k] = remote_ids[misses[k]];
  fetch_remote_rows(miss_ids, owned_features, staged.data(), misses);
  counters_.fetched_rows += static_cast<std::int64_t>(misses.size());
  for (std::size_t k = 0; k < remote_ids.size(); ++k)
    std::memcpy(out + remote_pos[k] * f, &staged[k * f], row_bytes);
  return x;
}

void DistributedSampler::fetch_remote_rows(std::span<const NodeId> ids,
                                           std::span<const float> owned_features, float* out,
                                           std::span<const std::int64_t> out_row) {
  const int num_ranks = comm_.size();
  const std::int64_t f = part_.feature_dim;
  const auto row_bytes = static_cast<std::size_t>(f) * sizeof(float);
  std::vector<int> owners(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) owners[i] = manifest_.owner_of(ids[i]);
  sampling::OwnerRouting routing;
  sampling::route_by_owner(owners, num_ranks, routing);
  std::vector<NodeId> requests;
  sampling::gather_by_order<NodeId>(ids, routing.order, requests);
  std::vector<std::int64_t> incoming_counts;
  const auto incoming = comm_.alltoallv<NodeId>(requests, routing.counts, &incoming_counts);
  std::vector<float> reply(incoming.size() * static_cast<std::size_t>(f));
  for (std::size_t i = 0; i < incoming.size(); ++i) {
    const NodeId l = incoming[i] - part_.offset;
    TESSEL_ASSERT(l >= 0 && l < part_.num_owned, "feature request for node {} not owned here",
                  incoming[i]);
    std::memcpy(&reply[i * f], owned_features.data() + l * f, row_bytes);
  }
  std::vector<std::int64_t> reply_counts(incoming_counts), back_counts(routing.counts);
  for (auto& c : reply_counts) c *= f;
  for (auto& c : back_counts) c *= f;
  std::vector<float> back(requests.size() * static_cast<std::size_t>(f));
  comm_.alltoallv(reply.data(), reply_counts, back.data(), back_counts, DType::f32);
  for (std::size_t k = 0; k < routing.order.size(); ++k) {
    const auto i = static_cast<std::size_t>(routing.order[k]);
    const std::int64_t row = out_row.empty() ? static_cast<std::int64_t>(i) : out_row[i];
    std::memcpy(out + row * f, &back[k * f], row_bytes);
  }
}

void DistributedSampler::presampled_inputs(bool remote_only, std::vector<NodeId>& candidates,
                                           std::vector<std::int64_t>& score) {
  constexpr std::int64_t kPresampleSteps = 8;
  PhaseTimes ignored;
  std::vector<std::vector<LocalId>> step_seeds;
  std::vector<std::int64_t> step_counts;
  assign_steps(0, step_seeds, step_counts, ignored);
  std::unordered_map<NodeId, std::int64_t> counts;
  const auto steps =
      std::min<std::int64_t>(kPresampleSteps, static_cast<std::int64_t>(step_counts.size()));
  for (std::int64_t s = 0; s < steps; ++s) {
    if (step_counts[s] == 0) continue;
    sample(0, static_cast<std::uint32_t>(s), step_seeds[s], ignored);
    for (NodeId g : blocks_[0].src)
      if (!remote_only || g < part_.offset || g >= part_.offset + part_.num_owned) ++counts[g];
  }
  for (const auto& [g, c] : counts) {
    candidates.push_back(g);
    score.push_back(c);
  }
}

void DistributedSampler::setup_cache(const std::string& policy, const sampling::CacheBudget& budget,
                                     std::span<const float> owned_features) {
  const bool enabled = policy != "none" && (budget.size_mb > 0 || budget.ratio > 0);
  if (!enabled) return;
  std::vector<NodeId> candidates;
  std::vector<std::int64_t> score;
  if (policy == "degree") {
    // The halo: remote in-neighbors of owned nodes, hubs first.
    for (std::int64_t h = 0; h < part_.num_halo; ++h) {
      candidates.push_back(local_global_[part_.num_owned + h]);
      score.push_back(part_.degree[part_.num_owned + h]);
    }
  } else {
    presampled_inputs(true, candidates, score);
  }
  cache_ = sampling::FeatureCache::build(candidates, score, budget, part_.feature_dim);
  std::vector<float> rows(static_cast<std::size_t>(cache_.size()) *
                         static_cast<std::size_t>(part_.feature_dim));
  fetch_remote_rows(cache_.ids(), owned_features, rows.data(), {});
  cache_.fill(rows);
  cache_.reset_stats();
  const auto total_rows = comm_.allreduce_value<std::int64_t>(cache_.size());
  log::info("feature cache ({}): {} remote rows on all ranks, {:.1f} MiB on rank 0", policy,
            total_rows, static_cast<double>(cache_.bytes()) / (1 << 20));
}

}  // namespace tessel::train
