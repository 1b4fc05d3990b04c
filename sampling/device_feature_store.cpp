// The host side of the tiered feature store: sorting a step's input nodes into tiers, counting,
// and the store of builds without CUDA.
#include "tessel/sampling/device_feature_store.hpp"

#include "tessel/core/error.hpp"

namespace tessel::sampling {

void DeviceFeatureStore::plan(std::span<const NodeId> nodes, std::vector<NodeId>& network_ids) {
  network_ids.clear();
  codes_.resize(nodes.size());
  std::int64_t cached = 0, owned = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const NodeId id = nodes[i];
    const std::int32_t slot = index_.find(id);
    if (slot != IdHashMap::kAbsent) {
      codes_[i] = static_cast<std::int64_t>(slot) << 2;
      ++cached;
    } else if (is_owned(id)) {
      codes_[i] = ((id - owned_begin_) << 2) | 1;
      ++owned;
    } else {
      codes_[i] = (static_cast<std::int64_t>(network_ids.size()) << 2) | 2;
      network_ids.push_back(id);
    }
  }
  const auto n = static_cast<std::int64_t>(nodes.size());
  const auto remote = static_cast<std::int64_t>(network_ids.size());
  const std::int64_t row_bytes = feature_dim_ * static_cast<std::int64_t>(sizeof(float));
  planned_network_ = remote;
  auto& c = counters_;
  c.device.requests += n;
  c.device.hits += cached;
  c.device.misses += n - cached;
  c.device.bytes += cached * row_bytes;
  c.host.requests += n - cached;
  c.host.hits += owned;
  c.host.misses += remote;
  c.host.bytes += owned * row_bytes;
  // The owners always have their rows: every network request is served.
  c.network.requests += remote;
  c.network.hits += remote;
  c.network.bytes += remote * row_bytes;
}

#if !defined(TESSEL_WITH_CUDA)
struct DeviceFeatureStore::Impl {};

DeviceFeatureStore::DeviceFeatureStore(std::span<const float>, std::int64_t, std::int64_t, NodeId,
                                       std::span<const NodeId>, std::span<const float>,
                                       Device device) {
  TESSEL_FAIL("GPU feature store on {}: Tessel was built without CUDA", device.str());
}
DeviceFeatureStore::~DeviceFeatureStore() = default;
Tensor DeviceFeatureStore::gather(std::span<const float>) {
  TESSEL_FAIL("GPU feature store: Tessel was built without CUDA");
}
#endif

} // namespace tessel::sampling
