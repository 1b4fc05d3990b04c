// Data-centric distributed sampling: routing frontier nodes to owners, answering with local
// draws, building blocks, and fetching remote feature rows through the cache.
#include "tessel/train/distributed_sampler.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/sampling/neighbor_sampler.hpp"

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace tessel::train {

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
  cache_.reset_stats();
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
  triples_.resize(static_cast<std::size_t>(layers));
  merged_.resize(static_cast<std::size_t>(layers));
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
    hop(frontier, fanouts_[l], key, phases, triples_[l], merged_[l]);
    ScopedPhase t(phases, "sample");
    sampling::Block& block = blocks_[l];
    builder_.build(frontier, merged_[l].offsets, merged_[l].neighbors, block, &first_seen_);
    // Sources are the destinations, then each new neighbor where it was first drawn: its
    // original id and degree came with that draw.
    auto& orig = src_orig_[l];
    auto& degree = src_degree_[l];
    orig.assign(frontier_orig.begin(), frontier_orig.end());
    degree.assign(frontier_degree.begin(), frontier_degree.end());
    for (const EdgeId e : first_seen_) {
      orig.push_back(triples_[l].neighbors[3 * e + 1]);
      degree.push_back(triples_[l].neighbors[3 * e + 2]);
    }
    frontier = block.src;
    frontier_orig = orig;
    frontier_degree = degree;
  }
}

// One hop: frontier nodes go to their owners, which draw their neighbors from the local CSR and
// answer (global id, original id, degree) per drawn neighbor; `triples` gets those answers and
// `merged` the global ids, both in frontier order (one pair per layer, so their capacity fits
// that layer's hop from step to step). Requests a rank makes to itself travel through the same
// exchange (a local copy inside alltoallv) so there is one code path.
void DistributedSampler::hop(std::span<const NodeId> frontier, int fanout, const rng::Key& key,
                             PhaseTimes& phases, sampling::SampledGlobalNeighbors& triples,
                             sampling::SampledGlobalNeighbors& merged) {
  const int num_ranks = comm_.size();
  const int me = comm_.rank();
  std::vector<int> owners(frontier.size());
  for (std::size_t i = 0; i < frontier.size(); ++i) owners[i] = manifest_.owner_of(frontier[i]);
  sampling::route_by_owner(owners, num_ranks, routing_);
  std::vector<NodeId> requests;
  sampling::gather_by_order<NodeId>(frontier, routing_.order, requests);
  for (int r = 0; r < num_ranks; ++r)
    if (r != me) counters_.remote_requests += routing_.counts[r];

  std::vector<std::int64_t> incoming_counts;
  std::vector<NodeId> incoming;
  {
    ScopedPhase t(phases, "communicate");
    incoming = comm_.alltoallv<NodeId>(requests, routing_.counts, &incoming_counts);
  }
  // Answers and their replies live in members: their capacity is reused by every hop of every
  // step, so the large id arrays are neither zero-filled nor faulted in again.
  std::vector<std::int64_t>& answer_counts = answer_counts_;
  std::vector<NodeId>& answer_ids = answer_ids_;
  answer_counts.resize(incoming.size());
  std::vector<std::int64_t> answer_ids_per_rank(static_cast<std::size_t>(num_ranks), 0);
  {
    ScopedPhase t(phases, "sample");
    const auto num_incoming = static_cast<std::int64_t>(incoming.size());
    std::vector<LocalId> rows(incoming.size());
    std::vector<NodeId> row_keys(incoming.size());
    for (std::int64_t i = 0; i < num_incoming; ++i) {
      const NodeId l = incoming[i] - part_.offset;
      TESSEL_EXPECTS(l >= 0 && l < part_.num_owned,
                     "part {}: a sampling request names node {}, which it does not own",
                     part_.part_id, incoming[i]);
      rows[i] = static_cast<LocalId>(l);
      row_keys[i] = part_.orig_id[l];
    }
    const EdgeId* draw_offsets = nullptr;
    if (device_graph_) {
      // The GPU draws and writes the answers; they come back in request order, as below.
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
      const auto num_answer_ids = static_cast<std::size_t>(sampled_.num_sampled()) * 3;
      if (answer_ids.size() < num_answer_ids) answer_ids.resize(num_answer_ids);
      draw_offsets = sampled_.offsets.data();
      constexpr std::int64_t kParallelDraws = std::int64_t{1} << 17;
#pragma omp parallel for schedule(dynamic, 256) if (sampled_.num_sampled() >= kParallelDraws)
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
      if (r != me)
        for (; request < end; ++request)
          counters_.remote_adjacency += part_.graph.degree(rows[request]) + 1;
      request = end;
    }
    counters_.sampled_edges += draw_offsets[num_incoming];
  }
  std::vector<std::int64_t>& back_counts = back_counts_;
  std::vector<NodeId>& back_ids = back_ids_;
  std::int64_t num_back_ids = 0;
  {
    ScopedPhase t(phases, "communicate");
    back_counts.resize(static_cast<std::size_t>(routing_.displs[num_ranks]));
    comm_.alltoallv(answer_counts.data(), incoming_counts, back_counts.data(), routing_.counts,
                    DType::i64);
    // What each owner answers is the sum of its answers' counts: no count exchange needed.
    std::vector<std::int64_t> back_ids_per_rank(static_cast<std::size_t>(num_ranks), 0);
    for (int r = 0; r < num_ranks; ++r)
      for (std::int64_t k = routing_.displs[r]; k < routing_.displs[r + 1]; ++k)
        back_ids_per_rank[r] += back_counts[k];
    std::int64_t total = 0;
    for (const std::int64_t c : back_ids_per_rank)
      total += c;
    num_back_ids = total;
    if (back_ids.size() < static_cast<std::size_t>(total))
      back_ids.resize(static_cast<std::size_t>(total));
    comm_.alltoallv(answer_ids.data(), answer_ids_per_rank, back_ids.data(), back_ids_per_rank,
                    DType::i64);
  }
  ScopedPhase t(phases, "sample");
  sampling::merge_answers(
      routing_, back_counts,
      std::span<const NodeId>(back_ids.data(), static_cast<std::size_t>(num_back_ids)), triples);
  merged.offsets.resize(triples.offsets.size());
  for (std::size_t i = 0; i < triples.offsets.size(); ++i)
    merged.offsets[i] = triples.offsets[i] / 3;
  const std::size_t n = triples.neighbors.size() / 3;
  merged.neighbors.resize(n);
  for (std::size_t i = 0; i < n; ++i)
    merged.neighbors[i] = triples.neighbors[3 * i];
  for (int r = 0; r < num_ranks; ++r)
    if (r != me)
      for (std::int64_t k = routing_.displs[r]; k < routing_.displs[r + 1]; ++k)
        counters_.answer_ids += back_counts[k] / 3;
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
    // Remote input nodes of the first steps of a presampled epoch. Epoch key 0 is never used
    // by training (epochs start at 1), so no training draw is reused.
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
        if (g < part_.offset || g >= part_.offset + part_.num_owned) ++counts[g];
    }
    for (const auto& [g, c] : counts) {
      candidates.push_back(g);
      score.push_back(c);
    }
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
