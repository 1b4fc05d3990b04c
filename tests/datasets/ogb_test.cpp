// Tests of the OGB raw folder reader and writer: tiny hand-written folders, round trips
// through the writer (CSV and npz), options, and one clear error per kind of bad input.
#include "tessel/core/error.hpp"
#include "tessel/datasets/ogb.hpp"
#include "tessel/datasets/synthetic.hpp"

#include "dataset_fixtures.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

namespace tessel {
namespace {

namespace fs = std::filesystem;
using datasets::Dataset;

std::string ogb_error(const fs::path& dir, const datasets::OgbOptions& options = {}) {
  return test::input_error([&] { (void)datasets::read_ogb_folder(dir, options); });
}

TEST(Ogb, ReadsTinyFolder) {
  for (bool gzip : {true, false}) {
    test::TempDir dir;
    test::TinyOgb tiny;
    tiny.gzip = gzip;
    test::write_tiny_ogb(dir / "tiny", tiny);
    const Dataset d = datasets::read_ogb_folder(dir / "tiny");
    EXPECT_EQ(d.name, "tiny");
    EXPECT_EQ(d.num_nodes, 6);
    EXPECT_EQ(d.num_edges(), 5);
    EXPECT_EQ(d.num_classes, 3);
    EXPECT_EQ(d.feature_dim, 2);
    EXPECT_FALSE(d.directed);
    // Row v lists the sources of edges into v.
    EXPECT_EQ(d.graph.indptr, (std::vector<EdgeId>{0, 0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(d.graph.indices, (std::vector<NodeId>{0, 1, 2, 3, 4}));
    EXPECT_EQ(d.labels, (std::vector<std::int64_t>{0, 1, -1, 0, 1, 2}));
    EXPECT_FLOAT_EQ(d.features[11], -0.6f);
    EXPECT_EQ(d.train, (std::vector<NodeId>{0, 1}));
    EXPECT_EQ(d.test, (std::vector<NodeId>{3, 4, 5}));
  }
}

TEST(Ogb, ToleratesCrLfMissingFinalNewlineAndPandasNan) {
  test::TempDir dir;
  test::TinyOgb tiny;
  tiny.edges = "0,1\r\n1,2\r\n2,3\r\n3,4\r\n4,5";
  tiny.labels = "0\n1\n\n0\nNaN\n2.0\n";
  test::write_tiny_ogb(dir / "t", tiny);
  const Dataset d = datasets::read_ogb_folder(dir / "t");
  EXPECT_EQ(d.num_edges(), 5);
  EXPECT_EQ(d.labels, (std::vector<std::int64_t>{0, 1, -1, 0, -1, 2}));
}

TEST(Ogb, Options) {
  test::TempDir dir;
  test::TinyOgb tiny;
  tiny.edges = "0,1\n1,0\n2,2\n3,4\n4,5\n"; // a reverse pair and a self-loop
  test::write_tiny_ogb(dir / "t", tiny);
  datasets::OgbOptions options;
  options.symmetrize = true;
  options.name = "renamed";
  Dataset d = datasets::read_ogb_folder(dir / "t", options);
  EXPECT_EQ(d.name, "renamed");
  EXPECT_EQ(d.num_edges(), 6); // {0,1}, {3,4}, {4,5} both ways
  EXPECT_FALSE(d.directed);
  options = {};
  options.directed = true;
  d = datasets::read_ogb_folder(dir / "t", options);
  EXPECT_TRUE(d.directed);
  EXPECT_EQ(d.num_edges(), 5);
}

TEST(Ogb, SplitSelection) {
  test::TempDir dir;
  test::write_tiny_ogb(dir / "t");
  test::TinyOgb other;
  other.split_name = "other";
  other.train = "5\n";
  other.test = "3\n4\n";
  test::write_tiny_ogb(dir / "t", other);
  const auto msg = ogb_error(dir / "t");
  EXPECT_NE(msg.find("several splits (other, tiny)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--split"), std::string::npos) << msg;
  datasets::OgbOptions options;
  options.split = "other";
  EXPECT_EQ(datasets::read_ogb_folder(dir / "t", options).train, (std::vector<NodeId>{5}));
  options.split = "nope";
  EXPECT_NE(ogb_error(dir / "t", options).find("no split \"nope\" (available: other, tiny)"),
            std::string::npos);
}

TEST(Ogb, RoundTripThroughWriter) {
  test::TempDir dir;
  Dataset data = test::small_dataset(2000);
  data.labels[5] = -1;
  datasets::OgbWriteOptions options;
  options.split_name = "mine";
  datasets::write_ogb_folder(data, dir / "folder", options);
  EXPECT_TRUE(fs::exists(dir / "folder" / "raw" / "edge.csv.gz"));
  test::expect_same_contents(datasets::read_ogb_folder(dir / "folder"), data);
  options.gzip = false;
  datasets::write_ogb_folder(data, dir / "plain", options);
  test::expect_same_contents(datasets::read_ogb_folder(dir / "plain"), data);
  // The writer refuses to write into a non-empty folder.
  EXPECT_THROW(datasets::write_ogb_folder(data, dir / "plain", options), InputError);
}

TEST(Ogb, ConvertGivesTheStoreWriteStoreGives) {
  test::TempDir dir;
  const Dataset data = test::small_dataset(3000);
  datasets::write_ogb_folder(data, dir / "folder");
  Dataset named = data;
  named.name = "folder";
  datasets::write_store(named, dir / "direct.h5");
  const auto report = datasets::convert_ogb_folder(dir / "folder", dir / "converted.h5");
  EXPECT_EQ(report.info.num_nodes, data.num_nodes);
  EXPECT_EQ(report.info.num_edges, data.num_edges());
  EXPECT_GT(report.text_bytes, 0);
  EXPECT_EQ(report.split, "random");
  EXPECT_EQ(test::read_file_bytes(dir / "direct.h5"), test::read_file_bytes(dir / "converted.h5"));
}

TEST(Ogb, NpzLayoutStoredDeflatedZip64) {
  const Dataset data = test::small_dataset(1500);
  for (int variant = 0; variant < 3; ++variant) {
    test::TempDir dir;
    datasets::OgbWriteOptions options;
    options.npz = true;
    options.npz_deflate = variant >= 1;
    options.npz_zip64 = variant == 2;
    datasets::write_ogb_folder(data, dir / "p", options);
    EXPECT_TRUE(fs::exists(dir / "p" / "raw" / "data.npz"));
    test::expect_same_contents(datasets::read_ogb_folder(dir / "p"), data);
  }
}

// ---- bad input: one clear line naming the file (and line) ----

struct Broken {
  test::TempDir dir;
  fs::path folder() const { return dir / "t"; }
};

std::string broken_error(const test::TinyOgb& tiny) {
  test::TempDir dir;
  test::write_tiny_ogb(dir / "t", tiny);
  return ogb_error(dir / "t");
}

TEST(OgbBadInput, MissingFile) {
  test::TempDir dir;
  test::write_tiny_ogb(dir / "t");
  fs::remove(dir / "t" / "raw" / "node-feat.csv.gz");
  const auto msg = ogb_error(dir / "t");
  EXPECT_NE(msg.find("raw/node-feat.csv.gz: no such file"), std::string::npos) << msg;
  EXPECT_NE(ogb_error(dir / "nothing").find("nothing: no such folder"), std::string::npos);
}

TEST(OgbBadInput, TruncatedGzip) {
  test::TempDir dir;
  test::write_tiny_ogb(dir / "t");
  std::string big;
  for (int i = 0; i < 5; ++i)
    big += "0,1\n";
  const auto edge = dir / "t" / "raw" / "edge.csv.gz";
  const auto bytes = test::read_file_bytes(edge);
  test::write_text(edge, bytes.substr(0, bytes.size() - 6));
  const auto msg = ogb_error(dir / "t");
  EXPECT_NE(msg.find("edge.csv.gz: truncated gzip"), std::string::npos) << msg;
}

TEST(OgbBadInput, RaggedRow) {
  test::TinyOgb tiny;
  tiny.feat = "0.5,1\n1.5,2\n2.5\n3.5,4\n4.5,5\n5.5,6\n";
  const auto msg = broken_error(tiny);
  EXPECT_NE(msg.find("node-feat.csv.gz line 3: has 1 comma-separated value, expected 2"),
            std::string::npos)
      << msg;
}

TEST(OgbBadInput, NonNumber) {
  test::TinyOgb tiny;
  tiny.edges = "0,1\n1,2\n2,x3\n3,4\n4,5\n";
  const auto msg = broken_error(tiny);
  EXPECT_NE(msg.find("edge.csv.gz line 3: value 2 \"x3\" is not an integer"), std::string::npos)
      << msg;
  tiny = {};
  tiny.feat = "0.5,1\n1.5,2\n2.5,3\n3.5,4\n4.5,inf\n5.5,6\n";
  const auto msg2 = broken_error(tiny);
  EXPECT_NE(msg2.find("node-feat.csv.gz line 5: value 2 \"inf\" is not a finite number"),
            std::string::npos)
      << msg2;
}

TEST(OgbBadInput, EndpointOutOfRange) {
  test::TinyOgb tiny;
  tiny.edges = "0,1\n1,2\n2,3\n3,6\n4,5\n";
  const auto msg = broken_error(tiny);
  EXPECT_NE(msg.find("edge.csv.gz line 4: edge 3,6: endpoint 6 is not a node id"),
            std::string::npos)
      << msg;
}

TEST(OgbBadInput, EdgeCountDisagrees) {
  test::TinyOgb tiny;
  tiny.num_edges = "6\n";
  auto msg = broken_error(tiny);
  EXPECT_NE(msg.find("edge.csv.gz: 5 edges, but"), std::string::npos) << msg;
  EXPECT_NE(msg.find("num-edge-list.csv.gz says 6"), std::string::npos) << msg;
  tiny.num_edges = "4\n";
  msg = broken_error(tiny);
  EXPECT_NE(msg.find("edge.csv.gz line 5: more edges than the 4"), std::string::npos) << msg;
}

TEST(OgbBadInput, NodeCountDisagrees) {
  test::TinyOgb tiny;
  tiny.labels = "0\n1\n2\n0\n1\n";
  auto msg = broken_error(tiny);
  EXPECT_NE(msg.find("node-label.csv.gz: 5 rows, but"), std::string::npos) << msg;
  EXPECT_NE(msg.find("num-node-list.csv.gz says 6 nodes"), std::string::npos) << msg;
  tiny = {};
  tiny.feat += "6.5,7\n";
  msg = broken_error(tiny);
  EXPECT_NE(msg.find("node-feat.csv.gz line 7: more rows than the 6 nodes"), std::string::npos)
      << msg;
}

TEST(OgbBadInput, SplitIdOutOfRange) {
  test::TinyOgb tiny;
  tiny.valid = "2\n9\n";
  const auto msg = broken_error(tiny);
  EXPECT_NE(msg.find("valid.csv.gz line 2: node id 9 is out of range"), std::string::npos) << msg;
}

TEST(OgbBadInput, OverlappingSplits) {
  test::TinyOgb tiny;
  tiny.test = "3\n1\n";
  const auto msg = broken_error(tiny);
  EXPECT_NE(msg.find("test.csv.gz line 2: node 1 is already in the train split"), std::string::npos)
      << msg;
}

TEST(OgbBadInput, MultiLabelAndBadLabels) {
  test::TinyOgb tiny;
  tiny.labels = "0,1\n1,0\n0,0\n1,1\n0,1\n1,1\n";
  auto msg = broken_error(tiny);
  EXPECT_NE(msg.find("node-label.csv.gz line 1: 2 label columns"), std::string::npos) << msg;
  tiny.labels = "0\n1\n2\n-4\n1\n2\n";
  msg = broken_error(tiny);
  EXPECT_NE(msg.find("node-label.csv.gz line 4: label -4 is negative"), std::string::npos) << msg;
  tiny.labels = "0\n1\n2.5\n0\n1\n2\n";
  msg = broken_error(tiny);
  EXPECT_NE(msg.find("node-label.csv.gz line 3: \"2.5\" is not a class id"), std::string::npos)
      << msg;
}

TEST(OgbBadInput, SeveralGraphs) {
  test::TinyOgb tiny;
  tiny.num_nodes = "6\n4\n";
  const auto msg = broken_error(tiny);
  EXPECT_NE(msg.find("num-node-list.csv.gz: 2 lines"), std::string::npos) << msg;
}

TEST(OgbBadInput, CorruptGzipData) {
  test::TempDir dir;
  test::write_tiny_ogb(dir / "t");
  const auto edge = dir / "t" / "raw" / "edge.csv.gz";
  auto bytes = test::read_file_bytes(edge);
  for (std::size_t i = 12; i < bytes.size() - 8; ++i)
    bytes[i] = static_cast<char>(bytes[i] ^ 0x5a);
  test::write_text(edge, bytes);
  const auto msg = ogb_error(dir / "t");
  EXPECT_NE(msg.find("edge.csv.gz: "), std::string::npos) << msg;
}

TEST(OgbBadInput, NpzProblems) {
  test::TempDir dir;
  datasets::OgbWriteOptions options;
  options.npz = true;
  datasets::write_ogb_folder(test::small_dataset(200), dir / "p", options);
  // A truncated archive.
  const auto npz = dir / "p" / "raw" / "data.npz";
  const auto bytes = test::read_file_bytes(npz);
  test::write_text(npz, bytes.substr(0, bytes.size() / 2));
  auto msg = ogb_error(dir / "p");
  EXPECT_NE(msg.find("data.npz"), std::string::npos) << msg;
  // The label archive missing.
  fs::remove(dir / "p" / "raw" / "node-label.npz");
  msg = ogb_error(dir / "p");
  EXPECT_NE(msg.find("node-label.npz: no such file"), std::string::npos) << msg;
}

} // namespace
} // namespace tessel
