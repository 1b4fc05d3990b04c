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
    : part_(part),
      manifest_(manifest),
      comm_(comm),
      seed_(seed),
      fanouts_(std::move(fanouts)),
      batch_size_(batch_size) {
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
  cache_ = sampling::FeatureCache({}, part_.feature_dim);
  cache_.reset_stats();
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

void DistributedSampler::remember(NodeId global, NodeInfo info) {
  bool inserted = false;
  info_index_.insert(global, static_cast<std::int32_t>(info_.size()), inserted);
  if (inserted) info_.push_back(info);
}

void DistributedSampler::sample(int epoch, std::uint32_t step, std::span<const LocalId> seeds,
                                PhaseTimes& phases) {
  const int layers = static_cast<int>(fanouts_.size());
  blocks_.resize(static_cast<std::size_t>(layers));
  info_index_.reset(static_cast<std::int64_t>(seeds.size()) * 8);
  info_.clear();
  std::vector<NodeId> frontier(seeds.size());
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    TESSEL_ASSERT(seeds[i] >= 0 && seeds[i] < part_.num_owned, "seed {} is not owned", seeds[i]);
    frontier[i] = part_.offset + seeds[i];
    remember(frontier[i], {part_.orig_id[seeds[i]], part_.degree[seeds[i]]});
  }
  // From the output layer back to the input: blocks_[l] feeds layer l.
  for (int l = layers - 1; l >= 0; --l) {
    const rng::Key key{seed_, rng::Stream::sampling, static_cast<std::uint32_t>(epoch), step,
                       static_cast<std::uint32_t>(l)};
    hop(frontier, fanouts_[l], key, phases);
    {
      ScopedPhase t(phases, "sample");
      builder_.build(frontier, merged_.offsets, merged_.neighbors, blocks_[l]);
    }
    frontier = blocks_[l].src;
  }
}

// One hop: frontier nodes go to their owners, which draw their neighbors from the local CSR and
// answer (global id, original id, degree) per drawn neighbor; merged_ gets the draws in
// frontier order. Requests a rank makes to itself travel through the same exchange (a local
// copy inside alltoallv) so there is one code path.
void DistributedSampler::hop(std::span<const NodeId> frontier, int fanout, const rng::Key& key,
                             PhaseTimes& phases) {
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
  std::vector<std::int64_t> answer_counts(incoming.size());
  std::vector<NodeId> answer_ids;
  std::vector<std::int64_t> answer_ids_per_rank(static_cast<std::size_t>(num_ranks), 0);
  {
    ScopedPhase t(phases, "sample");
    std::vector<LocalId> rows(incoming.size());
    std::vector<NodeId> row_keys(incoming.size());
    for (std::size_t i = 0; i < incoming.size(); ++i) {
      const NodeId l = incoming[i] - part_.offset;
      TESSEL_ASSERT(l >= 0 && l < part_.num_owned, "sampling request for node {} not owned here",
                    incoming[i]);
      rows[i] = static_cast<LocalId>(l);
      row_keys[i] = part_.orig_id[l];
    }
    sampling::sample_neighbors(part_.graph, std::span<const LocalId>(rows), row_keys, fanout, key,
                               sampled_);
    answer_ids.resize(static_cast<std::size_t>(sampled_.num_sampled()) * 3);
    std::int64_t at = 0;
    std::size_t request = 0;
    for (int r = 0; r < num_ranks; ++r) {
      for (std::int64_t k = 0; k < incoming_counts[r]; ++k, ++request) {
        const auto drawn = sampled_.of(static_cast<std::int64_t>(request));
        answer_counts[request] = static_cast<std::int64_t>(drawn.size()) * 3;
        for (LocalId u : drawn) {
          answer_ids[at++] = local_global_[u];
          answer_ids[at++] = part_.orig_id[u];
          answer_ids[at++] = part_.degree[u];
        }
        answer_ids_per_rank[r] += static_cast<std::int64_t>(drawn.size()) * 3;
        if (r != me) counters_.remote_adjacency += part_.graph.degree(rows[request]) + 1;
      }
    }
    counters_.sampled_edges += sampled_.num_sampled();
  }
  std::vector<std::int64_t> back_counts;
  std::vector<NodeId> back_ids;
  {
    ScopedPhase t(phases, "communicate");
    back_counts = comm_.alltoallv<std::int64_t>(answer_counts, incoming_counts);
    back_ids = comm_.alltoallv<NodeId>(answer_ids, answer_ids_per_rank);
  }
  ScopedPhase t(phases, "sample");
  sampling::merge_answers(routing_, back_counts, back_ids, triples_);
  merged_.offsets.resize(triples_.offsets.size());
  for (std::size_t i = 0; i < triples_.offsets.size(); ++i)
    merged_.offsets[i] = triples_.offsets[i] / 3;
  const std::size_t n = triples_.neighbors.size() / 3;
  merged_.neighbors.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const NodeId g = triples_.neighbors[3 * i];
    merged_.neighbors[i] = g;
    remember(g, {triples_.neighbors[3 * i + 1], triples_.neighbors[3 * i + 2]});
  }
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
  std::vector<NodeId> remote_ids;
  std::vector<std::int64_t> remote_pos;
  for (std::int64_t i = 0; i < n; ++i) {
    const NodeId l = nodes[i] - part_.offset;
    if (l >= 0 && l < part_.num_owned) {
      std::memcpy(out + i * f, owned_features.data() + l * f, row_bytes);
    } else {
      remote_ids.push_back(nodes[i]);
      remote_pos.push_back(i);
    }
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
