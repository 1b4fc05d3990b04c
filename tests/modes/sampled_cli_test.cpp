// End-to-end sampled training through the `tessel` binary: rank-count invariance, equivalence
// with full-batch at full fanout, the cache changing nothing but bytes, and Cora accuracy.
#include "train_test_helpers.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>

using namespace tessel;
namespace fs = std::filesystem;
using test::checkpoint_params;
using test::epochs_of;
using test::losses;
using test::read_metrics;
using test::run_ok;
using test::tessel_bin;

namespace {

// A small synthetic dataset partitioned into 1, 2 and 4 parts, shared by the tests below.
struct SampledCliData {
  static constexpr const char* kName = "sampled";
  static constexpr const char* kArgs = "--nodes 800 --avg-degree 10 --classes 4 --feat-dim 16 --seed 11";
};
using SampledCli = test::PartitionedSuite<SampledCliData>;

}  // namespace

TEST_F(SampledCli, LossesDoNotDependOnRankCount) {
  // Global batch 64 = batch-size x ranks.
  std::vector<std::vector<double>> runs;
  for (int p : {1, 2, 4}) {
    const auto tag = "inv" + std::to_string(p);
    run_ok(test::mpirun(p) + tessel_bin() + " train " + parts(p).string() +
           " --mode sampled --model sage --fanouts 5,3 --batch-size " + std::to_string(64 / p) +
           " --epochs 3 --dropout 0 --hidden 16 --lr 0.02 --seed 9 --quiet --metrics " +
           scratch(tag + ".jsonl").string());
    runs.push_back(losses(scratch(tag + ".jsonl")));
  }
  ASSERT_EQ(runs[0].size(), 3u);
  EXPECT_LT(runs[0][2], runs[0][0]);
  for (int i = 1; i < 3; ++i)
    for (std::size_t e = 0; e < runs[0].size(); ++e)
      EXPECT_LE(std::abs(runs[i][e] - runs[0][e]), 1e-5 * std::abs(runs[0][e]))
          << "P=" << (1 << i) << " epoch " << e + 1;
}

// Also the evaluation: full mode infers with whole-graph products, sampled mode layer by layer
// in row blocks, transforming first where the output is narrower (hidden 8: 16 -> 8 -> 4 both
// layers; hidden 32: 16 -> 32 aggregates first, 32 -> 4 transforms first). The same weights
// give the same logits up to the summation order.
TEST_F(SampledCli, FullFanoutOneBatchEqualsFullBatchSage) {
  for (const std::string hidden : {"8", "32"}) {
    for (const std::string mode : {"full", "sampled"}) {
      // The sampler's flags go to sampled mode only (full mode refuses them).
      const std::string sampling =
          mode == "sampled" ? " --fanouts -1,-1 --batch-size 100000" : std::string();
      const std::string tag = mode + hidden;
      run_ok(test::mpirun(2) + tessel_bin() + " train " + parts(2).string() + " --mode " + mode +
             " --model sage" + sampling + " --epochs 1 --dropout 0 --hidden " + hidden +
             " --seed 4 --quiet --metrics " + scratch(tag + ".jsonl").string() +
             " --checkpoint " + scratch("eq-" + tag).string() + " --checkpoint-every 1" +
             " --predictions " + scratch(tag + "-pred.h5").string());
    }
    const auto full = losses(scratch("full" + hidden + ".jsonl"));
    const auto sampled = losses(scratch("sampled" + hidden + ".jsonl"));
    ASSERT_EQ(full.size(), 1u);
    ASSERT_EQ(sampled.size(), 1u);
    EXPECT_NEAR(full[0], sampled[0], 1e-5 * full[0]);
    // Same initial weights and one optimizer step: equal parameters mean equal gradients.
    const auto a = checkpoint_params(scratch("eq-full" + hidden));
    const auto b = checkpoint_params(scratch("eq-sampled" + hidden));
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t k = 0; k < a.size(); ++k)
      ASSERT_NEAR(a[k], b[k], 1e-6f + 1e-5f * std::abs(a[k])) << k;
    const auto logits = [&](const std::string& tag) {
      return h5::File::open_read(scratch(tag + "-pred.h5")).read<float>("/logits");
    };
    const auto lf = logits("full" + hidden), ls = logits("sampled" + hidden);
    ASSERT_EQ(lf.size(), ls.size());
    ASSERT_FALSE(lf.empty());
    for (std::size_t k = 0; k < lf.size(); ++k)
      ASSERT_NEAR(lf[k], ls[k], 1e-5f + 1e-4f * std::abs(lf[k])) << "hidden " << hidden << " " << k;
  }
}

TEST_F(SampledCli, CacheChangesBytesNotResults) {
  const std::string common = " train " + parts(2).string() +
                             " --mode sampled --model sage --fanouts 6,4 --batch-size 32 --epochs 2 "
                             "--dropout 0.3 --seed 2 --quiet --metrics ";
  run_ok(test::mpirun(2) + tessel_bin() + common + scratch("nocache.jsonl").string() +
         " --cache-policy none");
  run_ok(test::mpirun(2) + tessel_bin() + common + scratch("degree.jsonl").string() +
         " --cache-policy degree --cache-ratio 0.5");
  run_ok(test::mpirun(2) + tessel_bin() + common + scratch("presample.jsonl").string() +
         " --cache-policy presample --cache-ratio 0.5");
  // No size given at two ranks on the CPU: the default cache (half the rank's feature bytes).
  run_ok(test::mpirun(2) + tessel_bin() + common + scratch("default.jsonl").string());
  const auto off = epochs_of(scratch("nocache.jsonl"));
  EXPECT_GT(epochs_of(scratch("default.jsonl"))[0].at("cache_rows").get<std::int64_t>(), 0);
  EXPECT_EQ(off[0].at("cache_rows").get<std::int64_t>(), 0);
  for (const char* name : {"degree.jsonl", "presample.jsonl", "default.jsonl"}) {
    const auto on = epochs_of(scratch(name));
    ASSERT_EQ(on.size(), off.size());
    for (std::size_t e = 0; e < on.size(); ++e) {
      EXPECT_EQ(on[e].at("loss").get<double>(), off[e].at("loss").get<double>()) << name;
      EXPECT_GT(on[e].at("cache_hit_rate").get<double>(), 0.0) << name;
      EXPECT_LT(on[e].at("bytes_fetched").get<std::int64_t>(),
                off[e].at("bytes_fetched").get<std::int64_t>())
          << name;
    }
  }
  EXPECT_EQ(off[0].at("cache_hit_rate").get<double>(), 0.0);
  EXPECT_GT(off[0].at("bytes_fetched").get<std::int64_t>(), 0);
  // The sampling rate per CPU second is the epoch's draws over the ranks' CPU seconds.
  const double cpu_s = off[0].at("sample_cpu_s").get<double>();
  ASSERT_GT(cpu_s, 0.0);
  EXPECT_NEAR(off[0].at("sampled_edges_per_cpu_s").get<double>(),
              static_cast<double>(off[0].at("sampled_edges").get<std::int64_t>()) / cpu_s,
              1e-9 * off[0].at("sampled_edges_per_cpu_s").get<double>());
}

TEST_F(SampledCli, MaxBatchesCutsTheEpoch) {
  // --max-batches 2 at global batch 16: two steps per epoch, the loss over their seeds only.
  run_ok(test::mpirun(2) + tessel_bin() + " train " + parts(2).string() +
         " --mode sampled --model sage --fanouts 5,3 --batch-size 8 --epochs 2 --max-batches 2 "
         "--seed 9 --quiet --metrics " + scratch("cut.jsonl").string());
  const auto epochs = epochs_of(scratch("cut.jsonl"));
  ASSERT_EQ(epochs.size(), 2u);
  for (const auto& e : epochs) {
    EXPECT_EQ(e.at("steps").get<std::int64_t>(), 2);
    EXPECT_TRUE(std::isfinite(e.at("loss").get<double>()));
    EXPECT_GT(e.at("loss").get<double>(), 0.0);
  }
}

TEST_F(SampledCli, PrefetchGivesTheSameLossesBitForBit) {
  // Steps prepared two ahead (the GPU's queue, run on the CPU) against one at a time, with
  // dropout and a cache: the same draws and updates in the same order.
  const std::string common = " train " + parts(2).string() +
                             " --mode sampled --model sage --fanouts 5,3 --batch-size 8 --epochs 2 "
                             "--dropout 0.3 --cache-ratio 0.3 --seed 6 --quiet --metrics ";
  run_ok(test::mpirun(2) + tessel_bin() + common + scratch("pf0.jsonl").string() +
         " --prefetch 0");
  run_ok(test::mpirun(2) + tessel_bin() + common + scratch("pf2.jsonl").string() +
         " --prefetch 2");
  const auto a = epochs_of(scratch("pf0.jsonl")), b = epochs_of(scratch("pf2.jsonl"));
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  for (std::size_t e = 0; e < a.size(); ++e) {
    EXPECT_GT(a[e].at("steps").get<std::int64_t>(), 2);
    EXPECT_EQ(a[e].at("loss").get<double>(), b[e].at("loss").get<double>()) << "epoch " << e + 1;
    EXPECT_EQ(a[e].at("valid_acc").get<double>(), b[e].at("valid_acc").get<double>());
    EXPECT_EQ(a[e].at("sampled_edges").get<std::int64_t>(),
              b[e].at("sampled_edges").get<std::int64_t>());
  }
}

TEST_F(SampledCli, GatherReadOrderGivesTheSameLossesBitForBit) {
  // The input rows gathered (with the input dropout) in the order they lie in memory
  // (TESSEL_GATHER_SORT=1) against the step's order (the default): the same rows, so the same
  // losses and parameters bit for bit, at one rank and at two with a cache (remote rows staged).
  for (const int p : {1, 2}) {
    SCOPED_TRACE("P=" + std::to_string(p));
    const std::string common =
        " train " + parts(p).string() +
        " --mode sampled --model sage --fanouts 5,3 --batch-size " + std::to_string(32 / p) +
        " --epochs 2 --dropout 0.4 --cache-ratio 0.3 --hidden 16 --seed 12 --quiet";
    const auto tag = "go" + std::to_string(p);
    run_ok("TESSEL_GATHER_SORT=1 " + test::mpirun(p, 2) + tessel_bin() + common + " --metrics " +
           scratch(tag + "-sorted.jsonl").string() + " --checkpoint " +
           scratch(tag + "-sorted").string() + " --checkpoint-every 2");
    run_ok(test::mpirun(p, 2) + tessel_bin() + common + " --metrics " +
           scratch(tag + "-step.jsonl").string() + " --checkpoint " +
           scratch(tag + "-step").string() + " --checkpoint-every 2");
    const auto a = epochs_of(scratch(tag + "-sorted.jsonl"));
    const auto b = epochs_of(scratch(tag + "-step.jsonl"));
    ASSERT_EQ(a.size(), 2u);
    ASSERT_EQ(b.size(), 2u);
    for (std::size_t e = 0; e < a.size(); ++e)
      EXPECT_EQ(a[e].at("loss").get<double>(), b[e].at("loss").get<double>()) << "epoch " << e + 1;
    const auto pa = checkpoint_params(scratch(tag + "-sorted"));
    const auto pb = checkpoint_params(scratch(tag + "-step"));
    ASSERT_EQ(pa.size(), pb.size());
    ASSERT_GT(pa.size(), 0u);
    EXPECT_EQ(std::memcmp(pa.data(), pb.data(), pa.size() * sizeof(float)), 0);
  }
}

TEST_F(SampledCli, DeviceResidentPathOnTheCpuTwinsMatchesHostPath) {
  // The GPU's device-resident path (blocks built and kept as tensors, routed with the frontier
  // ops, input rows from the tiered feature store with admission) run on the CPU twins with
  // --sample-routing device, with and without prefetch, against the host path; at one and two
  // ranks (global batch 8 both times). On the CPU every path computes the same blocks in the same
  // order, the same rows and the same CPU kernels over them, so the losses are equal bit for bit,
  // not merely close; prefetching two steps (the sampler's own data plane, a split of the data
  // communicator, carrying the exchanges) changes nothing but when steps are prepared.
  const std::string common = " --mode sampled --model sage --fanouts 5,3 --epochs 2 --dropout 0.3 "
                             "--cache-ratio 0.3 --seed 6 --quiet --device cpu --metrics ";
  std::vector<std::vector<nlohmann::json>> device_runs;
  for (int p : {1, 2}) {
    const std::string run = test::mpirun(p) + tessel_bin() + " train " + parts(p).string() +
                            " --batch-size " + std::to_string(8 / p) + common;
    const std::string tag = "resident-p" + std::to_string(p);
    run_ok(run + scratch(tag + "-host.jsonl").string() + " --sample-routing host");
    const std::string device_flags = " --sample-routing device --cache-admit-fraction 0.5";
    run_ok(run + scratch(tag + "-pf0.jsonl").string() + device_flags + " --prefetch 0");
    run_ok(run + scratch(tag + "-pf2.jsonl").string() + device_flags + " --prefetch 2");
    const auto host = epochs_of(scratch(tag + "-host.jsonl"));
    const auto pf0 = epochs_of(scratch(tag + "-pf0.jsonl"));
    const auto pf2 = epochs_of(scratch(tag + "-pf2.jsonl"));
    ASSERT_EQ(host.size(), 2u);
    ASSERT_EQ(pf0.size(), 2u);
    ASSERT_EQ(pf2.size(), 2u);
    for (std::size_t e = 0; e < host.size(); ++e) {
      const std::string at = tag + " epoch " + std::to_string(e + 1);
      EXPECT_GT(pf0[e].at("steps").get<std::int64_t>(), 4) << at;
      EXPECT_FALSE(host[e].contains("sample_routing")) << at;
      for (const auto* run : {&pf0, &pf2}) {
        const nlohmann::json& m = (*run)[e];
        EXPECT_EQ(m.at("sample_routing").get<std::string>(), "device") << at;
        EXPECT_EQ(m.at("loss").get<double>(), host[e].at("loss").get<double>()) << at;
        EXPECT_EQ(m.at("valid_acc").get<double>(), host[e].at("valid_acc").get<double>()) << at;
        for (const char* counter : {"steps", "sampled_edges", "input_rows", "remote_input_rows",
                                    "answer_ids", "data_centric_sample_bytes"})
          EXPECT_EQ(m.at(counter).get<std::int64_t>(), host[e].at(counter).get<std::int64_t>())
              << at << " " << counter;
        // The tiered store: every input row asked of the device tier, the tiers adding up.
        EXPECT_EQ(m.at("device_tier_requests").get<std::int64_t>(),
                  m.at("input_rows").get<std::int64_t>())
            << at;
        for (const char* tier : {"device", "host", "network"}) {
          const std::string t = std::string(tier) + "_tier_";
          EXPECT_EQ(m.at(t + "hits").get<std::int64_t>() + m.at(t + "misses").get<std::int64_t>(),
                    m.at(t + "requests").get<std::int64_t>())
              << at << " " << tier;
        }
      }
      // Prefetch: the same admissions and hits (decided in step order), the same bytes (the
      // sampler's own communicator counted with the epoch's).
      for (const char* counter : {"device_tier_hits", "device_tier_admitted",
                                  "device_tier_evicted", "network_tier_requests", "comm_bytes"})
        EXPECT_EQ(pf0[e].at(counter).get<std::int64_t>(), pf2[e].at(counter).get<std::int64_t>())
            << at << " " << counter;
    }
    if (p == 2) {
      std::int64_t admitted = 0;
      for (const auto& m : pf2) admitted += m.at("device_tier_admitted").get<std::int64_t>();
      EXPECT_GT(admitted, 0) << "remote rows were fetched, so some were admitted";
    }
    device_runs.push_back(pf2);
  }
  // One rank and two compute the same losses (float sums in another order: within 1e-5).
  for (std::size_t e = 0; e < 2; ++e) {
    const double one = device_runs[0][e].at("loss").get<double>();
    EXPECT_LE(std::abs(device_runs[1][e].at("loss").get<double>() - one), 1e-5 * std::abs(one))
        << "epoch " << e + 1;
  }
}

TEST(SampledCora, SageReachesAccuracyAtTwoRanks) {
  const auto cora = test::sample_dataset("cora");
  test::TempDir dir("cora-sampled");
  std::string out;
  ASSERT_EQ(test::run_command(tessel_bin() + " convert ogb " + cora.string() + " " +
                                  (dir / "cora.h5").string(), &out), 0) << out;
  ASSERT_EQ(test::run_command(tessel_bin() + " partition " + (dir / "cora.h5").string() +
                                  " --parts 2 --out " + (dir / "p2").string(), &out), 0) << out;
  double sum = 0;
  const int seeds = 5;
  for (int seed = 0; seed < seeds; ++seed) {
    const fs::path metrics = dir / ("s" + std::to_string(seed) + ".jsonl");
    ASSERT_EQ(test::run_command(test::mpirun(2) + tessel_bin() + " train " + (dir / "p2").string() +
                                    " --mode sampled --model sage --layers 2 --fanouts 10,10 "
                                    "--hidden 16 --batch-size 32 --epochs 100 --dropout 0.5 "
                                    "--lr 0.01 --weight-decay 5e-4 --normalize-features row "
                                    "--quiet --seed " + std::to_string(seed) + " --metrics " +
                                    metrics.string(), &out), 0) << out;
    std::ifstream in(metrics);
    std::string line, last;
    while (std::getline(in, line))
      if (!line.empty()) last = line;
    const double acc = nlohmann::json::parse(last).at("test_acc").get<double>();
    std::printf("cora sampled sage seed=%d test acc %.4f\n", seed, acc);
    sum += acc;
  }
  EXPECT_GE(sum / seeds, 0.78);
}
