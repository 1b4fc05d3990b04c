// Input feature rows for GPU training in three tiers: hot rows in device memory, the rest of the
// part's own rows in pinned host memory gathered over UVA, remote rows fetched from their owners
// (and, with admission slots, kept in device memory for later steps).
#pragma once

#include "tessel/core/tensor.hpp"
#include "tessel/core/types.hpp"
#include "tessel/sampling/id_map.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
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
  TierCounters device;  // the device cache (hot and admitted rows): bytes read in device memory
  TierCounters host;    // owned rows in pinned host memory: bytes read over PCIe (UVA)
  TierCounters network; // remote rows from their owners: bytes received, then uploaded
  std::int64_t admitted = 0; // network rows written into admission slots
  std::int64_t evicted = 0;  // admitted rows those writes replaced
};

// Second-chance (CLOCK) replacement over a fixed number of slots, for remote rows admitted into
// the device cache once fetched. A hit sets the slot's reference bit; a new row takes an empty
// slot, else the first slot without the bit that the hand reaches (clearing the bits it passes),
// and starts without the bit, so a row that is never hit again is the next to go. Deterministic:
// the state depends only on the sequence of touch() and admit() calls. Within one round
// (begin_round) a slot is filled at most once, so one step's copies never write a slot twice.
class ClockSlots {
public:
  explicit ClockSlots(std::int64_t slots = 0);
  std::int64_t slots() const { return static_cast<std::int64_t>(id_.size()); }
  std::int64_t size() const { return static_cast<std::int64_t>(index_.size()); }
  // The slot holding id, or -1; touch() also sets its reference bit.
  std::int32_t find(NodeId id) const;
  std::int32_t touch(NodeId id);
  void begin_round() { ++round_; }
  // Places id (not held) and returns its slot, with evicted = the id it replaced or -1; returns
  // -1 (nothing placed) when there are no slots or every slot was filled in this round.
  std::int32_t admit(NodeId id, NodeId& evicted);

private:
  std::vector<NodeId> id_;                  // slot -> id, -1 = empty
  std::vector<std::uint8_t> referenced_;    // slot -> reference bit
  std::vector<std::int64_t> filled_round_;  // slot -> round of its last fill
  std::int64_t round_ = 1;
  std::int64_t hand_ = 0;
  std::unordered_map<NodeId, std::int32_t> index_;
};

// What one plan() sorted: its nodes, how many of them the part owns (cached or not), and the
// remote rows it lists for the owners (its network ids).
struct PlanSummary {
  std::int64_t nodes = 0;
  std::int64_t owned = 0;
  std::int64_t network = 0;
};

// A rank's feature store on one device. Owned rows (global ids [owned_begin, owned_begin +
// num_owned)) live in mapped pinned host memory; a set of hot rows (owned or remote) is copied
// to device memory once, and `admit_slots` more device rows hold remote rows admitted after
// they were fetched (ClockSlots decides which). For a step's input nodes, plan() sorts each node
// into its tier, lists the remote ones the cache lacks and picks the admission slots of those;
// the caller fetches them from their owners (whose serve() gathers them on their device) and
// gather() writes every row into one device tensor with a single kernel, then copies the
// admitted rows into their slots. The rows are the values given, copied bit for bit, whatever
// their tier. On Device::cpu() the same store runs on the host (the CPU twin: host memory for
// every tier, loops for the kernels); a CUDA device needs a build with TESSEL_WITH_CUDA (the
// constructor throws otherwise).
class DeviceFeatureStore {
public:
  // owned: f32 [num_owned, feature_dim] row-major (host); cached_ids: distinct global ids kept
  // on the device, cached_rows: their rows [cached_ids.size(), feature_dim] (host).
  DeviceFeatureStore(std::span<const float> owned, std::int64_t num_owned, std::int64_t feature_dim,
                     NodeId owned_begin, std::span<const NodeId> cached_ids,
                     std::span<const float> cached_rows, Device device,
                     std::int64_t admit_slots = 0);
  ~DeviceFeatureStore();
  DeviceFeatureStore(const DeviceFeatureStore&) = delete;
  DeviceFeatureStore& operator=(const DeviceFeatureStore&) = delete;

  std::int64_t feature_dim() const { return feature_dim_; }
  Device device() const { return device_; }
  // Hot rows (chosen up front) and admission slots; cache_bytes counts both (device memory).
  std::int64_t cache_rows() const { return static_cast<std::int64_t>(cached_.size()); }
  std::int64_t admit_slots() const { return admitted_.slots(); }
  std::int64_t cache_bytes() const { return (cache_rows() + admit_slots()) * feature_dim_ * 4; }
  bool is_owned(NodeId id) const { return id >= owned_begin_ && id < owned_begin_ + num_owned_; }
  // Whether a step planned now would read id from device memory (hot or admitted).
  bool is_cached(NodeId id) const {
    return index_.find(id) != IdHashMap::kAbsent || admitted_.find(id) >= 0;
  }

  // Sorts `nodes` (global ids) into tiers and counts them; network_ids receives the remote ids
  // that are not cached, in node order: the rows gather() expects from the owners. With
  // admission slots it also decides which of those rows the next gather() keeps (so they are
  // cached for the plans after it). Each plan must be followed by its gather().
  PlanSummary plan(std::span<const NodeId> nodes, std::vector<NodeId>& network_ids);
  // The same plan from ids on the store's device (i64 [n]): the hot and owned tiers are found
  // there (a binary search of the sorted hot ids, a range test), and only the remote ids the hot
  // rows lack come to the host, where the admission slots (CLOCK, sequential) sort them into
  // admitted hits and network ids. Waits for the device (a count, then those ids).
  PlanSummary plan(const Tensor& nodes, std::vector<NodeId>& network_ids);
  // The rows of the last plan's nodes, f32 [nodes, feature_dim] on the store's device, read
  // from the cache, the owned rows and network_rows: f32 [rows, feature_dim] on the store's
  // device, where row network_row_of[k] holds the row of the plan's network_ids[k] (row k when
  // network_row_of is empty); it may be undefined when the plan listed no network ids. Admitted
  // rows are copied from network_rows into their cache rows after the gather. On a GPU enqueued
  // on the device's stream.
  Tensor gather(const Tensor& network_rows, std::span<const std::int64_t> network_row_of = {});
  // gather() with the network rows given in host memory ([network_ids.size(), feature_dim], in
  // network_ids order), uploaded first.
  Tensor gather(std::span<const float> network_rows);
  // The owner's side of the network tier: rows f32 [n, feature_dim] on the store's device of
  // `ids` (i64 [n] on the store's device, global ids this part owns), from the device cache where
  // it holds them, else from the owned rows (over UVA on a GPU), with gather()'s kernel. Counts
  // nothing and admits nothing. The CPU twin throws InputError if an id is not owned here; on a
  // GPU it is enqueued without waiting (the requesters route by owner), and an id neither owned
  // nor hot gets a row of zeros.
  Tensor serve(const Tensor& ids);
  // values as i64 [n] on the store's device (through pinned staging on a GPU, asynchronous).
  Tensor upload(std::span<const std::int64_t> values);
  // Writes hot rows that the constructor was given as placeholders (remote rows fetched once
  // every store exists): row row_of[k] of rows (f32 [rows, feature_dim] on the store's device)
  // into hot row hot_rows[k] (a position in cached_ids). With the admission kernel; no counters.
  void fill_hot_rows(const Tensor& rows, std::span<const std::int64_t> row_of,
                     std::span<const std::int64_t> hot_rows);

  const FeatureStoreCounters& counters() const { return counters_; }
  void reset_counters() { counters_ = {}; }

  struct Impl;

private:
  // Tier codes of ids (i64 [n] on the store's device): (slot << 2) for a hot row, ((id -
  // owned_begin) << 2) | 1 for another owned row, -1 for the rest (remote and not hot). pending:
  // the positions of the -1 codes, ascending; owned_uncached / owned_cached: the owned ids
  // outside and inside the hot rows. One twin per device: classify_host (loops) and
  // classify_device (kernels, a scan for the positions, one wait for the three counts; with
  // codes_only, the codes alone, enqueued without waiting: pending undefined, counts 0).
  struct Classified {
    Tensor codes, pending;
    std::int64_t owned_uncached = 0, owned_cached = 0;
  };
  Classified classify(const Tensor& ids) const;
  Classified classify_host(const Tensor& ids) const;
  Classified classify_device(const Tensor& ids, bool codes_only = false) const;
  // Admission decisions for the plan's network ids and every counter; returns the summary.
  PlanSummary finish_plan(std::int64_t nodes, std::int64_t cached, std::int64_t owned_uncached,
                          std::int64_t owned_all, std::span<const NodeId> network_ids);
  // The gather kernel and the admission copies: out[i] = the row codes[i] names (tier 2: row
  // of network_rows), then cache row pairs[2 j + 1] = network row pairs[2 j]. codes and pairs
  // i64 on the store's device.
  Tensor gather_rows(const Tensor& codes, const Tensor& network_rows, const Tensor& pairs);
  // The CUDA side (device_feature_store.cu): the device cache, the mapped owned rows and the
  // gather and admission kernels.
  void init_device(std::span<const float> owned, std::span<const float> cached_rows);
  Tensor gather_rows_device(const Tensor& codes, const Tensor& network_rows, const Tensor& pairs);
  Tensor upload_device(std::span<const std::int64_t> values);
  // The CPU twin of gather_rows_device.
  Tensor gather_rows_host(const Tensor& codes, const Tensor& network_rows, const Tensor& pairs);

  Device device_;
  std::int64_t num_owned_ = 0;
  std::int64_t feature_dim_ = 0;
  NodeId owned_begin_ = 0;
  std::vector<NodeId> cached_;      // slot -> global id
  IdHashMap index_;                 // global id -> slot
  // On the store's device: the hot ids ascending, and the slot of each (classify's lookup).
  Tensor hot_sorted_ids_, hot_sorted_slots_;
  ClockSlots admitted_;             // admission slots: cache rows cache_rows() + slot
  // The last plan's tier codes, (index << 2) | tier, with index k for network_ids[k] (gather()
  // maps it to its network row). A host plan keeps every node's code in codes_; a device plan
  // keeps them on the device (device_codes_, -1 at pending_) and in codes_ only those of the
  // pending positions, in their order.
  std::vector<std::int64_t> codes_;
  Tensor device_codes_, pending_;
  bool device_plan_ = false;
  std::int64_t planned_network_ = 0;
  // The last plan's admissions: (index in its network ids, cache row), applied by gather().
  std::vector<std::int64_t> admit_pairs_;
  bool gather_pending_ = false;
  FeatureStoreCounters counters_;
  // CPU twin: the owned rows and the cache rows (hot, then admission slots) in host memory.
  std::vector<float> host_owned_, host_cache_;
  // Defined beside Impl (in the .cu for CUDA builds), so this header needs no complete Impl.
  struct ImplDeleter {
    void operator()(Impl* impl) const noexcept;
  };
  std::unique_ptr<Impl, ImplDeleter> impl_;
};

} // namespace tessel::sampling
