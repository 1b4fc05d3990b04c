// Cora with the published GCN recipe reaches the published accuracy at P = 1 and P = 2.
#include "test_support.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

using namespace tessel;
namespace fs = std::filesystem;

namespace {

double summary_test_acc(const fs::path& metrics) {
  std::ifstream in(metrics);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  const auto j = nlohmann::json::parse(last);
  EXPECT_TRUE(j.contains("summary"));
  return j.at("test_acc").get<double>();
}

}  // namespace

TEST(CoraAccuracy, GcnMatchesThePaperAtOneAndTwoRanks) {
  const auto cora = test::sample_dataset("cora");
  test::TempDir dir("cora");
  const std::string tessel = test::tessel_binary().string();
  std::string out;
  ASSERT_EQ(test::run_command(tessel + " convert ogb " + cora.string() + " " +
                                  (dir / "cora.h5").string(),
                              &out),
            0)
      << out;
  for (int p : {1, 2}) {
    ASSERT_EQ(test::run_command(tessel + " partition " + (dir / "cora.h5").string() +
                                    " --parts " + std::to_string(p) + " --out " +
                                    (dir / ("p" + std::to_string(p))).string(),
                                &out),
              0)
        << out;
    double sum = 0;
    const int seeds = 5;
    for (int seed = 0; seed < seeds; ++seed) {
      const fs::path metrics = dir / ("p" + std::to_string(p) + "-s" + std::to_string(seed) + ".jsonl");
      ASSERT_EQ(test::run_command(
                    test::mpirun(p, 2 / p) + tessel + " train " +
                        (dir / ("p" + std::to_string(p))).string() +
                        " --mode full --model gcn --layers 2 --hidden 16 --dropout 0.5 --lr 0.01 "
                        "--weight-decay 5e-4 --epochs 200 --normalize-features row --quiet "
                        "--seed " + std::to_string(seed) + " --metrics " + metrics.string(),
                    &out),
                0)
          << out;
      const double acc = summary_test_acc(metrics);
      std::printf("cora P=%d seed=%d test acc %.4f\n", p, seed, acc);
      sum += acc;
    }
    EXPECT_GE(sum / seeds, 0.80) << "P=" << p;
  }
}
