// Replays the fuzz targets' saved inputs through the same entries the fuzzers use: every seed
// in corpus/<target>/ must be accepted, every input in regressions/<target>/ (each once made a
// reader crash or misbehave) must end in one InputError.
#include "fuzz_fixtures.hpp"
#include "fuzz_targets.hpp"

#include "tessel/train/checkpoint.hpp"
#include "tessel/core/error.hpp"
#include "tessel/nn/optimizer.hpp"

#include <gtest/gtest.h>

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

INSTANTIATE_TEST_SUITE_P(Targets, FuzzInputs, ::testing::ValuesIn(tessel::fuzz::targets().begin(),
                                                                  tessel::fuzz::targets().end()),
                         [](const auto& info) { return std::string(info.param.name); });

} // namespace
