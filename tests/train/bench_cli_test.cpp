// `tessel bench` at P = 2 on a tiny graph: the report has both modes, every key, and finite
// positive numbers; the Markdown table and the plot (or the message saying why not) exist.
#include "test_support.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <iterator>

using namespace tessel;
namespace fs = std::filesystem;

namespace {

void expect_positive_number(const nlohmann::json& j, const std::string& key, const std::string& mode) {
  ASSERT_TRUE(j.contains(key)) << mode << ": missing " << key;
  ASSERT_TRUE(j.at(key).is_number()) << mode << ": " << key << " = " << j.at(key);
  const double v = j.at(key).get<double>();
  EXPECT_TRUE(std::isfinite(v)) << mode << ": " << key;
  EXPECT_GT(v, 0.0) << mode << ": " << key;
}

}  // namespace

TEST(BenchCli, ReportHasBothModesWithEveryKey) {
  test::TempDir dir("bench");
  const std::string tessel = test::tessel_binary().string();
  std::string out;
  ASSERT_EQ(test::run_command(tessel + " convert synthetic --nodes 400 --avg-degree 8 --classes 3 "
                                       "--feat-dim 8 --seed 5 " + (dir / "g.h5").string(), &out), 0) << out;
  ASSERT_EQ(test::run_command(tessel + " partition " + (dir / "g.h5").string() +
                                  " --parts 2 --out " + (dir / "parts").string(), &out), 0) << out;
  const fs::path report_dir = dir / "report";
  ASSERT_EQ(test::run_command(test::mpirun(2) + tessel + " bench " + (dir / "parts").string() +
                                  " --modes full,sampled --model sage --epochs 2 --hidden 8 "
                                  "--fanouts 5,5 --batch-size 32 --target-acc 0.01 --quiet "
                                  "--halo-aggregation auto --stale-halo --out " +
                                  report_dir.string(), &out), 0) << out;
  std::ifstream in(report_dir / "report.json");
  ASSERT_TRUE(in.good()) << out;
  const auto report = nlohmann::json::parse(in);
  EXPECT_EQ(report.at("format"), "tessel-bench");
  EXPECT_EQ(report.at("ranks"), 2);
  ASSERT_EQ(report.at("modes").size(), 2u);
  EXPECT_EQ(report["modes"][0].at("mode"), "full");
  EXPECT_EQ(report["modes"][1].at("mode"), "sampled");
  // The full mode's halo settings and traffic; the sampled mode has none.
  EXPECT_EQ(report["modes"][0].at("halo_aggregation"), "auto");
  EXPECT_EQ(report["modes"][0].at("stale_halo"), true);
  expect_positive_number(report["modes"][0], "halo_bytes_per_epoch_median", "full");
  EXPECT_TRUE(report["modes"][0].contains("halo_exposed_seconds_per_epoch_median"));
  EXPECT_FALSE(report["modes"][1].contains("halo_aggregation"));
  for (const auto& m : report["modes"]) {
    const std::string mode = m.at("mode");
    EXPECT_EQ(m.at("epochs"), 2) << mode;
    for (const char* key : {"seconds_per_epoch_median", "seconds_per_epoch_p10",
                            "seconds_per_epoch_p90", "seconds_per_epoch_min",
                            "seconds_per_epoch_max", "train_seconds", "setup_seconds",
                            "time_to_target_s", "best_valid_acc", "test_acc_at_best_valid",
                            "best_epoch", "comm_bytes_per_epoch_median"})
      expect_positive_number(m, key, mode);
    // Both modes pick their best epoch by validation accuracy, under both names.
    EXPECT_EQ(m.at("metric"), "acc") << mode;
    EXPECT_EQ(m.at("higher_is_better"), true) << mode;
    EXPECT_EQ(m.at("best_valid"), m.at("best_valid_acc")) << mode;
    EXPECT_EQ(m.at("test_at_best_valid"), m.at("test_acc_at_best_valid")) << mode;
    ASSERT_EQ(m.at("peak_rss_bytes_per_rank").size(), 2u) << mode;
    for (const auto& rss : m["peak_rss_bytes_per_rank"]) EXPECT_GT(rss.get<double>(), 1e6) << mode;
    ASSERT_FALSE(m.at("phase_seconds_per_epoch").empty()) << mode;
    for (const auto& [phase, seconds] : m["phase_seconds_per_epoch"].items()) {
      EXPECT_TRUE(std::isfinite(seconds.get<double>())) << mode << " " << phase;
      EXPECT_GE(seconds.get<double>(), 0.0) << mode << " " << phase;
    }
    EXPECT_TRUE(fs::exists(report_dir / (mode + ".jsonl"))) << mode;
  }
  std::ifstream md_file(report_dir / "report.md");
  const std::string md((std::istreambuf_iterator<char>(md_file)), std::istreambuf_iterator<char>());
  EXPECT_NE(md.find("| best valid acc (higher is better) |"), std::string::npos) << md;
  EXPECT_NE(md.find("(f32, auto-aggregation, stale)"), std::string::npos) << md;
  // The plot needs matplotlib; without it the run says so and still succeeds.
  EXPECT_TRUE(fs::exists(report_dir / "accuracy_vs_time.png") ||
              out.find("matplotlib is not installed") != std::string::npos)
      << out;
  // A second run into the same folder is refused without --force.
  EXPECT_NE(test::run_command(test::mpirun(2) + tessel + " bench " + (dir / "parts").string() +
                                  " --epochs 1 --out " + report_dir.string(), &out), 0);
  EXPECT_NE(out.find("--force"), std::string::npos) << out;
}

// Every mode a bench lists runs with its own model and flags (pipeline: its SIGN MLP, 2 stages
// on the 2 ranks), and the report has one row per mode.
TEST(BenchCli, FullSampledAndPipelineOnCoraInOneReport) {
  test::TempDir dir("bench-cora");
  const std::string tessel = test::tessel_binary().string();
  std::string out;
  ASSERT_EQ(test::run_command(tessel + " convert ogb " + test::sample_dataset("cora").string() +
                                  " " + (dir / "cora.h5").string(), &out), 0) << out;
  ASSERT_EQ(test::run_command(tessel + " partition " + (dir / "cora.h5").string() +
                                  " --parts 2 --out " + (dir / "p").string(), &out), 0) << out;
  const std::string bench = test::mpirun(2, 1) + tessel + " bench " + (dir / "p").string() +
                            " --epochs 3 --hidden 16 --quiet";
  const std::string all = " --modes full,sampled,pipeline";
  // A flag of a mode not listed, and a pipeline that cannot run on 2 ranks, are refused before
  // any mode trains: no mode's line, no report.
  for (const auto& [flags, message] :
       {std::pair<std::string, std::string>{" --modes full,pipeline --fanouts 5,5",
                                            "--fanouts applies to --mode sampled, not --modes "
                                            "full,pipeline"},
        {all + " --stages 3", "--data-parallel 1 x --stages 3 = 3 ranks, but 2 are running"}}) {
    EXPECT_EQ(test::run_command(bench + flags + " --out " + (dir / "refused").string(), &out), 2)
        << out;
    EXPECT_NE(out.find(message), std::string::npos) << out;
    EXPECT_EQ(out.find("== bench: mode"), std::string::npos) << out;
    EXPECT_FALSE(fs::exists(dir / "refused"));
  }
  ASSERT_EQ(test::run_command(bench + all + " --stages 2 --mlp-layers 2 --fanouts 5,5 --out " +
                                  (dir / "r").string(), &out), 0) << out;
  std::ifstream in(dir / "r" / "report.json");
  const auto report = nlohmann::json::parse(in);
  ASSERT_EQ(report.at("modes").size(), 3u) << report.dump(1);
  const char* models[] = {"gcn 2x16", "gcn 2x16", "sign-mlp 2x16"};
  for (int i = 0; i < 3; ++i) {
    const auto& m = report["modes"][i];
    EXPECT_EQ(m.at("mode"), (std::vector<std::string>{"full", "sampled", "pipeline"}[i]));
    EXPECT_EQ(m.at("model"), models[i]);
    EXPECT_EQ(m.at("epochs"), 3);
    EXPECT_GT(m.at("best_valid_acc").get<double>(), 0.2) << m.dump();
  }
  // The pipeline's two stages send activations and gradients to each other.
  EXPECT_GT(report["modes"][2].at("comm_bytes_per_epoch_median").get<double>(), 0.0);
  EXPECT_FALSE(report.contains("failed"));
}

// A mode that fails at run time with an error every rank meets: the report of the modes that
// ran before it is written, naming the failure, and the bench exits non-zero with one line.
TEST(BenchCli, AFailingModeLeavesTheReportOfTheModesThatRan) {
  test::TempDir dir("bench-partial");
  const std::string tessel = test::tessel_binary().string();
  std::string out;
  ASSERT_EQ(test::run_command(tessel + " convert synthetic --nodes 300 --classes 3 --feat-dim 8 "
                                       "--seed 2 " + (dir / "g.h5").string(), &out), 0) << out;
  ASSERT_EQ(test::run_command(tessel + " partition " + (dir / "g.h5").string() +
                                  " --parts 2 --out " + (dir / "p").string(), &out), 0) << out;
  // The pipeline's precomputed features are damaged (a --features path that is a file is now
  // refused before any mode runs).
  fs::create_directories(dir / "f");
  for (const char* name : {"sign-0.h5", "sign-1.h5"}) std::ofstream(dir / "f" / name) << "garbage";
  const int rc = test::run_command(test::mpirun(2, 1) + tessel + " bench " + (dir / "p").string() +
                                       " --modes full,pipeline --epochs 2 --quiet --features " +
                                       (dir / "f").string() + " --out " +
                                       (dir / "r").string(),
                                   &out);
  EXPECT_EQ(rc, 2) << out;
  std::ifstream in(dir / "r" / "report.json");
  ASSERT_TRUE(in.good()) << out;
  const auto report = nlohmann::json::parse(in);
  ASSERT_EQ(report.at("modes").size(), 1u);
  EXPECT_EQ(report["modes"][0].at("mode"), "full");
  EXPECT_EQ(report.at("failed").at("mode"), "pipeline");
  const std::string error = report["failed"].at("error");
  EXPECT_NE(error.find("sign-0.h5: not an HDF5 file"), std::string::npos) << error;
  // One error line, rank 0's.
  std::size_t lines = 0;
  for (std::size_t at = out.find("tessel: error:"); at != std::string::npos;
       at = out.find("tessel: error:", at + 1))
    ++lines;
  EXPECT_EQ(lines, 1u) << out;
  EXPECT_NE(out.find("the report of the 1 mode that ran before --mode pipeline failed"),
            std::string::npos)
      << out;
}

// Full-batch link prediction in the report: the store's metric (AUC) picks the best epoch, and
// the link figures (decoder, negatives, training edges per second, test AP) have their keys and
// their row in the table.
TEST(BenchCli, LinkTaskReportsItsFigures) {
  test::TempDir dir("bench_link");
  const std::string tessel = test::tessel_binary().string();
  std::string out;
  ASSERT_EQ(test::run_command(tessel + " convert synthetic --nodes 300 --avg-degree 8 --classes 3 "
                                       "--feat-dim 8 --seed 5 --edge-split 85,5,10 " +
                                  (dir / "g.h5").string(), &out), 0) << out;
  ASSERT_EQ(test::run_command(tessel + " partition " + (dir / "g.h5").string() +
                                  " --parts 2 --out " + (dir / "parts").string(), &out), 0) << out;
  const fs::path report_dir = dir / "report";
  ASSERT_EQ(test::run_command(test::mpirun(2) + tessel + " bench " + (dir / "parts").string() +
                                  " --modes full --task link --decoder mlp --negatives 2 "
                                  "--epochs 3 --hidden 8 --out-dim 8 --quiet --out " +
                                  report_dir.string(), &out), 0) << out;
  const auto report = nlohmann::json::parse(std::ifstream(report_dir / "report.json"));
  const auto manifest = nlohmann::json::parse(std::ifstream(dir / "parts" / "partition.json"));
  ASSERT_EQ(report.at("modes").size(), 1u);
  const auto& m = report["modes"][0];
  EXPECT_EQ(m.at("metric"), "auc");
  EXPECT_EQ(m.at("higher_is_better"), true);
  expect_positive_number(m, "best_valid", "full");
  EXPECT_LE(m.at("best_valid").get<double>(), 1.0);
  ASSERT_TRUE(m.contains("link")) << m.dump();
  const auto& l = m["link"];
  EXPECT_EQ(l.at("decoder"), "mlp");
  EXPECT_EQ(l.at("negative_sampling"), "uniform");
  EXPECT_EQ(l.at("negatives"), 2);
  EXPECT_EQ(l.at("train_edges"), manifest.at("link").at("train_pos"));
  expect_positive_number(l, "train_edges_per_second", "full");
  // train_edges / the median epoch's seconds.
  EXPECT_NEAR(l["train_edges_per_second"].get<double>() * m["seconds_per_epoch_median"].get<double>(),
              l["train_edges"].get<double>(), 1e-6 * l["train_edges"].get<double>());
  expect_positive_number(l, "test_ap_at_best_valid", "full");
  EXPECT_LE(l["test_ap_at_best_valid"].get<double>(), 1.0);
  std::ifstream md_file(report_dir / "report.md");
  const std::string md((std::istreambuf_iterator<char>(md_file)), std::istreambuf_iterator<char>());
  EXPECT_NE(md.find("| link: decoder, negatives per edge | mlp, 2 uniform |"), std::string::npos) << md;
  EXPECT_NE(md.find("| best valid auc (higher is better) |"), std::string::npos) << md;

  // Sampled mode: its training edges are those its epoch's steps trained (fewer with
  // --max-batches), as its last epoch record says.
  const fs::path sampled_dir = dir / "report-sampled";
  ASSERT_EQ(test::run_command(test::mpirun(2) + tessel + " bench " + (dir / "parts").string() +
                                  " --modes sampled --task link --decoder mlp "
                                  "--negative-sampling degree --batch-size 32 --max-batches 2 "
                                  "--fanouts 4,4 --epochs 2 --hidden 8 --out-dim 8 --quiet --out " +
                                  sampled_dir.string(), &out), 0) << out;
  const auto sampled = nlohmann::json::parse(std::ifstream(sampled_dir / "report.json"));
  ASSERT_EQ(sampled.at("modes").size(), 1u);
  const auto& sl = sampled["modes"][0].at("link");
  EXPECT_EQ(sl.at("negative_sampling"), "degree");
  std::ifstream records(sampled_dir / "sampled.jsonl");
  std::int64_t last_edges = -1;
  for (std::string line; std::getline(records, line);) {
    const auto r = nlohmann::json::parse(line);
    if (r.contains("epoch") && r.contains("train_edges")) last_edges = r["train_edges"].get<std::int64_t>();
  }
  EXPECT_EQ(sl.at("train_edges").get<std::int64_t>(), last_edges);
  EXPECT_GT(last_edges, 0);
  EXPECT_LT(last_edges, manifest.at("link").at("train_pos").get<std::int64_t>());
}
