// The distributed sampler's hop interface: one step's hops, from the seeds to the input block,
// through a route that keeps the frontier, the draws and the blocks either in host memory
// (HostRoute: sample()) or on the device (DeviceRoute: sample_device() at more than one rank).
#pragma once

#include "tessel/dist/distributed_sampler.hpp"

namespace tessel::dist {

// What DistributedSampler::run_hops asks of a route, in this order: start with the seeds, then
// per layer from the output layer back to the input one hop with draws (the frontier's
// neighbours drawn at their owners, which also bring the frontier's original ids and degrees:
// the sources of the block after it) and its block, then one hop without draws for the input
// block's sources. Every call is collective.
class DistributedSampler::HopRoute {
 public:
  virtual ~HopRoute() = default;
  // The frontier becomes the seeds (global ids); `layers` blocks to fill.
  virtual void start(std::span<const NodeId> seed_ids, int layers) = 0;
  // Layer l's hop with draws (`fanout`, `key`), then block l; its sources are the next frontier.
  virtual void draw(int l, int layers, int fanout, const rng::Key& key, PhaseTimes& phases) = 0;
  // The input block's sources' original ids and degrees (a hop without draws).
  virtual void finish(PhaseTimes& phases) = 0;
};

// The host route: hop() on spans and vectors, blocks into blocks_.
class DistributedSampler::HostRoute final : public DistributedSampler::HopRoute {
 public:
  explicit HostRoute(DistributedSampler& s) : s_(s) {}
  void start(std::span<const NodeId> seed_ids, int layers) override;
  void draw(int l, int layers, int fanout, const rng::Key& key, PhaseTimes& phases) override;
  void finish(PhaseTimes& phases) override;

 private:
  DistributedSampler& s_;
  std::span<const NodeId> frontier_;
};

// The device route: hop_device() on tensors, blocks into device_blocks_; its exchanges over the
// data plane run on `stream` (set per step).
class DistributedSampler::DeviceRoute final : public DistributedSampler::HopRoute {
 public:
  explicit DeviceRoute(DistributedSampler& s) : s_(s) {}
  void set_stream(DeviceStream stream) { stream_ = stream; }
  void start(std::span<const NodeId> seed_ids, int layers) override;
  void draw(int l, int layers, int fanout, const rng::Key& key, PhaseTimes& phases) override;
  void finish(PhaseTimes& phases) override;

 private:
  DistributedSampler& s_;
  DeviceStream stream_;
  Tensor frontier_;
};

}  // namespace tessel::dist
