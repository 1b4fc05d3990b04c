// `tessel partition` through the built binary: every refusal (exit code and one-line message),
// a successful run with its summary, and --check on good, tampered and foreign folders.
#include "dataset_fixtures.hpp"
#include "partition_testing.hpp"
#include "tessel/datasets/dataset.hpp"
#include "tessel/partition/part.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <limits>

namespace tessel::partition {
namespace {

namespace fs = std::filesystem;

using Result = test::CommandResult;
using test::quote;
using test::run_tessel;

class PartitionCli : public ::testing::Test {
protected:
  void SetUp() override {
    test::PlantedOptions po;
    po.num_nodes = 300;
    data_ = test::planted_dataset(po);
    store_ = tmp_ / "planted.h5";
    datasets::write_store(data_, store_);
  }
  // Runs a command that must be refused: exit code 2 and one "tessel: error:" line containing
  // `expect`.
  void expect_refused(const std::string& args, const std::string& expect) {
    const auto r = run_tessel(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("tessel: error: "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(expect), std::string::npos) << "wanted \"" << expect << "\" in\n"
                                                        << r.output;
  }

  test::TempDir tmp_;
  datasets::Dataset data_;
  fs::path store_;
};

TEST_F(PartitionCli, PartitionsPrintsSummaryAndChecks) {
  const auto out = tmp_ / "parts";
  auto r =
      run_tessel("partition " + quote(store_) + " --parts 3 --out " + quote(out) + " --seed 4");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* what : {"edge cut", "balance (max/mean)", "replication", "peak RSS", "metis"})
    EXPECT_NE(r.output.find(what), std::string::npos) << what << " in\n" << r.output;
  test::verify_partition(out, data_, true);

  r = run_tessel("partition --check " + quote(out));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("OK: 3 parts"), std::string::npos) << r.output;
  r = run_tessel("partition --check " + quote(out) + " " + quote(store_));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("matches"), std::string::npos) << r.output;

  r = run_tessel("partition " + quote(store_) +
                 " --parts 2 --method random --balance nodes "
                 "--no-symmetrize --out " +
                 quote(tmp_ / "random"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(read_manifest(tmp_ / "random").method, "random");
}

TEST_F(PartitionCli, RefusesPartsBelowOne) {
  expect_refused("partition " + quote(store_) + " --parts 0 --out " + quote(tmp_ / "p"),
                 "--parts must be at least 1, got 0");
  expect_refused("partition " + quote(store_) + " --parts -3 --out " + quote(tmp_ / "p"),
                 "--parts must be at least 1, got -3");
  EXPECT_FALSE(fs::exists(tmp_ / "p"));
}

TEST_F(PartitionCli, RefusesMorePartsThanNodes) {
  expect_refused("partition " + quote(store_) + " --parts 301 --out " + quote(tmp_ / "p"),
                 "--parts 301 is more than the 300 nodes");
  EXPECT_FALSE(fs::exists(tmp_ / "p"));
}

TEST_F(PartitionCli, RefusesNonEmptyOutputWithoutForce) {
  fs::create_directories(tmp_ / "p");
  std::ofstream(tmp_ / "p" / "notes.txt") << "keep me";
  expect_refused("partition " + quote(store_) + " --parts 2 --out " + quote(tmp_ / "p"),
                 "exists and is not empty (use --force");
  EXPECT_TRUE(fs::exists(tmp_ / "p" / "notes.txt"));
  const auto r =
      run_tessel("partition " + quote(store_) + " --parts 2 --force --out " + quote(tmp_ / "p"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_FALSE(fs::exists(tmp_ / "p" / "notes.txt"));
  EXPECT_TRUE(fs::exists(tmp_ / "p" / "part-1.h5"));
}

TEST_F(PartitionCli, RefusesToReplaceAFolderHoldingTheInput) {
  fs::create_directories(tmp_ / "p");
  fs::copy_file(store_, tmp_ / "p" / "in.h5");
  expect_refused("partition " + quote(tmp_ / "p" / "in.h5") + " --parts 2 --force --out " +
                     quote(tmp_ / "p"),
                 "is inside the output directory");
  EXPECT_TRUE(fs::exists(tmp_ / "p" / "in.h5"));
}

TEST_F(PartitionCli, RefusesBadArguments) {
  const auto in = quote(store_), out = quote(tmp_ / "p");
  expect_refused("partition " + in + " --parts 2 --method kahip --out " + out,
                 "--method kahip: unknown partition method");
  expect_refused("partition " + in + " --parts 2 --balance nodes,vertices --out " + out,
                 "--balance nodes,vertices: unknown balance constraint \"vertices\"");
  expect_refused("partition " + in + " --out " + out, "missing --parts");
  expect_refused("partition " + in + " --parts 2", "missing --out");
  expect_refused("partition --parts 2 --out " + out, "missing the input dataset store");
  expect_refused("partition " + quote(tmp_ / "absent.h5") + " --parts 2 --out " + out, "absent.h5");
  expect_refused("partition --check " + quote(tmp_.path()) + " --parts 2",
                 "--check takes a folder");
  expect_refused("partition " + in + " --parts 2 --metis-max-edges 0 --out " + out,
                 "--metis-max-edges");
  expect_refused("partition " + in + " --parts 2 --order zigzag --out " + out,
                 "unknown node order \"zigzag\" (expected none, rcm, bfs or community)");
  EXPECT_FALSE(fs::exists(tmp_ / "p"));
}

// --order: recorded, printed, and the folder passes --check against the store; a temporal store
// (vertex ranges of a relabeled store) refuses it.
TEST_F(PartitionCli, OrderIsRecordedAndCheckedAndRefusedOnTemporalStores) {
  const auto out = tmp_ / "parts";
  const auto r = run_tessel("partition " + quote(store_) + " --parts 2 --order community --out " +
                            quote(out));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("order community"), std::string::npos) << r.output;
  EXPECT_EQ(read_manifest(out).raw["order"], "community");
  const auto check = run_tessel(fmt::format("partition --check {} {}", quote(out), quote(store_)));
  EXPECT_EQ(check.code, 0) << check.output;
  const auto temporal = tmp_ / "ec.h5";
  ASSERT_EQ(run_tessel("convert temporal " +
                       quote(test::sample_dataset("england_covid") / "england_covid.json") + " " +
                       quote(temporal))
                .code,
            0);
  expect_refused("partition " + quote(temporal) + " --parts 2 --order rcm --out " +
                     quote(tmp_ / "tp"),
                 "--order rcm applies to a static store");
  EXPECT_FALSE(fs::exists(tmp_ / "tp"));
}

TEST_F(PartitionCli, CoarsensAboveMetisMaxEdges) {
  const auto out = tmp_ / "parts";
  const auto r = run_tessel("partition " + quote(store_) +
                            " --parts 3 --metis-max-edges 500 --out " + quote(out));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("coarsened to"), std::string::npos) << r.output;
  EXPECT_EQ(read_manifest(out).raw["metis"]["max_edges"], 500);
  const auto check = run_tessel(fmt::format("partition --check {} {}", quote(out), quote(store_)));
  EXPECT_EQ(check.code, 0) << check.output;
}

TEST_F(PartitionCli, CheckRejectsCorruptedAndForeignFolders) {
  const auto out = tmp_ / "parts";
  ASSERT_EQ(run_tessel("partition " + quote(store_) + " --parts 3 --out " + quote(out)).code, 0);
  const auto m = read_manifest(out);
  Part part = load_part(out, 1, m);
  // Tamper with one index: point an edge at another local node.
  for (std::int64_t i = 0; i < part.num_owned; ++i) {
    const auto b = part.graph.indptr[i], e = part.graph.indptr[i + 1];
    if (e > b && part.graph.indices[e - 1] + 1 < part.num_local() &&
        part.graph.indices[e - 1] + 1 != i) {
      ++part.graph.indices[e - 1];
      break;
    }
  }
  write_part(part, m.dataset, out / part_file_name(1));
  expect_refused("partition --check " + quote(out), ""); // which check fires depends on the edge

  expect_refused("partition --check " + quote(tmp_.path()), "partition.json: cannot open");
  std::ofstream(out / "partition.json") << "{ not json";
  expect_refused("partition --check " + quote(out), "not valid JSON");
}

// The counts partition.json records for each part (owned, train, valid, test) are checked like
// its halo, edge and cut counts: a negative training count passed --check.
TEST_F(PartitionCli, CheckComparesEachPartsRecordedCounts) {
  const auto out = tmp_ / "parts";
  ASSERT_EQ(run_tessel("partition " + quote(store_) + " --parts 2 --out " + quote(out)).code, 0);
  std::string text;
  {
    std::ifstream in(out / "partition.json");
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const auto parts = text.find("\"parts\"");
  ASSERT_NE(parts, std::string::npos);
  const auto at = text.find("\"train\": ", parts);
  ASSERT_NE(at, std::string::npos);
  const auto value = at + std::string("\"train\": ").size();
  const auto end = text.find_first_of(",\n}", value);
  const std::string recorded = text.substr(value, end - value);
  text.replace(value, end - value, "-" + recorded);
  std::ofstream(out / "partition.json") << text;
  expect_refused("partition --check " + quote(out),
                 "nodes; partition.json parts[0].train says -" + recorded);
}

// Stores that `info` refuses are refused by `partition` too, with the same line, and nothing is
// left in the output folder's parent.
TEST_F(PartitionCli, RefusesWhatInfoRefuses) {
  const std::pair<test::StoreDamage, const char*> cases[] = {
      {test::StoreDamage::nan_feature, "/node/feat row 5 column 1 is nan, expected a finite number"},
      {test::StoreDamage::inf_feature, "/node/feat row 9 column 0 is -inf"},
      {test::StoreDamage::integer_features, "does not hold floating-point values"},
      {test::StoreDamage::overlapping_splits, "is already in /split/valid"},
      {test::StoreDamage::directed_two, "directed = 2, expected 0 or 1"},
      {test::StoreDamage::huge_label, "num_classes = 1000000001 is more than the 300 nodes"},
  };
  for (const auto& [damage, message] : cases) {
    const auto store = tmp_ / "damaged.h5";
    test::write_damaged_store(store, test::small_dataset(), damage);
    const auto out = tmp_ / "out";
    fs::create_directories(out);
    expect_refused("partition " + quote(store) + " --parts 2 --out " + quote(out / "parts"),
                   message);
    expect_refused("info " + quote(store), message);
    EXPECT_TRUE(test::list_dir(out).empty()) << message;
  }
}

// A part file whose features were edited to NaN is refused by --check, naming the file and row.
TEST_F(PartitionCli, CheckRefusesNonFiniteFeatures) {
  const auto out = tmp_ / "parts";
  ASSERT_EQ(run_tessel("partition " + quote(store_) + " --parts 3 --out " + quote(out)).code, 0);
  const auto m = read_manifest(out);
  Part part = load_part(out, 2, m);
  ASSERT_GT(part.num_owned, 4);
  part.features.at(4 * part.feature_dim) = std::numeric_limits<float>::infinity();
  write_part(part, m.dataset, out / part_file_name(2));
  expect_refused("partition --check " + quote(out),
                 "part-2.h5: /node/feat row 4 column 0 is inf, expected a finite number");
}

// A folder holding only some parts (one host's share when each host keeps the parts of its own
// ranks): --check --only verifies those, checksums included; the whole-folder check names the
// missing part and points at --only.
TEST_F(PartitionCli, CheckOnlyVerifiesTheHeldParts) {
  const auto out = tmp_ / "parts";
  ASSERT_EQ(run_tessel("partition " + quote(store_) + " --parts 3 --out " + quote(out)).code, 0);
  fs::remove(out / part_file_name(0));
  auto r = run_tessel("partition --check " + quote(out) + " --only 2,1");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("OK: parts 1, 2 of 3"), std::string::npos) << r.output;
  r = run_tessel("partition --check " + quote(out) + " --only 2 " + quote(store_));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("OK: part 2 of 3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("matches"), std::string::npos) << r.output;
  expect_refused("partition --check " + quote(out), "part-0.h5: no such file");
  expect_refused("partition --check " + quote(out), "--only");
  expect_refused("partition --check " + quote(out) + " --only 0", "part-0.h5: no such file");
  expect_refused("partition --check " + quote(out) + " --only 3", "there is no part 3");
  expect_refused("partition " + quote(store_) + " --parts 2 --out " + quote(tmp_ / "x") +
                     " --only 1",
                 "--only applies to --check");
  // A held part that was changed is refused by its checksum.
  const auto m = read_manifest(out);
  Part part = load_part(out, 1, m);
  part.labels.at(0) = part.labels.at(0) == 0 ? 1 : 0;
  write_part(part, m.dataset, out / part_file_name(1));
  expect_refused("partition --check " + quote(out) + " --only 1,2", "part-1.h5: /node/label");
}

TEST_F(PartitionCli, HelpListsOptions) {
  const auto r = run_tessel("partition --help");
  EXPECT_EQ(r.code, 0);
  for (const char* option : {"--parts", "--out", "--method", "--balance", "--seed",
                             "--no-symmetrize", "--force", "--check", "--only",
                             "--metis-max-edges"})
    EXPECT_NE(r.output.find(option), std::string::npos) << option;
}

// Cora in the OGB raw layout, converted by `tessel convert ogb`, partitioned by the CLI.
TEST(PartitionCliCora, ConvertPartitionCheck) {
  const auto cora = test::sample_dataset("cora");
  test::TempDir tmp;
  const auto store = tmp / "cora.h5";
  auto r = run_tessel("convert ogb " + quote(cora) + " " + quote(store));
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_tessel("partition " + quote(store) + " --parts 4 --out " + quote(tmp / "parts"));
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_tessel("partition --check " + quote(tmp / "parts") + " " + quote(store));
  EXPECT_EQ(r.code, 0) << r.output;
  const auto m = read_manifest(tmp / "parts");
  EXPECT_EQ(m.num_nodes, 2708);
  EXPECT_EQ(m.num_edges, 10556);
}

} // namespace
} // namespace tessel::partition
