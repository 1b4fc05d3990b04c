// Data-centric distributed sampling: input feature rows, fetched from their owners through the
// host cache or the device feature store.
#include "tessel/dist/distributed_sampler.hpp"

#include "sample_phase.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/kernels/context.hpp"
#include "tessel/kernels/dense.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <unordered_map>

namespace tessel::dist {

void DistributedSampler::setup_device_store(sampling::CachePolicy policy,
                                            const sampling::CacheBudget& budget, Device device) {
  const std::int64_t f = part_.feature_dim;
  const bool enabled =
      policy != sampling::CachePolicy::none && (budget.size_mb > 0 || budget.ratio > 0);
  std::vector<NodeId> hot;
  std::int64_t admit_slots = 0;
  if (enabled) {
    std::vector<NodeId> candidates;
    std::vector<std::int64_t> score;
    if (policy == sampling::CachePolicy::degree) {
      // Every row a step may need, owned or halo: hubs are drawn most often.
      candidates = local_globals();
      score.assign(part_.degree.begin(), part_.degree.begin() + part_.num_local());
    } else {
      presampled_inputs(false, candidates, score);
    }
    // The budget's rows: the policy's hot rows, and slots for remote rows admitted as fetched.
    const sampling::DeviceCacheSplit split =
        sampling::split_device_cache(budget, static_cast<std::int64_t>(candidates.size()), f * 4);
    admit_slots = split.admit_rows;
    hot = sampling::rank_candidates(candidates, score);
    hot.resize(static_cast<std::size_t>(split.hot_rows));
  }
  // Owned hot rows are copied here; remote ones come from their owners' stores over the data
  // plane once every store exists (every rank takes part in the exchange, with or without a
  // cache).
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
  device_store_ = std::make_unique<sampling::DeviceFeatureStore>(
      part_.features, part_.num_owned, f, part_.offset, hot, rows, device, admit_slots);
  if (comm_.size() > 1) {
    std::vector<std::int64_t> row_of;
    // Setup, like the store's uploads above, runs on the device's main stream.
    const Tensor remote_rows = exchange_rows(remote, row_of, DeviceStream::main());
    device_store_->fill_hot_rows(remote_rows, row_of, remote_pos);
  }
  // As in sample_on_device: the sorted hot ids and the remote hot rows are written
  // asynchronously on the device's stream, and a step on another stream would not wait for them.
  kernels::default_context(device).synchronize();
  const auto total_rows = comm_.allreduce_value<std::int64_t>(device_store_->cache_rows());
  const auto total_slots = comm_.allreduce_value<std::int64_t>(admit_slots);
  log::info("GPU feature store ({}): owned rows in pinned host memory (read over UVA), {} hot "
            "rows and {} admission slots (CLOCK) in device memory on all ranks ({:.1f} MiB on "
            "rank 0)",
            enabled ? option_word(policy) : std::string("no cache"), total_rows, total_slots,
            static_cast<double>(device_store_->cache_bytes()) / (1 << 20));
}

Tensor DistributedSampler::fetch_features_device(std::span<const NodeId> nodes,
                                                 PhaseTimes& phases, DeviceStream stream) {
  ScopedPhase t(phases, "fetch");
  TESSEL_ASSERT(device_store_ != nullptr, "fetch_features_device before setup_device_store");
  // The store's kernels, copies and buffers on `stream`, as the exchange.
  const Device device = device_store_->device();
  const device_memory::StreamScope on_stream(device, device_memory::resolve(device, stream));
  return fetch_planned_rows(device_store_->plan(nodes, network_ids_), stream);
}

Tensor DistributedSampler::fetch_features_device(const Tensor& nodes, PhaseTimes& phases,
                                                 DeviceStream stream) {
  ScopedPhase t(phases, "fetch");
  TESSEL_ASSERT(device_store_ != nullptr, "fetch_features_device before setup_device_store");
  const Device device = device_store_->device();
  const device_memory::StreamScope on_stream(device, device_memory::resolve(device, stream));
  return fetch_planned_rows(device_store_->plan(nodes, network_ids_), stream);
}

Tensor DistributedSampler::fetch_planned_rows(const sampling::PlanSummary& summary,
                                              DeviceStream stream) {
  const int num_ranks = comm_.size();
  const auto k = static_cast<std::int64_t>(network_ids_.size());
  const std::int64_t remote = summary.nodes - summary.owned;
  counters_.input_rows += summary.nodes;
  counters_.remote_input_rows += remote;
  counters_.cache_hits += remote - k;
  counters_.fetched_rows += k;
  if (num_ranks == 1) {
    // One rank owns every node: the plan lists nothing to fetch.
    TESSEL_ASSERT(k == 0, "{} network ids at one rank", k);
    network_row_of_.clear();
    return device_store_->gather(Tensor());
  }
  const Tensor received = exchange_rows(network_ids_, network_row_of_, stream);
  return device_store_->gather(received, network_row_of_);
}

Tensor DistributedSampler::exchange_rows(std::span<const NodeId> ids,
                                         std::vector<std::int64_t>& row_of,
                                         DeviceStream stream) {
  const int num_ranks = comm_.size();
  const Device device = device_store_->device();
  const auto k = static_cast<std::int64_t>(ids.size());
  // Requests grouped by owner (a stable counting sort on the host: the ids are few); the rows
  // come back in that order.
  std::vector<int> owners(static_cast<std::size_t>(k));
  for (std::int64_t i = 0; i < k; ++i)
    owners[i] = manifest_.owner_of(ids[i]);
  sampling::OwnerRouting routing;
  sampling::route_by_owner(owners, num_ranks, routing);
  std::vector<NodeId> requests(static_cast<std::size_t>(k));
  row_of.resize(static_cast<std::size_t>(k));
  for (std::int64_t j = 0; j < k; ++j) {
    requests[j] = ids[routing.order[j]];
    row_of[routing.order[j]] = j;
  }
  const std::vector<std::int64_t> incoming_counts = comm_.exchange_counts(routing.counts);
  const std::int64_t num_incoming =
      std::accumulate(incoming_counts.begin(), incoming_counts.end(), std::int64_t{0});
  Tensor incoming = Tensor::empty({num_incoming}, DType::i64, device);
  data_.alltoallv(device_store_->upload(requests), routing.counts, incoming, incoming_counts,
                  stream);
  // The owner's side: the requested rows, gathered on the device from this part's store.
  const Tensor served = device_store_->serve(incoming);
  Tensor received = Tensor::empty({k, part_.feature_dim}, DType::f32, device);
  data_.alltoallv(served, incoming_counts, received, routing.counts, stream);
  return received;
}

Tensor DistributedSampler::fetch_features(std::span<const NodeId> nodes,
                                          std::span<const float> owned_features,
                                          PhaseTimes& phases, const RowDropout& dropout) {
  const auto rows = sampling::rows_in_memory(owned_features, part_.feature_dim);
  return fetch_features(nodes, *rows, phases, dropout);
}

Tensor DistributedSampler::fetch_features(std::span<const NodeId> nodes,
                                          sampling::OwnedFeatureRows& owned_rows,
                                          PhaseTimes& phases, const RowDropout& dropout) {
  ScopedPhase t(phases, "fetch");
  const std::int64_t f = part_.feature_dim;
  const auto n = static_cast<std::int64_t>(nodes.size());
  // Where each row is read: owned rows through owned_rows, remote ones (listed in row order for
  // the cache and the owners) in the cache or where they arrive from their owners.
  std::vector<const float*> rows(static_cast<std::size_t>(n));
  std::vector<NodeId> remote_ids;
  std::vector<std::int64_t> remote_pos;
  std::vector<LocalId> owned_locals;
  std::vector<std::int64_t> owned_pos;
  const NodeId begin = part_.offset, end = part_.offset + part_.num_owned;
  for (std::int64_t i = 0; i < n; ++i) {
    if (nodes[i] >= begin && nodes[i] < end) {
      owned_locals.push_back(static_cast<LocalId>(nodes[i] - begin));
      owned_pos.push_back(i);
    } else {
      remote_ids.push_back(nodes[i]);
      remote_pos.push_back(i);
    }
  }
  counters_.input_rows += n;
  counters_.remote_input_rows += static_cast<std::int64_t>(remote_ids.size());
  // Cached rows are read where the cache holds them, the misses where they arrive from their
  // owners: a step's remote rows are not copied again before the gather into x.
  std::vector<std::int64_t> misses;
  cache_.locate(remote_ids, rows, remote_pos, misses);
  counters_.cache_hits += static_cast<std::int64_t>(remote_ids.size() - misses.size());
  std::vector<NodeId> miss_ids(misses.size());
  for (std::size_t k = 0; k < misses.size(); ++k) miss_ids[k] = remote_ids[misses[k]];
  // The owners' exchange reads owned_rows for the rows other ranks ask for, so this rank's own
  // rows are resolved after it (the pointers hold until the next read).
  std::vector<float> received;
  std::vector<std::int64_t> row_of;
  fetch_remote_rows(miss_ids, owned_rows, received, row_of);
  counters_.fetched_rows += static_cast<std::int64_t>(misses.size());
  for (std::size_t k = 0; k < misses.size(); ++k)
    rows[static_cast<std::size_t>(remote_pos[static_cast<std::size_t>(misses[k])])] =
        received.data() + row_of[k] * f;
  std::vector<const float*> owned_ptrs;
  owned_rows.resolve(owned_locals, owned_ptrs);
  for (std::size_t k = 0; k < owned_pos.size(); ++k)
    rows[static_cast<std::size_t>(owned_pos[k])] = owned_ptrs[k];
  Tensor x = Tensor::empty({n, f}, DType::f32);
  if (gather_sorted()) {
    // The rows read in ascending windows of where they lie (owned rows by local id, then the
    // remote rows): the order of the reads, never the result (x keeps the step's order).
    std::vector<std::int64_t> keys(static_cast<std::size_t>(n));
    for (std::size_t k = 0; k < owned_pos.size(); ++k)
      keys[static_cast<std::size_t>(owned_pos[k])] = owned_locals[k];
    for (std::size_t k = 0; k < remote_pos.size(); ++k)
      keys[static_cast<std::size_t>(remote_pos[k])] =
          part_.num_owned + static_cast<std::int64_t>(k);
    std::vector<std::int64_t> order;
    kernels::gather_read_order(keys, part_.num_owned + static_cast<std::int64_t>(remote_pos.size()),
                               order);
    kernels::gather_dropout_rows(rows, dropout.row_ids, dropout.key, dropout.p, x, order);
  } else {
    kernels::gather_dropout_rows(rows, dropout.row_ids, dropout.key, dropout.p, x);
  }
  return x;
}

bool DistributedSampler::gather_sorted() {
  // TESSEL_GATHER_SORT=1 reads the rows in read order. Off by default: on the machine measured
  // (docs/performance.md) the sort and the scattered writes cost more than the ordered reads
  // saved, at 200k and at 1M rows.
  static const bool sorted = [] {
    const char* env = std::getenv("TESSEL_GATHER_SORT");
    return env != nullptr && std::strcmp(env, "1") == 0;
  }();
  return sorted;
}

void DistributedSampler::fetch_remote_rows(std::span<const NodeId> ids,
                                           sampling::OwnedFeatureRows& owned_rows,
                                           std::vector<float>& received,
                                           std::vector<std::int64_t>& row_of) {
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
  {
    std::vector<LocalId> asked(incoming.size());
    for (std::size_t i = 0; i < incoming.size(); ++i) {
      const NodeId l = incoming[i] - part_.offset;
      TESSEL_ASSERT(l >= 0 && l < part_.num_owned, "feature request for node {} not owned here",
                    incoming[i]);
      asked[i] = static_cast<LocalId>(l);
    }
    std::vector<const float*> asked_rows;
    owned_rows.resolve(asked, asked_rows);
    for (std::size_t i = 0; i < incoming.size(); ++i)
      std::memcpy(&reply[i * f], asked_rows[i], row_bytes);
  }
  std::vector<std::int64_t> reply_counts(incoming_counts), back_counts(routing.counts);
  for (auto& c : reply_counts) c *= f;
  for (auto& c : back_counts) c *= f;
  received.resize(requests.size() * static_cast<std::size_t>(f));
  comm_.alltoallv(reply.data(), reply_counts, received.data(), back_counts, DType::f32);
  row_of.resize(ids.size());
  for (std::size_t k = 0; k < routing.order.size(); ++k)
    row_of[static_cast<std::size_t>(routing.order[k])] = static_cast<std::int64_t>(k);
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

void DistributedSampler::setup_cache(sampling::CachePolicy policy,
                                     const sampling::CacheBudget& budget,
                                     std::span<const float> owned_features) {
  const auto rows = sampling::rows_in_memory(owned_features, part_.feature_dim);
  setup_cache(policy, budget, *rows);
}

void DistributedSampler::setup_cache(sampling::CachePolicy policy,
                                     const sampling::CacheBudget& budget,
                                     sampling::OwnedFeatureRows& owned_rows) {
  const bool enabled =
      policy != sampling::CachePolicy::none && (budget.size_mb > 0 || budget.ratio > 0);
  if (!enabled) return;
  std::vector<NodeId> candidates;
  std::vector<std::int64_t> score;
  if (policy == sampling::CachePolicy::degree) {
    // The halo: remote in-neighbors of owned nodes, hubs first.
    for (std::int64_t h = 0; h < part_.num_halo; ++h) {
      candidates.push_back(halo_global_[static_cast<std::size_t>(h)]);
      score.push_back(part_.degree[part_.num_owned + h]);
    }
  } else {
    presampled_inputs(true, candidates, score);
  }
  cache_ = sampling::FeatureCache::build(candidates, score, budget, part_.feature_dim);
  std::vector<float> received;
  std::vector<std::int64_t> row_of;
  fetch_remote_rows(cache_.ids(), owned_rows, received, row_of);
  const auto f = static_cast<std::size_t>(part_.feature_dim);
  for (std::int64_t s = 0; s < cache_.size(); ++s)
    cache_.set_row(static_cast<std::int32_t>(s),
                   {received.data() + static_cast<std::size_t>(row_of[s]) * f, f});
  cache_.reset_stats();
  const auto total_rows = comm_.allreduce_value<std::int64_t>(cache_.size());
  log::info("feature cache ({}): {} remote rows on all ranks, {:.1f} MiB on rank 0", policy,
            total_rows, static_cast<double>(cache_.bytes()) / (1 << 20));
}

}  // namespace tessel::dist
