// GAT end to end through the `tessel` binary: the loss does not depend on the rank count (the
// halo carries the projected rows and their attention terms), resume is exact, and the options
// GAT does not support are refused with one line.
#include "train_test_helpers.hpp"

#include "dataset_fixtures.hpp"

#include "tessel/datasets/h5.hpp"

#include <gtest/gtest.h>

#include <cmath>

using namespace tessel;
namespace fs = std::filesystem;
using test::checkpoint_params;
using test::losses;
using test::run_ok;
using test::tessel_bin;

namespace {

struct GatCliData {
  static constexpr const char* kName = "gat";
  static constexpr const char* kArgs = "--nodes 400 --avg-degree 6 --classes 4 --feat-dim 16 --seed 3";
};
using GatCli = test::PartitionedSuite<GatCliData>;

const std::string kGat = " --mode full --model gat --heads 3 --hidden 4 --out-heads 2 --quiet";

}  // namespace

// Feature and attention dropout on: the draws are keyed by node ids, so P = 2 takes the same
// steps as P = 1 up to the order of float sums.
TEST_F(GatCli, FullBatchLossesDoNotDependOnRankCount) {
  std::vector<std::vector<double>> runs;
  std::vector<std::vector<float>> params;
  for (int p : {1, 2}) {
    const std::string tag = "gat" + std::to_string(p);
    run_ok(test::mpirun(p) + tessel_bin() + " train " + parts(p).string() + kGat +
           " --epochs 8 --dropout 0.3 --attn-dropout 0.3 --lr 0.02 --seed 7 --metrics " +
           scratch(tag + ".jsonl").string() + " --checkpoint " + scratch(tag).string() +
           " --checkpoint-every 8");
    runs.push_back(losses(scratch(tag + ".jsonl")));
    params.push_back(checkpoint_params(scratch(tag)));
  }
  ASSERT_EQ(runs[0].size(), 8u);
  EXPECT_LT(runs[0].back(), runs[0].front() * 0.95);  // the loss moves
  ASSERT_EQ(runs[1].size(), runs[0].size());
  for (std::size_t i = 0; i < runs[0].size(); ++i)
    EXPECT_LE(std::abs(runs[0][i] - runs[1][i]), 1e-5 * std::abs(runs[0][i])) << "epoch " << i + 1;
  ASSERT_EQ(params[0].size(), params[1].size());
  ASSERT_FALSE(params[0].empty());
  for (std::size_t k = 0; k < params[0].size(); ++k)
    ASSERT_NEAR(params[0][k], params[1][k], 1e-5f + 1e-4f * std::abs(params[0][k])) << k;
}

TEST_F(GatCli, ResumeIsBitForBit) {
  const std::string common = " train " + parts(2).string() + kGat +
                             " --dropout 0.5 --attn-dropout 0.5 --seed 5";
  run_ok(test::mpirun(2) + tessel_bin() + common + " --epochs 8 --metrics " +
         scratch("straight.jsonl").string());
  run_ok(test::mpirun(2) + tessel_bin() + common + " --epochs 4 --checkpoint " +
         scratch("ck").string() + " --checkpoint-every 4");
  run_ok(test::mpirun(2) + tessel_bin() + common + " --epochs 8 --resume " +
         scratch("ck").string() + " --metrics " + scratch("resumed.jsonl").string());
  const auto straight = losses(scratch("straight.jsonl"));
  const auto resumed = losses(scratch("resumed.jsonl"));
  ASSERT_EQ(straight.size(), 8u);
  ASSERT_EQ(resumed.size(), 4u);
  for (std::size_t i = 0; i < resumed.size(); ++i) EXPECT_EQ(resumed[i], straight[4 + i]) << i;
}

TEST_F(GatCli, UnsupportedOptionsAreRefused) {
  const std::string base = test::mpirun(1) + tessel_bin() + " train " + parts(1).string() + kGat +
                           " --epochs 1";
  for (const std::string extra : {" --halo-dtype bf16", " --boundary-sampling 0.5",
                                  " --halo-aggregation pre", " --stale-halo"}) {
    SCOPED_TRACE(extra);
    EXPECT_NE(test::run_command(base + extra + " 2>/dev/null"), 0);
  }
  EXPECT_NE(test::run_command(test::mpirun(1) + tessel_bin() + " train " + parts(1).string() +
                              " --mode full --model gcn --heads 2 --epochs 1 --quiet 2>/dev/null"),
            0);
}

// Sampled mode: attention over each block's sampled in-neighbours (and the self loop); the
// distributed sampler draws the same blocks at every rank count.
TEST_F(GatCli, SampledLossesDoNotDependOnRankCount) {
  std::vector<std::vector<double>> runs;
  for (int p : {1, 2}) {
    const std::string tag = "sampled" + std::to_string(p);
    run_ok(test::mpirun(p) + tessel_bin() + " train " + parts(p).string() +
           " --mode sampled --model gat --heads 2 --hidden 4 --fanouts 5,5 --batch-size 64 "
           "--epochs 4 --dropout 0.3 --attn-dropout 0.3 --lr 0.02 --seed 7 --quiet --metrics " +
           scratch(tag + ".jsonl").string());
    runs.push_back(losses(scratch(tag + ".jsonl")));
  }
  ASSERT_EQ(runs[0].size(), 4u);
  EXPECT_LT(runs[0].back(), runs[0].front());
  ASSERT_EQ(runs[1].size(), runs[0].size());
  for (std::size_t i = 0; i < runs[0].size(); ++i)
    EXPECT_LE(std::abs(runs[0][i] - runs[1][i]), 1e-4 * std::abs(runs[0][i])) << "epoch " << i + 1;
}

// `tessel predict` rebuilds the GAT (heads and output heads from the checkpoint) and gives the
// training run's predictions and embeddings of the same epoch bit for bit.
TEST_F(GatCli, PredictReproducesTheTrainingRunsPredictions) {
  const fs::path trained = scratch("pred-train.h5"), predicted = scratch("pred.h5"),
                 ck = scratch("pred-ck");
  run_ok(test::mpirun(2, 1) + tessel_bin() + " train " + parts(2).string() + kGat +
         " --epochs 4 --attn-dropout 0.3 --predictions " + trained.string() + " --embeddings " +
         scratch("emb-train.h5").string() + " --checkpoint " + ck.string());
  run_ok(test::mpirun(2, 1) + tessel_bin() + " predict " + ck.string() + " " + parts(2).string() +
         " --predictions " + predicted.string() + " --embeddings " + scratch("emb.h5").string());
  h5::File a = h5::File::open_read(trained), b = h5::File::open_read(predicted);
  EXPECT_EQ(a.read<std::int64_t>("/node_id"), b.read<std::int64_t>("/node_id"));
  EXPECT_EQ(a.read<float>("/logits"), b.read<float>("/logits"));
  const auto emb = h5::File::open_read(scratch("emb-train.h5")).read<float>("/embedding");
  EXPECT_EQ(emb, h5::File::open_read(scratch("emb.h5")).read<float>("/embedding"));
  EXPECT_EQ(emb.size(), a.read<std::int64_t>("/node_id").size() * 12);  // 3 heads x 4
}
