// Input feature rows for GPU training in three tiers: hot rows in device memory, the rest of the
// part's own rows in pinned host memory gathered over UVA, remote rows fetched from their owners.
#pragma once

#include "tessel/core/tensor.hpp"
#include "tessel/core/types.hpp"
#include "tessel/sampling/id_map.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace tessel::sampling {

// One tier's counts since the last reset. Each tier serves what it holds and passes the rest on:
// requests = hits + misses, and a tier's misses are the next tier's requests.
struct TierCounters {
  std::int64_t requests = 0;
  std::int64_t hits = 0;
  std::int64_t misses = 0;
  std::int64_t bytes = 0; // bytes of the rows it served
};
struct FeatureStoreCounters {
  TierCounters device;  // the device cache: bytes read in device memory
  TierCounters host;    // owned rows in pinned host memory: bytes read over PCIe (UVA)
  TierCounters network; // remote rows from their owners: bytes received, then uploaded
};

// A rank's feature store on one CUDA device. Owned rows (global ids [owned_begin, owned_begin +
// num_owned)) live in mapped pinned host memory; a set of hot rows (owned or remote) is copied
// to device memory once. For a step's input nodes, plan() sorts each node into its tier and
// lists the remote ones the cache lacks; the caller fetches those from their owners and
// gather() writes every row into one device tensor with a single kernel. The rows are the
// values given, copied bit for bit, whatever their tier. Builds with TESSEL_WITH_CUDA only (the
// constructor throws otherwise).
class DeviceFeatureStore {
public:
  // owned: f32 [num_owned, feature_dim] row-major (host); cached_ids: distinct global ids kept
  // on the device, cached_rows: their rows [cached_ids.size(), feature_dim] (host).
  DeviceFeatureStore(std::span<const float> owned, std::int64_t num_owned, std::int64_t feature_dim,
                     NodeId owned_begin, std::span<const NodeId> cached_ids,
                     std::span<const float> cached_rows, Device device);
  ~DeviceFeatureStore();
  DeviceFeatureStore(const DeviceFeatureStore&) = delete;
  DeviceFeatureStore& operator=(const DeviceFeatureStore&) = delete;

  std::int64_t feature_dim() const { return feature_dim_; }
  std::int64_t cache_rows() const { return static_cast<std::int64_t>(cached_.size()); }
  std::int64_t cache_bytes() const { return cache_rows() * feature_dim_ * 4; }
  bool is_owned(NodeId id) const { return id >= owned_begin_ && id < owned_begin_ + num_owned_; }
  bool is_cached(NodeId id) const { return index_.find(id) != IdHashMap::kAbsent; }

  // Sorts `nodes` (global ids) into tiers and counts them; network_ids receives the remote ids
  // that are not cached, in node order: the rows gather() expects from the owners.
  void plan(std::span<const NodeId> nodes, std::vector<NodeId>& network_ids);
  // The rows of the last plan's nodes, f32 [nodes, feature_dim] on the device. network_rows:
  // [network_ids.size(), feature_dim] (host), the owners' rows in network_ids order. Enqueued
  // on the device's stream.
  Tensor gather(std::span<const float> network_rows);

  const FeatureStoreCounters& counters() const { return counters_; }
  void reset_counters() { counters_ = {}; }

  struct Impl;

private:
  std::int64_t num_owned_ = 0;
  std::int64_t feature_dim_ = 0;
  NodeId owned_begin_ = 0;
  std::vector<NodeId> cached_;      // slot -> global id
  IdHashMap index_;                 // global id -> slot
  std::vector<std::int64_t> codes_; // per planned node: (index << 2) | tier
  std::int64_t planned_network_ = 0;
  FeatureStoreCounters counters_;
  std::unique_ptr<Impl> impl_;
};

} // namespace tessel::sampling
