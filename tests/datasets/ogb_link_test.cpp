// Tests of `convert ogb` on ogbl folders: the tiny collab- and citation2-shaped folders of
// tests/data/ogbl (their .pt splits written by torch), a featureless (ddi-like) copy, and one
// clear error per kind of bad split.
#include "tessel/core/error.hpp"
#include "tessel/datasets/h5.hpp"
#include "tessel/datasets/ogb_link.hpp"

#include "dataset_fixtures.hpp"
#include "pt_fixtures.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>

namespace tessel {
namespace {

namespace fs = std::filesystem;
using I64 = std::vector<std::int64_t>;

fs::path fixture(const std::string& name) {
  return fs::path(TESSEL_SOURCE_DIR) / "tests" / "data" / "ogbl" / name;
}

// A writable copy of a fixture folder.
fs::path copy_fixture(const test::TempDir& dir, const std::string& name) {
  const fs::path to = dir / name;
  fs::copy(fixture(name), to, fs::copy_options::recursive);
  return to;
}

TEST(OgbLink, ConvertsCollabShapedFolder) {
  test::TempDir dir;
  const fs::path out = dir / "collab.h5";
  ASSERT_TRUE(datasets::is_ogb_link_folder(fixture("ogbl-collab-tiny")));
  const auto r = datasets::convert_ogb_link_folder(fixture("ogbl-collab-tiny"), out);
  EXPECT_EQ(r.metric, "hits@50");
  EXPECT_EQ(r.train_pos, 4);
  EXPECT_EQ(r.valid_neg, 3);
  EXPECT_TRUE(r.weight && r.year && r.features);
  const auto f = h5::File::open_read(out);
  EXPECT_EQ(f.attr_string("name"), "ogbl-collab-tiny");
  EXPECT_EQ(f.attr_int("num_nodes"), 6);
  EXPECT_EQ(f.attr_int("num_edges"), 4);
  EXPECT_EQ(f.attr_int("num_classes"), 0);
  EXPECT_EQ(f.attr_int("feature_dim"), 3);
  EXPECT_EQ(f.attr_int("directed"), 0);
  // /graph is raw/edge.csv: the training edges 0-1, 1-2, 2-3, 3-4 as an in-neighbor CSR.
  EXPECT_EQ(f.read<std::int64_t>("/graph/indptr"), (I64{0, 0, 1, 2, 3, 4, 4}));
  EXPECT_EQ(f.read<std::int64_t>("/node/label"), I64(6, -1));
  EXPECT_EQ(f.dims("/split/train"), I64{0});
  EXPECT_EQ(f.read<float>("/node/feat")[3 * 5 + 2], 4.0f);
  EXPECT_EQ(f.attr_string("source", "/link"), "ogb");
  EXPECT_EQ(f.attr_string("metric", "/link"), "hits@50");
  EXPECT_EQ(f.attr_int("seed", "/link"), -1);
  EXPECT_EQ(f.read<std::int64_t>("/link/train_pos", {4, 2}), (I64{0, 1, 1, 2, 2, 3, 3, 4}));
  EXPECT_EQ(f.read<std::int64_t>("/link/valid_pos", {2, 2}), (I64{0, 2, 1, 3}));
  EXPECT_EQ(f.read<std::int64_t>("/link/valid_neg", {3, 2}), (I64{0, 5, 1, 5, 2, 5}));
  EXPECT_EQ(f.read<std::int64_t>("/link/test_pos", {2, 2}), (I64{4, 5, 0, 4}));
  EXPECT_EQ(f.read<std::int64_t>("/link/test_neg", {2, 2}), (I64{3, 5, 0, 3}));
  EXPECT_EQ(f.read<float>("/link/train_weight", {4}), (std::vector<float>{1, 2, 1, 1}));
  EXPECT_EQ(f.read<std::int64_t>("/link/test_year", {2}), (I64{2019, 2019}));
  EXPECT_FALSE(f.exists("/link/valid_neg_dst"));
}

TEST(OgbLink, ConvertsCitation2ShapedFolder) {
  test::TempDir dir;
  const fs::path out = dir / "cite.h5";
  datasets::OgbOptions options;
  options.directed = true;
  const auto r = datasets::convert_ogb_link_folder(fixture("ogbl-citation2-tiny"), out, options);
  EXPECT_EQ(r.metric, "mrr");
  EXPECT_EQ(r.neg_per_source, 3);
  EXPECT_FALSE(r.weight || r.year);
  const auto f = h5::File::open_read(out);
  EXPECT_EQ(f.attr_int("directed"), 1);
  EXPECT_EQ(f.attr_int("feature_dim"), 2);
  EXPECT_EQ(f.read<std::int64_t>("/link/train_pos", {5, 2}), (I64{0, 1, 0, 2, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(f.read<std::int64_t>("/link/valid_pos", {2, 2}), (I64{2, 0, 4, 5}));
  EXPECT_EQ(f.read<std::int64_t>("/link/valid_neg_dst", {2, 3}), (I64{1, 3, 6, 0, 1, 2}));
  EXPECT_EQ(f.read<std::int64_t>("/link/test_neg_dst", {2, 3}), (I64{0, 2, 4, 3, 4, 6}));
  EXPECT_FALSE(f.exists("/link/test_neg"));
}

// Split files in the legacy format (PyTorch before 1.6) convert to the same store.
TEST(OgbLink, LegacySplitFilesGiveTheSameSplits) {
  test::TempDir dir;
  const fs::path folder = copy_fixture(dir, "ogbl-collab-tiny");
  fs::copy_file(fixture("pt/collab-valid-legacy.pt"), folder / "split" / "time" / "valid.pt",
                fs::copy_options::overwrite_existing);
  datasets::convert_ogb_link_folder(folder, dir / "legacy.h5");
  const auto f = h5::File::open_read(dir / "legacy.h5");
  EXPECT_EQ(f.read<std::int64_t>("/link/valid_pos", {2, 2}), (I64{0, 2, 1, 3}));
  EXPECT_EQ(f.read<std::int64_t>("/link/valid_neg", {3, 2}), (I64{0, 5, 1, 5, 2, 5}));
  EXPECT_EQ(f.read<float>("/link/valid_weight", {2}), (std::vector<float>{1, 3}));
}

TEST(OgbLink, FolderWithoutFeaturesGetsAnEmptyFeatureMatrix) {
  test::TempDir dir;
  const fs::path folder = copy_fixture(dir, "ogbl-collab-tiny");
  fs::remove(folder / "raw" / "node-feat.csv.gz");
  datasets::OgbLinkOptions link;
  link.metric = "hits@20";
  const auto r = datasets::convert_ogb_link_folder(folder, dir / "ddi.h5", {}, link);
  EXPECT_FALSE(r.features);
  const auto f = h5::File::open_read(dir / "ddi.h5");
  EXPECT_EQ(f.attr_int("feature_dim"), 0);
  EXPECT_EQ(f.dims("/node/feat"), (I64{6, 0}));
  EXPECT_EQ(f.attr_string("metric", "/link"), "hits@20");
}

TEST(OgbLink, NodeFoldersAreNotLinkFolders) {
  test::TempDir dir;
  test::write_tiny_ogb(dir / "tiny");
  EXPECT_FALSE(datasets::is_ogb_link_folder(dir / "tiny"));
}

TEST(OgbLink, RefusesBadSplitsNamingFileAndRow) {
  struct Case {
    const char* which;
    std::vector<test::PtEntry> entries;
    std::string expect;
  };
  const auto edge = test::pt_long("edge", {1, 2}, {0, 1});
  const auto neg = test::pt_long("edge_neg", {1, 2}, {0, 2});
  std::vector<Case> cases = {
      {"valid",
       {test::pt_long("edge", {2, 2}, {0, 1, 2, 6}), neg},
       "valid.pt: edge row 1 column 1: node 6 is not a node id (num-node-list.csv.gz gives 6 "
       "nodes, ids 0 to 5)"},
      {"test",
       {edge, test::pt_long("edge_neg", {1, 2}, {-1, 2})},
       "test.pt: edge_neg row 0 column 0: node -1 is not a node id"},
      {"valid", {edge}, "a valid split needs its fixed negatives"},
      {"train",
       {test::pt_long("edge", {4}, {0, 1, 1, 2})},
       "train.pt: \"edge\" is int64 [4], expected [N, 2]"},
      {"train",
       {test::pt_long("src", {1}, {0})},
       "train.pt: holds src; expected \"edge\" [N, 2] (collab, ppa, ddi) or \"source_node\""},
      {"test",
       {edge, neg, test::pt_long("year", {2}, {1, 2})},
       "test.pt: \"year\" is int64 [2], expected [1] (one value per positive edge)"},
  };
  for (const auto& c : cases) {
    test::TempDir dir;
    const fs::path folder = copy_fixture(dir, "ogbl-collab-tiny");
    test::write_pt(folder / "split" / "time" / (std::string(c.which) + ".pt"), c.entries);
    const fs::path out = dir / "out.h5";
    const std::string e =
        test::input_error([&] { (void)datasets::convert_ogb_link_folder(folder, out); });
    EXPECT_NE(e.find(c.expect), std::string::npos) << e;
    EXPECT_FALSE(fs::exists(out));
    EXPECT_EQ(test::list_dir(dir.path()), (std::vector<std::string>{"ogbl-collab-tiny"}));
  }
  test::TempDir dir;
  datasets::OgbLinkOptions link;
  link.metric = "mrr";
  const std::string e = test::input_error([&] {
    (void)datasets::convert_ogb_link_folder(fixture("ogbl-collab-tiny"), dir / "o.h5", {}, link);
  });
  EXPECT_NE(e.find("--metric mrr: mrr needs per-source negatives"), std::string::npos) << e;
}

} // namespace
} // namespace tessel
