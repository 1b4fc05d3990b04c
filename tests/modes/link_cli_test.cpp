// Link prediction on a static graph through the `tessel` binary: convert --edge-split,
// partition (split edges assigned to ranks, checked), and full-batch --task link at 1 and 2
// ranks with the same losses.
#include "train_test_helpers.hpp"

#include "tessel/datasets/h5.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

using namespace tessel;
namespace fs = std::filesystem;
using test::epochs_of;
using test::losses;
using test::run_ok;
using test::tessel_bin;

namespace {

class LinkCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir("link");
    run_ok(tessel_bin() + " convert synthetic " + (dir_->path() / "g.h5").string() +
           " --nodes 500 --avg-degree 8 --classes 4 --feat-dim 16 --seed 3 --homophily 0.9 "
           "--feature-signal 3 --edge-split 85,5,10");
    for (int p : {1, 2})
      run_ok(tessel_bin() + " partition " + (dir_->path() / "g.h5").string() + " --parts " +
             std::to_string(p) + " --out " + parts(p).string());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path parts(int p) { return dir_->path() / ("p" + std::to_string(p)); }
  static fs::path scratch(const std::string& name) { return dir_->path() / name; }
  static inline test::TempDir* dir_ = nullptr;
};

}  // namespace

TEST_F(LinkCli, PartitionHoldsEverySplitEdgeOnceAndChecks) {
  const auto manifest = nlohmann::json::parse(std::ifstream(parts(2) / "partition.json"));
  ASSERT_TRUE(manifest.contains("link"));
  EXPECT_EQ(manifest["link"]["metric"], "auc");
  EXPECT_GT(manifest["link"]["valid_pos"].get<int>(), 0);
  // The checker verifies owners, the message-passing graph and that every edge is held once.
  run_ok(tessel_bin() + " partition --check " + parts(2).string() + " " +
         (dir_->path() / "g.h5").string());
}

TEST_F(LinkCli, LossesDoNotDependOnRankCountAndTheModelLearns) {
  std::vector<std::vector<double>> runs;
  std::vector<nlohmann::json> last;
  for (int p : {1, 2}) {
    const auto metrics = scratch("r" + std::to_string(p) + ".jsonl");
    run_ok(test::mpirun(p) + tessel_bin() + " train " + parts(p).string() +
           " --mode full --task link --model gcn --hidden 32 --out-dim 16 --dropout 0 --lr 0.01 "
           "--negatives 1 --epochs 30 --eval-every 10 --seed 5 --quiet --metrics " +
           metrics.string());
    runs.push_back(losses(metrics));
    last.push_back(epochs_of(metrics).back());
  }
  ASSERT_EQ(runs[0].size(), 30u);
  // Full-batch P ranks against one: float sums in another order (docs/robustness.md), 1e-5.
  for (std::size_t e = 0; e < runs[0].size(); ++e)
    EXPECT_LE(std::abs(runs[1][e] - runs[0][e]), 1e-5 * std::abs(runs[0][e])) << "epoch " << e + 1;
  EXPECT_LT(runs[0].back(), runs[0].front());
  // The planted graph's features predict its edges: well above chance after 30 epochs.
  EXPECT_GT(last[0].at("test_auc").get<double>(), 0.7) << last[0].dump();
  EXPECT_NEAR(last[0].at("test_auc").get<double>(), last[1].at("test_auc").get<double>(), 1e-4);
  EXPECT_TRUE(last[0].contains("test_ap")) << last[0].dump();
}

// GAT and SAGE encode too, with the same losses at 1 and 2 ranks (1e-5 relative over 10 epochs).
TEST_F(LinkCli, GatAndSageEncodersDoNotDependOnRankCount) {
  for (const std::string model : {"gat", "sage"}) {
    std::vector<std::vector<double>> runs;
    for (int p : {1, 2}) {
      const auto metrics = scratch(model + std::to_string(p) + ".jsonl");
      run_ok(test::mpirun(p) + tessel_bin() + " train " + parts(p).string() +
             " --mode full --task link --model " + model +
             (model == "gat" ? " --heads 2" : "") +
             " --hidden 8 --out-dim 8 --dropout 0.1 --epochs 10 --eval-every 5 --seed 6 "
             "--quiet --metrics " + metrics.string());
      runs.push_back(losses(metrics));
    }
    ASSERT_EQ(runs[0].size(), 10u) << model;
    EXPECT_LT(runs[0].back(), runs[0].front()) << model;
    for (std::size_t e = 0; e < runs[0].size(); ++e)
      EXPECT_LE(std::abs(runs[1][e] - runs[0][e]), 1e-5 * std::abs(runs[0][e]))
          << model << " epoch " << e + 1;
  }
}

// --predictions: the test edges' scores at the best epoch; their AUC is the run's test AUC there.
TEST_F(LinkCli, PredictionsHoldTheTestEdgesScores) {
  std::vector<std::vector<float>> scores;
  for (int p : {1, 2}) {
    const auto out = scratch("pred" + std::to_string(p) + ".h5");
    const auto metrics = scratch("pred" + std::to_string(p) + ".jsonl");
    run_ok(test::mpirun(p) + tessel_bin() + " train " + parts(p).string() +
           " --mode full --task link --hidden 16 --out-dim 8 --dropout 0 --epochs 8 --seed 2 "
           "--quiet --predictions " + out.string() + " --metrics " + metrics.string());
    const auto file = h5::File::open_read(out);
    EXPECT_EQ(file.attr_string("format"), "tessel-link-predictions");
    const auto pos = file.read<float>("/pos_score");
    const auto neg = file.read<float>("/neg_score");
    const auto pos_edge = file.read<std::int64_t>("/pos_edge");
    const auto neg_edge = file.read<std::int64_t>("/neg_edge");
    const auto manifest = nlohmann::json::parse(std::ifstream(parts(p) / "partition.json"));
    const auto n_pos = manifest["link"]["test_pos"].get<std::size_t>();
    ASSERT_EQ(pos.size(), n_pos);
    ASSERT_EQ(neg.size(), manifest["link"]["test_neg"].get<std::size_t>());
    ASSERT_EQ(pos_edge.size(), 2 * pos.size());
    ASSERT_EQ(neg_edge.size(), 2 * neg.size());
    std::int64_t twice_wins = 0;
    for (const float a : pos)
      for (const float b : neg)
        twice_wins += a > b ? 2 : a == b ? 1 : 0;
    std::vector<float> score = pos;
    score.insert(score.end(), neg.begin(), neg.end());
    const double auc = static_cast<double>(twice_wins) /
                       (2.0 * static_cast<double>(n_pos) * static_cast<double>(score.size() - n_pos));
    const auto summary = test::read_metrics(metrics).back();
    EXPECT_NEAR(auc, summary.at("test_acc").get<double>(), 1e-12) << summary.dump();
    scores.push_back(score);
  }
  for (std::size_t i = 0; i < scores[0].size(); ++i)
    EXPECT_NEAR(scores[1][i], scores[0][i], 1e-4 * (1 + std::abs(scores[0][i]))) << i;
}

// --embeddings: the encoder's output of every node; the dot product of two rows is the score
// --predictions gives that pair (1e-5 of the sum of the product's terms' magnitudes: a float
// dot product in another order), at 1 and 2 ranks.
TEST_F(LinkCli, EmbeddingsDecodeToThePredictedScores) {
  for (int p : {1, 2}) {
    const auto pred = scratch("epred" + std::to_string(p) + ".h5");
    const auto emb = scratch("emb" + std::to_string(p) + ".h5");
    run_ok(test::mpirun(p) + tessel_bin() + " train " + parts(p).string() +
           " --mode full --task link --hidden 16 --out-dim 8 --dropout 0 --epochs 6 --seed 2 "
           "--quiet --predictions " + pred.string() + " --embeddings " + emb.string());
    const auto e = h5::File::open_read(emb);
    EXPECT_EQ(e.attr_string("format"), "tessel-embeddings");
    const std::int64_t n = e.attr_int("num_nodes");
    ASSERT_EQ(e.attr_int("dim"), 8);
    const auto manifest = nlohmann::json::parse(std::ifstream(parts(p) / "partition.json"));
    ASSERT_EQ(n, manifest["num_nodes"].get<std::int64_t>());
    const auto node_id = e.read<std::int64_t>("/node_id");
    const auto rows = e.read<float>("/embedding");
    ASSERT_EQ(rows.size(), static_cast<std::size_t>(n * 8));
    for (std::int64_t v = 0; v < n; ++v) ASSERT_EQ(node_id[static_cast<std::size_t>(v)], v);
    const auto f = h5::File::open_read(pred);
    const auto pos_edge = f.read<std::int64_t>("/pos_edge");
    const auto pos = f.read<float>("/pos_score");
    ASSERT_FALSE(pos.empty());
    for (std::size_t i = 0; i < pos.size(); ++i) {
      const std::int64_t a = pos_edge[2 * i], b = pos_edge[2 * i + 1];
      double dot = 0, magnitude = 0;
      for (std::int64_t c = 0; c < 8; ++c) {
        const double term = static_cast<double>(rows[static_cast<std::size_t>(a * 8 + c)]) *
                            static_cast<double>(rows[static_cast<std::size_t>(b * 8 + c)]);
        dot += term;
        magnitude += std::abs(term);
      }
      EXPECT_NEAR(dot, pos[i], 1e-5 * magnitude) << "ranks " << p << " edge " << i;
    }
    // Not a constant table: the test edges score differently.
    EXPECT_NE(*std::min_element(pos.begin(), pos.end()), *std::max_element(pos.begin(), pos.end()));
  }
}

// tessel predict --edges: a link checkpoint scores the given pairs; given the test edges (a
// header, then lines as `src dst` and as `src,dst`), the scores are the training run's
// --predictions of the same epoch, bit for bit on the same partition and rank count. Bad rows and
// ids out of range are refused with the file and line, and nothing is written.
TEST_F(LinkCli, PredictScoresGivenEdgesAsTheTrainingRun) {
  const auto pred = scratch("tpred.h5");
  run_ok(test::mpirun(2) + tessel_bin() + " train " + parts(2).string() +
         " --mode full --task link --hidden 16 --out-dim 8 --dropout 0 --epochs 6 --seed 3 "
         "--quiet --predictions " + pred.string() + " --checkpoint " + scratch("lck").string());
  const auto f = h5::File::open_read(pred);
  const auto pos_edge = f.read<std::int64_t>("/pos_edge");
  const auto expected = f.read<float>("/pos_score");
  ASSERT_FALSE(expected.empty());
  const auto pairs = scratch("pairs.txt");
  {
    std::ofstream out(pairs);
    out << "src,dst\n";
    for (std::size_t i = 0; i < expected.size(); ++i)
      out << pos_edge[2 * i] << (i % 2 ? "," : " ") << pos_edge[2 * i + 1] << "\n";
  }
  const auto given = scratch("given.h5");
  const std::string predict = test::mpirun(2) + tessel_bin() + " predict " +
                              scratch("lck").string() + " " + parts(2).string();
  run_ok(predict + " --edges " + pairs.string() + " --predictions " + given.string());
  const auto g = h5::File::open_read(given);
  EXPECT_EQ(g.attr_string("format"), "tessel-link-predictions");
  EXPECT_EQ(g.attr_string("split"), "given");
  EXPECT_EQ(g.read<std::int64_t>("/pos_edge"), pos_edge);
  EXPECT_EQ(g.read<float>("/pos_score"), expected);
  EXPECT_FALSE(g.exists("/neg_score"));

  const auto bad = scratch("bad.txt");
  const auto bad_out = scratch("bad.h5");
  for (const auto& [text, message] :
       std::vector<std::pair<std::string, std::string>>{
           {"1 2\n3 x\n", "bad.txt line 2: expected `src dst` or `src,dst`"},
           {"1 2\n\n4 500\n", "bad.txt line 3: node id 500 is outside [0, 500)"},
           {"1 2 3\n", "bad.txt line 1: expected"}}) {
    std::ofstream(bad) << text;
    std::string out;
    EXPECT_NE(test::run_command(predict + " --edges " + bad.string() + " --predictions " +
                                    bad_out.string(),
                                &out),
              0);
    EXPECT_NE(out.find(message), std::string::npos) << out;
    EXPECT_FALSE(fs::exists(bad_out));
  }
}

// Negatives are keyed by (seed, epoch, edge id): a run resumed from a checkpoint continues the
// uninterrupted run bit for bit.
TEST_F(LinkCli, ResumeContinuesBitForBit) {
  const std::string common = tessel_bin() + " train " + parts(2).string() +
                             " --mode full --task link --hidden 16 --out-dim 8 --dropout 0.2 "
                             "--seed 4 --quiet ";
  run_ok(test::mpirun(2) + common + "--epochs 6 --metrics " + scratch("whole.jsonl").string());
  run_ok(test::mpirun(2) + common + "--epochs 3 --checkpoint " + scratch("ck").string() +
         " --checkpoint-every 3");
  run_ok(test::mpirun(2) + common + "--epochs 6 --resume " + scratch("ck").string() +
         " --metrics " + scratch("resumed.jsonl").string());
  const auto whole = epochs_of(scratch("whole.jsonl"));
  const auto resumed = epochs_of(scratch("resumed.jsonl"));
  ASSERT_EQ(whole.size(), 6u);
  ASSERT_EQ(resumed.size(), 3u);
  for (std::size_t e = 0; e < 3; ++e) {
    EXPECT_EQ(resumed[e].at("loss").get<double>(), whole[e + 3].at("loss").get<double>()) << e;
    EXPECT_EQ(resumed[e].at("test_auc").get<double>(), whole[e + 3].at("test_auc").get<double>());
  }
}

TEST_F(LinkCli, RefusesANodeClassificationPartition) {
  const auto plain = dir_->path() / "plain.h5";
  run_ok(tessel_bin() + " convert synthetic " + plain.string() + " --nodes 200 --seed 1");
  run_ok(tessel_bin() + " partition " + plain.string() + " --parts 1 --out " +
         scratch("plain1").string());
  std::string out;
  EXPECT_NE(test::run_command(tessel_bin() + " train " + scratch("plain1").string() +
                                  " --mode full --task link --epochs 1 --quiet",
                              &out),
            0);
  EXPECT_NE(out.find("--task link needs a partition of a link store"), std::string::npos) << out;
}

// --decoder mlp with --negative-sampling degree: the same losses at 1 and 2 ranks (the decoder's
// gradient is summed over ranks, the degree table is the whole graph's), and both flags change
// the run (an MLP decoder and other negatives give other losses than the dot product's).
TEST_F(LinkCli, MlpDecoderAndDegreeNegativesDoNotDependOnRankCount) {
  const std::string common = " --mode full --task link --model gcn --hidden 16 --out-dim 8 "
                             "--dropout 0 --lr 0.01 --negatives 2 --epochs 15 --eval-every 5 "
                             "--seed 8 --quiet --metrics ";
  std::vector<std::vector<double>> runs;
  for (int p : {1, 2}) {
    const auto metrics = scratch("mlp" + std::to_string(p) + ".jsonl");
    run_ok(test::mpirun(p) + tessel_bin() + " train " + parts(p).string() + common +
           metrics.string() + " --decoder mlp --negative-sampling degree");
    runs.push_back(losses(metrics));
  }
  ASSERT_EQ(runs[0].size(), 15u);
  for (std::size_t e = 0; e < runs[0].size(); ++e)
    EXPECT_LE(std::abs(runs[1][e] - runs[0][e]), 1e-5 * std::abs(runs[0][e])) << "epoch " << e + 1;
  EXPECT_LT(runs[0].back(), runs[0].front());
  for (const std::string other : {" --decoder mlp", " --negative-sampling degree"}) {
    const auto metrics = scratch("other.jsonl");
    fs::remove(metrics);
    run_ok(tessel_bin() + " train " + parts(1).string() + common + metrics.string() + other);
    EXPECT_NE(losses(metrics)[1], runs[0][1]) << other;
  }
  std::string out;
  EXPECT_NE(test::run_command(tessel_bin() + " train " + parts(1).string() +
                                  " --mode full --epochs 1 --quiet --decoder mlp",
                              &out),
            0);
  EXPECT_NE(out.find("--decoder mlp applies to --task link"), std::string::npos) << out;
}

// The MLP decoder's parameters are in the checkpoint and the optimizer: a resumed run continues
// bit for bit, and `predict --edges` scores the test edges as the training run did.
TEST_F(LinkCli, MlpDecoderResumesBitForBitAndPredictsAsTraining) {
  const std::string common = tessel_bin() + " train " + parts(2).string() +
                             " --mode full --task link --decoder mlp --hidden 16 --out-dim 8 "
                             "--dropout 0.2 --seed 4 --quiet ";
  run_ok(test::mpirun(2) + common + "--epochs 6 --metrics " + scratch("mwhole.jsonl").string() +
         " --predictions " + scratch("mpred.h5").string() + " --checkpoint " +
         scratch("mck_all").string());
  run_ok(test::mpirun(2) + common + "--epochs 3 --checkpoint " + scratch("mck").string() +
         " --checkpoint-every 3");
  run_ok(test::mpirun(2) + common + "--epochs 6 --resume " + scratch("mck").string() +
         " --metrics " + scratch("mresumed.jsonl").string());
  const auto whole = epochs_of(scratch("mwhole.jsonl"));
  const auto resumed = epochs_of(scratch("mresumed.jsonl"));
  ASSERT_EQ(whole.size(), 6u);
  ASSERT_EQ(resumed.size(), 3u);
  for (std::size_t e = 0; e < 3; ++e) {
    EXPECT_EQ(resumed[e].at("loss").get<double>(), whole[e + 3].at("loss").get<double>()) << e;
    EXPECT_EQ(resumed[e].at("test_auc").get<double>(), whole[e + 3].at("test_auc").get<double>());
  }
  const auto f = h5::File::open_read(scratch("mpred.h5"));
  const auto pos_edge = f.read<std::int64_t>("/pos_edge");
  const auto expected = f.read<float>("/pos_score");
  const auto pairs = scratch("mpairs.txt");
  {
    std::ofstream out(pairs);
    for (std::size_t i = 0; i < expected.size(); ++i)
      out << pos_edge[2 * i] << " " << pos_edge[2 * i + 1] << "\n";
  }
  run_ok(test::mpirun(2) + tessel_bin() + " predict " + scratch("mck_all").string() + " " +
         parts(2).string() + " --edges " + pairs.string() + " --predictions " +
         scratch("mgiven.h5").string());
  EXPECT_EQ(h5::File::open_read(scratch("mgiven.h5")).read<float>("/pos_score"), expected);
}

// Sampled mode: batches of training edges, K uniform negatives each, the neighbourhoods of every
// endpoint sampled by their owners. The global batch (--batch-size x ranks) and every draw are
// keyed by ids, so 1 and 2 ranks give the same losses (1e-5 relative: float sums in another
// order, as the node task's sampled runs), and the model learns.
TEST_F(LinkCli, SampledLossesDoNotDependOnRankCountAndTheModelLearns) {
  for (const std::string model : {"sage", "gcn"}) {
    std::vector<std::vector<double>> runs;
    std::vector<nlohmann::json> last;
    for (int p : {1, 2}) {
      const auto metrics = scratch("s-" + model + std::to_string(p) + ".jsonl");
      run_ok(test::mpirun(p) + tessel_bin() + " train " + parts(p).string() +
             " --mode sampled --task link --model " + model +
             " --fanouts 5,3 --batch-size " + std::to_string(128 / p) +
             " --negatives 2 --hidden 16 --out-dim 8 --dropout 0.2 --lr 0.01 --epochs 4 "
             "--eval-every 2 --seed 7 --quiet --metrics " + metrics.string());
      runs.push_back(losses(metrics));
      last.push_back(epochs_of(metrics).back());
    }
    ASSERT_EQ(runs[0].size(), 4u) << model;
    EXPECT_LT(runs[0].back(), runs[0].front()) << model;
    for (std::size_t e = 0; e < runs[0].size(); ++e)
      EXPECT_LE(std::abs(runs[1][e] - runs[0][e]), 1e-5 * std::abs(runs[0][e]))
          << model << " epoch " << e + 1;
    EXPECT_EQ(last[0].at("train_edges").get<std::int64_t>(),
              last[1].at("train_edges").get<std::int64_t>());
    EXPECT_GT(last[0].at("test_auc").get<double>(), 0.6) << model << " " << last[0].dump();
    EXPECT_NEAR(last[0].at("test_auc").get<double>(), last[1].at("test_auc").get<double>(), 1e-4)
        << model;
  }
}

TEST_F(LinkCli, SampledResumeContinuesBitForBit) {
  const std::string common = tessel_bin() + " train " + parts(2).string() +
                             " --mode sampled --task link --fanouts 4,4 --batch-size 64 "
                             "--hidden 16 --out-dim 8 --dropout 0.2 --seed 4 --quiet ";
  run_ok(test::mpirun(2) + common + "--epochs 4 --metrics " + scratch("s-whole.jsonl").string());
  run_ok(test::mpirun(2) + common + "--epochs 2 --checkpoint " + scratch("s-ck").string() +
         " --checkpoint-every 2");
  run_ok(test::mpirun(2) + common + "--epochs 4 --resume " + scratch("s-ck").string() +
         " --metrics " + scratch("s-resumed.jsonl").string());
  const auto whole = epochs_of(scratch("s-whole.jsonl"));
  const auto resumed = epochs_of(scratch("s-resumed.jsonl"));
  ASSERT_EQ(whole.size(), 4u);
  ASSERT_EQ(resumed.size(), 2u);
  for (std::size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(resumed[e].at("loss").get<double>(), whole[e + 2].at("loss").get<double>()) << e;
    EXPECT_EQ(resumed[e].at("test_auc").get<double>(), whole[e + 2].at("test_auc").get<double>());
  }
}

// Sampled link training runs on the CPU's host path: the device-resident path is refused with
// one line, before anything is trained.
TEST_F(LinkCli, SampledRefusesTheDeviceResidentPath) {
  std::string out;
  EXPECT_NE(test::run_command(tessel_bin() + " train " + parts(1).string() +
                                  " --mode sampled --task link --sample-routing device "
                                  "--epochs 1 --quiet",
                              &out),
            0);
  EXPECT_NE(out.find("--task link in sampled mode runs on the CPU's host path"), std::string::npos)
      << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

// The graph modes train classification or link prediction: --task node-regression (dynamic
// mode's) is refused in one line instead of running as classification.
TEST_F(LinkCli, GraphModesRefuseNodeRegression) {
  for (const char* mode : {"full", "sampled"}) {
    std::string out;
    EXPECT_NE(test::run_command(tessel_bin() + " train " + parts(1).string() + " --mode " + mode +
                                    " --task node-regression --epochs 1 --quiet",
                                &out),
              0)
        << mode;
    EXPECT_NE(out.find("--task node-regression is dynamic mode's; --mode " + std::string(mode) +
                       " trains node-classification (the default) or link"),
              std::string::npos)
        << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  }
}

// Sampled mode with --decoder mlp and --negative-sampling degree: the decoder's gradient is summed
// over ranks and the degree table is the whole graph's, so 1 and 2 ranks give the same losses;
// the decoder is in the checkpoint and the optimizer state, so a resumed run continues bit for
// bit; and the flags change the run (other losses than the dot product's uniform negatives).
TEST_F(LinkCli, SampledMlpDecoderAndDegreeNegativesDoNotDependOnRankCountAndResume) {
  const std::string common = " --mode sampled --task link --model sage --fanouts 5,3 "
                             "--negatives 2 --hidden 16 --out-dim 8 --dropout 0.2 --lr 0.01 "
                             "--eval-every 2 --seed 7 --quiet ";
  const std::string flags = " --decoder mlp --negative-sampling degree";
  auto batch = [](int p) { return " --batch-size " + std::to_string(128 / p); };
  std::vector<std::vector<double>> runs;
  for (int p : {1, 2}) {
    const auto metrics = scratch("sm-" + std::to_string(p) + ".jsonl");
    run_ok(test::mpirun(p) + tessel_bin() + " train " + parts(p).string() + common + batch(p) +
           flags + " --epochs 4 --metrics " + metrics.string());
    runs.push_back(losses(metrics));
  }
  ASSERT_EQ(runs[0].size(), 4u);
  EXPECT_LT(runs[0].back(), runs[0].front());
  for (std::size_t e = 0; e < runs[0].size(); ++e)
    EXPECT_LE(std::abs(runs[1][e] - runs[0][e]), 1e-5 * std::abs(runs[0][e])) << "epoch " << e + 1;
  for (const std::string other : {" --decoder mlp", " --negative-sampling degree"}) {
    const auto metrics = scratch("sm-other.jsonl");
    fs::remove(metrics);
    run_ok(tessel_bin() + " train " + parts(1).string() + common + batch(1) + other +
           " --epochs 1 --metrics " + metrics.string());
    EXPECT_NE(losses(metrics)[0], runs[0][0]) << other;
  }
  run_ok(test::mpirun(2) + tessel_bin() + " train " + parts(2).string() + common + batch(2) +
         flags + " --epochs 2 --checkpoint " + scratch("sm-ck").string() +
         " --checkpoint-every 2");
  const auto resumed_metrics = scratch("sm-resumed.jsonl");
  run_ok(test::mpirun(2) + tessel_bin() + " train " + parts(2).string() + common + batch(2) +
         flags + " --epochs 4 --resume " + scratch("sm-ck").string() + " --metrics " +
         resumed_metrics.string());
  const auto resumed = losses(resumed_metrics);
  ASSERT_EQ(resumed.size(), 2u);
  for (std::size_t e = 0; e < 2; ++e) EXPECT_EQ(resumed[e], runs[1][e + 2]) << e;
}
