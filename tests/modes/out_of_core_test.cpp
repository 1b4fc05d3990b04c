// Features read from the part file within --feature-memory: sampled runs give the losses,
// accuracies, predictions and checkpoints of the in-memory run bit for bit (1 and 2 ranks, also
// on AVX2, also with a budget of no row at all), and the modes that hold every row refuse a
// budget they cannot keep. SIGN precompute within a budget writes the files it writes in
// memory, and pipeline training refuses a budget below the SIGN features it holds.
#include "train_test_helpers.hpp"

#include "tessel/datasets/h5.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <iterator>

using namespace tessel;
namespace fs = std::filesystem;
using test::checkpoint_params;
using test::epochs_of;
using test::run_ok;
using test::tessel_bin;

namespace {

class OutOfCore : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir("out-of-core");
    test::make_partitions(dir_->path(),
                          "--nodes 600 --avg-degree 8 --classes 4 --feat-dim 12 --seed 5", {1, 2});
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path parts(int p) { return dir_->path() / ("p" + std::to_string(p)); }
  static fs::path scratch(const std::string& name) { return dir_->path() / name; }
  static inline test::TempDir* dir_ = nullptr;
};

std::vector<float> predictions_of(const fs::path& path) {
  const h5::File file = h5::File::open_read(path);
  return file.read<float>("/logits");
}

std::vector<float> embeddings_of(const fs::path& path) {
  const h5::File file = h5::File::open_read(path);
  return file.read<float>("/embedding");
}

void expect_same_floats(const std::vector<float>& a, const std::vector<float>& b,
                        const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  ASSERT_FALSE(a.empty()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what;
}

// One sampled run at `p` ranks with `memory` as --feature-memory; its outputs under tag. A run
// that fails is a fatal failure: callers wrap it in ASSERT_NO_FATAL_FAILURE, so no output of a
// failed run is read.
// Every run infers in blocks of 64 elements (4 to 5 rows at these widths), so layer-wise
// inference crosses many block boundaries; the blocks never depend on the budget.
constexpr const char* kSmallBlocks = "TESSEL_INFER_BLOCK_ELEMENTS=64 ";

// `model`: the model's flags. GraphSAGE 2x16 on 12 features aggregates first at layer 0 (12 to
// 16 columns) and transforms first at layer 1 (16 to 4).
void run_sampled(const fs::path& part_dir, int p, const std::string& memory,
                 const fs::path& out_dir, const std::string& tag, const std::string& env = "",
                 const std::string& model = "--model sage --hidden 16",
                 const std::string& normalize = "row") {
  fs::create_directories(out_dir);
  run_ok(kSmallBlocks + env + test::mpirun(p) + tessel_bin() + " train " + part_dir.string() +
         " --mode sampled " + model + " --fanouts 5,3 --batch-size " + std::to_string(48 / p) +
         " --epochs 2 --dropout 0.3 --lr 0.02 --seed 7 --normalize-features " + normalize +
         " "
         "--cache-ratio 0.3 --quiet --feature-memory " +
         memory + " --metrics " + (out_dir / (tag + ".jsonl")).string() + " --predictions " +
         (out_dir / (tag + "-pred.h5")).string() + " --embeddings " +
         (out_dir / (tag + "-emb.h5")).string() + " --checkpoint " + (out_dir / tag).string());
}

void expect_same_run(const fs::path& dir, const std::string& a, const std::string& b) {
  const auto ea = epochs_of(dir / (a + ".jsonl")), eb = epochs_of(dir / (b + ".jsonl"));
  ASSERT_EQ(ea.size(), 2u);
  ASSERT_EQ(eb.size(), ea.size());
  for (std::size_t e = 0; e < ea.size(); ++e) {
    EXPECT_EQ(ea[e].at("loss").get<double>(), eb[e].at("loss").get<double>()) << b << " " << e;
    EXPECT_EQ(ea[e].at("valid_acc").get<double>(), eb[e].at("valid_acc").get<double>()) << b;
    EXPECT_EQ(ea[e].at("test_acc").get<double>(), eb[e].at("test_acc").get<double>()) << b;
  }
  expect_same_floats(predictions_of(dir / (a + "-pred.h5")), predictions_of(dir / (b + "-pred.h5")),
                     b + " predictions");
  expect_same_floats(embeddings_of(dir / (a + "-emb.h5")), embeddings_of(dir / (b + "-emb.h5")),
                     b + " embeddings");
  const auto ca = checkpoint_params(dir / a), cb = checkpoint_params(dir / b);
  ASSERT_EQ(ca.size(), cb.size());
  EXPECT_EQ(std::memcmp(ca.data(), cb.data(), ca.size() * sizeof(float)), 0) << b;
}

} // namespace

TEST_F(OutOfCore, TinyBudgetsGiveTheInMemoryRunBitForBit) {
  const std::string model = "--model sage --hidden 16";
  for (int p : {1, 2}) {
    const fs::path out = scratch("bits" + std::to_string(p));
    // Normalized rows are copied out of the read-ahead's buffer and normalized; raw rows are
    // pointed at there: one rank count each.
    const std::string normalize = p == 1 ? "row" : "none";
    ASSERT_NO_FATAL_FAILURE(run_sampled(parts(p), p, "all", out, "all", "", model, normalize));
    std::ifstream manifest(parts(p) / "partition.json");
    const auto edges = nlohmann::json::parse(manifest).at("num_edges").get<std::int64_t>();
    ASSERT_GT(edges, 0);
    // The index takes 4 bytes a row (2400 at one part): 0 holds no row, 3K about 14 rows (a few in
    // the recency tier), 4K about 35. With no row held, the graph's column ids are read into
    // scratch-file mappings too (spill::Scope; arrays this small only when the threshold is 0).
    for (const std::string budget : {"0", "3K", "4K"}) {
      const bool spilled = budget == "0";
      // TMPDIR on this disk (not a tmpfs, where the ids would stay on the heap).
      ASSERT_NO_FATAL_FAILURE(run_sampled(
          parts(p), p, budget, out, "ooc" + budget,
          spilled ? "TESSEL_SPILL_MIN_BYTES=0 TMPDIR=" + out.string() + " " : "", model,
          normalize));
      ASSERT_NO_FATAL_FAILURE(expect_same_run(out, "all", "ooc" + budget));
      const auto epochs = epochs_of(out / ("ooc" + budget + ".jsonl"));
      for (const auto& e : epochs) {
        EXPECT_GT(e.at("feature_bytes_read").get<std::int64_t>(), 0) << budget;
        EXPECT_GT(e.at("feature_requests").get<std::int64_t>(), 0) << budget;
        // Each step's rows are read ahead (the first's before its gather, the others' during
        // the step before's compute).
        EXPECT_GT(e.at("feature_ahead_hits").get<std::int64_t>(), 0) << budget;
        if (budget == "0")
          EXPECT_EQ(e.at("feature_hit_rate").get<double>(), 0.0);
        else
          EXPECT_GT(e.at("feature_hit_rate").get<double>(), 0.0) << budget;
        // Every rank's column ids: 4 bytes an edge, in a mapping only where spilled.
        const auto scratch = e.at("graph_scratch_bytes").get<std::int64_t>();
        if (spilled)
          EXPECT_EQ(scratch, 4 * edges) << p;
        else
          EXPECT_EQ(scratch, 0) << budget;
      }
    }
    // In memory, the epoch line carries none of the reader's figures.
    const auto in_memory = epochs_of(out / "all.jsonl");
    ASSERT_FALSE(in_memory.empty());
    EXPECT_FALSE(in_memory[0].contains("feature_hit_rate"));
  }
}

TEST_F(OutOfCore, Avx2GivesTheInMemoryRunBitForBit) {
  const std::string env = "ONEDNN_MAX_CPU_ISA=AVX2 TESSEL_CPU_ISA=avx2 ";
  const fs::path out = scratch("avx2");
  ASSERT_NO_FATAL_FAILURE(run_sampled(parts(2), 2, "all", out, "all", env));
  ASSERT_NO_FATAL_FAILURE(run_sampled(parts(2), 2, "2K", out, "ooc", env));
  expect_same_run(out, "all", "ooc");
}

// Layer-wise inference transforms first where a layer's output is narrower than its input
// (owners transform their rows, the halo carries those) and aggregates first elsewhere: with
// either order at either layer, GCN and GraphSAGE, a budget of no row (every layer's output and
// every transformed input on a scratch file) gives the in-memory run bit for bit at 2 ranks.
TEST_F(OutOfCore, BothInferenceOrdersGiveTheInMemoryRunBitForBit) {
  const std::string avx2 = "ONEDNN_MAX_CPU_ISA=AVX2 TESSEL_CPU_ISA=avx2 ";
  struct Case {
    std::string tag, model, env;
  };
  // 12 -> 16 -> 4 (aggregate, then transform first); 12 -> 8 -> 4 (transform first twice).
  for (const Case& c : {Case{"gcn16", "--model gcn --hidden 16", ""},
                        Case{"gcn8", "--model gcn --hidden 8", ""},
                        Case{"sage8", "--model sage --hidden 8", avx2}}) {
    const fs::path out = scratch("orders-" + c.tag);
    ASSERT_NO_FATAL_FAILURE(run_sampled(parts(2), 2, "all", out, "all", c.env, c.model));
    ASSERT_NO_FATAL_FAILURE(run_sampled(parts(2), 2, "0", out, "ooc", c.env, c.model));
    ASSERT_NO_FATAL_FAILURE(expect_same_run(out, "all", "ooc")) << c.tag;
  }
}

TEST_F(OutOfCore, ABudgetThatHoldsEveryRowStaysInMemory) {
  const fs::path out = scratch("big");
  ASSERT_NO_FATAL_FAILURE(run_sampled(parts(1), 1, "1G", out, "big"));
  const auto epochs = epochs_of(out / "big.jsonl");
  ASSERT_FALSE(epochs.empty());
  EXPECT_FALSE(epochs[0].contains("feature_hit_rate"));
}

TEST_F(OutOfCore, FullBatchRefusesABudgetItCannotKeep) {
  std::string output;
  const int rc = test::run_command(tessel_bin() + " train " + parts(1).string() +
                                       " --mode full --epochs 1 --feature-memory 1K",
                                   &output);
  EXPECT_NE(rc, 0);
  EXPECT_NE(output.find("--feature-memory 1K: full mode holds all of a rank's feature rows"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("--mode sampled"), std::string::npos) << output;
  // 600 nodes x 12 features x 4 bytes on the one part.
  EXPECT_NE(output.find("28800 bytes"), std::string::npos) << output;
}

TEST(OutOfCoreDynamic, DynamicModeRefusesABudgetItCannotKeep) {
  test::TempDir dir("ooc-dynamic");
  const auto json = test::sample_dataset("england_covid") / "england_covid.json";
  run_ok(tessel_bin() + " convert temporal " + json.string() + " " + (dir.path() / "ec.h5").string() +
         " --lags 8");
  run_ok(tessel_bin() + " partition " + (dir.path() / "ec.h5").string() + " --parts 1 --out " +
         (dir.path() / "ec-p1").string());
  std::string output;
  const int rc = test::run_command(tessel_bin() + " train " + (dir.path() / "ec-p1").string() +
                                       " --mode dynamic --model gcn-gru --epochs 1 "
                                       "--feature-memory 1K",
                                   &output);
  EXPECT_NE(rc, 0);
  EXPECT_NE(output.find("--feature-memory 1K: dynamic mode holds its snapshots' features"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("--mode sampled"), std::string::npos) << output;
}

TEST_F(OutOfCore, BadSizesAreRefused) {
  for (const std::string word : {"12Q", "-5", "G", "lots"}) {
    std::string output;
    const int rc = test::run_command(tessel_bin() + " train " + parts(1).string() +
                                         " --mode sampled --epochs 1 --feature-memory " + word,
                                     &output);
    EXPECT_NE(rc, 0) << word;
    EXPECT_NE(output.find("expected auto, all, or a size in bytes"), std::string::npos)
        << word << ": " << output;
  }
}

TEST(OutOfCoreCora, TinyBudgetMatchesInMemory) {
  const auto cora = test::sample_dataset("cora");
  test::TempDir dir("cora-ooc");
  std::string out;
  ASSERT_EQ(test::run_command(tessel_bin() + " convert ogb " + cora.string() + " " +
                                  (dir.path() / "cora.h5").string(),
                              &out),
            0)
      << out;
  ASSERT_EQ(test::run_command(tessel_bin() + " partition " + (dir.path() / "cora.h5").string() +
                                  " --parts 1 --out " + (dir.path() / "p1").string(),
                              &out),
            0)
      << out;
  ASSERT_NO_FATAL_FAILURE(run_sampled(dir.path() / "p1", 1, "all", dir.path(), "all"));
  // 256 KiB: about 40 of Cora's 2708 rows of 1433 features.
  ASSERT_NO_FATAL_FAILURE(run_sampled(dir.path() / "p1", 1, "256K", dir.path(), "ooc"));
  expect_same_run(dir.path(), "all", "ooc");
  const auto epochs = epochs_of(dir.path() / "ooc.jsonl");
  ASSERT_FALSE(epochs.empty());
  EXPECT_GT(epochs.back().at("feature_hit_rate").get<double>(), 0.0);
  EXPECT_LT(epochs.back().at("feature_memory_bytes").get<std::int64_t>(), 256 * 1024 + 1);
}

// `tessel predict` with a budget: the same predictions and embeddings as with every row in
// memory (every layer reads its input in row blocks either way).
TEST_F(OutOfCore, PredictWithABudgetGivesTheInMemoryOutputs) {
  const fs::path out = scratch("predict");
  ASSERT_NO_FATAL_FAILURE(run_sampled(parts(2), 2, "all", out, "train"));
  for (const std::string budget : {"all", "0", "3K"}) {
    ASSERT_NO_FATAL_FAILURE(run_ok(kSmallBlocks + test::mpirun(2) + tessel_bin() + " predict " +
                                   (out / "train").string() + " " + parts(2).string() +
                                   " --feature-memory " + budget + " --predictions " +
                                   (out / ("p" + budget + ".h5")).string() + " --embeddings " +
                                   (out / ("e" + budget + ".h5")).string()));
  }
  for (const std::string budget : {"0", "3K"}) {
    expect_same_floats(predictions_of(out / "pall.h5"), predictions_of(out / ("p" + budget + ".h5")),
                       budget);
    expect_same_floats(embeddings_of(out / "eall.h5"), embeddings_of(out / ("e" + budget + ".h5")),
                       budget);
  }
}

// A budget below one layer's [nodes, hidden] output: layer-wise inference writes each layer's
// rows, and the halo rows it receives, to scratch files in TMPDIR and reads them back through
// the out-of-core reader (the results are those of the in-memory run: the tests above), and
// removes the files after.
TEST_F(OutOfCore, LayerOutputsOverTheBudgetGoToScratchFilesThatAreRemoved) {
  const fs::path out = scratch("scratch");
  const fs::path tmp = out / "tmp";
  fs::create_directories(tmp);
  ASSERT_NO_FATAL_FAILURE(
      run_sampled(parts(2), 2, "0", out, "ooc", "TMPDIR=" + tmp.string() + " "));
  for (const auto& entry : fs::recursive_directory_iterator(tmp))
    EXPECT_EQ(entry.path().filename().string().rfind("tessel-infer-", 0), std::string::npos)
        << entry.path();
  // The run says where the rows went; in memory, no scratch file is made.
  for (const std::string memory : {"0", "all"}) {
    std::string output;
    // A malformed spill threshold (a test knob) is named, and the default taken.
    ASSERT_EQ(test::run_command(std::string(kSmallBlocks) + "TMPDIR=" + tmp.string() +
                                    " TESSEL_SPILL_MIN_BYTES=16M " + test::mpirun(2) +
                                    tessel_bin() + " train " +
                                    parts(2).string() +
                                    " --mode sampled --model sage --fanouts 5,3 --batch-size 24 "
                                    "--epochs 1 --hidden 16 --seed 7 --feature-memory " + memory,
                                &output),
              0)
        << output;
    const bool noted = output.find("goes to a scratch file in " + tmp.string()) != std::string::npos;
    EXPECT_EQ(noted, memory == "0") << output;
    // A layer's halo rows too, as they arrive (read back like the owned ones: the results are
    // the in-memory run's, TinyBudgetsGiveTheInMemoryRunBitForBit at 2 ranks).
    const bool halo_noted = output.find("each layer's halo over it goes to a scratch file in " +
                                        tmp.string()) != std::string::npos;
    EXPECT_EQ(halo_noted, memory == "0") << output;
    EXPECT_NE(output.find("TESSEL_SPILL_MIN_BYTES=16M: expected a byte count"), std::string::npos)
        << output;
  }
  for (const auto& entry : fs::recursive_directory_iterator(tmp))
    EXPECT_EQ(entry.path().filename().string().rfind("tessel-infer-", 0), std::string::npos)
        << entry.path();
}

namespace {

// `tessel precompute` of the 2-hop SIGN features at p ranks within `memory`, into out/tag.
void precompute_sign(const fs::path& part_dir, int p, const std::string& memory,
                     const fs::path& out, const std::string& tag, const std::string& env) {
  run_ok(kSmallBlocks + env + test::mpirun(p) + tessel_bin() + " precompute " +
         part_dir.string() + " --hops 2 --normalize-features row --feature-memory " + memory +
         " --out " + (out / tag).string());
}

// Pipeline training on the features in out/tag (with --feature-memory all: it holds them).
void train_sign(const fs::path& part_dir, int p, const fs::path& out, const std::string& tag,
                const std::string& env) {
  run_ok(env + test::mpirun(p) + tessel_bin() + " train " + part_dir.string() +
         " --mode pipeline --stages 1 --data-parallel " + std::to_string(p) +
         " --hops 2 --mlp-layers 2 --hidden 8 --epochs 2 --lr 0.05 "
         "--seed 3 --normalize-features row --quiet --features " +
         (out / tag).string() + " --metrics " + (out / (tag + ".jsonl")).string());
}

std::vector<float> sign_rows_of(const fs::path& dir, int part) {
  const h5::File file = h5::File::open_read(dir / ("sign-" + std::to_string(part) + ".h5"));
  return file.read<float>("/feat");
}

} // namespace

// SIGN precompute within a budget of no row (X read from the part file, every hop through a
// scratch file), of a few rows, of 30K (X alone at one part, 28,800 bytes: the hops to scratch
// files; at two parts X and hop 1, hop 2 to its scratch file) and
// unbounded writes the same files bit for bit, on AVX2 too, at 1 and 2 ranks; pipeline training
// on them gives the same losses; no scratch file is left.
TEST_F(OutOfCore, SignPrecomputeWithinABudgetWritesTheSameFilesAndLosses) {
  for (const std::string env : {"", "ONEDNN_MAX_CPU_ISA=AVX2 TESSEL_CPU_ISA=avx2 "}) {
    for (int p : {1, 2}) {
      SCOPED_TRACE(env + std::to_string(p) + " ranks");
      const fs::path out = scratch("sign" + std::to_string(p) + (env.empty() ? "" : "-avx2"));
      fs::create_directories(out);
      ASSERT_NO_FATAL_FAILURE(precompute_sign(parts(p), p, "all", out, "all", env));
      ASSERT_NO_FATAL_FAILURE(train_sign(parts(p), p, out, "all", env));
      const auto base = epochs_of(out / "all.jsonl");
      ASSERT_EQ(base.size(), 2u);
      for (const std::string budget : {"0", "3K", "30K"}) {
        ASSERT_NO_FATAL_FAILURE(precompute_sign(parts(p), p, budget, out, budget, env));
        for (int part = 0; part < p; ++part)
          expect_same_floats(sign_rows_of(out / "all", part), sign_rows_of(out / budget, part),
                             budget + " part " + std::to_string(part));
        for (const auto& entry : fs::directory_iterator(out / budget))
          EXPECT_EQ(entry.path().filename().string().rfind(".sign-", 0), std::string::npos)
              << entry.path();
        ASSERT_NO_FATAL_FAILURE(train_sign(parts(p), p, out, budget, env));
        const auto epochs = epochs_of(out / (budget + ".jsonl"));
        ASSERT_EQ(epochs.size(), base.size());
        for (std::size_t e = 0; e < epochs.size(); ++e)
          EXPECT_EQ(epochs[e].at("loss").get<double>(), base[e].at("loss").get<double>())
              << budget << " epoch " << e;
      }
    }
  }
}

// The precompute says where the rows went; pipeline training, which holds X and its hops,
// refuses a budget below them in one line naming the bytes.
TEST_F(OutOfCore, SignBudgetIsReportedAndPipelineRefusesOneItCannotKeep) {
  std::string output;
  ASSERT_EQ(test::run_command(tessel_bin() + " precompute " + parts(1).string() +
                                  " --hops 2 --feature-memory 0 --out " +
                                  scratch("sign-note").string(),
                              &output),
            0)
      << output;
  EXPECT_NE(output.find("--feature-memory 0: features read from the part file on 1 of 1 ranks, "
                        "up to 2 of 2 hops through scratch files"),
            std::string::npos)
      << output;
  EXPECT_NE(test::run_command(tessel_bin() + " precompute " + parts(1).string() +
                                  " --feature-memory auto --out " + scratch("sign-auto").string(),
                              &output),
            0);
  EXPECT_NE(output.find("precompute takes a size"), std::string::npos) << output;
  EXPECT_FALSE(fs::exists(scratch("sign-auto")));
  for (const std::string memory : {"0", "60K"}) {
    ASSERT_NE(test::run_command(tessel_bin() + " train " + parts(1).string() +
                                    " --mode pipeline --hops 2 --epochs 1 --feature-memory " +
                                    memory,
                                &output),
              0);
    // 600 nodes x 3 x 12 features x 4 bytes.
    EXPECT_NE(output.find("--feature-memory " + memory +
                          ": pipeline mode holds a rank's SIGN features in memory (X and 2 hops: "),
              std::string::npos)
        << output;
    EXPECT_NE(output.find("86400 bytes"), std::string::npos) << output;
  }
}
