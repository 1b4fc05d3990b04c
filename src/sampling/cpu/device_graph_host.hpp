// The CPU twin of DeviceGraph (Device::cpu()): the same arrays in host memory, drawn by the CPU
// sampler, so the device-resident sampling path has a twin that runs without a GPU.
#pragma once

#include "tessel/sampling/device_graph.hpp"
#include "tessel/sampling/neighbor_sampler.hpp"

#include <vector>

namespace tessel::sampling {

struct DeviceGraph::HostTwin {
  HostTwin(const LocalCsr& graph, std::span<const NodeId> row_keys,
           std::span<const std::int64_t> row_degrees, std::span<const NodeId> answers);

  std::int64_t bytes() const;
  // DeviceGraph's methods of the same names, on CPU tensors and host vectors.
  void sample(std::span<const LocalId> rows, int fanout, const rng::Key& key,
              std::vector<EdgeId>& offsets, std::vector<NodeId>& answers);
  std::int64_t sample(const Tensor& frontier, NodeId first_row, int fanout, const rng::Key& key,
                      Tensor& offsets, Tensor& draws);
  void row_info(const Tensor& ids, NodeId first_row, Tensor& orig, Tensor& degree) const;
  Tensor upload(std::span<const NodeId> ids) const;

  LocalCsr graph;
  std::vector<NodeId> row_keys;
  std::vector<std::int64_t> row_degrees;
  std::vector<NodeId> answers;

private:
  // Draws rows_ (keys keys_) into sampled_; the scratch is reused by every call.
  void draw(int fanout, const rng::Key& key);
  std::vector<LocalId> rows_;
  std::vector<NodeId> keys_;
  SampledNeighbors sampled_;
};

} // namespace tessel::sampling
