// The tiered GPU feature store: rows gathered from the device cache, from pinned host memory over
// UVA and from the network tier are the CPU's rows bit for bit, and every tier's counters add up
// (hits + misses = requests, each tier's misses are the next one's requests). Skips without a GPU.
#include "tessel/sampling/device_feature_store.hpp"

#include "tessel/core/rng.hpp"

#include <gtest/gtest.h>

#include <cstring>

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
    for (const TierCounters* t : {&c.device, &c.host, &c.network})
      EXPECT_EQ(t->hits + t->misses, t->requests) << what;
    EXPECT_EQ(c.device.requests, static_cast<std::int64_t>(nodes_.size())) << what;
    EXPECT_EQ(c.host.requests, c.device.misses) << what;
    EXPECT_EQ(c.network.requests, c.host.misses) << what;
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
