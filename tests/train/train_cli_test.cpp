// End-to-end training through the `tessel` binary: P-rank invariance, resume, fault handling.
#include "train_test_helpers.hpp"

#include "dataset_fixtures.hpp"

#include "tessel/datasets/dataset.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
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

// `partition --order` renumbers each part's nodes; nothing but the order of float sums may
// change: losses and parameters within the rank-count bound (dropout on, so the draws must be
// keyed by source id), predictions in source id order within the same bound, and a checkpoint
// of the unordered run resumes on an ordered partition. Against --order none at P = 1.
TEST_F(TrainCli, NodeOrderChangesNothingButTheSummationOrder) {
  const auto h5 = scratch("synth.h5").string();
  const auto base = [&](const fs::path& parts, const std::string& tag) {
    return tessel_bin() + " train " + parts.string() +
           " --mode full --model gcn --epochs 6 --dropout 0.5 --hidden 16 --lr 0.05 --seed 7 "
           "--quiet --metrics " + scratch(tag + ".jsonl").string();
  };
  run_ok(tessel_bin() + " partition " + h5 + " --parts 1 --order none --out " +
         scratch("o-none").string());
  run_ok(base(scratch("o-none"), "o-none") + " --predictions " + scratch("o-none.pred.h5").string() +
         " --checkpoint " + scratch("o-none-ck").string() + " --checkpoint-every 6");
  // The same run stopped after epoch 3, to be resumed on an ordered partition.
  run_ok(tessel_bin() + " train " + scratch("o-none").string() +
         " --mode full --model gcn --epochs 3 --dropout 0.5 --hidden 16 --lr 0.05 --seed 7 "
         "--quiet --checkpoint " + scratch("o-none-ck3").string() + " --checkpoint-every 3");
  const auto want = losses(scratch("o-none.jsonl"));
  const auto want_params = checkpoint_params(scratch("o-none-ck"));
  const auto want_pred = h5::File::open_read(scratch("o-none.pred.h5")).read<float>("/logits");
  const std::pair<std::string, int> cases[] = {
      {"rcm", 1}, {"rcm", 2}, {"bfs", 2}, {"community", 2}};
  for (const auto& [order, p] : cases) {
      SCOPED_TRACE(order + " P=" + std::to_string(p));
      const auto tag = "o-" + order + std::to_string(p);
      run_ok(tessel_bin() + " partition " + h5 + " --parts " + std::to_string(p) + " --order " +
             order + " --out " + scratch(tag).string());
      run_ok(test::mpirun(p) + base(scratch(tag), tag) + " --predictions " +
             scratch(tag + ".pred.h5").string() + " --checkpoint " + scratch(tag + "-ck").string() +
             " --checkpoint-every 6");
      expect_same_losses(want, losses(scratch(tag + ".jsonl")));
      const auto params = checkpoint_params(scratch(tag + "-ck"));
      ASSERT_EQ(params.size(), want_params.size());
      for (std::size_t k = 0; k < params.size(); ++k)
        ASSERT_NEAR(params[k], want_params[k], 1e-5f + 1e-4f * std::abs(want_params[k])) << k;
      h5::File pred = h5::File::open_read(scratch(tag + ".pred.h5"));
      const auto ids = pred.read<std::int64_t>("/node_id");
      for (std::size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(ids[i], static_cast<std::int64_t>(i));
      const auto logits = pred.read<float>("/logits");
      ASSERT_EQ(logits.size(), want_pred.size());
      for (std::size_t i = 0; i < logits.size(); ++i)
        ASSERT_NEAR(logits[i], want_pred[i], 1e-4f * (1 + std::abs(want_pred[i]))) << i;
    }
  // The unordered run's epoch-3 checkpoint, resumed on the RCM partition at P = 2 (epochs 4..6).
  run_ok(test::mpirun(2) + base(scratch("o-rcm2"), "o-resumed") + " --resume " +
         scratch("o-none-ck3").string());
  const auto resumed = losses(scratch("o-resumed.jsonl"));
  ASSERT_EQ(resumed.size(), 3u);
  expect_same_losses(std::vector<double>(want.begin() + 3, want.end()), resumed);
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
  // The resumed summary counts the run's epochs from the start, and this process's apart.
  const auto summary = read_metrics(scratch("resumed.jsonl")).back();
  EXPECT_EQ(summary.at("epochs"), 12);
  EXPECT_EQ(summary.at("epochs_this_run"), 7);
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
  // On the CPU, the tensors' peak since setup: some bytes (the features at least), fewer than
  // the process's peak RSS.
  const auto host_peak = lines[3].at("host_peak_bytes").get<std::int64_t>();
  EXPECT_GT(host_peak, 0);
  EXPECT_LT(host_peak, lines[3].at("peak_rss_bytes").get<std::int64_t>());
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

// Results go to stdout (so `> out.txt` keeps them), diagnostics to stderr; with --eval-every
// the epochs between evaluations print nothing unless --verbose; counts read "1 rank".
TEST_F(TrainCli, ResultsOnStdoutAndOnlyEvaluatedEpochs) {
  const fs::path out = scratch("stdout.txt"), err = scratch("stderr.txt");
  const std::string train = tessel_bin() + " train " + parts(1).string() +
                            " --epochs 4 --eval-every 2 --threads 1";
  // In a subshell: run_command adds its own 2>&1.
  ASSERT_EQ(test::run_command("(" + train + " > " + out.string() + " 2> " + err.string() + ")"), 0);
  const std::string o = test::read_file_bytes(out), e = test::read_file_bytes(err);
  EXPECT_NE(o.find("best valid acc"), std::string::npos) << o;
  EXPECT_NE(o.find("epoch    2 |"), std::string::npos) << o;
  EXPECT_NE(o.find("epoch    4 |"), std::string::npos) << o;
  EXPECT_EQ(o.find("epoch    1 |"), std::string::npos) << o;
  EXPECT_EQ(o.find("not evaluated"), std::string::npos) << o;
  EXPECT_NE(e.find("full training: 1 rank x 1 thread,"), std::string::npos) << e;
  EXPECT_EQ(e.find("best valid acc"), std::string::npos) << e;
  ASSERT_EQ(
      test::run_command("(" + train + " --verbose > " + out.string() + " 2> " + err.string() + ")"),
      0);
  const std::string verbose = test::read_file_bytes(out);
  EXPECT_NE(verbose.find("epoch    1 | loss"), std::string::npos) << verbose;
  EXPECT_NE(verbose.find("not evaluated"), std::string::npos) << verbose;
}

// --eval-every 0: training alone. The losses are those of an evaluated run (evaluation changes
// no state training reads), no epoch is evaluated, and the outputs are still written.
TEST_F(TrainCli, EvalEveryZeroTrainsTheSameLossesWithoutEvaluating) {
  const fs::path none = scratch("eval0.jsonl"), every = scratch("eval1.jsonl");
  const fs::path predictions = scratch("eval0-pred.h5");
  for (const char* mode : {"full", "sampled"}) {
    const std::string train = tessel_bin() + " train " + parts(1).string() +
                              " --epochs 3 --threads 1 --quiet --mode " + mode + " --metrics ";
    ASSERT_EQ(test::run_command(train + none.string() + " --eval-every 0 --predictions " +
                                predictions.string()),
              0);
    ASSERT_EQ(test::run_command(train + every.string()), 0);
    const auto a = test::epochs_of(none), b = test::epochs_of(every);
    ASSERT_EQ(a.size(), b.size()) << mode;
    int epochs = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      ++epochs;
      EXPECT_EQ(a[i]["loss"].get<double>(), b[i]["loss"].get<double>()) << mode << " line " << i;
      EXPECT_FALSE(a[i]["evaluated"].get<bool>()) << mode << " line " << i;
      EXPECT_TRUE(b[i]["evaluated"].get<bool>()) << mode << " line " << i;
    }
    EXPECT_EQ(epochs, 3) << mode;
    EXPECT_TRUE(fs::exists(predictions)) << mode;
    fs::remove(predictions);
  }
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

// The test accuracy of a predictions file, against the store's labels and test split.
double predicted_test_acc(const fs::path& predictions, const fs::path& store) {
  const auto data = datasets::read_store(store);
  h5::File file = h5::File::open_read(predictions);
  const auto ids = file.read<std::int64_t>("/node_id");
  const auto predicted = file.read<std::int64_t>("/predicted");
  std::vector<std::int64_t> by_node(static_cast<std::size_t>(data.num_nodes), -1);
  for (std::size_t i = 0; i < ids.size(); ++i) by_node[ids[i]] = predicted[i];
  std::int64_t correct = 0;
  for (const NodeId v : data.test) correct += by_node[v] == data.labels[v];
  return static_cast<double>(correct) / static_cast<double>(data.test.size());
}

// --save best (the default): the predictions hold the best validation epoch and reproduce the
// summary's test accuracy exactly, at 1 and 2 ranks; best.h5 beside the checkpoint holds that
// epoch while checkpoint.h5 keeps the last for --resume. --save last: the last epoch's.
TEST_F(TrainCli, PredictionsAtTheBestEpochReproduceTheSummary) {
  for (const int p : {1, 2}) {
    const std::string tag = "best-p" + std::to_string(p);
    const fs::path pred = scratch(tag + ".h5"), metrics = scratch(tag + ".jsonl"),
                   ck = scratch(tag + "-ck");
    run_ok(test::mpirun(p, 1) + tessel_bin() + " train " + parts(p).string() +
           " --epochs 40 --lr 0.05 --quiet --predictions " + pred.string() + " --metrics " +
           metrics.string() + " --checkpoint " + ck.string());
    const auto lines = test::read_metrics(metrics);
    const auto& summary = lines.back();
    const int best = summary["best_epoch"].get<int>();
    SCOPED_TRACE(tag + ": best epoch " + std::to_string(best));
    EXPECT_EQ(summary["saved_epoch"].get<int>(), best);
    EXPECT_EQ(predicted_test_acc(pred, scratch("synth.h5")), summary["test_acc"].get<double>());
    EXPECT_EQ(h5::File::open_read(ck / "best.h5").attr_int("epoch"), best);
    EXPECT_EQ(h5::File::open_read(ck / "checkpoint.h5").attr_int("epoch"), 40);
    if (p == 1) {
      // The run must pick an epoch before the last, or this test shows nothing.
      EXPECT_LT(best, 40);
      run_ok(tessel_bin() + " train " + parts(p).string() +
             " --epochs 40 --lr 0.05 --quiet --save last --predictions " + pred.string() +
             " --metrics " + metrics.string());
      const auto last = test::read_metrics(metrics);
      EXPECT_EQ(last.back()["saved_epoch"].get<int>(), 40);
      EXPECT_EQ(predicted_test_acc(pred, scratch("synth.h5")),
                last[last.size() - 2]["test_acc"].get<double>());
    }
  }
}

// `tessel predict` with a saved model reproduces the training run's predictions of the same
// epoch bit for bit on the same partition and rank count (1 and 2), and within rounding on
// another rank count (the GEMM's row blocks differ).
TEST_F(TrainCli, PredictReproducesTheTrainingRunsPredictions) {
  for (const int p : {1, 2}) {
    const std::string tag = "predict-p" + std::to_string(p);
    const fs::path trained = scratch(tag + "-train.h5"), predicted = scratch(tag + ".h5"),
                   ck = scratch(tag + "-ck");
    run_ok(test::mpirun(p, 1) + tessel_bin() + " train " + parts(p).string() +
           " --mode sampled --model sage --epochs 6 --quiet --predictions " + trained.string() +
           // At 2 ranks with row-normalized features: predict normalizes them as training did.
           (p == 2 ? " --normalize-features row" : "") +
           " --embeddings " + scratch(tag + "-train-emb.h5").string() + " --checkpoint " +
           ck.string());
    run_ok(test::mpirun(p, 1) + tessel_bin() + " predict " + ck.string() + " " +
           parts(p).string() + " --predictions " + predicted.string() + " --embeddings " +
           scratch(tag + "-emb.h5").string());
    h5::File a = h5::File::open_read(trained), b = h5::File::open_read(predicted);
    EXPECT_EQ(a.read<std::int64_t>("/node_id"), b.read<std::int64_t>("/node_id")) << tag;
    EXPECT_EQ(a.read<float>("/logits"), b.read<float>("/logits")) << tag;
    const h5::File ea = h5::File::open_read(scratch(tag + "-train-emb.h5")),
                   eb = h5::File::open_read(scratch(tag + "-emb.h5"));
    EXPECT_EQ(ea.read<float>("/embedding"), eb.read<float>("/embedding")) << tag;
    EXPECT_EQ(ea.read<std::int64_t>("/node_id"), a.read<std::int64_t>("/node_id")) << tag;
    if (p == 2) {
      const fs::path other = scratch(tag + "-on-4.h5");
      run_ok(test::mpirun(4, 1) + tessel_bin() + " predict " + (ck / "best.h5").string() + " " +
             parts(4).string() + " --predictions " + other.string());
      const auto x = a.read<float>("/logits"), y = h5::File::open_read(other).read<float>("/logits");
      ASSERT_EQ(x.size(), y.size());
      for (std::size_t i = 0; i < x.size(); ++i)
        EXPECT_NEAR(x[i], y[i], 1e-4 * (1 + std::abs(x[i]))) << i;
    }
  }
  // A graph of another feature width: one error naming the checkpoint and both models.
  run_ok(tessel_bin() + " convert synthetic --nodes 100 --classes 4 --feat-dim 12 --seed 1 " +
         scratch("narrow.h5").string());
  run_ok(tessel_bin() + " partition " + scratch("narrow.h5").string() + " --parts 1 --out " +
         scratch("narrow-p1").string());
  std::string out;
  EXPECT_EQ(test::run_command(tessel_bin() + " predict " + scratch("predict-p1-ck").string() +
                                  " " + scratch("narrow-p1").string() + " --predictions " +
                                  scratch("narrow-pred.h5").string(),
                              &out),
            2);
  EXPECT_NE(out.find("best.h5: checkpoint was written for model"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(scratch("narrow-pred.h5")));
}

// --embeddings: the last hidden layer's output of every node (after its ReLU), by source id,
// the same within rounding on 1 and 2 ranks; a 1-layer model has none and is refused.
TEST_F(TrainCli, EmbeddingsHaveTheDocumentedShapeAndIds) {
  std::vector<std::vector<float>> runs;
  for (const int p : {1, 2}) {
    const fs::path file = scratch("emb-p" + std::to_string(p) + ".h5");
    run_ok(test::mpirun(p) + tessel_bin() + " train " + parts(p).string() +
           " --mode full --layers 3 --hidden 12 --epochs 3 --quiet --embeddings " + file.string());
    h5::File f = h5::File::open_read(file);
    EXPECT_EQ(f.attr_string("format"), "tessel-embeddings");
    EXPECT_EQ(f.attr_int("num_nodes"), 600);
    EXPECT_EQ(f.attr_int("dim"), 12);
    EXPECT_EQ(f.attr_string("layer"), "GNN layer 1 (layers 0..2), after its ReLU");
    EXPECT_EQ(f.dims("/embedding"), (std::vector<std::int64_t>{600, 12}));
    const auto ids = f.read<std::int64_t>("/node_id");
    ASSERT_EQ(ids.size(), 600u);
    for (std::size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i], static_cast<std::int64_t>(i));
    runs.push_back(f.read<float>("/embedding"));
  }
  const auto& e = runs[0];
  EXPECT_TRUE(std::all_of(e.begin(), e.end(), [](float v) { return v >= 0.0f; }));
  EXPECT_GT(std::count_if(e.begin(), e.end(), [](float v) { return v > 0.0f; }), 600);
  ASSERT_EQ(runs[1].size(), e.size());
  for (std::size_t i = 0; i < e.size(); ++i)
    ASSERT_NEAR(runs[1][i], e[i], 1e-4f * (1 + e[i])) << i;
  std::string out;
  EXPECT_EQ(test::run_command(tessel_bin() + " train " + parts(1).string() +
                                  " --layers 1 --epochs 1 --embeddings " +
                                  scratch("emb-1.h5").string(),
                              &out),
            2);
  EXPECT_NE(out.find("--embeddings writes the last hidden layer's output, and a 1-layer gcn model "
                     "has no hidden layer"),
            std::string::npos)
      << out;
  EXPECT_FALSE(fs::exists(scratch("emb-1.h5")));
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

// The output files are gathered at rank 0 a range of source ids per round: many small rounds
// (TESSEL_INFER_BLOCK_ELEMENTS=8: 8 ids a round for 4 classes, 2 for 12 hidden columns) write
// the same files, bit for bit, as one round. Full-batch mode, so the rounds are the only change.
TEST_F(TrainCli, OutputFilesWrittenInManyRoundsEqualOneRound) {
  for (const std::string env : {"", "TESSEL_INFER_BLOCK_ELEMENTS=8 "}) {
    const std::string tag = env.empty() ? "one" : "many";
    run_ok(env + test::mpirun(2) + tessel_bin() + " train " + parts(2).string() +
           " --mode full --layers 3 --hidden 12 --epochs 2 --seed 5 --quiet --predictions " +
           scratch(tag + "-pred.h5").string() + " --embeddings " +
           scratch(tag + "-emb.h5").string());
  }
  for (const auto& [file, datasets] :
       {std::pair<std::string, std::vector<std::string>>{"pred", {"/logits"}},
        std::pair<std::string, std::vector<std::string>>{"emb", {"/embedding"}}}) {
    h5::File one = h5::File::open_read(scratch("one-" + file + ".h5"));
    h5::File many = h5::File::open_read(scratch("many-" + file + ".h5"));
    EXPECT_EQ(one.read<std::int64_t>("/node_id"), many.read<std::int64_t>("/node_id")) << file;
    for (const auto& name : datasets) {
      const auto a = one.read<float>(name);
      const auto b = many.read<float>(name);
      ASSERT_EQ(a.size(), b.size()) << name;
      ASSERT_FALSE(a.empty());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << name;
    }
  }
  h5::File pred = h5::File::open_read(scratch("many-pred.h5"));
  const auto ids = pred.read<std::int64_t>("/node_id");
  ASSERT_EQ(ids.size(), 600u);
  for (std::size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(ids[i], static_cast<std::int64_t>(i));
  EXPECT_EQ(pred.read<std::int64_t>("/predicted"),
            h5::File::open_read(scratch("one-pred.h5")).read<std::int64_t>("/predicted"));
}
