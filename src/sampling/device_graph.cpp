// Graph placement choice for GPU sampling, and the DeviceGraph of builds without CUDA (its CPU
// twin only).
#include "tessel/sampling/device_graph.hpp"

#include "cpu/device_graph_host.hpp"
#include "cuda/device_graph_cuda.hpp"

#include "tessel/core/error.hpp"

#include <fmt/format.h>

namespace tessel::sampling {

GraphPlacement choose_graph_placement(GraphPlacement requested, std::int64_t bytes, Device device,
                                      std::string& reason) {
  const double mib = static_cast<double>(bytes) / (1 << 20);
  if (requested == GraphPlacement::device) {
    reason = fmt::format("graph in device memory ({:.1f} MiB, --graph-placement device)", mib);
    return GraphPlacement::device;
  }
  if (requested == GraphPlacement::pinned) {
    reason = fmt::format("graph in pinned host memory read over UVA ({:.1f} MiB, "
                         "--graph-placement pinned)",
                         mib);
    return GraphPlacement::pinned;
  }
  const std::int64_t free_bytes = cuda::free_device_bytes(device);
  const bool fits = bytes <= free_bytes / 4;
  reason = fmt::format("graph in {} ({:.1f} MiB; {:.1f} MiB free on {}; auto takes device memory "
                       "up to a quarter of it)",
                       fits ? "device memory" : "pinned host memory read over UVA", mib,
                       static_cast<double>(free_bytes) / (1 << 20), device.str());
  return fits ? GraphPlacement::device : GraphPlacement::pinned;
}

#if !defined(TESSEL_WITH_CUDA)
// Without CUDA only the CPU twin exists.
struct DeviceGraph::Impl {};

DeviceGraph::DeviceGraph(const LocalCsr& graph, std::span<const NodeId> row_keys,
                         std::span<const std::int64_t> row_degrees, std::span<const NodeId> answers,
                         Device device, GraphPlacement) {
  TESSEL_EXPECTS(device.is_cpu(), "GPU sampling on {}: Tessel was built without CUDA",
                 device.str());
  host_ = std::make_unique<HostTwin>(graph, row_keys, row_degrees, answers);
}
DeviceGraph::~DeviceGraph() = default;
GraphPlacement DeviceGraph::placement() const {
  return GraphPlacement::device;
}
std::int64_t DeviceGraph::bytes() const {
  return host_->bytes();
}
void DeviceGraph::sample(std::span<const LocalId> rows, int fanout, const rng::Key& key,
                         std::vector<EdgeId>& offsets, std::vector<NodeId>& answers) {
  host_->sample(rows, fanout, key, offsets, answers);
}
std::int64_t DeviceGraph::sample(const Tensor& frontier, NodeId first_row, int fanout,
                                 const rng::Key& key, Tensor& offsets, Tensor& draws) {
  return host_->sample(frontier, first_row, fanout, key, offsets, draws);
}
void DeviceGraph::row_info(const Tensor& ids, NodeId first_row, Tensor& orig, Tensor& degree) {
  host_->row_info(ids, first_row, orig, degree);
}
Tensor DeviceGraph::upload(std::span<const NodeId> ids) {
  return host_->upload(ids);
}

namespace cuda {
std::int64_t free_device_bytes(Device) {
  return 0;
}
} // namespace cuda
#endif

} // namespace tessel::sampling
