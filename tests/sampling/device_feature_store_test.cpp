// The tiered feature store: rows gathered from the device cache, from pinned host memory over
// UVA and from the network tier are the CPU's rows bit for bit, and every tier's counters add up
// (hits + misses = requests, each tier's misses are the next one's requests); remote rows admitted
// into the cache (CLOCK) are served from it later, still bit for bit. The store's CPU twin is
// tested everywhere; the CUDA store where a GPU is visible (skipping with a message otherwise),
// against the same expectations and against the CPU twin step by step.
#include "tessel/sampling/device_feature_store.hpp"

#include "tessel/core/rng.hpp"

#include "tier_checks.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <set>

using namespace tessel;
using namespace tessel::sampling;

namespace {

constexpr std::int64_t kOwned = 300, kDim = 13; // an odd width: rows are not 16-byte multiples
constexpr NodeId kBegin = 1000;                 // owned global ids [1000, 1300)

// A value no two (node, column) pairs share, so a row from the wrong node cannot pass.
float value_of(NodeId node, std::int64_t col) {
  const rng::Key key{11, rng::Stream::init, 0, 0, 0};
  return key.uniform(static_cast<std::uint64_t>(node), static_cast<std::uint32_t>(col)) +
         static_cast<float>(node);
}

std::vector<float> rows_of(std::span<const NodeId> ids) {
  std::vector<float> rows(ids.size() * kDim);
  for (std::size_t i = 0; i < ids.size(); ++i)
    for (std::int64_t c = 0; c < kDim; ++c)
      rows[i * kDim + c] = value_of(ids[i], c);
  return rows;
}

class DeviceFeatureStoreTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (!device_memory::cuda_available())
      GTEST_SKIP() << "no GPU visible: GPU feature store not tested";
    std::vector<NodeId> owned_ids(kOwned);
    for (std::int64_t i = 0; i < kOwned; ++i)
      owned_ids[i] = kBegin + i;
    owned_ = rows_of(owned_ids);
    // A step's input nodes: owned and remote ones, interleaved, in no particular order.
    for (NodeId v = 0; v < 2000; v += 7)
      nodes_.push_back(v);
  }

  // Gathers nodes_ through `store` (the network tier served from value_of) and checks the rows
  // against the CPU's and the counters against the tiers' rules.
  void check(DeviceFeatureStore& store, const std::string& what) {
    store.reset_counters();
    std::vector<NodeId> network_ids;
    store.plan(nodes_, network_ids);
    for (const NodeId id : network_ids) {
      EXPECT_FALSE(store.is_owned(id)) << what;
      EXPECT_FALSE(store.is_cached(id)) << what;
    }
    const Tensor x = store.gather(rows_of(network_ids)).to(Device::cpu());
    ASSERT_EQ(x.rows(), static_cast<std::int64_t>(nodes_.size()));
    ASSERT_EQ(x.cols(), kDim);
    const std::vector<float> expected = rows_of(nodes_);
    EXPECT_EQ(std::memcmp(x.data<float>(), expected.data(), expected.size() * sizeof(float)), 0)
        << what << ": gathered rows differ from the CPU's";

    const FeatureStoreCounters& c = store.counters();
    test::expect_tiers_add_up(c, static_cast<std::int64_t>(nodes_.size()), what);
    EXPECT_EQ(c.network.misses, 0) << what;
    EXPECT_EQ(c.network.requests, static_cast<std::int64_t>(network_ids.size())) << what;
    std::int64_t cached = 0, owned = 0;
    for (const NodeId id : nodes_) {
      if (store.is_cached(id))
        ++cached;
      else if (store.is_owned(id))
        ++owned;
    }
    EXPECT_EQ(c.device.hits, cached) << what;
    EXPECT_EQ(c.host.hits, owned) << what;
    EXPECT_EQ(c.device.bytes, cached * kDim * 4) << what;
    EXPECT_EQ(c.host.bytes, owned * kDim * 4) << what;
  }

  std::vector<float> owned_;
  std::vector<NodeId> nodes_;
};

} // namespace

TEST_F(DeviceFeatureStoreTest, UvaGatherMatchesCpu) {
  // No cache: owned rows come over UVA from pinned host memory, remote ones from the network.
  DeviceFeatureStore store(owned_, kOwned, kDim, kBegin, {}, {}, Device::cuda(0));
  check(store, "uva");
  EXPECT_EQ(store.counters().device.hits, 0);
  EXPECT_GT(store.counters().host.hits, 0);
  EXPECT_GT(store.counters().network.hits, 0);
}

TEST_F(DeviceFeatureStoreTest, DeviceGatherMatchesCpu) {
  // Every input node cached: all rows come from device memory.
  DeviceFeatureStore store(owned_, kOwned, kDim, kBegin, nodes_, rows_of(nodes_), Device::cuda(0));
  check(store, "device");
  EXPECT_EQ(store.counters().device.hits, static_cast<std::int64_t>(nodes_.size()));
  EXPECT_EQ(store.counters().network.requests, 0);
}

TEST_F(DeviceFeatureStoreTest, MixedTiersMatchCpuOverSteps) {
  // Every third input node cached (owned and remote alike): all three tiers in one gather, twice
  // (the device buffers of the first step are reused by the second).
  std::vector<NodeId> hot;
  for (std::size_t i = 0; i < nodes_.size(); i += 3)
    hot.push_back(nodes_[i]);
  DeviceFeatureStore store(owned_, kOwned, kDim, kBegin, hot, rows_of(hot), Device::cuda(0));
  check(store, "mixed step 1");
  check(store, "mixed step 2");
  std::vector<NodeId> network_ids;
  store.plan(nodes_, network_ids);
  EXPECT_EQ(store.counters().device.requests, static_cast<std::int64_t>(2 * nodes_.size()))
      << "counters accumulate over steps";
  EXPECT_GT(store.counters().device.hits, 0);
  EXPECT_GT(store.counters().host.hits, 0);
  EXPECT_GT(store.counters().network.hits, 0);
  store.reset_counters();
  EXPECT_EQ(store.counters().device.requests, 0);
}

// ---- CLOCK admission slots (host bookkeeping) ----

TEST(ClockSlots, FillsEmptySlotsThenEvictsTheFirstUnreferenced) {
  ClockSlots c(3);
  NodeId evicted = 0;
  c.begin_round();
  EXPECT_EQ(c.admit(10, evicted), 0);
  EXPECT_EQ(evicted, -1);
  EXPECT_EQ(c.admit(11, evicted), 1);
  EXPECT_EQ(c.admit(12, evicted), 2);
  EXPECT_EQ(c.size(), 3);
  // A hit gives 10 its second chance: the hand clears its bit and takes 11's slot.
  EXPECT_EQ(c.touch(10), 0);
  c.begin_round();
  EXPECT_EQ(c.admit(13, evicted), 1);
  EXPECT_EQ(evicted, 11);
  EXPECT_EQ(c.find(11), -1);
  EXPECT_EQ(c.find(13), 1);
  EXPECT_EQ(c.find(10), 0);
  // Next: 12 (never hit) goes before 10, whose bit the hand cleared on its way.
  c.begin_round();
  EXPECT_EQ(c.admit(14, evicted), 2);
  EXPECT_EQ(evicted, 12);
  c.begin_round();
  EXPECT_EQ(c.admit(15, evicted), 0);
  EXPECT_EQ(evicted, 10);
  EXPECT_EQ(c.size(), 3);
}

TEST(ClockSlots, FillsASlotAtMostOncePerRound) {
  ClockSlots c(4);
  NodeId evicted = 0;
  c.begin_round();
  std::set<std::int32_t> slots;
  for (NodeId id = 0; id < 4; ++id) slots.insert(c.admit(id, evicted));
  EXPECT_EQ(slots, (std::set<std::int32_t>{0, 1, 2, 3}));
  // A fifth admission in the same round would overwrite a row copied in this round: refused.
  EXPECT_EQ(c.admit(99, evicted), -1);
  EXPECT_EQ(c.find(99), -1);
  c.begin_round();
  EXPECT_GE(c.admit(99, evicted), 0);
  EXPECT_GE(evicted, 0);
  ClockSlots none(0);
  EXPECT_EQ(none.admit(1, evicted), -1);
}

TEST(ClockSlots, SameCallsGiveTheSameSlots) {
  // Deterministic: two instances fed the same sequence agree at every step.
  ClockSlots a(7), b(7);
  for (int step = 0; step < 50; ++step) {
    a.begin_round();
    b.begin_round();
    for (NodeId id = step; id < step + 5; ++id) {
      if (id % 3 == 0) {
        EXPECT_EQ(a.touch(id), b.touch(id));
      } else if (a.find(id) < 0) {
        NodeId ea = 0, eb = 0;
        EXPECT_EQ(a.admit(id, ea), b.admit(id, eb));
        EXPECT_EQ(ea, eb);
      }
    }
  }
}

// ---- the store's CPU twin, and the CUDA store against it ----

namespace {

// Steps whose input nodes overlap: remote rows fetched in one step come back in later ones.
std::vector<std::vector<NodeId>> overlapping_steps() {
  std::vector<std::vector<NodeId>> steps;
  for (int s = 0; s < 6; ++s) {
    std::vector<NodeId> nodes;
    for (NodeId v = 45 * s; v < 45 * s + 900; v += 3) nodes.push_back(v);
    for (NodeId v = 1100; v < 1200; v += 2) nodes.push_back(v);  // owned
    steps.push_back(nodes);
  }
  return steps;
}

struct StepResult {
  std::vector<float> rows;
  std::vector<NodeId> network_ids;
  FeatureStoreCounters counters;
};

// Keeps a step's gathered rows x (host) in r and checks them against the CPU's rows of nodes.
void keep_rows(const Tensor& x, const std::vector<NodeId>& nodes, const std::string& what,
               StepResult& r) {
  EXPECT_EQ(x.rows(), static_cast<std::int64_t>(nodes.size())) << what;
  r.rows.assign(x.data<float>(), x.data<float>() + x.numel());
  const std::vector<float> expected = rows_of(nodes);
  EXPECT_EQ(r.rows.size(), expected.size()) << what;
  EXPECT_EQ(std::memcmp(r.rows.data(), expected.data(), expected.size() * sizeof(float)), 0)
      << what << ": gathered rows differ from the CPU's";
}

// Runs one step through `store`: plan, the network rows from value_of, gather. Checks the rows
// against the CPU's and the counters' rules; returns what the step produced.
StepResult run_step(DeviceFeatureStore& store, const std::vector<NodeId>& nodes,
                    const std::string& what) {
  StepResult r;
  const FeatureStoreCounters before = store.counters();
  store.plan(nodes, r.network_ids);
  for (const NodeId id : r.network_ids) EXPECT_FALSE(store.is_owned(id)) << what;
  const Tensor x = store.gather(rows_of(r.network_ids)).to(Device::cpu());
  keep_rows(x, nodes, what, r);
  r.counters = store.counters();
  const FeatureStoreCounters& c = r.counters;
  for (const TierCounters* t : {&c.device, &c.host, &c.network})
    EXPECT_EQ(t->hits + t->misses, t->requests) << what;
  EXPECT_EQ(c.host.requests, c.device.misses) << what;
  EXPECT_EQ(c.network.requests, c.host.misses) << what;
  EXPECT_EQ(c.network.requests - before.network.requests,
            static_cast<std::int64_t>(r.network_ids.size()))
      << what;
  EXPECT_EQ(c.device.requests - before.device.requests, static_cast<std::int64_t>(nodes.size()))
      << what;
  EXPECT_LE(c.admitted - before.admitted, static_cast<std::int64_t>(r.network_ids.size())) << what;
  EXPECT_LE(c.admitted - before.admitted, store.admit_slots()) << what;
  return r;
}

std::vector<float> all_owned_rows() {
  std::vector<NodeId> ids(kOwned);
  for (std::int64_t i = 0; i < kOwned; ++i) ids[i] = kBegin + i;
  return rows_of(ids);
}

} // namespace

TEST(DeviceFeatureStoreCpuTwin, TiersMatchTheRowsWithAndWithoutAdmission) {
  const std::vector<float> owned = all_owned_rows();
  const std::vector<NodeId> hot = {3, 9, 1101, 1105, 600};
  const auto steps = overlapping_steps();
  DeviceFeatureStore fixed(owned, kOwned, kDim, kBegin, hot, rows_of(hot), Device::cpu());
  DeviceFeatureStore admitting(owned, kOwned, kDim, kBegin, hot, rows_of(hot), Device::cpu(), 120);
  EXPECT_EQ(admitting.admit_slots(), 120);
  EXPECT_EQ(admitting.cache_bytes(), (5 + 120) * kDim * 4);
  std::int64_t fixed_network = 0, admitting_network = 0;
  for (std::size_t s = 0; s < steps.size(); ++s) {
    const StepResult a = run_step(fixed, steps[s], "static cache, step " + std::to_string(s));
    const StepResult b = run_step(admitting, steps[s], "admitting, step " + std::to_string(s));
    fixed_network += static_cast<std::int64_t>(a.network_ids.size());
    admitting_network += static_cast<std::int64_t>(b.network_ids.size());
    // Every remote row admitted by this step's gather is a device hit for the next plan.
    EXPECT_LE(b.counters.admitted, b.counters.network.requests);
  }
  EXPECT_EQ(fixed.counters().admitted, 0);
  EXPECT_GT(admitting.counters().admitted, 0);
  EXPECT_GT(admitting.counters().evicted, 0) << "the steps need more remote rows than 120 slots";
  // Overlapping steps: admitted rows are served from the cache, so fewer rows travel.
  EXPECT_LT(admitting_network, fixed_network);
  EXPECT_GT(admitting.counters().device.hits, fixed.counters().device.hits);
}

TEST(DeviceFeatureStoreCpuTwin, AdmittedRowIsServedFromItsSlotNextStep) {
  const std::vector<float> owned = all_owned_rows();
  DeviceFeatureStore store(owned, kOwned, kDim, kBegin, {}, {}, Device::cpu(), 4);
  const std::vector<NodeId> step1 = {5, 6, 1100, 7};
  const std::vector<NodeId> step2 = {7, 1101, 5, 8};
  const StepResult a = run_step(store, step1, "step 1");
  EXPECT_EQ(a.network_ids, (std::vector<NodeId>{5, 6, 7}));
  EXPECT_EQ(store.counters().admitted, 3);
  EXPECT_TRUE(store.is_cached(5) && store.is_cached(6) && store.is_cached(7));
  const StepResult b = run_step(store, step2, "step 2");
  EXPECT_EQ(b.network_ids, (std::vector<NodeId>{8}));  // 5 and 7 now come from the cache
  EXPECT_EQ(store.counters().device.hits, 2);
  EXPECT_EQ(store.counters().admitted, 4);
  EXPECT_EQ(store.counters().evicted, 0);
  // A plan whose admissions were never gathered is refused at the next plan.
  std::vector<NodeId> network;
  store.plan(std::vector<NodeId>{100, 101}, network);
  EXPECT_THROW(store.plan(std::vector<NodeId>{102}, network), Error);
}

TEST_F(DeviceFeatureStoreTest, AdmittingStoreMatchesTheCpuTwinStepByStep) {
  const std::vector<NodeId> hot = {3, 9, 1101, 1105, 600};
  const auto steps = overlapping_steps();
  DeviceFeatureStore gpu(owned_, kOwned, kDim, kBegin, hot, rows_of(hot), Device::cuda(0), 120);
  DeviceFeatureStore cpu(owned_, kOwned, kDim, kBegin, hot, rows_of(hot), Device::cpu(), 120);
  for (std::size_t s = 0; s < steps.size(); ++s) {
    const std::string what = "step " + std::to_string(s);
    const StepResult g = run_step(gpu, steps[s], "cuda " + what);
    const StepResult c = run_step(cpu, steps[s], "cpu " + what);
    EXPECT_EQ(g.network_ids, c.network_ids) << what;
    EXPECT_EQ(g.rows, c.rows) << what;
    EXPECT_EQ(g.counters.device.hits, c.counters.device.hits) << what;
    EXPECT_EQ(g.counters.admitted, c.counters.admitted) << what;
    EXPECT_EQ(g.counters.evicted, c.counters.evicted) << what;
  }
  EXPECT_GT(gpu.counters().evicted, 0);
}


// ---- plans from device ids, and the owner's side of the network tier ----

namespace {

Tensor id_tensor(const std::vector<NodeId>& ids, Device device) {
  const Tensor host = Tensor::from_vector(ids);
  return device.is_cpu() ? host : host.to(device);
}

// The rows of `ids` as f32 [n, kDim] on `device`, stored in the order `row_of` says: the row of
// ids[k] at row row_of[k].
Tensor placed_rows(const std::vector<NodeId>& ids, const std::vector<std::int64_t>& row_of,
                   Device device) {
  const std::vector<float> rows = rows_of(ids);
  Tensor t = Tensor::empty({static_cast<std::int64_t>(ids.size()), kDim}, DType::f32);
  for (std::size_t k = 0; k < ids.size(); ++k)
    std::memcpy(t.data<float>() + row_of[k] * kDim, rows.data() + k * kDim, kDim * sizeof(float));
  return device.is_cpu() ? t : t.to(device);
}

// Reversed positions: the network rows arrive in another order than the plan lists them.
std::vector<std::int64_t> reversed_rows(std::size_t n) {
  std::vector<std::int64_t> row_of(n);
  for (std::size_t k = 0; k < n; ++k)
    row_of[k] = static_cast<std::int64_t>(n - 1 - k);
  return row_of;
}

void expect_same_counters(const FeatureStoreCounters& a, const FeatureStoreCounters& b,
                          const std::string& what) {
  const TierCounters* x[3] = {&a.device, &a.host, &a.network};
  const TierCounters* y[3] = {&b.device, &b.host, &b.network};
  for (int t = 0; t < 3; ++t) {
    EXPECT_EQ(x[t]->requests, y[t]->requests) << what << " tier " << t;
    EXPECT_EQ(x[t]->hits, y[t]->hits) << what << " tier " << t;
    EXPECT_EQ(x[t]->misses, y[t]->misses) << what << " tier " << t;
    EXPECT_EQ(x[t]->bytes, y[t]->bytes) << what << " tier " << t;
  }
  EXPECT_EQ(a.admitted, b.admitted) << what;
  EXPECT_EQ(a.evicted, b.evicted) << what;
}

// One step planned from ids on the store's device, its network rows handed over in reversed
// order (as rows arrive grouped by owner); returns what it produced and checks the rows.
StepResult run_device_step(DeviceFeatureStore& store, const std::vector<NodeId>& nodes,
                           const std::string& what, PlanSummary* summary = nullptr) {
  StepResult r;
  const PlanSummary s = store.plan(id_tensor(nodes, store.device()), r.network_ids);
  if (summary) *summary = s;
  const std::vector<std::int64_t> row_of = reversed_rows(r.network_ids.size());
  const Tensor x =
      store.gather(placed_rows(r.network_ids, row_of, store.device()), row_of).to(Device::cpu());
  keep_rows(x, nodes, what, r);
  r.counters = store.counters();
  return r;
}

// The same hot rows as above plus enough admission slots to evict: a store and its twin.
std::unique_ptr<DeviceFeatureStore> admitting_store(Device device) {
  const std::vector<NodeId> hot = {3, 9, 1101, 1105, 600, 1299};
  return std::make_unique<DeviceFeatureStore>(all_owned_rows(), kOwned, kDim, kBegin, hot,
                                              rows_of(hot), device, 120);
}

} // namespace

// A plan from ids on the device (the CPU twin's tensors here) sorts every node as the host plan
// does: the same network ids, admissions, evictions and counters, and the same rows bit for bit,
// with the network rows handed over in another order than listed.
TEST(DeviceFeatureStoreCpuTwin, PlanFromDeviceIdsIsTheHostPlan) {
  const auto steps = overlapping_steps();
  auto host = admitting_store(Device::cpu());
  auto device = admitting_store(Device::cpu());
  for (std::size_t s = 0; s < steps.size(); ++s) {
    const std::string what = "step " + std::to_string(s);
    const StepResult a = run_step(*host, steps[s], "host ids, " + what);
    PlanSummary summary;
    const StepResult b = run_device_step(*device, steps[s], "device ids, " + what, &summary);
    EXPECT_EQ(a.network_ids, b.network_ids) << what;
    EXPECT_EQ(a.rows, b.rows) << what;
    expect_same_counters(a.counters, b.counters, what);
    std::int64_t owned = 0;
    for (const NodeId id : steps[s])
      owned += device->is_owned(id) ? 1 : 0;
    EXPECT_EQ(summary.nodes, static_cast<std::int64_t>(steps[s].size())) << what;
    EXPECT_EQ(summary.owned, owned) << what;
    EXPECT_EQ(summary.network, static_cast<std::int64_t>(b.network_ids.size())) << what;
  }
  EXPECT_GT(device->counters().evicted, 0);
  EXPECT_GT(device->counters().host.hits, 0);
  // An empty step plans and gathers nothing.
  std::vector<NodeId> network;
  const PlanSummary empty = device->plan(id_tensor({}, Device::cpu()), network);
  EXPECT_EQ(empty.nodes, 0);
  EXPECT_TRUE(network.empty());
  EXPECT_EQ(device->gather(Tensor()).rows(), 0);
  // Ids on another device, a network row position outside the rows: refused.
  device->plan(id_tensor({5, 6}, Device::cpu()), network);
  ASSERT_EQ(network.size(), 2u);
  const std::vector<std::int64_t> outside = {0, 2};
  EXPECT_THROW(device->gather(placed_rows(network, {0, 1}, Device::cpu()), outside), InputError);
  EXPECT_THROW(device->gather(Tensor()), InputError);
}

// The owner's side: serve() returns the rows of owned ids (hot ones from the cache) in the order
// asked, and refuses an id the part does not own.
TEST(DeviceFeatureStoreCpuTwin, ServesOwnedRowsAndRefusesOthers) {
  auto store = admitting_store(Device::cpu());
  const std::vector<NodeId> ids = {1299, 1000, 1101, 1200, 1105, 1000};
  const Tensor x = store->serve(id_tensor(ids, Device::cpu()));
  const std::vector<float> expected = rows_of(ids);
  ASSERT_EQ(x.rows(), static_cast<std::int64_t>(ids.size()));
  EXPECT_EQ(std::memcmp(x.data<float>(), expected.data(), expected.size() * sizeof(float)), 0);
  EXPECT_EQ(store->counters().device.requests, 0) << "serving counts in no tier";
  EXPECT_EQ(store->serve(id_tensor({}, Device::cpu())).rows(), 0);
  EXPECT_THROW(store->serve(id_tensor({1000, 1300}, Device::cpu())), InputError);
  EXPECT_THROW(store->serve(id_tensor({3}, Device::cpu())), InputError) << "hot but remote";
}

// The CUDA store's device plan (the tier kernels, the scan of the pending positions, the uploads)
// and serve() against the CPU twin, step by step.
TEST_F(DeviceFeatureStoreTest, DevicePlanAndServeMatchTheCpuTwin) {
  const auto steps = overlapping_steps();
  auto gpu = admitting_store(Device::cuda(0));
  auto cpu = admitting_store(Device::cpu());
  for (std::size_t s = 0; s < steps.size(); ++s) {
    const std::string what = "step " + std::to_string(s);
    PlanSummary gs, cs;
    const StepResult g = run_device_step(*gpu, steps[s], "cuda " + what, &gs);
    const StepResult c = run_device_step(*cpu, steps[s], "cpu " + what, &cs);
    EXPECT_EQ(g.network_ids, c.network_ids) << what;
    EXPECT_EQ(g.rows, c.rows) << what;
    expect_same_counters(g.counters, c.counters, what);
    EXPECT_EQ(gs.owned, cs.owned) << what;
  }
  EXPECT_GT(gpu->counters().evicted, 0);
  // More ids than one warp and one block, owned hot and uncached ones, in a scrambled order.
  std::vector<NodeId> ids;
  for (int k = 0; k < 700; ++k)
    ids.push_back(kBegin + (k * 37) % kOwned);
  const Tensor g = gpu->serve(id_tensor(ids, Device::cuda(0))).to(Device::cpu());
  const Tensor c = cpu->serve(id_tensor(ids, Device::cpu()));
  ASSERT_EQ(g.shape(), c.shape());
  EXPECT_EQ(std::memcmp(g.data<float>(), c.data<float>(), c.nbytes()), 0);
  const std::vector<float> expected = rows_of(ids);
  EXPECT_EQ(std::memcmp(g.data<float>(), expected.data(), expected.size() * sizeof(float)), 0);
  // Unchecked on the GPU (no wait for the device): an id neither owned nor hot gets zeros.
  const Tensor partly = gpu->serve(id_tensor({1000, 1300}, Device::cuda(0))).to(Device::cpu());
  ASSERT_EQ(partly.rows(), 2);
  EXPECT_EQ(std::memcmp(partly.data<float>(), rows_of(std::vector<NodeId>{1000}).data(), kDim * sizeof(float)), 0);
  for (std::int64_t c = 0; c < kDim; ++c)
    EXPECT_EQ(partly.data<float>()[kDim + c], 0.0f);
}

namespace {

// Hot remote rows given as placeholders (zeros) and written afterwards, in another order than
// listed, as setup does once every rank's store exists; a plan then serves them from the cache.
void check_fill_hot_rows(Device device) {
  const std::vector<NodeId> hot = {3, 1101, 9, 600};
  std::vector<float> placeholders = rows_of(hot);
  for (const std::size_t remote : {0, 2, 3})
    std::fill_n(placeholders.begin() + static_cast<std::int64_t>(remote) * kDim, kDim, 0.0f);
  DeviceFeatureStore store(all_owned_rows(), kOwned, kDim, kBegin, hot, placeholders, device);
  const std::vector<NodeId> remote = {3, 9, 600};
  const std::vector<std::int64_t> row_of = {2, 0, 1};
  store.fill_hot_rows(placed_rows(remote, row_of, device), row_of,
                      std::vector<std::int64_t>{0, 2, 3});
  const StepResult r = run_device_step(store, {600, 1101, 3, 1200, 9}, "filled hot rows");
  EXPECT_TRUE(r.network_ids.empty());
  EXPECT_EQ(r.counters.device.hits, 4);
  EXPECT_THROW(store.fill_hot_rows(placed_rows(remote, row_of, device), row_of,
                                   std::vector<std::int64_t>{0, 2, 4}),
               InputError);
}

} // namespace

TEST(DeviceFeatureStoreCpuTwin, FillsPlaceholderHotRows) {
  check_fill_hot_rows(Device::cpu());
}

TEST_F(DeviceFeatureStoreTest, FillsPlaceholderHotRows) {
  check_fill_hot_rows(Device::cuda(0));
}
