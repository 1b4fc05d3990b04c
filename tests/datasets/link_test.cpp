// Tests of the link prediction splits: the random edge split, the store's /link group, and bad
// split data refused with the file, dataset and row.
#include "tessel/core/error.hpp"
#include "tessel/datasets/dataset.hpp"

#include "dataset_fixtures.hpp"
#include "test_support.hpp"

#include <hdf5.h>

#include <gtest/gtest.h>

#include <set>
#include <utility>

namespace tessel {
namespace {

using datasets::Dataset;
using datasets::LinkSplits;

std::set<std::pair<NodeId, NodeId>> undirected_edges(const Csr& graph) {
  std::set<std::pair<NodeId, NodeId>> out;
  for (NodeId v = 0; v < graph.num_rows; ++v)
    for (EdgeId e = graph.indptr[v]; e < graph.indptr[v + 1]; ++e)
      if (graph.indices[e] != v)
        out.insert({std::min(graph.indices[e], v), std::max(graph.indices[e], v)});
  return out;
}

std::vector<std::pair<NodeId, NodeId>> rows(const std::vector<NodeId>& pairs) {
  std::vector<std::pair<NodeId, NodeId>> out;
  for (std::size_t i = 0; i + 1 < pairs.size(); i += 2)
    out.push_back({std::min(pairs[i], pairs[i + 1]), std::max(pairs[i], pairs[i + 1])});
  return out;
}

TEST(LinkSplit, PartitionsTheEdgesAndDrawsNegatives) {
  Dataset data = test::small_dataset();
  const auto all = undirected_edges(data.graph);
  const auto num = static_cast<std::int64_t>(all.size());
  datasets::random_link_split(data, 85, 5, 10, 3);
  const LinkSplits& l = data.link;
  EXPECT_EQ(LinkSplits::rows(l.valid_pos), num * 5 / 100);
  EXPECT_EQ(LinkSplits::rows(l.test_pos), num * 10 / 100);
  EXPECT_EQ(LinkSplits::rows(l.train_pos), num - num * 5 / 100 - num * 10 / 100);
  EXPECT_EQ(LinkSplits::rows(l.valid_neg), LinkSplits::rows(l.valid_pos));
  EXPECT_EQ(LinkSplits::rows(l.test_neg), LinkSplits::rows(l.test_pos));
  // Every edge in exactly one split; the graph holds exactly the training edges.
  std::set<std::pair<NodeId, NodeId>> seen;
  for (const auto* list : {&l.train_pos, &l.valid_pos, &l.test_pos})
    for (const auto& e : rows(*list)) {
      EXPECT_TRUE(all.count(e)) << e.first << "," << e.second;
      EXPECT_TRUE(seen.insert(e).second) << e.first << "," << e.second;
    }
  EXPECT_EQ(seen.size(), all.size());
  const auto graph = undirected_edges(data.graph);
  const auto train = rows(l.train_pos);
  const std::set<std::pair<NodeId, NodeId>> train_set(train.begin(), train.end());
  EXPECT_EQ(graph, train_set);
  // Negatives are no edge, no self-loop, and distinct.
  std::set<std::pair<NodeId, NodeId>> negatives;
  for (const auto* list : {&l.valid_neg, &l.test_neg})
    for (const auto& e : rows(*list)) {
      EXPECT_NE(e.first, e.second);
      EXPECT_FALSE(all.count(e));
      EXPECT_TRUE(negatives.insert(e).second);
    }
  // Seeded: the same seed gives the same split, another seed another.
  Dataset again = test::small_dataset();
  datasets::random_link_split(again, 85, 5, 10, 3);
  EXPECT_EQ(again.link.test_pos, l.test_pos);
  EXPECT_EQ(again.link.test_neg, l.test_neg);
  Dataset other = test::small_dataset();
  datasets::random_link_split(other, 85, 5, 10, 4);
  EXPECT_NE(other.link.test_pos, l.test_pos);
}

TEST(LinkSplit, RefusesBadPercentagesAndDirectedGraphs) {
  Dataset data = test::small_dataset();
  EXPECT_NE(test::input_error([&] { datasets::random_link_split(data, 80, 5, 10, 1); })
                .find("summing to 100"),
            std::string::npos);
  data.directed = true;
  EXPECT_NE(test::input_error([&] { datasets::random_link_split(data, 85, 5, 10, 1); })
                .find("directed"),
            std::string::npos);
}

TEST(LinkStore, RoundTripBothNegativeKinds) {
  test::TempDir dir;
  Dataset data = test::small_dataset();
  datasets::random_link_split(data, 80, 10, 10, 5);
  data.link.train_weight.assign(static_cast<std::size_t>(LinkSplits::rows(data.link.train_pos)),
                                2.5f);
  datasets::write_store(data, dir / "l.h5");
  const Dataset back = datasets::read_store(dir / "l.h5");
  EXPECT_EQ(back.link.source, "random");
  EXPECT_EQ(back.link.metric, "auc");
  EXPECT_EQ(back.link.seed, 5);
  EXPECT_EQ(back.link.fractions, "80,10,10");
  EXPECT_EQ(back.link.train_pos, data.link.train_pos);
  EXPECT_EQ(back.link.valid_pos, data.link.valid_pos);
  EXPECT_EQ(back.link.test_neg, data.link.test_neg);
  EXPECT_EQ(back.link.train_weight, data.link.train_weight);
  EXPECT_EQ(back.graph.indices, data.graph.indices);
  // Per-source negatives (citation2's kind): [n, K].
  data.link.source = "ogb";
  data.link.metric = "mrr";
  data.link.valid_neg.clear();
  data.link.test_neg.clear();
  data.link.neg_per_source = 3;
  for (const auto* pos : {&data.link.valid_pos, &data.link.test_pos}) {
    auto& dst = pos == &data.link.valid_pos ? data.link.valid_neg_dst : data.link.test_neg_dst;
    for (std::int64_t r = 0; r < LinkSplits::rows(*pos) * 3; ++r) dst.push_back(r % data.num_nodes);
  }
  datasets::write_store(data, dir / "c.h5");
  const Dataset c = datasets::read_store(dir / "c.h5");
  EXPECT_EQ(c.link.neg_per_source, 3);
  EXPECT_EQ(c.link.metric, "mrr");
  EXPECT_EQ(c.link.test_neg_dst, data.link.test_neg_dst);
  EXPECT_TRUE(c.link.valid_neg.empty());
  // A store without /link reads without link splits.
  datasets::write_store(test::small_dataset(), dir / "n.h5");
  EXPECT_FALSE(datasets::read_store(dir / "n.h5").link.present());
}

// Overwrites row `row` of an int64 [n, 2] dataset of a written store, through HDF5.
void edit_pair(const std::filesystem::path& file, const char* dataset, hsize_t row, NodeId u,
               NodeId v) {
  test::drop_file_checksum(file);
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  const hid_t d = H5Dopen2(f, dataset, H5P_DEFAULT);
  const hid_t space = H5Dget_space(d);
  const hsize_t start[2] = {row, 0}, count[2] = {1, 2};
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  const hid_t mem = H5Screate_simple(2, count, nullptr);
  const std::int64_t values[2] = {u, v};
  ASSERT_GE(H5Dwrite(d, H5T_NATIVE_INT64, mem, space, H5P_DEFAULT, values), 0);
  H5Sclose(mem);
  H5Sclose(space);
  H5Dclose(d);
  H5Fclose(f);
}

TEST(LinkStore, BadSplitDataIsRefusedWithFileAndRow) {
  test::TempDir dir;
  Dataset data = test::small_dataset();
  datasets::random_link_split(data, 80, 10, 10, 5);
  datasets::write_store(data, dir / "a.h5");
  // A node id out of range.
  edit_pair(dir / "a.h5", "/link/valid_pos", 2, 1, data.num_nodes);
  std::string msg = test::input_error([&] { (void)datasets::read_store(dir / "a.h5"); });
  EXPECT_NE(msg.find("a.h5: /link/valid_pos row 2: node 300 is not a node id"), std::string::npos)
      << msg;
  // A test edge that is still an edge of the message-passing graph (reversed, undirected).
  datasets::write_store(data, dir / "b.h5");
  const NodeId u = data.link.train_pos[2 * 4], v = data.link.train_pos[2 * 4 + 1];
  edit_pair(dir / "b.h5", "/link/test_pos", 3, v, u);
  msg = test::input_error([&] { (void)datasets::read_store(dir / "b.h5"); });
  EXPECT_NE(msg.find(fmt::format("b.h5: /link/test_pos row 3: edge {},{} is also an edge of "
                                 "/graph",
                                 v, u)),
            std::string::npos)
      << msg;
  // Writing refuses the same before anything is left behind.
  data.link.test_pos[6] = -1;
  msg = test::input_error([&] { datasets::write_store(data, dir / "c.h5"); });
  EXPECT_NE(msg.find("/link/test_pos row 3: node -1 is not a node id"), std::string::npos) << msg;
  EXPECT_FALSE(std::filesystem::exists(dir / "c.h5"));
}

} // namespace
} // namespace tessel
