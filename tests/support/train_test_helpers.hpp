// Helpers for end-to-end training tests: run the binary, read metrics files and checkpoints.
#pragma once

#include "test_support.hpp"

#include "tessel/datasets/h5.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace tessel::test {

inline std::string tessel_bin() { return tessel_binary().string(); }

// Runs a command and fails the test (with its output) unless it exits 0.
inline void run_ok(const std::string& command) {
  std::string output;
  const int rc = run_command(command, &output);
  ASSERT_EQ(rc, 0) << command << "\n" << output;
}

// Every JSON line of a metrics file (epochs and the summary).
inline std::vector<nlohmann::json> read_metrics(const std::filesystem::path& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// The per-epoch lines only.
inline std::vector<nlohmann::json> epochs_of(const std::filesystem::path& path) {
  std::vector<nlohmann::json> epochs;
  for (auto& j : read_metrics(path))
    if (!j.contains("summary")) epochs.push_back(std::move(j));
  return epochs;
}

inline std::vector<double> losses(const std::filesystem::path& path) {
  std::vector<double> out;
  for (const auto& j : epochs_of(path)) out.push_back(j.at("loss").get<double>());
  return out;
}

// All parameters of a checkpoint folder, concatenated in the order the file lists them.
inline std::vector<float> checkpoint_params(const std::filesystem::path& dir) {
  h5::File file = h5::File::open_read(dir / "checkpoint.h5");
  std::vector<float> all;
  const std::string names = file.attr_string("parameters");
  for (std::size_t start = 0; start < names.size();) {
    auto comma = names.find(',', start);
    if (comma == std::string::npos) comma = names.size();
    const auto v = file.read<float>("/params/" + names.substr(start, comma - start));
    all.insert(all.end(), v.begin(), v.end());
    start = comma + 1;
  }
  return all;
}

// Makes a synthetic store in `dir` (synthetic_args: the sizes and seed) and partitions it into
// each rank count of `parts`, as dir/p<P>.
inline void make_partitions(const std::filesystem::path& dir, const std::string& synthetic_args,
                            std::initializer_list<int> parts) {
  const auto h5 = dir / "synth.h5";
  run_ok(tessel_bin() + " convert synthetic " + synthetic_args + " " + h5.string());
  for (int p : parts)
    run_ok(tessel_bin() + " partition " + h5.string() + " --parts " + std::to_string(p) +
           " --out " + (dir / ("p" + std::to_string(p))).string());
}

// A synthetic dataset (`tessel convert synthetic` with Spec::kArgs) partitioned into 1, 2 and 4
// parts, made once per test suite in a temporary folder named after Spec::kName.
template <class Spec>
class PartitionedSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir(Spec::kName);
    make_partitions(dir_->path(), Spec::kArgs, {1, 2, 4});
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::filesystem::path parts(int p) { return dir_->path() / ("p" + std::to_string(p)); }
  static std::filesystem::path scratch(const std::string& name) { return dir_->path() / name; }
  static inline TempDir* dir_ = nullptr;
};

}  // namespace tessel::test
