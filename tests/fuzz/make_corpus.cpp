// Writes the fuzz targets' seed corpus (valid inputs made by Tessel's own writers) into
// OUT/<target>/. Run by hand after a format change: fuzz_make_corpus tests/fuzz/corpus
#include "fuzz_fixtures.hpp"
#include "fuzz_targets.hpp"

#include "tessel/train/checkpoint.hpp"
#include "tessel/datasets/ogb.hpp"
#include "tessel/nn/optimizer.hpp"
#include "tessel/partition/part.hpp"
#include "tessel/partition/partitioner.hpp"

#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace tessel;

namespace {

std::vector<std::uint8_t> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void copy_seed(const fs::path& from, const fs::path& to) {
  fuzz::write_file(to, read_bytes(from));
}

void ogb_csv_seeds(const fs::path& out, const fs::path& work) {
  for (const bool gzip : {false, true}) {
    const fs::path dir = work / (gzip ? "ogb-gz" : "ogb");
    datasets::OgbWriteOptions o;
    o.split_name = fuzz::kOgbSplit;
    o.gzip = gzip;
    datasets::write_ogb_folder(fuzz::tiny_dataset(), dir, o);
    for (std::size_t k = 0; k < fuzz::kOgbCsvFiles.size(); ++k) {
      const std::string file = std::string(fuzz::kOgbCsvFiles[k]) + (gzip ? ".gz" : "");
      std::vector<std::uint8_t> seed{static_cast<std::uint8_t>(k)};
      const auto bytes = read_bytes(dir / file);
      seed.insert(seed.end(), bytes.begin(), bytes.end());
      fuzz::write_file(out / (std::to_string(k) + "-" + fs::path(file).filename().string()), seed);
    }
  }
}

void npz_seeds(const fs::path& out, const fs::path& work) {
  struct Variant {
    const char* name;
    bool deflate, zip64;
  };
  for (const Variant v : {Variant{"stored", false, false}, Variant{"deflate", true, false},
                          Variant{"zip64", false, true}}) {
    const fs::path dir = work / (std::string("npz-") + v.name);
    datasets::OgbWriteOptions o;
    o.split_name = fuzz::kOgbSplit;
    o.npz = true;
    o.npz_deflate = v.deflate;
    o.npz_zip64 = v.zip64;
    datasets::write_ogb_folder(fuzz::tiny_dataset(), dir, o);
    copy_seed(dir / "raw" / "data.npz", out / (std::string("data-") + v.name + ".npz"));
  }
}

void store_seeds(const fs::path& out, const fs::path&) {
  datasets::write_store(fuzz::tiny_dataset(), out / "tiny.h5");
  // Without features: /node/feat is [6, 0] and holds no storage.
  auto plain = fuzz::tiny_dataset();
  plain.feature_dim = 0;
  plain.features.clear();
  datasets::write_store(plain, out / "no-features.h5");
}

void part_seeds(const fs::path& out, const fs::path& work) {
  partition::PartitionOptions o;
  o.num_parts = 2; // as the part target partitions its fixture
  partition::partition_dataset(fuzz::tiny_dataset(), work / "parts", o);
  copy_seed(work / "parts" / partition::part_file_name(0), out / "part-0.h5");
}

void checkpoint_seeds(const fs::path& out, const fs::path& work) {
  nn::Model model(fuzz::checkpoint_model());
  nn::OptimizerConfig oc;
  oc.kind = fuzz::kCheckpointOptimizer;
  auto optimizer = nn::make_optimizer(oc);
  train::CheckpointMeta meta;
  meta.epoch = 1;
  meta.seed = 1;
  meta.model_json = fuzz::kCheckpointModelJson;
  meta.mode = fuzz::kCheckpointMode;
  // Before the first step the optimizer has no moments; after it, it has all of them.
  train::save_checkpoint(work / "fresh", meta, model, *optimizer);
  copy_seed(work / "fresh" / "checkpoint.h5", out / "fresh.h5");
  model.zero_grad();
  const auto params = model.parameters();
  optimizer->step(params);
  train::save_checkpoint(work / "stepped", meta, model, *optimizer);
  copy_seed(work / "stepped" / "checkpoint.h5", out / "stepped.h5");
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_corpus OUT_DIR\n");
    return 2;
  }
  try {
    const fs::path out = argv[1];
    const fs::path work = fuzz::scratch_dir();
    struct Maker {
      const char* target;
      void (*make)(const fs::path&, const fs::path&);
    };
    for (const Maker m : {Maker{"ogb_csv", ogb_csv_seeds}, Maker{"npz", npz_seeds},
                          Maker{"store", store_seeds}, Maker{"part", part_seeds},
                          Maker{"checkpoint", checkpoint_seeds}}) {
      fs::remove_all(out / m.target);
      fs::create_directories(out / m.target);
      fs::create_directories(work / m.target);
      m.make(out / m.target, work / m.target);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_make_corpus: %s\n", e.what());
    return 1;
  }
  return 0;
}
