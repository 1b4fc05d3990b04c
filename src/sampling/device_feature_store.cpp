// The host side of the tiered feature store: sorting a step's input nodes into tiers (from host
// ids, or from device ids with the CPU twin of the classification), counting, choosing admission
// slots (CLOCK), and the CPU twin of the gather.
#include "tessel/sampling/device_feature_store.hpp"

#include "tessel/core/error.hpp"
#include "tessel/sampling/frontier_ops.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

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
  // The device plan looks hot rows up by binary search: their ids ascending, with their slots.
  std::vector<std::int64_t> by_id(cached_.size());
  std::iota(by_id.begin(), by_id.end(), std::int64_t{0});
  std::sort(by_id.begin(), by_id.end(),
            [&](std::int64_t a, std::int64_t b) { return cached_[a] < cached_[b]; });
  std::vector<std::int64_t> sorted_ids(by_id.size());
  for (std::size_t k = 0; k < by_id.size(); ++k)
    sorted_ids[k] = cached_[by_id[k]];
  if (device.is_cpu()) {
    host_owned_.assign(owned.begin(), owned.end());
    host_cache_.assign(static_cast<std::size_t>((cache_rows() + admit_slots) * feature_dim), 0.0f);
    std::copy(cached_rows.begin(), cached_rows.end(), host_cache_.begin());
  } else {
    init_device(owned, cached_rows);
  }
  hot_sorted_ids_ = upload(sorted_ids);
  hot_sorted_slots_ = upload(by_id);
}

Tensor DeviceFeatureStore::upload(std::span<const std::int64_t> values) {
  if (device_.is_cpu()) {
    Tensor t = Tensor::empty({static_cast<std::int64_t>(values.size())}, DType::i64);
    std::copy(values.begin(), values.end(), t.data<std::int64_t>());
    return t;
  }
  return upload_device(values);
}

PlanSummary DeviceFeatureStore::plan(std::span<const NodeId> nodes,
                                     std::vector<NodeId>& network_ids) {
  // An admission decided here is in the bookkeeping already: its row must reach its slot.
  TESSEL_ASSERT(!gather_pending_ || admit_pairs_.empty(),
                "DeviceFeatureStore::plan: the previous plan's admissions were never gathered");
  network_ids.clear();
  admit_pairs_.clear();
  device_plan_ = false;
  device_codes_ = pending_ = Tensor();
  codes_.resize(nodes.size());
  const std::int64_t hot = cache_rows();
  std::int64_t cached = 0, owned = 0, owned_all = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const NodeId id = nodes[i];
    const std::int32_t slot = index_.find(id);
    std::int32_t admitted = -1;
    owned_all += is_owned(id) ? 1 : 0;
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
  return finish_plan(static_cast<std::int64_t>(nodes.size()), cached, owned, owned_all,
                     network_ids);
}

PlanSummary DeviceFeatureStore::plan(const Tensor& nodes, std::vector<NodeId>& network_ids) {
  TESSEL_EXPECTS(nodes.defined() && nodes.dim() == 1 && nodes.dtype() == DType::i64 &&
                     nodes.device() == device_,
                 "DeviceFeatureStore::plan: nodes are {}, expected i64 [n] on {}", nodes.describe(),
                 device_.str());
  TESSEL_ASSERT(!gather_pending_ || admit_pairs_.empty(),
                "DeviceFeatureStore::plan: the previous plan's admissions were never gathered");
  network_ids.clear();
  admit_pairs_.clear();
  Classified c = classify(nodes);
  // Only the nodes neither hot nor owned come to the host: admitted (a hit marks its slot, in
  // node order as the host plan does) or fetched from their owners.
  const Tensor pending_ids = take(nodes, c.pending).to(Device::cpu());
  const std::int64_t m = pending_ids.numel();
  const NodeId* ids = pending_ids.data<NodeId>();
  const std::int64_t hot = cache_rows();
  std::int64_t cached = nodes.numel() - m - c.owned_uncached;
  codes_.resize(static_cast<std::size_t>(m));
  for (std::int64_t j = 0; j < m; ++j) {
    const std::int32_t admitted = admitted_.slots() > 0 ? admitted_.touch(ids[j]) : -1;
    if (admitted >= 0) {
      codes_[j] = (hot + admitted) << 2;
      ++cached;
    } else {
      codes_[j] = (static_cast<std::int64_t>(network_ids.size()) << 2) | 2;
      network_ids.push_back(ids[j]);
    }
  }
  device_codes_ = std::move(c.codes);
  pending_ = std::move(c.pending);
  device_plan_ = true;
  return finish_plan(nodes.numel(), cached, c.owned_uncached, c.owned_uncached + c.owned_cached,
                     network_ids);
}

PlanSummary DeviceFeatureStore::finish_plan(std::int64_t nodes, std::int64_t cached,
                                            std::int64_t owned_uncached, std::int64_t owned_all,
                                            std::span<const NodeId> network_ids) {
  const std::int64_t hot = cache_rows();
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
  const auto remote = static_cast<std::int64_t>(network_ids.size());
  const std::int64_t row_bytes = feature_dim_ * static_cast<std::int64_t>(sizeof(float));
  planned_network_ = remote;
  auto& c = counters_;
  c.device.requests += nodes;
  c.device.hits += cached;
  c.device.misses += nodes - cached;
  c.device.bytes += cached * row_bytes;
  c.host.requests += nodes - cached;
  c.host.hits += owned_uncached;
  c.host.misses += remote;
  c.host.bytes += owned_uncached * row_bytes;
  // The owners always have their rows: every network request is served, and its row is what
  // this rank receives.
  c.network.requests += remote;
  c.network.hits += remote;
  c.network.bytes += remote * row_bytes;
  return PlanSummary{nodes, owned_all, remote};
}

Tensor DeviceFeatureStore::gather(const Tensor& network_rows,
                                  std::span<const std::int64_t> network_row_of) {
  const std::int64_t f = feature_dim_;
  Tensor rows = network_rows;
  if (!rows.defined()) {
    TESSEL_EXPECTS(planned_network_ == 0,
                   "DeviceFeatureStore::gather: no network rows for {} network ids",
                   planned_network_);
    rows = Tensor::empty({0, f}, DType::f32, device_);
  }
  TESSEL_EXPECTS(rows.dtype() == DType::f32 && rows.dim() == 2 && rows.cols() == f &&
                     rows.device() == device_,
                 "DeviceFeatureStore::gather: network rows are {}, expected f32 [rows, {}] on {}",
                 rows.describe(), f, device_.str());
  TESSEL_EXPECTS(network_row_of.empty() ||
                     static_cast<std::int64_t>(network_row_of.size()) == planned_network_,
                 "DeviceFeatureStore::gather: {} network row positions for {} network ids",
                 network_row_of.size(), planned_network_);
  TESSEL_EXPECTS(!network_row_of.empty() || rows.rows() >= planned_network_,
                 "DeviceFeatureStore::gather: {} network rows for {} network ids", rows.rows(),
                 planned_network_);
  auto row_of = [&](std::int64_t k) {
    if (network_row_of.empty()) return k;
    const std::int64_t row = network_row_of[static_cast<std::size_t>(k)];
    TESSEL_EXPECTS(row >= 0 && row < rows.rows(),
                   "DeviceFeatureStore::gather: network id {} at row {} of {}", k, row,
                   rows.rows());
    return row;
  };
  // The codes (every node's, or a device plan's pending ones) and the admission pairs go to the
  // device in one upload, their network indices turned into rows of network_rows.
  const auto num_codes = static_cast<std::int64_t>(codes_.size());
  std::vector<std::int64_t> staged(codes_.size() + admit_pairs_.size());
  for (std::int64_t i = 0; i < num_codes; ++i) {
    const std::int64_t code = codes_[static_cast<std::size_t>(i)];
    staged[static_cast<std::size_t>(i)] = (code & 3) == 2 ? (row_of(code >> 2) << 2) | 2 : code;
  }
  for (std::size_t p = 0; p + 1 < admit_pairs_.size(); p += 2) {
    staged[codes_.size() + p] = row_of(admit_pairs_[p]);
    staged[codes_.size() + p + 1] = admit_pairs_[p + 1];
  }
  const Tensor both = upload(staged);
  const Tensor pairs = both.rows_slice(num_codes, both.rows());
  Tensor codes = both.rows_slice(0, num_codes);
  if (device_plan_) {
    scatter(codes, pending_, device_codes_);
    codes = device_codes_;
  }
  Tensor out = gather_rows(codes, rows, pairs);
  admit_pairs_.clear();
  gather_pending_ = false;
  device_plan_ = false;
  device_codes_ = pending_ = Tensor();
  return out;
}

Tensor DeviceFeatureStore::gather(std::span<const float> network_rows) {
  TESSEL_EXPECTS(static_cast<std::int64_t>(network_rows.size()) == planned_network_ * feature_dim_,
                 "DeviceFeatureStore::gather: {} network values, expected {} rows x {}",
                 network_rows.size(), planned_network_, feature_dim_);
  Tensor rows = Tensor::empty({planned_network_, feature_dim_}, DType::f32);
  if (!network_rows.empty())
    std::memcpy(rows.raw(), network_rows.data(), network_rows.size() * sizeof(float));
  return gather(device_.is_cpu() ? rows : rows.to(device_));
}

void DeviceFeatureStore::fill_hot_rows(const Tensor& rows, std::span<const std::int64_t> row_of,
                                       std::span<const std::int64_t> hot_rows) {
  TESSEL_EXPECTS(row_of.size() == hot_rows.size(),
                 "DeviceFeatureStore::fill_hot_rows: {} row positions for {} hot rows",
                 row_of.size(), hot_rows.size());
  if (hot_rows.empty()) return;
  TESSEL_EXPECTS(rows.defined() && rows.dtype() == DType::f32 && rows.dim() == 2 &&
                     rows.cols() == feature_dim_ && rows.device() == device_,
                 "DeviceFeatureStore::fill_hot_rows: rows are {}, expected f32 [rows, {}] on {}",
                 rows.describe(), feature_dim_, device_.str());
  std::vector<std::int64_t> pairs(2 * hot_rows.size());
  for (std::size_t k = 0; k < hot_rows.size(); ++k) {
    TESSEL_EXPECTS(row_of[k] >= 0 && row_of[k] < rows.rows() && hot_rows[k] >= 0 &&
                       hot_rows[k] < cache_rows(),
                   "DeviceFeatureStore::fill_hot_rows: row {} of {} into hot row {} of {}",
                   row_of[k], rows.rows(), hot_rows[k], cache_rows());
    pairs[2 * k] = row_of[k];
    pairs[2 * k + 1] = hot_rows[k];
  }
  // No codes: the gather writes nothing, the admission copies move the rows.
  gather_rows(Tensor::empty({0}, DType::i64, device_), rows, upload(pairs));
}

Tensor DeviceFeatureStore::serve(const Tensor& ids) {
  TESSEL_EXPECTS(ids.defined() && ids.dim() == 1 && ids.dtype() == DType::i64 &&
                     ids.device() == device_,
                 "DeviceFeatureStore::serve: ids are {}, expected i64 [n] on {}", ids.describe(),
                 device_.str());
  // On a GPU the check would cost a wait for the device between the two exchanges of every step.
  const Classified c = device_.is_cpu() ? classify_host(ids) : classify_device(ids, true);
  const std::int64_t not_owned = ids.numel() - c.owned_uncached - c.owned_cached;
  TESSEL_EXPECTS(!device_.is_cpu() || not_owned == 0,
                 "feature store of nodes [{}, {}): {} of {} requested rows are not owned here",
                 owned_begin_, owned_begin_ + num_owned_, not_owned, ids.numel());
  return gather_rows(c.codes, Tensor::empty({0, feature_dim_}, DType::f32, device_),
                     Tensor::empty({0}, DType::i64, device_));
}

DeviceFeatureStore::Classified DeviceFeatureStore::classify(const Tensor& ids) const {
  return device_.is_cpu() ? classify_host(ids) : classify_device(ids);
}

// The CPU twin of the classification kernels: the same binary search over the sorted hot ids.
DeviceFeatureStore::Classified DeviceFeatureStore::classify_host(const Tensor& ids) const {
  const std::int64_t n = ids.numel();
  const NodeId* in = ids.data<NodeId>();
  const std::int64_t* keys = hot_sorted_ids_.data<std::int64_t>();
  const std::int64_t* keys_end = keys + hot_sorted_ids_.numel();
  const std::int64_t* slots = hot_sorted_slots_.data<std::int64_t>();
  Classified c;
  c.codes = Tensor::empty({n}, DType::i64);
  std::int64_t* codes = c.codes.data<std::int64_t>();
  std::vector<std::int64_t> pending;
  for (std::int64_t i = 0; i < n; ++i) {
    const NodeId id = in[i];
    const std::int64_t* at = std::lower_bound(keys, keys_end, id);
    const bool owned = is_owned(id);
    if (at != keys_end && *at == id) {
      codes[i] = slots[at - keys] << 2;
      c.owned_cached += owned ? 1 : 0;
    } else if (owned) {
      codes[i] = ((id - owned_begin_) << 2) | 1;
      ++c.owned_uncached;
    } else {
      codes[i] = -1;
      pending.push_back(i);
    }
  }
  c.pending = Tensor::empty({static_cast<std::int64_t>(pending.size())}, DType::i64);
  std::copy(pending.begin(), pending.end(), c.pending.data<std::int64_t>());
  return c;
}

Tensor DeviceFeatureStore::gather_rows(const Tensor& codes, const Tensor& network_rows,
                                       const Tensor& pairs) {
  return device_.is_cpu() ? gather_rows_host(codes, network_rows, pairs)
                          : gather_rows_device(codes, network_rows, pairs);
}

// The CPU twin of the gather and admission kernels: every row copied bit for bit from its tier,
// then the admitted network rows into their cache rows.
Tensor DeviceFeatureStore::gather_rows_host(const Tensor& codes, const Tensor& network_rows,
                                            const Tensor& pairs) {
  const std::int64_t n = codes.numel();
  const std::int64_t f = feature_dim_;
  const std::int64_t* code = codes.data<std::int64_t>();
  const float* network = network_rows.numel() > 0 ? network_rows.data<float>() : nullptr;
  Tensor out = Tensor::empty({n, f}, DType::f32);
  float* dst = out.data<float>();
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t index = code[i] >> 2;
    const int tier = static_cast<int>(code[i] & 3);
    TESSEL_ASSERT(code[i] >= 0 && tier <= 2 && (tier != 2 || index < network_rows.rows()),
                  "DeviceFeatureStore: row {} has tier code {}", i, code[i]);
    const float* src = (tier == 0   ? host_cache_.data()
                        : tier == 1 ? host_owned_.data()
                                    : network) +
                       index * f;
    std::memcpy(dst + i * f, src, static_cast<std::size_t>(f) * sizeof(float));
  }
  const std::int64_t* pair = pairs.numel() > 0 ? pairs.data<std::int64_t>() : nullptr;
  for (std::int64_t p = 0; p + 1 < pairs.numel(); p += 2)
    std::memcpy(host_cache_.data() + pair[p + 1] * f, network + pair[p] * f,
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
Tensor DeviceFeatureStore::gather_rows_device(const Tensor&, const Tensor&, const Tensor&) {
  TESSEL_FAIL("GPU feature store: Tessel was built without CUDA");
}
Tensor DeviceFeatureStore::upload_device(std::span<const std::int64_t>) {
  TESSEL_FAIL("GPU feature store: Tessel was built without CUDA");
}
DeviceFeatureStore::Classified DeviceFeatureStore::classify_device(const Tensor&, bool) const {
  TESSEL_FAIL("GPU feature store: Tessel was built without CUDA");
}
#endif

} // namespace tessel::sampling
