// Data-centric distributed sampling: the sampler's setup, the epoch's steps, and one step's
// blocks from its hops through a hop route (on the host, or on the device: hop_route.hpp).
#include "tessel/dist/distributed_sampler.hpp"

#include "hop_route.hpp"
#include "sample_phase.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/spill.hpp"
#include "tessel/kernels/context.hpp"
#include "tessel/sampling/neighbor_sampler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace tessel::dist {

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
  if (!sampling::rows_sorted_by_key(part_.graph, part_.orig_id)) {
    sampling::sort_rows_by_key(part_.graph, part_.orig_id);
    // Column ids in a scratch-file mapping (out of core): start writing the reordered pages
    // back, so the kernel can drop them without waiting.
    (void)spill::write_back(part_.graph.indices.data());
  }
  // Sampling reads a few rows here and there: a fault on a paged-out row reads its page alone.
  (void)spill::advise_random(part_.graph.indices.data());
  num_owned_ = part_.num_owned;
  offset_ = part_.offset;
  halo_global_.resize(static_cast<std::size_t>(part_.num_halo));
  for (std::int64_t h = 0; h < part_.num_halo; ++h)
    halo_global_[static_cast<std::size_t>(h)] =
        manifest_.offsets[part_.halo_owner[h]] + part_.halo_owner_local[h];
  // Halo nodes' original ids and degrees are in the part: requests for them carry no flag.
  halo_local_.build(halo_global_.data(), 0, part_.num_halo);
  cache_ = sampling::FeatureCache({}, part_.feature_dim);
  cache_.reset_stats();
  host_route_ = std::make_unique<HostRoute>(*this);
}

DistributedSampler::~DistributedSampler() = default;

std::vector<NodeId> DistributedSampler::local_globals() const {
  std::vector<NodeId> ids(static_cast<std::size_t>(part_.num_local()));
  for (std::int64_t l = 0; l < part_.num_owned; ++l) ids[static_cast<std::size_t>(l)] = offset_ + l;
  std::copy(halo_global_.begin(), halo_global_.end(), ids.begin() + part_.num_owned);
  return ids;
}

void DistributedSampler::sample_on_device(Device device, sampling::GraphPlacement placement) {
  std::vector<NodeId> owned_keys(part_.orig_id.begin(), part_.orig_id.begin() + part_.num_owned);
  std::vector<std::int64_t> owned_degrees(part_.degree.begin(),
                                          part_.degree.begin() + part_.num_owned);
  const LocalCsr& owned = part_.graph;  // rows: the owned nodes, in canonical order
  const std::vector<NodeId> local_global = local_globals();
  const std::int64_t bytes = static_cast<std::int64_t>(
      owned.indptr.size() * sizeof(EdgeId) + owned.indices.size() * sizeof(LocalId) +
      (owned_keys.size() + owned_degrees.size() + local_global.size()) * sizeof(NodeId));
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
                                                          local_global, device, where);
  // What sample_device's routing reads on the device: the parts' id ranges, and the nodes this
  // part knows (owned and halo) sorted by global id with their original ids and degrees.
  owner_offsets_ = device_graph_->upload(manifest_.offsets);
  std::vector<std::int64_t> by_id(local_global.size());
  std::iota(by_id.begin(), by_id.end(), std::int64_t{0});
  std::sort(by_id.begin(), by_id.end(),
            [&](std::int64_t a, std::int64_t b) { return local_global[a] < local_global[b]; });
  std::vector<NodeId> known_ids(by_id.size()), known_orig(by_id.size()),
      known_degree(by_id.size());
  for (std::size_t k = 0; k < by_id.size(); ++k) {
    known_ids[k] = local_global[by_id[k]];
    known_orig[k] = part_.orig_id[by_id[k]];
    known_degree[k] = part_.degree[by_id[k]];
  }
  known_ids_ = device_graph_->upload(known_ids);
  known_orig_ = device_graph_->upload(known_orig);
  known_degree_ = device_graph_->upload(known_degree);
  // The uploads above are asynchronous on the device's stream; a step sampled on another stream
  // (a prefetching trainer's side stream) reads these tables without waiting for this one.
  kernels::default_context(device).synchronize();
  device_route_ = std::make_unique<DeviceRoute>(*this);
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
  sample_nodes(epoch, step, seed_global_ids(seeds), phases);
}

void DistributedSampler::sample_nodes(int epoch, std::uint32_t step,
                                      std::span<const NodeId> seed_ids, PhaseTimes& phases) {
  run_hops(*host_route_, epoch, step, seed_ids, phases);
}

// From the output layer back to the input: block l feeds layer l, and its destinations are the
// sources of block l + 1 (the seeds for the last block). The hop that samples block l's sources
// (as hop l - 1's frontier) also brings their original ids and degrees from their owners; the
// input block's come from one more exchange without draws. The route (host or device) keeps
// the frontier, the draws and the blocks.
void DistributedSampler::run_hops(HopRoute& route, int epoch, std::uint32_t step,
                                  std::span<const NodeId> seed_ids, PhaseTimes& phases) {
  const int layers = static_cast<int>(fanouts_.size());
  route.start(seed_ids, layers);
  for (int l = layers - 1; l >= 0; --l) {
    const rng::Key key{seed_, rng::Stream::sampling, static_cast<std::uint32_t>(epoch), step,
                       static_cast<std::uint32_t>(l)};
    route.draw(l, layers, fanouts_[l], key, phases);
  }
  route.finish(phases);
}

bool DistributedSampler::device_resident() const {
  return device_graph_ != nullptr && !route_on_host_;
}

void DistributedSampler::sample_device(int epoch, std::uint32_t step,
                                       std::span<const LocalId> seeds, PhaseTimes& phases,
                                       DeviceStream stream) {
  TESSEL_EXPECTS(device_resident(),
                 "sample_device: blocks stay on the device only where owners draw on the device "
                 "graph (sample_on_device) and routing is not on the host (route_on_host)");
  // The sampler's kernels, copies and buffers on `stream`, as its exchanges.
  const Device device = owner_offsets_.device();
  const device_memory::StreamScope on_stream(device, device_memory::resolve(device, stream));
  if (comm_.size() > 1) {
    sample_device_routed(epoch, step, seeds, phases, stream);
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
                                               PhaseTimes& phases, DeviceStream stream) {
  // sample()'s order, keys and exchanges, through the device route.
  const std::vector<NodeId> seed_ids = seed_global_ids(seeds);
  device_route_->set_stream(stream);
  run_hops(*device_route_, epoch, step, seed_ids, phases);
}

}  // namespace tessel::dist
