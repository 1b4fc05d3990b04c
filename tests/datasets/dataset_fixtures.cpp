// Test fixtures for the datasets layer.
#include "dataset_fixtures.hpp"

#include "tessel/datasets/h5.hpp"
#include "tessel/datasets/synthetic.hpp"

#include <gtest/gtest.h>

#include <limits>

#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tessel::test {

namespace fs = std::filesystem;

void write_gz(const fs::path& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot create " + path.string());
  if (!text.empty()) gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string read_file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> list_dir(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void expect_same_contents(const datasets::Dataset& a, const datasets::Dataset& b) {
  EXPECT_EQ(a.num_nodes, b.num_nodes);
  EXPECT_EQ(a.num_classes, b.num_classes);
  EXPECT_EQ(a.feature_dim, b.feature_dim);
  EXPECT_EQ(a.graph.indptr, b.graph.indptr);
  EXPECT_EQ(a.graph.indices, b.graph.indices);
  EXPECT_EQ(a.features, b.features);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.train, b.train);
  EXPECT_EQ(a.valid, b.valid);
  EXPECT_EQ(a.test, b.test);
}

void write_tiny_ogb(const fs::path& dir, const TinyOgb& t) {
  fs::create_directories(dir / "raw");
  fs::create_directories(dir / "split" / t.split_name);
  const auto put = [&](const fs::path& base, const std::string& text) {
    fs::path p = base;
    p += t.gzip ? ".csv.gz" : ".csv";
    if (t.gzip)
      write_gz(p, text);
    else
      write_text(p, text);
  };
  put(dir / "raw" / "num-node-list", t.num_nodes);
  put(dir / "raw" / "num-edge-list", t.num_edges);
  put(dir / "raw" / "edge", t.edges);
  put(dir / "raw" / "node-feat", t.feat);
  put(dir / "raw" / "node-label", t.labels);
  put(dir / "split" / t.split_name / "train", t.train);
  put(dir / "split" / t.split_name / "valid", t.valid);
  put(dir / "split" / t.split_name / "test", t.test);
}

datasets::Dataset small_dataset(std::int64_t nodes, std::uint64_t seed) {
  datasets::SyntheticOptions o;
  o.num_nodes = nodes;
  o.avg_degree = 6;
  o.num_classes = 4;
  o.feature_dim = 5;
  o.seed = seed;
  o.name = "small";
  return datasets::make_synthetic(o);
}

void write_damaged_store(const fs::path& path, const datasets::Dataset& data, StoreDamage damage) {
  auto f = h5::File::create(path);
  auto indptr = data.graph.indptr;
  auto indices = data.graph.indices;
  auto labels = data.labels;
  auto test = data.test;
  auto features = data.features;
  std::int64_t num_classes = data.num_classes;
  if (damage == StoreDamage::overlapping_splits) test.push_back(data.valid.at(0));
  if (damage == StoreDamage::nan_feature)
    features.at(5 * data.feature_dim + 1) = std::numeric_limits<float>::quiet_NaN();
  if (damage == StoreDamage::inf_feature)
    features.at(9 * data.feature_dim) = -std::numeric_limits<float>::infinity();
  if (damage == StoreDamage::huge_label) {
    labels.at(7) = 1000000000;
    num_classes = 1000000001;
  }
  if (damage == StoreDamage::non_monotone_indptr) std::swap(indptr[3], indptr[4]);
  if (damage == StoreDamage::non_monotone_indptr && indptr[3] == indptr[4]) indptr[3] += 1;
  if (damage == StoreDamage::index_out_of_range) indices[indices.size() / 2] = data.num_nodes + 5;
  if (damage == StoreDamage::label_out_of_range) labels[7] = data.num_classes;
  if (damage == StoreDamage::split_out_of_range) test.push_back(data.num_nodes);
  f.write("/graph/indptr", indptr, "indptr");
  f.write("/graph/indices", indices, "indices");
  if (damage == StoreDamage::integer_features) {
    const std::vector<std::int32_t> whole(features.begin(), features.end());
    f.write("/node/feat", whole.data(), {data.num_nodes, data.feature_dim}, "feat", 64);
  } else {
    f.write("/node/feat", features.data(), {data.num_nodes, data.feature_dim}, "feat", 64);
  }
  if (damage != StoreDamage::missing_label) f.write("/node/label", labels, "label");
  f.write("/split/train", data.train, "train");
  f.write("/split/valid", data.valid, "valid");
  f.write("/split/test", test, "test");
  f.set_attr("format", std::string(damage == StoreDamage::wrong_format ? "something-else"
                                                                       : datasets::kStoreFormat));
  f.set_attr("version",
             std::int64_t{damage == StoreDamage::newer_version ? 99 : datasets::kStoreVersion});
  f.set_attr("name", data.name);
  f.set_attr("num_nodes", data.num_nodes);
  f.set_attr("num_edges", data.num_edges());
  f.set_attr("num_classes", num_classes);
  f.set_attr("feature_dim", data.feature_dim);
  f.set_attr("directed", std::int64_t{damage == StoreDamage::directed_two ? 2 : 0});
  f.close();
}

} // namespace tessel::test
