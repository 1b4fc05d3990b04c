// Test fixtures for the datasets layer: tiny OGB folders written by hand (to break them on
// purpose), gzip helpers, damaged stores.
#pragma once

#include "tessel/datasets/dataset.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace tessel::test {

// One gzip member holding `text`.
void write_gz(const std::filesystem::path& path, const std::string& text);
void write_text(const std::filesystem::path& path, const std::string& text);
std::string read_file_bytes(const std::filesystem::path& path);
// Names of the entries of a folder (files and folders, hidden ones included), sorted.
std::vector<std::string> list_dir(const std::filesystem::path& dir);

// A 6-node OGB folder, file contents spelled out so a test can break one of them.
struct TinyOgb {
  std::string num_nodes = "6\n";
  std::string num_edges = "5\n";
  std::string edges = "0,1\n1,2\n2,3\n3,4\n4,5\n";
  std::string feat = "0.5,1\n1.5,2\n2.5,3\n3.5,4\n4.5,5\n5.5,-6e-1\n";
  std::string labels = "0\n1\nnan\n0\n1\n2\n";
  std::string train = "0\n1\n";
  std::string valid = "2\n";
  std::string test = "3\n4\n5\n";
  std::string split_name = "tiny";
  bool gzip = true;
};
void write_tiny_ogb(const std::filesystem::path& dir, const TinyOgb& tiny = {});

// Expects a and b to hold the same graph, features, labels and splits (name and directedness
// aside: a reader may set them from where the data came from).
void expect_same_contents(const datasets::Dataset& a, const datasets::Dataset& b);

// A small synthetic dataset (a few hundred nodes).
datasets::Dataset small_dataset(std::int64_t nodes = 300, std::uint64_t seed = 7);

enum class StoreDamage {
  none,
  missing_label,
  non_monotone_indptr,
  index_out_of_range,
  label_out_of_range,
  split_out_of_range,
  wrong_format,
  newer_version,
  overlapping_splits, // valid[0] is also a test node
  directed_two,       // directed = 2
  integer_features,   // /node/feat stored as int32
  nan_feature,        // row 5, column 1 of /node/feat is NaN
  inf_feature,        // row 9, column 0 of /node/feat is -inf
  huge_label,         // node 7 has label 10^9 and num_classes is 10^9 + 1
};
// Writes `data` as a store the way the writer does, but with one thing broken.
void write_damaged_store(const std::filesystem::path& path, const datasets::Dataset& data,
                         StoreDamage damage);

} // namespace tessel::test
