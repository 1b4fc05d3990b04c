// The host side of the tiered feature store: sorting a step's input nodes into tiers, counting,
// choosing admission slots (CLOCK), and the CPU twin of the gather.
#include "tessel/sampling/device_feature_store.hpp"

#include "tessel/core/error.hpp"

#include <algorithm>
#include <cstring>

namespace tessel::sampling {

ClockSlots::ClockSlots(std::int64_t slots)
    : id_(static_cast<std::size_t>(std::max<std::int64_t>(slots, 0)), -1),
      referenced_(id_.size(), 0), filled_round_(id_.size(), 0) {
  TESSEL_EXPECTS(slots < (std::int64_t{1} << 31), "ClockSlots: {} slots, expected fewer than 2^31",
                 slots);
  index_.reserve(id_.size());
}

std::int32_t ClockSlots::find(NodeId id) const {
  const auto it = index_.find(id);
  return it == index_.end() ? -1 : it->second;
}

std::int32_t ClockSlots::touch(NodeId id) {
  const std::int32_t slot = find(id);
  if (slot >= 0) referenced_[static_cast<std::size_t>(slot)] = 1;
  return slot;
}

std::int32_t ClockSlots::admit(NodeId id, NodeId& evicted) {
  evicted = -1;
  const auto n = static_cast<std::int64_t>(id_.size());
  if (n == 0) return -1;
  TESSEL_ASSERT(find(id) < 0, "ClockSlots::admit: node {} is already held", id);
  // Two turns at most: the first clears every reference bit it meets, so the second finds a
  // slot without one (or one filled in this round, which ends the admissions of this round).
  for (std::int64_t step = 0; step <= 2 * n; ++step) {
    const auto s = static_cast<std::size_t>(hand_);
    if (filled_round_[s] == round_) return -1;
    if (id_[s] >= 0 && referenced_[s]) {
      referenced_[s] = 0;
      hand_ = (hand_ + 1) % n;
      continue;
    }
    if (id_[s] >= 0) {
      evicted = id_[s];
      index_.erase(id_[s]);
    }
    id_[s] = id;
    referenced_[s] = 0;
    filled_round_[s] = round_;
    index_.emplace(id, static_cast<std::int32_t>(s));
    hand_ = (hand_ + 1) % n;
    return static_cast<std::int32_t>(s);
  }
  return -1;
}

DeviceFeatureStore::DeviceFeatureStore(std::span<const float> owned, std::int64_t num_owned,
                                       std::int64_t feature_dim, NodeId owned_begin,
                                       std::span<const NodeId> cached_ids,
                                       std::span<const float> cached_rows, Device device,
                                       std::int64_t admit_slots)
    : device_(device), num_owned_(num_owned), feature_dim_(feature_dim), owned_begin_(owned_begin),
      cached_(cached_ids.begin(), cached_ids.end()), admitted_(admit_slots) {
  TESSEL_EXPECTS(feature_dim > 0, "GPU feature store: feature dimension {}, expected > 0",
                 feature_dim);
  TESSEL_EXPECTS(static_cast<std::int64_t>(owned.size()) == num_owned * feature_dim,
                 "GPU feature store: {} owned values, expected {} rows x {}", owned.size(),
                 num_owned, feature_dim);
  TESSEL_EXPECTS(cached_rows.size() == cached_ids.size() * static_cast<std::size_t>(feature_dim),
                 "GPU feature store: {} cached values, expected {} rows x {}", cached_rows.size(),
                 cached_ids.size(), feature_dim);
  TESSEL_EXPECTS(admit_slots >= 0, "GPU feature store: {} admission slots, expected >= 0",
                 admit_slots);
  TESSEL_EXPECTS(cache_rows() + admit_slots < (std::int64_t{1} << 31),
                 "GPU feature store: {} hot rows and {} admission slots, expected fewer than 2^31",
                 cache_rows(), admit_slots);
  index_.reset(static_cast<std::int64_t>(cached_.size()));
  for (std::size_t s = 0; s < cached_.size(); ++s) {
    bool inserted = false;
    index_.insert(cached_[s], static_cast<std::int32_t>(s), inserted);
    TESSEL_EXPECTS(inserted, "GPU feature store: node {} is cached twice", cached_[s]);
  }
  if (device.is_cpu()) {
    host_owned_.assign(owned.begin(), owned.end());
    host_cache_.assign(static_cast<std::size_t>((cache_rows() + admit_slots) * feature_dim), 0.0f);
    std::copy(cached_rows.begin(), cached_rows.end(), host_cache_.begin());
    return;
  }
  init_device(owned, cached_rows);
}

void DeviceFeatureStore::plan(std::span<const NodeId> nodes, std::vector<NodeId>& network_ids) {
  // An admission decided here is in the bookkeeping already: its row must reach its slot.
  TESSEL_ASSERT(!gather_pending_ || admit_pairs_.empty(),
                "DeviceFeatureStore::plan: the previous plan's admissions were never gathered");
  network_ids.clear();
  admit_pairs_.clear();
  codes_.resize(nodes.size());
  const std::int64_t hot = cache_rows();
  std::int64_t cached = 0, owned = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const NodeId id = nodes[i];
    const std::int32_t slot = index_.find(id);
    std::int32_t admitted = -1;
    if (slot != IdHashMap::kAbsent) {
      codes_[i] = static_cast<std::int64_t>(slot) << 2;
      ++cached;
    } else if (admitted_.slots() > 0 && (admitted = admitted_.touch(id)) >= 0) {
      codes_[i] = (hot + admitted) << 2;
      ++cached;
    } else if (is_owned(id)) {
      codes_[i] = ((id - owned_begin_) << 2) | 1;
      ++owned;
    } else {
      codes_[i] = (static_cast<std::int64_t>(network_ids.size()) << 2) | 2;
      network_ids.push_back(id);
    }
  }
  // Admissions come after every node was sorted: a slot that one of this step's hits reads may
  // be refilled, but gather() copies this step's rows out before it writes the new ones.
  if (admitted_.slots() > 0 && !network_ids.empty()) {
    admitted_.begin_round();
    for (std::size_t k = 0; k < network_ids.size(); ++k) {
      if (admitted_.find(network_ids[k]) >= 0) continue;  // listed twice in one step
      NodeId evicted = -1;
      const std::int32_t slot = admitted_.admit(network_ids[k], evicted);
      if (slot < 0) break;  // every slot was filled in this round
      admit_pairs_.push_back(static_cast<std::int64_t>(k));
      admit_pairs_.push_back(hot + slot);
      ++counters_.admitted;
      if (evicted >= 0) ++counters_.evicted;
    }
  }
  gather_pending_ = true;
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

Tensor DeviceFeatureStore::gather(std::span<const float> network_rows) {
  TESSEL_EXPECTS(static_cast<std::int64_t>(network_rows.size()) == planned_network_ * feature_dim_,
                 "DeviceFeatureStore::gather: {} network values, expected {} rows x {}",
                 network_rows.size(), planned_network_, feature_dim_);
  Tensor out = device_.is_cpu() ? gather_host(network_rows) : gather_device(network_rows);
  admit_pairs_.clear();
  gather_pending_ = false;
  return out;
}

// The CPU twin of the gather and admission kernels: every row copied bit for bit from its tier,
// then the admitted network rows into their cache rows.
Tensor DeviceFeatureStore::gather_host(std::span<const float> network_rows) {
  const auto n = static_cast<std::int64_t>(codes_.size());
  const std::int64_t f = feature_dim_;
  Tensor out = Tensor::empty({n, f}, DType::f32);
  float* dst = out.data<float>();
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t index = codes_[static_cast<std::size_t>(i)] >> 2;
    const int tier = static_cast<int>(codes_[static_cast<std::size_t>(i)] & 3);
    const float* src = (tier == 0   ? host_cache_.data()
                        : tier == 1 ? host_owned_.data()
                                    : network_rows.data()) +
                       index * f;
    std::memcpy(dst + i * f, src, static_cast<std::size_t>(f) * sizeof(float));
  }
  for (std::size_t p = 0; p + 1 < admit_pairs_.size(); p += 2)
    std::memcpy(host_cache_.data() + admit_pairs_[p + 1] * f, network_rows.data() + admit_pairs_[p] * f,
                static_cast<std::size_t>(f) * sizeof(float));
  return out;
}

#if !defined(TESSEL_WITH_CUDA)
struct DeviceFeatureStore::Impl {};

void DeviceFeatureStore::ImplDeleter::operator()(Impl* impl) const noexcept { delete impl; }
DeviceFeatureStore::~DeviceFeatureStore() = default;
void DeviceFeatureStore::init_device(std::span<const float>, std::span<const float>) {
  TESSEL_FAIL("GPU feature store on {}: Tessel was built without CUDA", device_.str());
}
Tensor DeviceFeatureStore::gather_device(std::span<const float>) {
  TESSEL_FAIL("GPU feature store: Tessel was built without CUDA");
}
#endif

} // namespace tessel::sampling
