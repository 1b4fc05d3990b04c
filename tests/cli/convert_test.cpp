// Tests of `tessel convert` and `tessel info` through the binary: the Cora check, synthetic
// data, and for every kind of bad input one error line naming the file, exit code 2 and no
// output left behind.
#include "tessel/datasets/dataset.hpp"

#include "dataset_fixtures.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace tessel {
namespace {

namespace fs = std::filesystem;

using Result = test::CommandResult;
using test::quote;
using test::run_tessel;

// The failure contract: exit code 2, exactly one line "tessel: error: ..." holding every
// expected piece, and an output folder with nothing in it.
void expect_clean_failure(const Result& r, const std::vector<std::string>& pieces,
                          const fs::path& out_dir) {
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_EQ(r.output.rfind("tessel: error: ", 0), 0u) << r.output;
  for (const auto& piece : pieces)
    EXPECT_NE(r.output.find(piece), std::string::npos)
        << "missing \"" << piece << "\" in: " << r.output;
  EXPECT_TRUE(test::list_dir(out_dir).empty()) << "output left behind in " << out_dir;
}

// A tiny OGB folder with one file broken, converted into an empty output folder.
struct BrokenConvert {
  test::TempDir dir;
  fs::path out_dir;
  Result result;
  explicit BrokenConvert(const test::TinyOgb& tiny, const std::string& extra = "") {
    test::write_tiny_ogb(dir / "tiny", tiny);
    out_dir = dir / "out";
    fs::create_directories(out_dir);
    result = run_tessel("convert ogb " + quote(dir / "tiny") + " " + quote(out_dir / "tiny.h5") +
                        " " + extra);
  }
};

// An ogbl folder (split/<name>/*.pt) becomes a link store; a bad split file is one error line.
TEST(CliConvert, OgblFolderBecomesALinkStore) {
  const fs::path collab =
      fs::path(TESSEL_SOURCE_DIR) / "tests" / "data" / "ogbl" / "ogbl-collab-tiny";
  test::TempDir dir;
  auto r = run_tessel("convert ogb " + quote(collab) + " " + quote(dir / "c.h5") + " --json");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["task"], "link");
  EXPECT_EQ(j["feature_dim"], 3);
  EXPECT_EQ(j["link"]["train_pos"], 4);
  EXPECT_EQ(j["link"]["valid_neg"], 3);
  EXPECT_EQ(j["link"]["metric"], "hits@50");
  r = run_tessel("info " + quote(dir / "c.h5") + " --json");
  EXPECT_EQ(r.code, 0) << r.output;

  fs::copy(collab, dir / "bad", fs::copy_options::recursive);
  fs::remove(dir / "bad" / "raw" / "node-feat.csv.gz");
  r = run_tessel("convert ogb " + quote(dir / "bad") + " " + quote(dir / "nofeat.h5"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("no node features (no raw/node-feat: the store has feature_dim 0)"),
            std::string::npos)
      << r.output;
  const fs::path valid = dir / "bad" / "split" / "time" / "valid.pt";
  const std::string bytes = test::read_file_bytes(valid);
  test::write_text(valid, bytes.substr(0, bytes.size() - 30));
  const fs::path out_dir = dir / "out";
  fs::create_directories(out_dir);
  r = run_tessel("convert ogb " + quote(dir / "bad") + " " + quote(out_dir / "x.h5"));
  expect_clean_failure(r, {valid.string(), "truncated"}, out_dir);
}

TEST(CliConvert, CoraCheck) {
  const auto cora = test::sample_dataset("cora");
  test::TempDir dir;
  const auto store = dir / "cora.h5";
  auto r = run_tessel("convert ogb " + quote(cora) + " " + quote(store));
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_tessel("info " + quote(store) + " --json");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["num_nodes"], 2708);
  EXPECT_EQ(j["num_edges"], 5278);
  EXPECT_EQ(j["edge_layout"], "undirected, each edge stored once");
  EXPECT_EQ(j["num_edges_symmetrized"], 10556);
  EXPECT_EQ(j["feature_dim"], 1433);
  EXPECT_EQ(j["num_classes"], 7);
  EXPECT_EQ(j["split"]["train"], 140);
  EXPECT_EQ(j["split"]["valid"], 500);
  EXPECT_EQ(j["split"]["test"], 1000);
  EXPECT_EQ(j["directed"], false);
  r = run_tessel("info " + quote(store));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("nodes         2708"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("10556 directed edges"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("train 140, valid 500, test 1000"), std::string::npos) << r.output;
  // The store itself: features are Cora's binary bag of words.
  const auto rows = datasets::read_feature_rows(store, 0, 2708);
  EXPECT_TRUE(
      std::all_of(rows.begin(), rows.end(), [](float x) { return x == 0.0f || x == 1.0f; }));
}

TEST(CliConvert, HelpTexts) {
  for (const char* args :
       {"convert --help", "convert ogb --help", "convert synthetic --help", "info --help"}) {
    const auto r = run_tessel(args);
    EXPECT_EQ(r.code, 0) << args << ": " << r.output;
    EXPECT_NE(r.output.find("OPTIONS"), std::string::npos) << r.output;
  }
}

TEST(CliConvert, SyntheticIsReproducibleAndRoundTripsThroughOgb) {
  test::TempDir dir;
  const std::string opts = "--nodes 3000 --avg-degree 10 --classes 5 --feat-dim 8 --seed 9";
  ASSERT_EQ(run_tessel("convert synthetic " + opts + " " + quote(dir / "a.h5")).code, 0);
  const auto r = run_tessel("convert synthetic " + opts + " " + quote(dir / "b.h5"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(test::read_file_bytes(dir / "a.h5"), test::read_file_bytes(dir / "b.h5"));
  ASSERT_EQ(run_tessel("convert synthetic " + opts + " --ogb " + quote(dir / "folder")).code, 0);
  const auto c = run_tessel("convert ogb " + quote(dir / "folder") + " " + quote(dir / "c.h5") +
                            " --name synthetic --json");
  ASSERT_EQ(c.code, 0) << c.output;
  const auto j = nlohmann::json::parse(c.output);
  EXPECT_EQ(j["num_nodes"], 3000);
  EXPECT_GT(j["text_bytes"].get<std::int64_t>(), 0);
  EXPECT_GT(j["peak_rss_bytes"].get<std::int64_t>(), 0);
  EXPECT_EQ(test::read_file_bytes(dir / "a.h5"), test::read_file_bytes(dir / "c.h5"));
  const auto info = run_tessel("info " + quote(dir / "a.h5"));
  EXPECT_EQ(info.code, 0) << info.output;
  EXPECT_NE(info.output.find("nodes         3000"), std::string::npos) << info.output;
}

// A preset fills what the command line leaves out; flags given override it.
TEST(CliConvert, SyntheticPresetFillsUnsetOptions) {
  test::TempDir dir;
  const auto r = run_tessel("convert synthetic --preset products --nodes 20000 --feat-dim 4 " +
                            quote(dir / "p.h5"));
  ASSERT_EQ(r.code, 0) << r.output;
  const auto info = datasets::read_store_info(dir / "p.h5");
  EXPECT_EQ(info.num_nodes, 20000);  // given
  EXPECT_EQ(info.feature_dim, 4);    // given
  EXPECT_EQ(info.num_classes, 47);   // from the preset
  EXPECT_EQ(info.name, "synthetic-products");
  // About nodes * 57 / 2 draws, fewer once repeated pairs are dropped.
  EXPECT_GT(info.num_edges, 20000 * 57 / 2 * 7 / 10);
  EXPECT_LE(info.num_edges, 20000 * 57 / 2);
  // 8% train, 1.6% valid.
  EXPECT_NEAR(static_cast<double>(info.num_train) / 20000, 0.08, 0.01);
  EXPECT_NEAR(static_cast<double>(info.num_valid) / 20000, 0.016, 0.005);
  fs::create_directories(dir / "bad");
  expect_clean_failure(
      run_tessel("convert synthetic --preset papers " + quote(dir / "bad" / "x.h5")),
      {"--preset papers: unknown synthetic preset", "products"}, dir / "bad");
}

// --scale shrinks a preset's node count, keeping its shape; it needs a preset.
TEST(CliConvert, ScaledPapers100mPreset) {
  test::TempDir dir;
  const auto r = run_tessel("convert synthetic --preset papers100m --scale 0.0001 " +
                            quote(dir / "p.h5"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("features in blocks of"), std::string::npos) << r.output;
  const auto info = datasets::read_store_info(dir / "p.h5");
  EXPECT_EQ(info.num_nodes, 11106);
  EXPECT_EQ(info.feature_dim, 128);
  EXPECT_EQ(info.num_classes, 172);
  EXPECT_EQ(info.name, "synthetic-papers100m-x0.0001");
  EXPECT_LT(info.num_train + info.num_valid + info.num_test, 11106 / 20);
  fs::create_directories(dir / "bad");
  expect_clean_failure(run_tessel("convert synthetic --scale 0.5 " + quote(dir / "bad" / "x.h5")),
                       {"--scale needs --preset"}, dir / "bad");
  expect_clean_failure(
      run_tessel("convert synthetic --preset papers100m --scale 0 " + quote(dir / "bad" / "x.h5")),
      {"--scale must be in (0, 1000]"}, dir / "bad");
  expect_clean_failure(run_tessel("convert synthetic --npz " + quote(dir / "bad" / "x.h5")),
                       {"--npz needs --ogb"}, dir / "bad");
}

// --ogb --npz writes papers100M's layout, which `convert ogb` reads back to the store that
// `convert synthetic` writes directly.
TEST(CliConvert, SyntheticNpzFolderConvertsToTheSameStore) {
  test::TempDir dir;
  const std::string flags = "convert synthetic --nodes 500 --feat-dim 6 --test-frac 0.2 ";
  ASSERT_EQ(run_tessel(flags + quote(dir / "direct.h5")).code, 0);
  const auto w = run_tessel(flags + "--ogb --npz " + quote(dir / "folder"));
  ASSERT_EQ(w.code, 0) << w.output;
  EXPECT_TRUE(fs::exists(dir / "folder" / "raw" / "data.npz"));
  const auto c = run_tessel("convert ogb " + quote(dir / "folder") + " " + quote(dir / "via.h5"));
  ASSERT_EQ(c.code, 0) << c.output;
  const auto direct = datasets::read_store(dir / "direct.h5");
  const auto via = datasets::read_store(dir / "via.h5");
  EXPECT_EQ(via.graph.indptr, direct.graph.indptr);
  EXPECT_EQ(via.graph.indices, direct.graph.indices);
  EXPECT_EQ(via.features, direct.features);
  EXPECT_EQ(via.labels, direct.labels);
  EXPECT_EQ(via.test, direct.test);
  EXPECT_LT(direct.train.size() + direct.valid.size() + direct.test.size(), 500u * 5 / 10);
}

TEST(CliConvert, SymmetrizeFlag) {
  test::TempDir dir;
  test::write_tiny_ogb(dir / "tiny");
  const auto r = run_tessel("convert ogb " + quote(dir / "tiny") + " " + quote(dir / "t.h5") +
                            " --symmetrize");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(datasets::read_store_info(dir / "t.h5").num_edges, 10);
}

// ---- bad input ----

// A file where the OGB folder belongs says so (it said "no such folder").
TEST(CliBadInput, FileWhereTheFolderBelongs) {
  test::TempDir dir;
  test::write_text(dir / "x.json", "{}\n");
  fs::create_directories(dir / "out");
  const Result r = run_tessel("convert ogb " + quote(dir / "x.json") + " " + quote(dir / "out" / "o.h5"));
  expect_clean_failure(r, {"x.json: is a file; expected an OGB dataset folder"}, dir / "out");
}

TEST(CliBadInput, MissingFile) {
  test::TempDir dir;
  test::write_tiny_ogb(dir / "tiny");
  fs::remove(dir / "tiny" / "raw" / "edge.csv.gz");
  fs::create_directories(dir / "out");
  const auto r =
      run_tessel("convert ogb " + quote(dir / "tiny") + " " + quote(dir / "out" / "t.h5"));
  expect_clean_failure(r, {"raw/edge.csv.gz: no such file"}, dir / "out");
}

TEST(CliBadInput, TruncatedGzip) {
  test::TempDir dir;
  test::TinyOgb tiny;
  test::write_tiny_ogb(dir / "tiny", tiny);
  const auto feat = dir / "tiny" / "raw" / "node-feat.csv.gz";
  const auto bytes = test::read_file_bytes(feat);
  test::write_text(feat, bytes.substr(0, bytes.size() - 10));
  fs::create_directories(dir / "out");
  const auto r =
      run_tessel("convert ogb " + quote(dir / "tiny") + " " + quote(dir / "out" / "t.h5"));
  expect_clean_failure(r, {"node-feat.csv.gz: truncated gzip"}, dir / "out");
}

TEST(CliBadInput, RaggedRow) {
  test::TinyOgb tiny;
  tiny.feat = "0.5,1\n1.5,2\n2.5,3\n3.5,4,9\n4.5,5\n5.5,6\n";
  BrokenConvert b(tiny);
  expect_clean_failure(
      b.result, {"node-feat.csv.gz line 4", "3 comma-separated values, expected 2"}, b.out_dir);
}

TEST(CliBadInput, NonNumber) {
  test::TinyOgb tiny;
  tiny.feat = "0.5,1\n1.5,2\n2.5,abc\n3.5,4\n4.5,5\n5.5,6\n";
  BrokenConvert b(tiny);
  expect_clean_failure(b.result, {"node-feat.csv.gz line 3", "\"abc\" is not a finite number"},
                       b.out_dir);
}

TEST(CliBadInput, EndpointOutOfRange) {
  test::TinyOgb tiny;
  tiny.edges = "0,1\n1,2\n2,3\n3,4\n4,17\n";
  BrokenConvert b(tiny);
  expect_clean_failure(b.result, {"edge.csv.gz line 5", "endpoint 17 is not a node id"}, b.out_dir);
}

TEST(CliBadInput, EdgeCountDisagrees) {
  test::TinyOgb tiny;
  tiny.num_edges = "7\n";
  BrokenConvert b(tiny);
  expect_clean_failure(b.result, {"edge.csv.gz: 5 edges", "num-edge-list.csv.gz says 7"},
                       b.out_dir);
}

TEST(CliBadInput, NodeCountDisagrees) {
  test::TinyOgb tiny;
  tiny.feat = "0.5,1\n1.5,2\n2.5,3\n3.5,4\n4.5,5\n";
  BrokenConvert b(tiny);
  expect_clean_failure(b.result, {"node-feat.csv.gz: 5 rows", "num-node-list.csv.gz says 6 nodes"},
                       b.out_dir);
}

// Counts that the files cannot hold are refused before anything is sized by them (3e9 nodes
// used to allocate 24 GB for the CSR row pointers; 1e12 ended with a bare "out of memory").
TEST(CliBadInput, NodeCountBeyondWhatTheFilesHold) {
  for (const std::string count : {"3000000000", "1000000000000"}) {
    test::TinyOgb tiny;
    tiny.num_nodes = count + "\n";
    BrokenConvert b(tiny);
    expect_clean_failure(
        b.result,
        {"num-node-list.csv.gz: says " + count + " nodes", "node-label.csv.gz can hold at most"},
        b.out_dir);
  }
}

TEST(CliBadInput, EdgeCountBeyondWhatTheFileHolds) {
  test::TinyOgb tiny;
  tiny.num_edges = "1000000000000\n";
  BrokenConvert b(tiny);
  expect_clean_failure(b.result,
                       {"num-edge-list.csv.gz: says 1000000000000 edges",
                        "edge.csv.gz can hold at most"},
                       b.out_dir);
}

// A stray label of 10^9 used to make a store with 1,000,000,001 classes.
TEST(CliBadInput, LabelAboveNodeCount) {
  test::TinyOgb tiny;
  tiny.labels = "0\n1\nnan\n1000000000\n1\n2\n";
  BrokenConvert b(tiny);
  expect_clean_failure(b.result,
                       {"node-label.csv.gz line 4", "label 1000000000 is too large",
                        "below the number of nodes (6"},
                       b.out_dir);
}

// Out of memory names what was being done. A virtual memory limit makes the allocation fail.
// Not built with AddressSanitizer (TESSEL_TEST_UNDER_ASAN): every other build runs this test.
#if !defined(TESSEL_TEST_UNDER_ASAN)
TEST(CliBadInput, OutOfMemoryNamesTheActivity) {
  test::TempDir dir;
  fs::create_directories(dir / "out");
  Result r;
  r.code = test::run_command(
      "bash -c 'ulimit -v 2000000 && exec " + quote(test::tessel_binary()) +
          " convert synthetic --nodes 200000000 --avg-degree 2 --classes 2 --feat-dim 1 " +
          quote(dir / "out" / "s.h5") + "'",
      &r.output);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_NE(r.output.find("tessel: error: out of memory while generating a synthetic graph of "
                          "200000000 nodes, in running `tessel convert`"),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(test::list_dir(dir / "out").empty());
}
#endif

TEST(CliBadInput, SplitIdOutOfRange) {
  test::TinyOgb tiny;
  tiny.test = "3\n4\n6\n";
  BrokenConvert b(tiny);
  expect_clean_failure(b.result, {"test.csv.gz line 3", "node id 6 is out of range"}, b.out_dir);
}

// An empty training split converted into a store no mode can train on.
TEST(CliBadInput, EmptyTrainingSplit) {
  test::TinyOgb tiny;
  tiny.train = "";
  BrokenConvert b(tiny);
  expect_clean_failure(b.result,
                       {"split/tiny/train.csv.gz: the training split is empty",
                        "expected the training nodes' ids, one per line"},
                       b.out_dir);
  tiny.gzip = false;
  BrokenConvert plain(tiny, "--edge-split 70,20,10");
  expect_clean_failure(plain.result, {"split/tiny/train.csv: the training split is empty"},
                       plain.out_dir);
  test::TinyOgb no_valid;
  no_valid.valid = "";
  test::TempDir dir;
  test::write_tiny_ogb(dir / "tiny", no_valid);
  const auto ok = run_tessel("convert ogb " + quote(dir / "tiny") + " " + quote(dir / "t.h5"));
  EXPECT_EQ(ok.code, 0) << ok.output;
}

TEST(CliBadInput, SeveralSplitsWithoutChoice) {
  test::TempDir dir;
  test::write_tiny_ogb(dir / "tiny");
  test::TinyOgb other;
  other.split_name = "b";
  test::write_tiny_ogb(dir / "tiny", other);
  fs::create_directories(dir / "out");
  const auto r =
      run_tessel("convert ogb " + quote(dir / "tiny") + " " + quote(dir / "out" / "t.h5"));
  expect_clean_failure(r, {"several splits (b, tiny)", "--split"}, dir / "out");
}

TEST(CliBadInput, OutputFolderMissing) {
  test::TempDir dir;
  test::write_tiny_ogb(dir / "tiny");
  fs::create_directories(dir / "out");
  const auto r =
      run_tessel("convert ogb " + quote(dir / "tiny") + " " + quote(dir / "out" / "no" / "t.h5"));
  expect_clean_failure(r, {"does not exist"}, dir / "out");
}

TEST(CliBadInput, SyntheticBadOptions) {
  test::TempDir dir;
  const auto r = run_tessel("convert synthetic --nodes 100 --train-frac 0.9 --valid-frac 0.5 " +
                            quote(dir / "s.h5"));
  expect_clean_failure(r, {"--train-frac"}, dir.path());
}

// Damaged stores, read by `tessel info`.
void expect_info_failure(test::StoreDamage damage, const std::vector<std::string>& pieces) {
  test::TempDir dir;
  fs::create_directories(dir / "in");
  test::write_damaged_store(dir / "in" / "d.h5", test::small_dataset(), damage);
  fs::create_directories(dir / "out");
  auto all = pieces;
  all.push_back("d.h5");
  expect_clean_failure(run_tessel("info " + quote(dir / "in" / "d.h5")), all, dir / "out");
}

TEST(CliBadInput, StoreMissingDataset) {
  expect_info_failure(test::StoreDamage::missing_label, {"/node/label"});
}

TEST(CliBadInput, StoreNonMonotoneIndptr) {
  expect_info_failure(test::StoreDamage::non_monotone_indptr, {"/graph", "not monotone at row 3"});
}

TEST(CliBadInput, StoreIndexOutOfRange) {
  expect_info_failure(test::StoreDamage::index_out_of_range, {"/graph", "outside [0, 300)"});
}

// Stores that read_store used to accept, and `info` with it, while partition or training
// refused them (or trained on nonsense).
TEST(CliBadInput, StoreOverlappingSplits) {
  expect_info_failure(test::StoreDamage::overlapping_splits,
                      {"/split/test[", "is already in /split/valid"});
}

TEST(CliBadInput, StoreDirectedTwo) {
  expect_info_failure(test::StoreDamage::directed_two, {"directed = 2, expected 0 or 1"});
}

TEST(CliBadInput, StoreIntegerFeatures) {
  expect_info_failure(test::StoreDamage::integer_features,
                      {"/node/feat", "does not hold floating-point values"});
}

TEST(CliBadInput, StoreNonFiniteFeatures) {
  expect_info_failure(test::StoreDamage::nan_feature,
                      {"/node/feat row 5 column 1 is nan, expected a finite number"});
  expect_info_failure(test::StoreDamage::inf_feature, {"/node/feat row 9 column 0 is -inf"});
}

TEST(CliBadInput, StoreHugeLabel) {
  expect_info_failure(test::StoreDamage::huge_label,
                      {"num_classes = 1000000001 is more than the 300 nodes"});
}

TEST(CliBadInput, InfoMissingFile) {
  test::TempDir dir;
  expect_clean_failure(run_tessel("info " + quote(dir / "none.h5")), {"none.h5: no such file"},
                       dir.path());
}

} // namespace
} // namespace tessel
