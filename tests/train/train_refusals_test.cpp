// Hostile input to `tessel train` and `tessel bench`: bad flags, edited part files and
// checkpoints, diverging runs and failed benches. Each must end with one clear line and a
// non-zero exit (2 for usage and input errors) and leave no half-written output behind.
#include "train_test_helpers.hpp"

#include "tessel/partition/part.hpp"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>

using namespace tessel;
namespace fs = std::filesystem;
using test::read_metrics;
using test::run_ok;
using test::tessel_bin;

namespace {

struct RefusalData {
  static constexpr const char* kName = "refusals";
  static constexpr const char* kArgs =
      "--nodes 300 --avg-degree 6 --classes 3 --feat-dim 8 --seed 11";
};

class TrainRefusals : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir(RefusalData::kName);
    test::make_partitions(dir_->path(), RefusalData::kArgs, {1, 2});
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path parts(int p) { return dir_->path() / ("p" + std::to_string(p)); }
  static fs::path scratch(const std::string& name) { return dir_->path() / name; }

  // A copy of the P-part folder to edit.
  static fs::path copy_parts(int p, const std::string& name) {
    const fs::path to = scratch(name);
    fs::remove_all(to);
    fs::copy(parts(p), to, fs::copy_options::recursive);
    return to;
  }

  // Loads part p of `dir`, lets `edit` change it and writes it back. With `update_checksums`
  // partition.json records the edited part's checksums too (as if partition had written it),
  // so the structural checks are exercised rather than the checksums.
  template <class Edit>
  static void edit_part(const fs::path& dir, int p, Edit edit, bool update_checksums) {
    const partition::Manifest manifest = partition::read_manifest(dir);
    partition::LoadOptions load;
    partition::Part part = partition::load_part(dir, p, manifest, load);
    edit(part);
    partition::write_part(part, manifest.dataset, dir / partition::part_file_name(p));
    if (!update_checksums) return;
    nlohmann::json raw = manifest.raw;
    raw["parts"][p]["checksums"] = partition::part_checksums(part, true);
    std::ofstream(dir / "partition.json") << raw.dump(2);
  }

  static inline test::TempDir* dir_ = nullptr;
};

struct Outcome {
  int code = -1;
  std::string output;
};

Outcome run(const std::string& command) {
  Outcome r;
  r.code = test::run_command(command, &r.output);
  return r;
}

}  // namespace

// NaN or Inf in a part file's features is refused at load with file, row and column.
TEST_F(TrainRefusals, NonFiniteFeaturesAreRefusedAtLoad) {
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity()}) {
    const fs::path dir = copy_parts(1, "nan-feat");
    edit_part(dir, 0, [&](partition::Part& part) { part.features[5 * part.feature_dim + 3] = bad; },
              true);
    const Outcome r =
        run(tessel_bin() + " train " + dir.string() + " --epochs 2 --quiet --metrics " +
            (dir / "m.jsonl").string());
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find("part-0.h5: /node/feat row 5"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("column 3"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("loss"), std::string::npos) << r.output;
  }
}

// A part file edited after partitioning: its checksum no longer matches partition.json.
TEST_F(TrainRefusals, EditedPartFileFailsItsChecksum) {
  const fs::path dir = copy_parts(2, "edited");
  edit_part(dir, 1, [](partition::Part& part) { std::swap(part.orig_id[0], part.orig_id[1]); },
            false);
  const Outcome r = run(test::mpirun(2) + tessel_bin() + " train " + dir.string() +
                        " --epochs 2 --quiet");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("part-1.h5: /nodes/orig_id has checksum"), std::string::npos)
      << r.output;
  // partition records one checksum per dataset of every part.
  const auto manifest = partition::read_manifest(parts(2));
  for (int p = 0; p < 2; ++p) {
    const auto& sums = manifest.raw["parts"][p]["checksums"];
    EXPECT_EQ(sums.size(), 11u) << sums.dump();
    for (const auto& [name, value] : sums.items())
      EXPECT_EQ(value.get<std::string>().rfind("crc32:", 0), 0u) << name;
  }
}

// structural check, not the checksum, has to catch it).
TEST_F(TrainRefusals, LoadPartVerifiesHaloOrderDegreesAndRowOrder) {
  auto load_error = [](const fs::path& dir, int p) {
    try {
      partition::load_part(dir, p, partition::read_manifest(dir));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // Untouched parts load.
  EXPECT_EQ(load_error(parts(2), 0), "");
  EXPECT_EQ(load_error(parts(2), 1), "");

  fs::path dir = copy_parts(2, "halo-order");
  edit_part(dir, 0, [](partition::Part& part) {
    ASSERT_GE(part.num_halo, 2);
    part.halo_owner_local[1] = part.halo_owner_local[0];
  }, true);
  EXPECT_NE(load_error(dir, 0).find("not in increasing (owner, owner_local) order"),
            std::string::npos);

  dir = copy_parts(2, "zero-degree");
  std::int64_t row = -1;
  edit_part(dir, 0, [&](partition::Part& part) {
    for (std::int64_t v = 0; v < part.num_owned && row < 0; ++v)
      if (part.graph.degree(v) > 0) row = v;
    ASSERT_GE(row, 0);
    part.degree[row] = 0;
  }, true);
  EXPECT_NE(load_error(dir, 0).find("owned node " + std::to_string(row) + " has"),
            std::string::npos);

  dir = copy_parts(2, "unsorted-row");
  row = -1;
  edit_part(dir, 0, [&](partition::Part& part) {
    for (std::int64_t v = 0; v < part.num_owned && row < 0; ++v)
      if (part.graph.degree(v) >= 2) row = v;
    ASSERT_GE(row, 0);
    const auto b = part.graph.indptr[row];
    std::swap(part.graph.indices[b], part.graph.indices[b + 1]);
  }, true);
  EXPECT_NE(load_error(dir, 0).find("row " + std::to_string(row) + " is not strictly increasing"),
            std::string::npos);

  dir = copy_parts(2, "halo-zero-degree");
  edit_part(dir, 1, [](partition::Part& part) {
    ASSERT_GE(part.num_halo, 1);
    part.degree[part.num_owned] = 0;
  }, true);
  EXPECT_NE(load_error(dir, 1).find("halo node 0"), std::string::npos);
}
