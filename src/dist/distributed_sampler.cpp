// Data-centric distributed sampling: routing frontier nodes to owners, answering with local
// draws, building blocks, and fetching remote feature rows through the cache.
#include "tessel/dist/distributed_sampler.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/kernels/context.hpp"
#include "tessel/kernels/dense.hpp"
#include "tessel/sampling/frontier_ops.hpp"
#include "tessel/sampling/neighbor_sampler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <numeric>
#include <unordered_map>

namespace tessel::dist {
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

// Above this many draws a hop packs and merges them on every thread.
constexpr std::int64_t kParallelDraws = std::int64_t{1} << 17;

}  // namespace

DistributedSampler::DistributedSampler(partition::Part& part, const partition::Manifest& manifest,
                                       comm::Communicator& comm, std::uint64_t seed,
                                       std::vector<int> fanouts, std::int64_t batch_size,
                                       comm::Communicator* data)
    : part_(part), manifest_(manifest), comm_(comm), data_(data ? *data : comm), seed_(seed),
      fanouts_(std::move(fanouts)), batch_size_(batch_size), builder_(manifest.num_nodes) {
  TESSEL_EXPECTS(data_.size() == comm_.size() && data_.rank() == comm_.rank(),
                 "DistributedSampler: the data plane has rank {} of {}, the control plane {} of {}",
                 data_.rank(), data_.size(), comm_.rank(), comm_.size());
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
  // Halo nodes' original ids and degrees are in the part: requests for them carry no flag.
  halo_local_.reset(part_.num_halo);
  bool inserted = false;
  for (std::int64_t h = part_.num_owned; h < part_.num_local(); ++h)
    halo_local_.insert(local_global_[h], static_cast<std::int32_t>(h), inserted);
  cache_ = sampling::FeatureCache({}, part_.feature_dim);
  cache_.reset_stats();
}

void DistributedSampler::sample_on_device(Device device, sampling::GraphPlacement placement) {
  std::vector<NodeId> owned_keys(part_.orig_id.begin(), part_.orig_id.begin() + part_.num_owned);
  std::vector<std::int64_t> owned_degrees(part_.degree.begin(),
                                          part_.degree.begin() + part_.num_owned);
  const LocalCsr& owned = part_.graph;  // rows: the owned nodes, in canonical order
  const std::int64_t bytes = static_cast<std::int64_t>(
      owned.indptr.size() * sizeof(EdgeId) + owned.indices.size() * sizeof(LocalId) +
      (owned_keys.size() + owned_degrees.size() + local_global_.size()) * sizeof(NodeId));
  std::string reason;
  sampling::GraphPlacement where = sampling::GraphPlacement::device;
  if (device.is_cpu()) {
    // The device graph's CPU twin: there is no other memory to choose.
    reason = fmt::format("graph in host memory ({:.1f} MiB, the device graph's CPU twin)",
                         static_cast<double>(bytes) / (1 << 20));
  } else {
    where = sampling::choose_graph_placement(placement, bytes, device, reason);
  }
  device_graph_ = std::make_unique<sampling::DeviceGraph>(owned, owned_keys, owned_degrees,
                                                          local_global_, device, where);
  // What sample_device's routing reads on the device: the parts' id ranges, and the nodes this
  // part knows (owned and halo) sorted by global id with their original ids and degrees.
  owner_offsets_ = device_graph_->upload(manifest_.offsets);
  std::vector<std::int64_t> by_id(local_global_.size());
  std::iota(by_id.begin(), by_id.end(), std::int64_t{0});
  std::sort(by_id.begin(), by_id.end(),
            [&](std::int64_t a, std::int64_t b) { return local_global_[a] < local_global_[b]; });
  std::vector<NodeId> known_ids(by_id.size()), known_orig(by_id.size()),
      known_degree(by_id.size());
  for (std::size_t k = 0; k < by_id.size(); ++k) {
    known_ids[k] = local_global_[by_id[k]];
    known_orig[k] = part_.orig_id[by_id[k]];
    known_degree[k] = part_.degree[by_id[k]];
  }
  known_ids_ = device_graph_->upload(known_ids);
  known_orig_ = device_graph_->upload(known_orig);
  known_degree_ = device_graph_->upload(known_degree);
  // The uploads above are asynchronous on the device's stream; a step sampled on another stream
  // (a prefetching trainer's side stream) reads these tables without waiting for this one.
  kernels::default_context(device).synchronize();
  log::info("{} sampling on {}: {}", device.is_cpu() ? "Device-graph" : "GPU", device.str(),
            reason);
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
      candidates = local_global_;
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
    const Tensor remote_rows = exchange_rows(remote, row_of);
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
                                                 PhaseTimes& phases) {
  ScopedPhase t(phases, "fetch");
  TESSEL_ASSERT(device_store_ != nullptr, "fetch_features_device before setup_device_store");
  return fetch_planned_rows(device_store_->plan(nodes, network_ids_));
}

Tensor DistributedSampler::fetch_features_device(const Tensor& nodes, PhaseTimes& phases) {
  ScopedPhase t(phases, "fetch");
  TESSEL_ASSERT(device_store_ != nullptr, "fetch_features_device before setup_device_store");
  return fetch_planned_rows(device_store_->plan(nodes, network_ids_));
}

Tensor DistributedSampler::fetch_planned_rows(const sampling::PlanSummary& summary) {
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
  const Tensor received = exchange_rows(network_ids_, network_row_of_);
  return device_store_->gather(received, network_row_of_);
}

Tensor DistributedSampler::exchange_rows(std::span<const NodeId> ids,
                                         std::vector<std::int64_t>& row_of) {
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
  data_.alltoallv(device_store_->upload(requests), routing.counts, incoming, incoming_counts);
  // The owner's side: the requested rows, gathered on the device from this part's store.
  const Tensor served = device_store_->serve(incoming);
  Tensor received = Tensor::empty({k, part_.feature_dim}, DType::f32, device);
  data_.alltoallv(served, incoming_counts, received, routing.counts);
  return received;
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

std::vector<NodeId> DistributedSampler::seed_global_ids(std::span<const LocalId> seeds) const {
  std::vector<NodeId> seed_ids(seeds.size());
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    TESSEL_ASSERT(seeds[i] >= 0 && seeds[i] < part_.num_owned, "seed {} is not owned", seeds[i]);
    seed_ids[i] = part_.offset + seeds[i];
  }
  return seed_ids;
}

void DistributedSampler::sample(int epoch, std::uint32_t step, std::span<const LocalId> seeds,
                                PhaseTimes& phases) {
  const int layers = static_cast<int>(fanouts_.size());
  blocks_.resize(static_cast<std::size_t>(layers));
  draws_.resize(static_cast<std::size_t>(layers));
  src_orig_.resize(static_cast<std::size_t>(layers));
  src_degree_.resize(static_cast<std::size_t>(layers));
  const std::vector<NodeId> seed_ids = seed_global_ids(seeds);
  // From the output layer back to the input: blocks_[l] feeds layer l, and its destinations are
  // the sources of block l + 1 (the seeds for the last block). The hop that samples block l's
  // sources (as hop l - 1's frontier) also brings their original ids and degrees from their
  // owners; the input block's come from one more exchange without draws.
  std::span<const NodeId> frontier = seed_ids;
  for (int l = layers - 1; l >= 0; --l) {
    const rng::Key key{seed_, rng::Stream::sampling, static_cast<std::uint32_t>(epoch), step,
                       static_cast<std::uint32_t>(l)};
    HopDraws& draws = draws_[l];
    const bool sources_of_next = l + 1 < layers;
    hop(frontier, fanouts_[l], key, phases, &draws,
        sources_of_next ? src_orig_[l + 1] : seed_orig_,
        sources_of_next ? src_degree_[l + 1] : seed_degree_);
    SamplePhase t(phases, sample_cpu_seconds_);
    sampling::Block& block = blocks_[l];
    const std::span<const NodeId> ids(draws.ids.data(),
                                      static_cast<std::size_t>(draws.offsets.back()));
    builder_.build(frontier, draws.offsets, ids, block);
    frontier = block.src;
  }
  hop(frontier, 0, rng::Key{}, phases, nullptr, src_orig_[0], src_degree_[0]);
}

bool DistributedSampler::device_resident() const {
  return device_graph_ != nullptr && !route_on_host_;
}

void DistributedSampler::sample_device(int epoch, std::uint32_t step,
                                       std::span<const LocalId> seeds, PhaseTimes& phases) {
  TESSEL_EXPECTS(device_resident(),
                 "sample_device: blocks stay on the device only where owners draw on the device "
                 "graph (sample_on_device) and routing is not on the host (route_on_host)");
  if (comm_.size() > 1) {
    sample_device_routed(epoch, step, seeds, phases);
    return;
  }
  SamplePhase t(phases, sample_cpu_seconds_);
  const int layers = static_cast<int>(fanouts_.size());
  device_blocks_.resize(static_cast<std::size_t>(layers));
  const std::vector<NodeId> seed_ids = seed_global_ids(seeds);
  // The same layer order and keys as sample(); every frontier node is one of the graph's rows
  // (one rank owns them all), so nothing is routed and nothing comes back to the host but the
  // two counts each hop waits for (draws, sources).
  Tensor frontier = device_graph_->upload(seed_ids);
  for (int l = layers - 1; l >= 0; --l) {
    const rng::Key key{seed_, rng::Stream::sampling, static_cast<std::uint32_t>(epoch), step,
                       static_cast<std::uint32_t>(l)};
    Tensor offsets, draws;
    counters_.sampled_edges +=
        device_graph_->sample(frontier, part_.offset, fanouts_[l], key, offsets, draws);
    sampling::BlockTensors& block = device_blocks_[l];
    builder_.build(frontier, offsets, draws, block);
    device_graph_->row_info(block.src, part_.offset, block.src_orig, block.src_degree);
    frontier = block.src;
  }
}

void DistributedSampler::sample_device_routed(int epoch, std::uint32_t step,
                                               std::span<const LocalId> seeds,
                                               PhaseTimes& phases) {
  const int layers = static_cast<int>(fanouts_.size());
  device_blocks_.resize(static_cast<std::size_t>(layers));
  const std::vector<NodeId> seed_ids = seed_global_ids(seeds);
  // sample()'s order, keys and exchanges: the hop that draws from block l + 1's sources also
  // brings their original ids and degrees, and one more hop without draws those of the input
  // block's sources.
  Tensor frontier = device_graph_->upload(seed_ids);
  for (int l = layers - 1; l >= 0; --l) {
    const rng::Key key{seed_, rng::Stream::sampling, static_cast<std::uint32_t>(epoch), step,
                       static_cast<std::uint32_t>(l)};
    Tensor offsets, draws, orig, degree;
    hop_device(frontier, fanouts_[l], key, phases, &offsets, &draws, orig, degree);
    SamplePhase t(phases, sample_cpu_seconds_);
    if (l + 1 < layers) {
      device_blocks_[l + 1].src_orig = orig;
      device_blocks_[l + 1].src_degree = degree;
    }
    sampling::BlockTensors& block = device_blocks_[l];
    builder_.build(frontier, offsets, draws, block);
    frontier = block.src;
  }
  Tensor orig, degree;
  hop_device(frontier, 0, rng::Key{}, phases, nullptr, nullptr, orig, degree);
  SamplePhase t(phases, sample_cpu_seconds_);
  device_blocks_[0].src_orig = orig;
  device_blocks_[0].src_degree = degree;
}

// One device hop's exchange as hop_device() goes through its steps. Per rank: requests sent and
// of them flagged; requests received and of them flagged; answer ids sent and received.
struct DistributedSampler::DeviceHopExchange {
  bool with_draws = false;
  int me = 0;
  std::size_t p = 0; // ranks
  Device device;
  sampling::FrontierRoute route;
  Tensor requests; // the frontier in routed order
  std::vector<std::int64_t> send, flagged_to, recv, flagged_from;
  // Routed positions of the flagged requests, per owner: [flag_begin[r], flag_begin[r] +
  // flagged_to[r]).
  std::vector<std::int64_t> flag_begin;
  std::int64_t remote_requests = 0;
  Tensor incoming; // the requests this rank answers
  // The owner's side: the draw count and draws of every request, the original id and degree of
  // the flagged ones.
  Tensor lengths, answers, info_orig, info_degree;
  std::vector<std::int64_t> answers_to, answers_from;
  // What came back of them.
  Tensor back_lengths, back_answers, back_orig, back_degree;
};

// hop() with the frontier, the draws and the exchanged ids on the device: the same requests
// (every frontier node owned elsewhere, flagged where the part lacks its original id and degree;
// without draws only the flagged ones), the same replies and the same counters. Routing is a
// stable bucketing on the device, by owner and then flag, so the nodes a rank sends each owner
// are its unflagged ones, then its flagged ones, in frontier order; only the per-rank counts
// come to the host (the control plane exchanges them), the ids travel over the data plane. A
// rank's own frontier nodes go through the exchange to itself (a copy; they are not counted as
// traffic), so one call draws every row this rank answers. The host reads values back from the
// device (and waits for it) once per hop without draws (the route's counts) and three times per
// hop with draws: the route's counts, the draw total (DeviceGraph::sample), and the answer counts
// together with the degree sums of the remote_adjacency statistic.
void DistributedSampler::hop_device(const Tensor& frontier, int fanout, const rng::Key& key,
                                    PhaseTimes& phases, Tensor* offsets, Tensor* draws,
                                    Tensor& frontier_orig, Tensor& frontier_degree) {
  DeviceHopExchange x;
  x.with_draws = draws != nullptr;
  x.me = comm_.rank();
  x.p = static_cast<std::size_t>(comm_.size());
  x.device = frontier.device();
  x.send.assign(x.p, 0);
  x.flagged_to.assign(x.p, 0);
  x.recv.assign(x.p, 0);
  x.flagged_from.assign(x.p, 0);
  x.flag_begin.assign(x.p, 0);
  {
    SamplePhase t(phases, sample_cpu_seconds_);
    route_device(x, frontier, frontier_orig, frontier_degree);
  }
  for (std::size_t r = 0; r < x.p; ++r)
    x.remote_requests += static_cast<int>(r) == x.me ? 0 : x.send[r];
  counters_.remote_requests += x.remote_requests;
  counters_.sample_bytes += x.remote_requests * static_cast<std::int64_t>(sizeof(NodeId));
  {
    ScopedPhase t(phases, "communicate");
    send_device_requests(x);
  }
  x.answers_to.assign(x.p, 0);
  x.answers_from.assign(x.p, 0);
  {
    SamplePhase t(phases, sample_cpu_seconds_);
    answer_device_requests(x, fanout, key);
  }
  {
    ScopedPhase t(phases, "communicate");
    return_device_replies(x, frontier.numel());
  }
  SamplePhase t(phases, sample_cpu_seconds_);
  // Flagged replies to their frontier positions; the draws back in frontier order.
  std::vector<std::int64_t> flagged_routed;
  for (std::size_t r = 0; r < x.p; ++r)
    for (std::int64_t k = x.flag_begin[r]; k < x.flag_begin[r] + x.flagged_to[r]; ++k)
      flagged_routed.push_back(k);
  const Tensor flagged_pos = sampling::take(x.route.order, device_graph_->upload(flagged_routed));
  sampling::scatter(x.back_orig, flagged_pos, frontier_orig);
  sampling::scatter(x.back_degree, flagged_pos, frontier_degree);
  if (x.with_draws)
    sampling::unroute_segments(x.route.order, x.back_lengths, x.back_answers, *offsets, *draws);
}

// The frontier's known original ids and degrees, its route (by owner, then flag) and the
// per-rank counts of what it sends.
void DistributedSampler::route_device(DeviceHopExchange& x, const Tensor& frontier,
                                      Tensor& frontier_orig, Tensor& frontier_degree) {
  const Tensor known_pos = sampling::find_sorted(known_ids_, frontier);
  frontier_orig = sampling::take(known_orig_, known_pos);
  frontier_degree = sampling::take(known_degree_, known_pos);
  x.route = sampling::route_frontier(frontier, owner_offsets_, known_pos,
                                     x.with_draws ? sampling::RouteKeys::owner_then_flag
                                                  : sampling::RouteKeys::flagged_only);
  const std::vector<std::int64_t>& counts = x.route.counts;
  std::int64_t at = 0;
  for (std::size_t r = 0; r < x.p; ++r) {
    if (x.with_draws) {
      x.send[r] = counts[2 * r] + counts[2 * r + 1];
      x.flagged_to[r] = counts[2 * r + 1];
      x.flag_begin[r] = at + counts[2 * r];
    } else {
      x.send[r] = x.flagged_to[r] = counts[r];
      x.flag_begin[r] = at;
    }
    at += x.send[r];
  }
  x.requests = sampling::take(frontier, x.route.order);
}

// The per-rank counts over the control plane, then the requests over the data plane.
// Collective.
void DistributedSampler::send_device_requests(DeviceHopExchange& x) {
  const std::size_t p = x.p;
  std::vector<std::int64_t> announce(2 * p), heard(2 * p), twos(p, 2);
  for (std::size_t r = 0; r < p; ++r) {
    announce[2 * r] = x.send[r];
    announce[2 * r + 1] = x.flagged_to[r];
  }
  comm_.alltoallv(announce.data(), twos, heard.data(), twos, DType::i64);
  for (std::size_t r = 0; r < p; ++r) {
    x.recv[r] = heard[2 * r];
    x.flagged_from[r] = heard[2 * r + 1];
  }
  x.incoming = Tensor::empty({std::accumulate(x.recv.begin(), x.recv.end(), std::int64_t{0})},
                             DType::i64, x.device);
  data_.alltoallv(x.requests, x.send, x.incoming, x.recv);
}

// The owner's side: draws for every request, the original id and degree of the flagged ones
// (the last flagged_from[r] requests from rank r).
void DistributedSampler::answer_device_requests(DeviceHopExchange& x, int fanout,
                                                const rng::Key& key) {
  Tensor in_orig, in_degree;
  device_graph_->row_info(x.incoming, part_.offset, in_orig, in_degree);
  std::vector<std::int64_t> flagged_rows;
  std::int64_t start = 0;
  for (std::size_t r = 0; r < x.p; ++r) {
    for (std::int64_t j = start + x.recv[r] - x.flagged_from[r]; j < start + x.recv[r]; ++j)
      flagged_rows.push_back(j);
    start += x.recv[r];
  }
  const Tensor flagged_index = device_graph_->upload(flagged_rows);
  x.info_orig = sampling::take(in_orig, flagged_index);
  x.info_degree = sampling::take(in_degree, flagged_index);
  if (!x.with_draws) return;
  Tensor request_offsets;
  counters_.sampled_edges +=
      device_graph_->sample(x.incoming, part_.offset, fanout, key, request_offsets, x.answers);
  x.lengths = sampling::segment_lengths(request_offsets);
  count_device_answers(x, request_offsets, in_degree);
}

// One read-back for what the host needs of the owner's side: the request offsets at the rank
// bounds (each rank's answers: the draws between its first and last request), and the sum
// of the degrees of the other ranks' requests (those before and after this rank's own) for
// the model-centric comparison (remote_adjacency: adjacency lists, degree + 1 values, of
// the rows drawn for other ranks).
void DistributedSampler::count_device_answers(DeviceHopExchange& x, const Tensor& request_offsets,
                                              const Tensor& in_degree) {
  const std::size_t p = x.p;
  // [p + 1] rank bounds, then the two ranges of the other ranks' requests.
  std::vector<std::int64_t> positions(p + 1, 0);
  for (std::size_t r = 0; r < p; ++r)
    positions[r + 1] = positions[r] + x.recv[r];
  const std::int64_t before = positions[static_cast<std::size_t>(x.me)];
  const std::int64_t after = positions[static_cast<std::size_t>(x.me) + 1];
  const std::int64_t total = positions[p];
  positions.insert(positions.end(), {0, before, after, total});
  const Tensor device_positions = device_graph_->upload(positions);
  const auto np = static_cast<std::int64_t>(p);
  const Tensor bounds = device_positions.rows_slice(0, np + 1);
  const Tensor others_ranges = device_positions.rows_slice(np + 1, np + 5).reshape({2, 2});
  Tensor readback = Tensor::empty({np + 3}, DType::i64, x.device);
  readback.rows_slice(0, np + 1).copy_from(sampling::take(request_offsets, bounds));
  readback.rows_slice(np + 1, np + 3)
      .copy_from(sampling::segment_sums({in_degree}, others_ranges).reshape({2}));
  const Tensor host = readback.to(Device::cpu());
  const std::int64_t* at_bounds = host.data<std::int64_t>();
  for (std::size_t r = 0; r < p; ++r)
    x.answers_to[r] = at_bounds[r + 1] - at_bounds[r];
  const std::int64_t other_degrees = at_bounds[p + 1] + at_bounds[p + 2];
  counters_.remote_adjacency += other_degrees + (total - (after - before));
}

// The flagged requests' original ids and degrees back to the requesters, then (with draws) the
// draw counts of the `n` frontier nodes and the answers. Collective.
void DistributedSampler::return_device_replies(DeviceHopExchange& x, std::int64_t n) {
  const std::size_t p = x.p;
  const std::int64_t num_flagged =
      std::accumulate(x.flagged_to.begin(), x.flagged_to.end(), std::int64_t{0});
  x.back_orig = Tensor::empty({num_flagged}, DType::i64, x.device);
  x.back_degree = Tensor::empty({num_flagged}, DType::i64, x.device);
  data_.alltoallv(x.info_orig, x.flagged_from, x.back_orig, x.flagged_to);
  data_.alltoallv(x.info_degree, x.flagged_from, x.back_degree, x.flagged_to);
  // Own requests carry no flag, so every flagged reply came from another rank.
  counters_.sample_bytes += 2 * num_flagged * static_cast<std::int64_t>(sizeof(std::int64_t));
  if (!x.with_draws) return;
  x.back_lengths = Tensor::empty({n}, DType::i64, x.device);
  data_.alltoallv(x.lengths, x.recv, x.back_lengths, x.send);
  std::vector<std::int64_t> ones(p, 1);
  comm_.alltoallv(x.answers_to.data(), ones, x.answers_from.data(), ones, DType::i64);
  x.back_answers = Tensor::empty(
      {std::accumulate(x.answers_from.begin(), x.answers_from.end(), std::int64_t{0})}, DType::i64,
      x.device);
  data_.alltoallv(x.answers, x.answers_to, x.back_answers, x.answers_from);
  const std::int64_t remote_answers =
      x.back_answers.numel() - x.answers_from[static_cast<std::size_t>(x.me)];
  counters_.answer_ids += remote_answers;
  counters_.sample_bytes +=
      (x.remote_requests + remote_answers) * static_cast<std::int64_t>(sizeof(std::int64_t));
}

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
      const std::int32_t halo = halo_local_.find(x.frontier[i]);
      if (halo != sampling::IdHashMap::kAbsent) {
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
  const NodeId* global_of = local_global_.data();
#pragma omp parallel for schedule(dynamic, 256) if (row_offsets[num_incoming] >= kParallelDraws)
  for (std::int64_t request = 0; request < num_incoming; ++request) {
    NodeId* out = answer_ids_.data() + row_offsets[request];
    for (const LocalId u : sampled_.of(request))
      *out++ = global_of[u];
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
  // Own draws are local ids (global ids from local_global_) on the CPU, global ids where the GPU
  // answered them; answers are copied whole.
  const NodeId* global_of = local_global_.data();
#pragma omp parallel for schedule(dynamic, 256) if (num_draws >= kParallelDraws)
  for (std::int64_t k = 0; k < n; ++k) {
    NodeId* ids = ids_out.data() + offsets[order[k]];
    if (k >= own_begin && k < own_end && !device_graph_) {
      for (const LocalId u : sampled_.of(num_incoming + k - own_begin))
        *ids++ = global_of[u];
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
  // the cache and the owners) in `staged`.
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
  // Cached rows land in `staged`; the misses are fetched from their owners.
  std::vector<float> staged(remote_ids.size() * static_cast<std::size_t>(f));
  std::vector<std::int64_t> misses;
  cache_.gather(remote_ids, staged, misses);
  counters_.cache_hits += static_cast<std::int64_t>(remote_ids.size() - misses.size());
  std::vector<NodeId> miss_ids(misses.size());
  for (std::size_t k = 0; k < misses.size(); ++k) miss_ids[k] = remote_ids[misses[k]];
  // The owners' exchange reads owned_rows for the rows other ranks ask for, so this rank's own
  // rows are resolved after it (the pointers hold until the next read).
  fetch_remote_rows(miss_ids, owned_rows, staged.data(), misses);
  counters_.fetched_rows += static_cast<std::int64_t>(misses.size());
  for (std::size_t k = 0; k < remote_ids.size(); ++k)
    rows[static_cast<std::size_t>(remote_pos[k])] = staged.data() + k * static_cast<std::size_t>(f);
  std::vector<const float*> owned_ptrs;
  owned_rows.resolve(owned_locals, owned_ptrs);
  for (std::size_t k = 0; k < owned_pos.size(); ++k)
    rows[static_cast<std::size_t>(owned_pos[k])] = owned_ptrs[k];
  Tensor x = Tensor::empty({n, f}, DType::f32);
  kernels::gather_dropout_rows(rows, dropout.row_ids, dropout.key, dropout.p, x);
  return x;
}

void DistributedSampler::fetch_remote_rows(std::span<const NodeId> ids,
                                           sampling::OwnedFeatureRows& owned_rows, float* out,
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
      candidates.push_back(local_global_[part_.num_owned + h]);
      score.push_back(part_.degree[part_.num_owned + h]);
    }
  } else {
    presampled_inputs(true, candidates, score);
  }
  cache_ = sampling::FeatureCache::build(candidates, score, budget, part_.feature_dim);
  std::vector<float> rows(static_cast<std::size_t>(cache_.size()) *
                         static_cast<std::size_t>(part_.feature_dim));
  fetch_remote_rows(cache_.ids(), owned_rows, rows.data(), {});
  cache_.fill(rows);
  cache_.reset_stats();
  const auto total_rows = comm_.allreduce_value<std::int64_t>(cache_.size());
  log::info("feature cache ({}): {} remote rows on all ranks, {:.1f} MiB on rank 0", policy,
            total_rows, static_cast<double>(cache_.bytes()) / (1 << 20));
}

}  // namespace tessel::dist
