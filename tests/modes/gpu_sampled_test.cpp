// Sampled training on a GPU: --device cuda against --device cpu (the same draws, so the same
// sampled edges and input rows, and losses within 1e-4 relative) for GraphSAGE with dropout on a
// synthetic graph and on Cora, at P = 1 and at P = 2 with both ranks on one GPU; the graph in
// device memory and in pinned host memory read over UVA sample the same blocks; the feature
// store's tiers (device cache by degree or presampled counts, pinned host rows, network) change
// bytes, not losses, and their counters add up; prefetching steps (--prefetch 2: on the
// device-resident path, sampled on the device's side stream) gives the losses of --prefetch 0 at
// P = 1 and 2; routing the frontier on the GPU or on the host (--sample-routing)
// gives the same samples and losses. Skips with a message when no GPU is visible.
#include "train_test_helpers.hpp"

#include "tessel/core/tensor.hpp"

#include <cmath>

using namespace tessel;
using test::tessel_bin;

namespace {

struct GpuSampledSynthetic {
  static constexpr const char* kName = "gpu-sampled";
  static constexpr const char* kArgs =
      "--nodes 3000 --avg-degree 10 --classes 5 --feat-dim 24 --seed 7";
};

// The sampling counters every run of the same draws must agree on exactly.
constexpr const char* kSampleCounters[] = {"sampled_edges", "input_rows", "remote_input_rows"};

class GpuSampled : public test::PartitionedSuite<GpuSampledSynthetic> {
protected:
  void SetUp() override {
    if (!device_memory::cuda_available())
      GTEST_SKIP() << "no GPU visible: GPU sampled training not tested";
  }

  // Runs `tessel train` in sampled mode for 3 epochs; returns the metrics of every epoch.
  static std::vector<nlohmann::json> train(const std::filesystem::path& parts, int np,
                                           const std::string& flags, const std::string& tag,
                                           std::string* log = nullptr) {
    const auto metrics = scratch(tag + ".jsonl");
    std::string output;
    const int rc = test::run_command(test::mpirun(np) + tessel_bin() + " train " + parts.string() +
                                         " --mode sampled --epochs 3 " + flags + " --metrics " +
                                         metrics.string(),
                                     &output);
    EXPECT_EQ(rc, 0) << output;
    if (log) *log = output;
    auto epochs = test::epochs_of(metrics);
    EXPECT_EQ(epochs.size(), 3u) << tag << "\n" << output;
    return epochs;
  }

  // Same draws: equal sampling counters; same arithmetic up to float reassociation: losses
  // within `tolerance` relative.
  static void expect_same(const std::vector<nlohmann::json>& a,
                          const std::vector<nlohmann::json>& b, double tolerance,
                          const std::string& tag) {
    ASSERT_EQ(a.size(), b.size()) << tag;
    for (std::size_t e = 0; e < a.size(); ++e) {
      const double la = a[e].at("loss").get<double>(), lb = b[e].at("loss").get<double>();
      EXPECT_TRUE(std::isfinite(la)) << tag;
      EXPECT_LE(std::abs(la - lb), tolerance * std::abs(la))
          << tag << " epoch " << e + 1 << ": " << la << " vs " << lb;
      for (const char* counter : kSampleCounters)
        EXPECT_EQ(a[e].at(counter).get<std::int64_t>(), b[e].at(counter).get<std::int64_t>())
            << tag << " epoch " << e + 1 << " " << counter;
    }
  }

  static void compare_devices(const std::filesystem::path& parts, int np, const std::string& flags,
                              const std::string& tag) {
    const auto cpu = train(parts, np, flags + " --device cpu", tag + "-cpu");
    std::string log;
    const auto gpu = train(parts, np, flags + " --device cuda --comm mpi", tag + "-gpu", &log);
    EXPECT_NE(log.find("GPU sampling on cuda:0"), std::string::npos) << log;
    ASSERT_FALSE(gpu.empty());
    EXPECT_TRUE(gpu[0].contains("graph_placement")) << tag;
    expect_same(cpu, gpu, 1e-4, tag);
    // Full-neighbour evaluation runs on the GPU: the same predictions up to near-ties.
    for (std::size_t e = 0; e < cpu.size() && e < gpu.size(); ++e)
      for (const char* split : {"train_acc", "valid_acc", "test_acc"})
        EXPECT_NEAR(cpu[e].at(split).get<double>(), gpu[e].at(split).get<double>(), 0.01)
            << tag << " epoch " << e + 1 << " " << split;
    // The model learns: the last epoch's loss is below the first.
    EXPECT_LT(gpu.back().at("loss").get<double>(), gpu.front().at("loss").get<double>()) << tag;
  }
};

constexpr const char* kSage =
    "--model sage --layers 2 --hidden 32 --fanouts 10,5 --dropout 0.5 --seed 3 --quiet";

} // namespace

TEST_F(GpuSampled, SageMatchesCpuAtOneAndTwoRanks) {
  compare_devices(parts(1), 1, std::string(kSage) + " --batch-size 64", "sage-p1");
  compare_devices(parts(2), 2, std::string(kSage) + " --batch-size 32", "sage-p2");
}

TEST_F(GpuSampled, PinnedGraphSamplesWhatDeviceGraphSamples) {
  std::string device_log, pinned_log;
  const auto on_device = train(
      parts(2), 2, std::string(kSage) + " --batch-size 32 --device cuda --graph-placement device",
      "placement-device", &device_log);
  const auto pinned = train(
      parts(2), 2, std::string(kSage) + " --batch-size 32 --device cuda --graph-placement pinned",
      "placement-pinned", &pinned_log);
  EXPECT_NE(device_log.find("graph in device memory"), std::string::npos) << device_log;
  EXPECT_NE(pinned_log.find("graph in pinned host memory"), std::string::npos) << pinned_log;
  ASSERT_FALSE(pinned.empty());
  EXPECT_EQ(pinned[0].at("graph_placement").get<std::string>(), "pinned");
  expect_same(on_device, pinned, 1e-6, "device vs pinned");
}

// At two ranks the frontier is routed on the GPU (ids over the data plane) by default;
// --sample-routing host routes it through host memory instead: the same samples, the same
// sampling traffic, the same losses.
TEST_F(GpuSampled, DeviceRoutingSamplesWhatHostRoutingSamples) {
  const std::string flags = std::string(kSage) + " --batch-size 32 --device cuda";
  const auto routed = train(parts(2), 2, flags, "routing-device");
  const auto on_host = train(parts(2), 2, flags + " --sample-routing host", "routing-host");
  ASSERT_FALSE(routed.empty());
  ASSERT_FALSE(on_host.empty());
  EXPECT_EQ(routed[0].at("sample_routing").get<std::string>(), "device");
  EXPECT_EQ(on_host[0].at("sample_routing").get<std::string>(), "host");
  for (std::size_t e = 0; e < routed.size() && e < on_host.size(); ++e) {
    EXPECT_EQ(routed[e].at("sampled_edges"), on_host[e].at("sampled_edges")) << "epoch " << e;
    EXPECT_EQ(routed[e].at("data_centric_sample_bytes"), on_host[e].at("data_centric_sample_bytes"))
        << "epoch " << e;
  }
  expect_same(routed, on_host, 1e-6, "device vs host routing");
}

TEST_F(GpuSampled, FeatureTiersChangeBytesNotLosses) {
  const std::string flags = std::string(kSage) + " --batch-size 32 --device cuda";
  const auto none = train(parts(2), 2, flags + " --cache-policy none", "tiers-none");
  const auto degree =
      train(parts(2), 2, flags + " --cache-policy degree --cache-ratio 0.3", "tiers-degree");
  const auto presample = train(
      parts(2), 2, flags + " --cache-policy presample --cache-size-mb 0.05", "tiers-presample");
  // Half the budget for remote rows admitted once fetched (CLOCK).
  const auto admit = train(parts(2), 2,
                           flags + " --cache-policy degree --cache-ratio 0.3 "
                                   "--cache-admit-fraction 0.5",
                           "tiers-admit");
  // No budget given: a share of the free GPU memory, and the log says how much.
  std::string default_log;
  const auto by_default =
      train(parts(2), 2, flags + " --cache-policy degree", "tiers-default", &default_log);
  EXPECT_NE(default_log.find("device cache budget:"), std::string::npos) << default_log;
  expect_same(none, admit, 1e-6, "gpu without cache vs admitting cache");
  expect_same(none, by_default, 1e-6, "gpu without cache vs the default budget");
  std::int64_t admitted = 0;
  for (const auto& e : admit) admitted += e.at("device_tier_admitted").get<std::int64_t>();
  EXPECT_GT(admitted, 0) << "remote rows were fetched, so some were admitted";
  for (const auto& e : by_default) EXPECT_GT(e.at("cache_rows").get<std::int64_t>(), 0);
  const auto cpu =
      train(parts(2), 2, std::string(kSage) + " --batch-size 32 --device cpu", "tiers-cpu");
  expect_same(cpu, degree, 1e-4, "cpu vs gpu degree cache");
  for (const auto* run : {&degree, &presample}) {
    expect_same(none, *run, 1e-6, "gpu without vs with cache");
    for (const auto& e : *run) {
      EXPECT_GT(e.at("device_tier_hits").get<std::int64_t>(), 0);
      EXPECT_GT(e.at("cache_rows").get<std::int64_t>(), 0);
    }
  }
  for (const auto* run : {&none, &degree, &presample, &admit, &by_default})
    for (const auto& e : *run) {
      for (const char* tier : {"device", "host", "network"}) {
        const std::string p = std::string(tier) + "_tier_";
        EXPECT_EQ(e.at(p + "hits").get<std::int64_t>() + e.at(p + "misses").get<std::int64_t>(),
                  e.at(p + "requests").get<std::int64_t>())
            << tier;
      }
      EXPECT_EQ(e.at("device_tier_requests").get<std::int64_t>(),
                e.at("input_rows").get<std::int64_t>());
      EXPECT_EQ(e.at("host_tier_requests").get<std::int64_t>(),
                e.at("device_tier_misses").get<std::int64_t>());
      EXPECT_EQ(e.at("network_tier_requests").get<std::int64_t>(),
                e.at("host_tier_misses").get<std::int64_t>());
    }
  // Without a cache every owned row comes over UVA and every remote one from its owner.
  EXPECT_EQ(none[0].at("device_tier_hits").get<std::int64_t>(), 0);
  EXPECT_EQ(none[0].at("network_tier_requests").get<std::int64_t>(),
            none[0].at("remote_input_rows").get<std::int64_t>());
  EXPECT_GT(none[0].at("host_tier_hits").get<std::int64_t>(), 0);
  // A cache of remote rows leaves less for the network.
  EXPECT_LT(degree[0].at("network_tier_bytes").get<std::int64_t>(),
            none[0].at("network_tier_bytes").get<std::int64_t>());
}

TEST_F(GpuSampled, PrefetchChangesNothingButOverlap) {
  // Steps sampled and gathered ahead (queue depth 2) against one step at a time, on the
  // device-resident path, at P = 1 (NCCL data plane) and P = 2 (two ranks on one GPU, MPI staged):
  // with prefetch the sampler and the feature store run on the device's side stream, with a data
  // plane of their own, while the main stream trains the previous step; the main stream waits
  // for each step's event. The same draws, the same updates in the same order, the same
  // admissions into the device cache. A third run cuts the epoch at 3 steps.
  for (int p : {1, 2}) {
    const std::string tag = "prefetch-p" + std::to_string(p);
    const std::string flags = std::string(kSage) + " --batch-size " + std::to_string(32 / p) +
                              " --device cuda --sample-routing device --cache-policy degree "
                              "--cache-ratio 0.2 --cache-admit-fraction 0.3";
    const auto none = train(parts(p), p, flags + " --prefetch 0", tag + "-0");
    const auto two = train(parts(p), p, flags + " --prefetch 2", tag + "-2");
    expect_same(none, two, 1e-6, tag + ": prefetch 0 vs 2");
    for (std::size_t e = 0; e < none.size() && e < two.size(); ++e) {
      EXPECT_EQ(two[e].at("sample_routing").get<std::string>(), "device") << tag;
      EXPECT_EQ(none[e].at("steps").get<std::int64_t>(), two[e].at("steps").get<std::int64_t>());
      for (const char* counter : {"device_tier_hits", "device_tier_admitted", "network_tier_requests"})
        EXPECT_EQ(none[e].at(counter).get<std::int64_t>(), two[e].at(counter).get<std::int64_t>())
            << tag << " epoch " << e + 1 << " " << counter;
      for (const char* split : {"train_acc", "valid_acc", "test_acc"})
        EXPECT_NEAR(none[e].at(split).get<double>(), two[e].at(split).get<double>(), 1e-9);
    }
    // Blocks written on the side stream and released on the main one return to the allocator
    // once both streams are past them: the third epoch needs (almost) no new device memory. A
    // leak would add about one cudaMalloc per block tensor and step.
    ASSERT_EQ(two.size(), 3u) << tag;
    const std::int64_t steps = two[2].at("steps").get<std::int64_t>();
    EXPECT_LE(two[2].at("gpu_allocations").get<std::int64_t>() -
                  two[1].at("gpu_allocations").get<std::int64_t>(),
              steps)
        << tag << ": cudaMalloc calls in epoch 3 (epoch 1: "
        << two[0].at("gpu_allocations").get<std::int64_t>() << ", epoch 2: "
        << two[1].at("gpu_allocations").get<std::int64_t>() << ")";
  }
  const std::string flags =
      std::string(kSage) + " --batch-size 16 --device cuda --cache-policy degree --cache-ratio 0.2";
  const auto cut = train(parts(2), 2, flags + " --prefetch 2 --max-batches 3", "prefetch-cut");
  for (const auto& e : cut)
    EXPECT_EQ(e.at("steps").get<std::int64_t>(), 3);
}

TEST_F(GpuSampled, CoraMatchesCpu) {
  const auto cora = test::sample_dataset("cora");
  const auto h5 = scratch("cora.h5");
  test::run_ok(tessel_bin() + " convert ogb " + cora.string() + " " + h5.string());
  for (int p : {1, 2})
    test::run_ok(tessel_bin() + " partition " + h5.string() + " --parts " + std::to_string(p) +
                 " --out " + scratch("cora-p" + std::to_string(p)).string());
  const std::string flags =
      "--model sage --layers 2 --hidden 16 --fanouts 10,10 --dropout 0.5 --normalize-features "
      "row --weight-decay 5e-4 --seed 1 --quiet";
  compare_devices(scratch("cora-p1"), 1, flags + " --batch-size 64", "cora-p1");
  compare_devices(scratch("cora-p2"), 2, flags + " --batch-size 32", "cora-p2");
}
