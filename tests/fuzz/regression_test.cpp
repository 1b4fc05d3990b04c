// Replays the fuzz targets' saved inputs through the same entries the fuzzers use: every seed
// in corpus/<target>/ must be accepted, every input in regressions/<target>/ (each once made a
// reader crash or misbehave) must end in one InputError.
#include "fuzz_fixtures.hpp"
#include "fuzz_targets.hpp"

#include "tessel/train/checkpoint.hpp"
#include "tessel/core/error.hpp"
#include "tessel/nn/optimizer.hpp"

#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

namespace fs = std::filesystem;

namespace {

const fs::path kData = TESSEL_FUZZ_DATA_DIR;

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::uint8_t> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class FuzzInputs : public ::testing::TestWithParam<tessel::fuzz::Target> {};

TEST_P(FuzzInputs, SeedsAreAccepted) {
  const auto seeds = files_in(kData / "corpus" / GetParam().name);
  ASSERT_FALSE(seeds.empty()) << "no seed corpus for " << GetParam().name;
  for (const auto& file : seeds) {
    const auto bytes = read_bytes(file);
    try {
      GetParam().run(bytes);
    } catch (const std::exception& e) {
      ADD_FAILURE() << file.filename() << ": " << e.what();
    }
  }
}

TEST_P(FuzzInputs, RegressionsEndInOneInputError) {
  for (const auto& file : files_in(kData / "regressions" / GetParam().name)) {
    const auto bytes = read_bytes(file);
    try {
      GetParam().run(bytes);
      ADD_FAILURE() << file.filename() << ": accepted";
    } catch (const tessel::InputError& e) {
      EXPECT_GT(std::string(e.what()).size(), 0u) << file.filename();
    } catch (const std::exception& e) {
      ADD_FAILURE() << file.filename() << ": not an InputError: " << e.what();
    }
  }
}

// Optimizer state is checked against its parameter's shape before anything is sized by the
// file: a damaged chunk index once let a small checkpoint claim a state big enough to exhaust
// memory. Written with the checkpoint writer, whose optimizer holds a moment of the wrong shape.
TEST(CheckpointInput, OptimizerStateOfAnotherShapeIsRefusedWithTheFile) {
  using namespace tessel;
  nn::Model model(fuzz::checkpoint_model());
  nn::OptimizerConfig oc;
  oc.kind = fuzz::kCheckpointOptimizer;
  auto optimizer = nn::make_optimizer(oc);
  const std::string param = model.parameters().front()->name;
  optimizer->load_state({{"adam.m." + param, Tensor::zeros({5}, DType::f32)}});
  train::CheckpointMeta meta;
  meta.epoch = 1;
  meta.seed = 1;
  meta.model_json = fuzz::kCheckpointModelJson;
  meta.mode = fuzz::kCheckpointMode;
  const fs::path dir = fuzz::scratch_dir() / "wrong-shape";
  train::save_checkpoint(dir, meta, model, *optimizer);
  try {
    fuzz::checkpoint(read_bytes(dir / "checkpoint.h5"));
    ADD_FAILURE() << "a moment of shape 5 was accepted for " << param;
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("checkpoint.h5: optimizer state adam.m." + param + " has shape 5, expected"),
              std::string::npos)
        << what;
  }
}

namespace {

// A checkpoint of the fuzz target's model, written by Tessel's writer; returns its file.
fs::path tessel_checkpoint(const std::string& name) {
  using namespace tessel;
  nn::Model model(fuzz::checkpoint_model());
  nn::OptimizerConfig oc;
  oc.kind = fuzz::kCheckpointOptimizer;
  auto optimizer = nn::make_optimizer(oc);
  train::CheckpointMeta meta;
  meta.epoch = 1;
  meta.seed = 1;
  meta.model_json = fuzz::kCheckpointModelJson;
  meta.mode = fuzz::kCheckpointMode;
  const fs::path dir = fuzz::scratch_dir() / name;
  train::save_checkpoint(dir, meta, model, *optimizer);
  return dir / "checkpoint.h5";
}

std::string input_error(const std::vector<std::uint8_t>& bytes) {
  try {
    tessel::fuzz::checkpoint(bytes);
  } catch (const tessel::InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

} // namespace

// The checkpoint's "parameters" attribute (the list tools read) must name this model's
// parameters in order; an edited list is refused naming the attribute.
TEST(CheckpointInput, ParametersAttributeIsChecked) {
  const fs::path file = tessel_checkpoint("parameters-attr");
  {
    const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    ASSERT_GE(H5Adelete(f, "parameters"), 0);
    const hid_t type = H5Tcopy(H5T_C_S1);
    const std::string value = "layer9.weight";
    H5Tset_size(type, value.size());
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t a = H5Acreate2(f, "parameters", type, space, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(a, 0);
    EXPECT_GE(H5Awrite(a, type, value.data()), 0);
    H5Aclose(a);
    H5Sclose(space);
    H5Tclose(type);
    H5Fclose(f);
  }
  // The edit made through HDF5 leaves the whole-file checksum stale: refused as damage first.
  // (The edit may change the length, which is checked first.)
  auto bytes = read_bytes(file);
  const std::string stale = input_error(bytes);
  EXPECT_TRUE(stale.find("whole-file CRC-32") != std::string::npos ||
              stale.find("but Tessel wrote") != std::string::npos)
      << stale;
  // Without the checksum header (as h5py or an older Tessel leaves it) the attribute is read.
  std::fill(bytes.begin(), bytes.begin() + 64, 0);
  const std::string what = input_error(bytes);
  EXPECT_NE(what.find("checkpoint.h5: the parameters attribute lists \"layer9.weight\", expected"),
            std::string::npos)
      << what;
}

// Damage to a checkpoint of Tessel's making (a flipped bit anywhere, a truncation) is one
// InputError from the whole-file checksum, before HDF5 parses the file.
TEST(CheckpointInput, DamagedTesselCheckpointIsRefusedBeforeHdf5) {
  const auto good = read_bytes(tessel_checkpoint("damaged"));
  EXPECT_EQ(input_error(good), "(accepted)");
  for (std::size_t at = 600; at < good.size(); at += good.size() / 7) {
    auto bad = good;
    bad[at] ^= 0x04;
    EXPECT_NE(input_error(bad).find("whole-file CRC-32"), std::string::npos) << at;
  }
  const std::vector<std::uint8_t> torn(good.begin(), good.begin() + good.size() / 2);
  EXPECT_NE(input_error(torn).find("truncated"), std::string::npos);
}

// A checkpoint whose whole-file checksum header is wiped (read as a file without one) and whose
// data is then damaged: each dataset's own checksum refuses it, naming the dataset. (Without
// them the damaged values were loaded.) A file without per-dataset checksums, as older Tessel
// wrote, still loads.
TEST(CheckpointInput, DamagedDataBehindAWipedHeaderIsRefused) {
  const fs::path file = tessel_checkpoint("wiped-header");
  std::string name;
  haddr_t offset = HADDR_UNDEF;
  {
    const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    char buffer[256] = {};
    ASSERT_GT(H5Lget_name_by_idx(f, "/params", H5_INDEX_NAME, H5_ITER_INC, 0, buffer,
                                 sizeof buffer, H5P_DEFAULT),
              0);
    name = std::string("/params/") + buffer;
    const hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
    ASSERT_GE(d, 0);
    offset = H5Dget_offset(d);  // contiguous storage; the user block counted
    H5Dclose(d);
    H5Fclose(f);
  }
  ASSERT_NE(offset, HADDR_UNDEF);
  auto bytes = read_bytes(file);
  ASSERT_LT(offset + 4, bytes.size());
  std::fill(bytes.begin(), bytes.begin() + 64, 0);
  EXPECT_EQ(input_error(bytes), "(accepted)");
  // A low mantissa bit of the first value: still a finite number, so only a checksum sees it.
  bytes[offset + 1] ^= 0x01;
  const std::string what = input_error(bytes);
  EXPECT_NE(what.find("checkpoint.h5: " + name + " has checksum crc32:"), std::string::npos)
      << what;
  // Written without per-dataset checksums (older Tessel): read with the other checks as before.
  {
    const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    EXPECT_GE(H5Adelete(f, "dataset_checksums"), 0);
    H5Fclose(f);
  }
  auto old = read_bytes(file);
  std::fill(old.begin(), old.begin() + 64, 0);
  EXPECT_EQ(input_error(old), "(accepted)");
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzInputs, ::testing::ValuesIn(tessel::fuzz::targets().begin(),
                                                                  tessel::fuzz::targets().end()),
                         [](const auto& info) { return std::string(info.param.name); });

} // namespace
