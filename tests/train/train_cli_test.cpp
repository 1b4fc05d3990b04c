// End-to-end training through the `tessel` binary: P-rank invariance, resume, fault handling.
#include "train_test_helpers.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
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
struct TrainCliData {
  static constexpr const char* kName = "train";
  static constexpr const char* kArgs = "--nodes 600 --avg-degree 8 --classes 4 --feat-dim 24 --seed 3";
};
using TrainCli = test::PartitionedSuite<TrainCliData>;

void expect_same_losses(const std::vector<double>& a, const std::vector<double>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_LE(std::abs(a[i] - b[i]), 1e-5 * std::abs(a[i])) << "epoch " << i + 1;
}

}  // namespace

TEST_F(TrainCli, FullBatchLossesAndParametersDoNotDependOnRankCount) {
  for (const std::string model : {"gcn", "sage"}) {
    std::vector<std::vector<double>> runs;
    std::vector<std::vector<float>> params;
    for (int p : {1, 2, 4}) {
      const auto tag = model + std::to_string(p);
      run_ok(test::mpirun(p) + tessel_bin() + " train " + parts(p).string() + " --mode full --model " +
             model + " --epochs 10 --dropout 0 --hidden 16 --lr 0.05 --seed 7 --quiet --metrics " +
             scratch(tag + ".jsonl").string() + " --checkpoint " + scratch(tag).string() +
             " --checkpoint-every 10");
      runs.push_back(losses(scratch(tag + ".jsonl")));
      params.push_back(checkpoint_params(scratch(tag)));
    }
    ASSERT_EQ(runs[0].size(), 10u);
    // The loss must move, or the comparison proves nothing.
    EXPECT_LT(runs[0].back(), runs[0].front() * 0.95) << model;
    for (int i = 1; i < 3; ++i) {
      SCOPED_TRACE(model + " P=" + std::to_string(1 << i));
      expect_same_losses(runs[0], runs[i]);
      ASSERT_EQ(params[0].size(), params[i].size());
      ASSERT_FALSE(params[0].empty());
      for (std::size_t k = 0; k < params[0].size(); ++k)
        ASSERT_NEAR(params[0][k], params[i][k], 1e-5f + 1e-4f * std::abs(params[0][k])) << k;
    }
  }
}

TEST_F(TrainCli, ResumeReachesTheSameFinalLoss) {
  const std::string common = " train " + parts(2).string() +
                             " --mode full --model gcn --epochs 12 --dropout 0.5 --seed 5 --quiet";
  run_ok(test::mpirun(2) + tessel_bin() + common + " --metrics " + scratch("straight.jsonl").string());
  run_ok(test::mpirun(2) + tessel_bin() + " train " + parts(2).string() +
         " --mode full --model gcn --epochs 5 --dropout 0.5 --seed 5 --quiet --checkpoint " +
         scratch("ck").string() + " --checkpoint-every 5");
  run_ok(test::mpirun(2) + tessel_bin() + common + " --resume " + scratch("ck").string() +
         " --metrics " + scratch("resumed.jsonl").string());
  const auto straight = losses(scratch("straight.jsonl"));
  const auto resumed = losses(scratch("resumed.jsonl"));
  ASSERT_EQ(straight.size(), 12u);
  ASSERT_EQ(resumed.size(), 7u);  // epochs 6..12
  for (std::size_t i = 0; i < resumed.size(); ++i)
    EXPECT_NEAR(resumed[i], straight[5 + i], 1e-6 * std::abs(straight[5 + i])) << i;
}

TEST_F(TrainCli, MetricsFileHasEveryKeyAndSummary) {
  run_ok(test::mpirun(2) + tessel_bin() + " train " + parts(2).string() +
         " --mode full --epochs 3 --quiet --metrics " + scratch("m.jsonl").string());
  const auto lines = read_metrics(scratch("m.jsonl"));
  ASSERT_EQ(lines.size(), 4u);
  for (int i = 0; i < 3; ++i)
    for (const char* key : {"epoch", "loss", "train_acc", "valid_acc", "test_acc", "epoch_s",
                            "comm_bytes"})
      EXPECT_TRUE(lines[i].contains(key)) << key;
  EXPECT_GT(lines[0].at("comm_bytes").get<std::int64_t>(), 0);
  EXPECT_TRUE(lines[3].at("summary").get<bool>());
  EXPECT_TRUE(lines[3].contains("best_valid_acc"));
  EXPECT_TRUE(lines[3].contains("test_acc"));
}

TEST_F(TrainCli, WrongRankCountIsOneClearError) {
  std::string output;
  const int rc = test::run_command(test::mpirun(2) + tessel_bin() + " train " + parts(4).string() +
                                       " --epochs 1",
                                   &output);
  EXPECT_NE(rc, 0);
  EXPECT_NE(output.find("4 parts"), std::string::npos) << output;
  EXPECT_NE(output.find("2 ranks"), std::string::npos) << output;
}

TEST_F(TrainCli, FailingRankTakesTheJobDownQuickly) {
  std::string output;
  const auto start = std::chrono::steady_clock::now();
  const int rc = test::run_command("TESSEL_FAULT_RANK=1 TESSEL_FAULT_EPOCH=3 " + test::mpirun(2) +
                                       tessel_bin() + " train " + parts(2).string() +
                                       " --epochs 50 --quiet",
                                   &output);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(rc, 0);
  EXPECT_LT(seconds, 10.0);
  EXPECT_NE(output.find("rank 1"), std::string::npos) << output;
  EXPECT_NE(output.find("injected fault"), std::string::npos) << output;
}

TEST_F(TrainCli, PredictionsCoverEveryNode) {
  run_ok(test::mpirun(2) + tessel_bin() + " train " + parts(2).string() +
         " --mode full --epochs 2 --quiet --predictions " + scratch("pred.h5").string());
  h5::File file = h5::File::open_read(scratch("pred.h5"));
  const auto ids = file.read<std::int64_t>("/node_id");
  ASSERT_EQ(ids.size(), 600u);
  for (std::size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i], static_cast<std::int64_t>(i));
  EXPECT_EQ(file.dims("/logits"), (std::vector<std::int64_t>{600, 4}));
}
