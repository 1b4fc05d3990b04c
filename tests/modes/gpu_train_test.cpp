// Device-resident full-batch training: --device cuda against --device cpu (same losses within
// 1e-4 relative, same accuracies) for GCN and GraphSAGE with dropout, at P = 1 and at P = 2 with
// both ranks on one GPU; the device allocator stops allocating after the first epochs; a rank
// killed during GPU training ends the job. Skips with a message when no GPU is visible.
#include "train_test_helpers.hpp"

#include "tessel/core/tensor.hpp"

#include <chrono>
#include <cmath>

using namespace tessel;
using test::tessel_bin;

namespace {

struct GpuSynthetic {
  static constexpr const char* kName = "gpu-train";
  static constexpr const char* kArgs =
      "--nodes 3000 --avg-degree 8 --classes 5 --feat-dim 24 --seed 5";
};

class GpuTrain : public test::PartitionedSuite<GpuSynthetic> {
 protected:
  void SetUp() override {
    if (!device_memory::cuda_available()) GTEST_SKIP() << "no GPU visible: GPU training not tested";
  }

  // Trains `parts` on both devices and compares every epoch.
  static void compare(const std::filesystem::path& parts, int np, const std::string& flags,
                      const std::string& tag) {
    const auto cpu = scratch(tag + "-cpu.jsonl"), gpu = scratch(tag + "-gpu.jsonl");
    const std::string common = " train " + parts.string() + " --mode full --epochs 10 --quiet " +
                               flags + " --metrics ";
    test::run_ok(test::mpirun(np) + tessel_bin() + common + cpu.string() + " --device cpu");
    std::string output;
    const int rc = test::run_command(test::mpirun(np) + tessel_bin() + common + gpu.string() +
                                         " --device cuda --comm mpi",
                                     &output);
    ASSERT_EQ(rc, 0) << output;
    const auto a = test::epochs_of(cpu), b = test::epochs_of(gpu);
    ASSERT_EQ(a.size(), 10u);
    ASSERT_EQ(b.size(), 10u);
    for (std::size_t e = 0; e < a.size(); ++e) {
      const double la = a[e].at("loss").get<double>(), lb = b[e].at("loss").get<double>();
      EXPECT_LE(std::abs(la - lb), 1e-4 * std::abs(la)) << tag << " epoch " << e + 1;
      for (const char* split : {"train_acc", "valid_acc", "test_acc"})
        EXPECT_NEAR(a[e].at(split).get<double>(), b[e].at(split).get<double>(), 1e-9)
            << tag << " epoch " << e + 1 << " " << split;
    }
    // The caching allocator: nothing new from the device after the second epoch.
    ASSERT_TRUE(b[1].contains("gpu_allocations")) << "GPU run reported no allocator counters";
    EXPECT_EQ(b[1].at("gpu_allocations").get<std::int64_t>(),
              b.back().at("gpu_allocations").get<std::int64_t>())
        << tag << ": device allocations grew after epoch 2";
    EXPECT_GT(b.back().at("gpu_cache_hits").get<std::int64_t>(), 0);
  }
};

}  // namespace

TEST_F(GpuTrain, GcnMatchesCpuAtOneAndTwoRanks) {
  compare(parts(1), 1, "--model gcn --hidden 32 --dropout 0.5", "gcn-p1");
  compare(parts(2), 2, "--model gcn --hidden 32 --dropout 0.5", "gcn-p2");
}

TEST_F(GpuTrain, SageMatchesCpuAtOneAndTwoRanks) {
  compare(parts(1), 1, "--model sage --hidden 32 --dropout 0.5", "sage-p1");
  compare(parts(2), 2, "--model sage --hidden 32 --dropout 0.5", "sage-p2");
}

TEST_F(GpuTrain, CoraMatchesCpu) {
  const auto cora = test::sample_dataset("cora");
  const auto h5 = scratch("cora.h5");
  test::run_ok(tessel_bin() + " convert ogb " + cora.string() + " " + h5.string());
  for (int p : {1, 2})
    test::run_ok(tessel_bin() + " partition " + h5.string() + " --parts " + std::to_string(p) +
                 " --out " + scratch("cora-p" + std::to_string(p)).string());
  for (const char* model : {"gcn", "sage"})
    for (int p : {1, 2})
      compare(scratch("cora-p" + std::to_string(p)), p,
              std::string("--model ") + model +
                  " --hidden 16 --dropout 0.5 --normalize-features row --weight-decay 5e-4",
              std::string("cora-") + model + "-p" + std::to_string(p));
}

TEST_F(GpuTrain, DefaultDeviceIsTheGpuAndSaysSo) {
  std::string output;
  const int rc = test::run_command(test::mpirun(2) + tessel_bin() + " train " +
                                       parts(2).string() + " --epochs 1",
                                   &output);
  ASSERT_EQ(rc, 0) << output;
  EXPECT_NE(output.find("device cuda"), std::string::npos) << output;
  EXPECT_NE(output.find("0:cuda:0 1:cuda:0"), std::string::npos) << output;
  EXPECT_NE(output.find("mpi staged"), std::string::npos) << output;  // two ranks, one GPU
}

TEST_F(GpuTrain, KilledRankEndsTheJobNamingIt) {
  std::string output;
  const auto start = std::chrono::steady_clock::now();
  const int rc = test::run_command(
      "TESSEL_FAULT_RANK=1 TESSEL_FAULT_EPOCH=3 TESSEL_FAULT_KIND=kill " + test::mpirun(2) +
          tessel_bin() + " train " + parts(2).string() + " --device cuda --epochs 200 --quiet",
      &output);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(rc, 0);
  EXPECT_LT(seconds, 10.0) << output;
  EXPECT_NE(output.find("rank 1"), std::string::npos) << output;
  std::printf("[ note ] killed rank ended the job after %.1f s\n", seconds);
}
