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
                                  "--fanouts 5,5 --batch-size 32 --target-acc 0.01 --quiet --out " +
                                  report_dir.string(), &out), 0) << out;
  std::ifstream in(report_dir / "report.json");
  ASSERT_TRUE(in.good()) << out;
  const auto report = nlohmann::json::parse(in);
  EXPECT_EQ(report.at("format"), "tessel-bench");
  EXPECT_EQ(report.at("ranks"), 2);
  ASSERT_EQ(report.at("modes").size(), 2u);
  EXPECT_EQ(report["modes"][0].at("mode"), "full");
  EXPECT_EQ(report["modes"][1].at("mode"), "sampled");
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
  // The plot needs matplotlib; without it the run says so and still succeeds.
  EXPECT_TRUE(fs::exists(report_dir / "accuracy_vs_time.png") ||
              out.find("matplotlib is not installed") != std::string::npos)
      << out;
  // A second run into the same folder is refused without --force.
  EXPECT_NE(test::run_command(test::mpirun(2) + tessel + " bench " + (dir / "parts").string() +
                                  " --epochs 1 --out " + report_dir.string(), &out), 0);
  EXPECT_NE(out.find("--force"), std::string::npos) << out;
}
