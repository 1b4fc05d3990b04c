// Stores whose features are float16 or bfloat16 (convert --feature-dtype) train bit for bit like
// float32 stores holding the same values rounded beforehand: in memory and out of core at a
// small budget (pread and HDF5 reads), at 1 and 2 ranks, also on AVX2; parts keep the store's
// dtype; the refusals.
#include "train_test_helpers.hpp"

#include "tessel/datasets/dataset.hpp"
#include "tessel/datasets/h5.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>

using namespace tessel;
namespace fs = std::filesystem;
using datasets::FeatureDtype;
using test::epochs_of;
using test::run_ok;
using test::tessel_bin;

namespace {

constexpr const char* kSynthetic = "--nodes 500 --avg-degree 8 --classes 4 --feat-dim 12 --seed 5 ";

class FeatureDtypes : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir("feature-dtype");
    const fs::path f32 = dir_->path() / "f32.h5";
    run_ok(tessel_bin() + " convert synthetic " + kSynthetic + f32.string());
    for (const FeatureDtype dtype : {FeatureDtype::float16, FeatureDtype::bfloat16}) {
      const std::string name = datasets::to_string(dtype);
      run_ok(tessel_bin() + " convert synthetic " + kSynthetic + "--feature-dtype " + name + " " +
             (dir_->path() / (name + ".h5")).string());
      // The reference: a float32 store of the same values rounded to the dtype beforehand.
      datasets::Dataset data = datasets::read_store(f32);
      datasets::round_features(data.features.data(),
                               static_cast<std::int64_t>(data.features.size()), dtype);
      datasets::write_store(data, dir_->path() / ("rounded-" + name + ".h5"));
      for (const std::string& store : {name, "rounded-" + name})
        for (int p : {1, 2})
          run_ok(tessel_bin() + " partition " + (dir_->path() / (store + ".h5")).string() +
                 " --parts " + std::to_string(p) + " --out " + parts(store, p).string());
    }
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path parts(const std::string& store, int p) {
    return dir_->path() / (store + "-p" + std::to_string(p));
  }
  static fs::path scratch(const std::string& name) { return dir_->path() / name; }
  static inline test::TempDir* dir_ = nullptr;
};

void run_sampled(const fs::path& part_dir, int p, const std::string& memory,
                 const fs::path& out_dir, const std::string& tag, const std::string& env = "") {
  fs::create_directories(out_dir);
  run_ok(env + test::mpirun(p) + tessel_bin() + " train " + part_dir.string() +
         " --mode sampled --model sage --fanouts 5,3 --batch-size " + std::to_string(48 / p) +
         " --epochs 2 --dropout 0.3 --hidden 16 --lr 0.02 --seed 7 --cache-ratio 0.3 --quiet "
         "--feature-memory " + memory + " --metrics " + (out_dir / (tag + ".jsonl")).string() +
         " --predictions " + (out_dir / (tag + "-pred.h5")).string());
}

void expect_same_run(const fs::path& dir, const std::string& a, const std::string& b) {
  const auto ea = epochs_of(dir / (a + ".jsonl")), eb = epochs_of(dir / (b + ".jsonl"));
  ASSERT_EQ(ea.size(), 2u);
  ASSERT_EQ(eb.size(), ea.size());
  for (std::size_t e = 0; e < ea.size(); ++e) {
    EXPECT_EQ(ea[e].at("loss").get<double>(), eb[e].at("loss").get<double>()) << b << " " << e;
    EXPECT_EQ(ea[e].at("valid_acc").get<double>(), eb[e].at("valid_acc").get<double>()) << b;
  }
  const auto pa = h5::File::open_read(dir / (a + "-pred.h5")).read<float>("/logits");
  const auto pb = h5::File::open_read(dir / (b + "-pred.h5")).read<float>("/logits");
  ASSERT_EQ(pa.size(), pb.size());
  ASSERT_FALSE(pa.empty());
  EXPECT_EQ(std::memcmp(pa.data(), pb.data(), pa.size() * sizeof(float)), 0) << b;
}

} // namespace

TEST_F(FeatureDtypes, PartsKeepTheStoresDtypeAndHalfItsFeatureBytes) {
  for (const std::string name : {"float16", "bfloat16"}) {
    const auto part = h5::File::open_read(parts(name, 2) / "part-0.h5");
    EXPECT_EQ(datasets::to_string(part.feature_dtype("/node/feat")), name);
    const auto rounded = h5::File::open_read(parts("rounded-" + name, 2) / "part-0.h5");
    EXPECT_EQ(rounded.feature_dtype("/node/feat"), FeatureDtype::float32);
    // Same rows, read back as float32.
    EXPECT_EQ(part.read<float>("/node/feat"), rounded.read<float>("/node/feat")) << name;
  }
  EXPECT_LT(fs::file_size(dir_->path() / "float16.h5"), fs::file_size(dir_->path() / "f32.h5"));
}

TEST_F(FeatureDtypes, TrainBitForBitLikeRoundedFloat32InMemoryAndOutOfCore) {
  for (const std::string name : {"float16", "bfloat16"}) {
    for (int p : {1, 2}) {
      const fs::path out = scratch(name + std::to_string(p));
      ASSERT_NO_FATAL_FAILURE(run_sampled(parts("rounded-" + name, p), p, "all", out, "ref"));
      ASSERT_NO_FATAL_FAILURE(run_sampled(parts(name, p), p, "all", out, "mem"));
      ASSERT_NO_FATAL_FAILURE(expect_same_run(out, "ref", "mem"));
      // 3K: the 4-byte index plus a few float32 rows; the rest read from the part file.
      ASSERT_NO_FATAL_FAILURE(run_sampled(parts(name, p), p, "3K", out, "ooc"));
      ASSERT_NO_FATAL_FAILURE(expect_same_run(out, "ref", "ooc"));
      const auto epochs = epochs_of(out / "ooc.jsonl");
      // Bytes read count the stored rows: 2 bytes a value.
      const auto read = epochs[0].at("feature_bytes_read").get<std::int64_t>();
      EXPECT_GT(read, 0);
      EXPECT_EQ(read % (12 * 2), 0);
      if (p == 2) {
        ASSERT_NO_FATAL_FAILURE(
            run_sampled(parts(name, p), p, "3K", out, "hdf5", "TESSEL_FEATURE_IO=hdf5 "));
        ASSERT_NO_FATAL_FAILURE(expect_same_run(out, "ref", "hdf5"));
      }
    }
  }
}

TEST_F(FeatureDtypes, Avx2TrainsBitForBitLikeRoundedFloat32) {
  const std::string env = "ONEDNN_MAX_CPU_ISA=AVX2 TESSEL_CPU_ISA=avx2 ";
  const fs::path out = scratch("avx2");
  ASSERT_NO_FATAL_FAILURE(run_sampled(parts("rounded-float16", 2), 2, "all", out, "ref", env));
  ASSERT_NO_FATAL_FAILURE(run_sampled(parts("float16", 2), 2, "all", out, "mem", env));
  ASSERT_NO_FATAL_FAILURE(run_sampled(parts("float16", 2), 2, "2K", out, "ooc", env));
  expect_same_run(out, "ref", "mem");
  expect_same_run(out, "ref", "ooc");
}

TEST_F(FeatureDtypes, FullBatchReadsSixteenBitPartsToo) {
  const fs::path out = scratch("full");
  fs::create_directories(out);
  for (const std::string store : {"float16", "rounded-float16"})
    run_ok(tessel_bin() + " train " + parts(store, 1).string() +
           " --mode full --epochs 2 --hidden 8 --seed 3 --quiet --metrics " +
           (out / (store + ".jsonl")).string());
  const auto a = epochs_of(out / "float16.jsonl"), b = epochs_of(out / "rounded-float16.jsonl");
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(a[1].at("loss").get<double>(), b[1].at("loss").get<double>());
}

TEST_F(FeatureDtypes, AWrongChecksumOfASixteenBitPartIsRefused) {
  // The good runs above check the CRC over the stored 16-bit values (they would fail on a
  // mismatch); this checks a mismatch is still found, in memory and out of core.
  const fs::path copy = scratch("changed");
  fs::copy(parts("float16", 1), copy, fs::copy_options::recursive);
  nlohmann::json manifest;
  {
    std::ifstream in(copy / "partition.json");
    in >> manifest;
  }
  manifest["parts"][0]["checksums"]["/node/feat"] = "crc32:00000000";
  {
    std::ofstream out(copy / "partition.json");
    out << manifest.dump(2);
  }
  for (const std::string memory : {"all", "1K"}) {
    std::string output;
    const int rc = test::run_command(tessel_bin() + " train " + copy.string() +
                                         " --mode sampled --epochs 1 --feature-memory " + memory,
                                     &output);
    EXPECT_NE(rc, 0) << memory;
    EXPECT_NE(output.find("/node/feat has checksum"), std::string::npos) << memory << output;
  }
}

TEST(FeatureDtypeRefusals, BadDtypesAndOgbFoldersAreRefused) {
  test::TempDir dir("feature-dtype-refusals");
  std::string output;
  EXPECT_NE(test::run_command(tessel_bin() + " convert synthetic --nodes 50 --feature-dtype "
                                             "float64 " + (dir.path() / "x.h5").string(),
                              &output),
            0);
  EXPECT_NE(output.find("--feature-dtype"), std::string::npos) << output;
  EXPECT_NE(test::run_command(tessel_bin() + " convert synthetic --nodes 50 --ogb "
                                             "--feature-dtype float16 " + (dir.path() / "o").string(),
                              &output),
            0);
  EXPECT_NE(output.find("--feature-dtype is for stores"), std::string::npos) << output;
  EXPECT_FALSE(fs::exists(dir.path() / "x.h5"));
  EXPECT_FALSE(fs::exists(dir.path() / "o"));
}
