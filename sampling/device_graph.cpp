// Graph placement choice for GPU sampling, and the DeviceGraph of builds without CUDA.
#include "tessel/sampling/device_graph.hpp"

#include "cuda/device_graph_cuda.hpp"

#include "tessel/core/error.hpp"

#include <fmt/format.h>

namespace tessel::sampling {

const char* graph_placement_name(GraphPlacement placement) {
  return placement == GraphPlacement::device ? "device" : "pinned";
}

GraphPlacement choose_graph_placement(const std::string& requested, std::int64_t bytes,
                                      Device device, std::string& reason) {
  TESSEL_EXPECTS(requested == "auto" || requested == "device" || requested == "pinned",
                 "--graph-placement {}: expected auto, device or pinned", requested);
  const double mib = static_cast<double>(bytes) / (1 << 20);
  if (requested == "device") {
    reason = fmt::format("graph in device memory ({:.1f} MiB, --graph-placement device)", mib);
    return GraphPlacement::device;
  }
  if (requested == "pinned") {
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
struct DeviceGraph::Impl {};

DeviceGraph::DeviceGraph(const LocalCsr&, std::span<const NodeId>, std::span<const std::int64_t>,
                         std::span<const NodeId>, Device device, GraphPlacement) {
  TESSEL_FAIL("GPU sampling on {}: Tessel was built without CUDA", device.str());
}
DeviceGraph::~DeviceGraph() = default;
GraphPlacement DeviceGraph::placement() const {
  return GraphPlacement::device;
}
std::int64_t DeviceGraph::bytes() const {
  return 0;
}
void DeviceGraph::sample(std::span<const LocalId>, int, const rng::Key&, std::vector<EdgeId>&,
                         std::vector<NodeId>&) {
  TESSEL_FAIL("GPU sampling: Tessel was built without CUDA");
}

std::int64_t DeviceGraph::sample(const Tensor&, NodeId, int, const rng::Key&, Tensor&, Tensor&) {
  TESSEL_FAIL("GPU sampling: Tessel was built without CUDA");
}
void DeviceGraph::row_info(const Tensor&, NodeId, Tensor&, Tensor&) {
  TESSEL_FAIL("GPU sampling: Tessel was built without CUDA");
}
Tensor DeviceGraph::upload(std::span<const NodeId>) {
  TESSEL_FAIL("GPU sampling: Tessel was built without CUDA");
}

namespace cuda {
std::int64_t free_device_bytes(Device) {
  return 0;
}
} // namespace cuda
#endif

} // namespace tessel::sampling
