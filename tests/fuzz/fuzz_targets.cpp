// The fuzz targets' bodies: each writes the input where a reader expects a file (the readers
// take paths, as the CLI gives them) and reads it the way the CLI does.
#include "fuzz_targets.hpp"

#include "fuzz_fixtures.hpp"

#include "npz.hpp"
#include "torch_pt.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/datasets/ogb.hpp"
#include "tessel/datasets/temporal.hpp"
#include "tessel/nn/optimizer.hpp"
#include "tessel/partition/part.hpp"
#include "tessel/partition/partitioner.hpp"
#include "tessel/partition/temporal.hpp"
#include "tessel/train/checkpoint.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace tessel::fuzz {

namespace fs = std::filesystem;

datasets::Dataset tiny_dataset() {
  datasets::Dataset d;
  d.name = "fuzz";
  d.num_nodes = 6;
  d.num_classes = 3;
  d.feature_dim = 2;
  d.graph.num_rows = d.graph.num_cols = 6;
  d.graph.indptr = {0, 0, 1, 2, 3, 4, 5}; // in-neighbors: edges 0->1, 1->2, ..., 4->5
  d.graph.indices = {0, 1, 2, 3, 4};
  d.features = {0.5f, 1, 1.5f, 2, 2.5f, 3, 3.5f, 4, 4.5f, 5, 5.5f, -0.6f};
  d.labels = {0, 1, -1, 0, 1, 2};
  d.train = {0, 1};
  d.valid = {2};
  d.test = {3, 4, 5};
  return d;
}

nn::ModelConfig checkpoint_model() {
  nn::ModelConfig c;
  c.kind = nn::ModelKind::gcn;
  c.in_dim = 2;
  c.hidden = 4;
  c.out_dim = 3;
  c.layers = 2;
  c.seed = 1;
  return c;
}

const fs::path& scratch_dir() {
  static const fs::path dir = [] {
    // Quiet: the fixtures' partitioning logs at info level, once per process.
    log::set_level(log::Level::warn);
    std::string pattern = (fs::temp_directory_path() / "tessel-fuzz-XXXXXX").string();
    if (!mkdtemp(pattern.data())) {
      std::perror("tessel fuzz: mkdtemp");
      std::abort();
    }
    std::atexit([] { std::error_code ec; fs::remove_all(scratch_dir(), ec); });
    return fs::path(pattern);
  }();
  return dir;
}

void write_file(const fs::path& path, Bytes bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) ||
      std::fclose(f) != 0) {
    std::perror(("tessel fuzz: writing " + path.string()).c_str());
    std::abort();
  }
}

namespace {

std::vector<std::uint8_t> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A valid plain-CSV OGB folder; ogb_csv overwrites one file per input and puts it back after.
struct OgbCsvFolder {
  fs::path dir = scratch_dir() / "ogb-csv";
  std::vector<std::vector<std::uint8_t>> valid;
  OgbCsvFolder() {
    datasets::OgbWriteOptions o;
    o.split_name = kOgbSplit;
    o.gzip = false;
    datasets::write_ogb_folder(tiny_dataset(), dir, o);
    for (const char* f : kOgbCsvFiles)
      valid.push_back(read_bytes(dir / f));
  }
};

// papers100M's binary layout; npz overwrites raw/data.npz.
struct OgbNpzFolder {
  fs::path dir = scratch_dir() / "ogb-npz";
  OgbNpzFolder() {
    datasets::OgbWriteOptions o;
    o.split_name = kOgbSplit;
    o.gzip = false;
    o.npz = true;
    datasets::write_ogb_folder(tiny_dataset(), dir, o);
  }
};

// A two-part partition of the tiny dataset; part overwrites part-0.h5.
struct PartFolder {
  fs::path dir = scratch_dir() / "parts";
  partition::Manifest manifest;
  PartFolder() {
    partition::PartitionOptions o;
    o.num_parts = 2;
    partition::partition_dataset(tiny_dataset(), dir, o);
    manifest = partition::read_manifest(dir);
    // Without the recorded checksums, so mutated inputs reach the structural checks instead of
    // stopping at the first checksum mismatch.
    for (auto& part : manifest.raw["parts"])
      part.erase("checksums");
  }
};

template <class T> void read_all(datasets::detail::NpzArchive::Array& array) {
  std::vector<T> block(4096);
  for (std::int64_t left = array.header().count(); left > 0;) {
    const std::int64_t k = std::min<std::int64_t>(left, static_cast<std::int64_t>(block.size()));
    array.read(block.data(), k);
    left -= k;
  }
}

} // namespace

void ogb_csv(Bytes input) {
  static OgbCsvFolder folder;
  static std::size_t replaced = 0;
  if (input.empty()) return;
  write_file(folder.dir / kOgbCsvFiles[replaced], folder.valid[replaced]);
  replaced = input[0] % kOgbCsvFiles.size();
  write_file(folder.dir / kOgbCsvFiles[replaced], input.subspan(1));
  datasets::OgbOptions o;
  o.split = kOgbSplit;
  datasets::read_ogb_folder(folder.dir, o);
}

void npz(Bytes input) {
  static OgbNpzFolder folder;
  const fs::path data = folder.dir / "raw" / "data.npz";
  write_file(data, input);
  {
    const datasets::detail::NpzArchive archive(data);
    for (const auto& key : archive.keys()) {
      auto array = archive.open(key);
      if (array.header().kind == 'f')
        read_all<float>(array);
      else
        read_all<std::int64_t>(array);
    }
  }
  datasets::OgbOptions o;
  o.split = kOgbSplit;
  datasets::read_ogb_folder(folder.dir, o);
}

void pt(Bytes input) {
  const fs::path path = scratch_dir() / "split.pt";
  write_file(path, input);
  const datasets::detail::PtFile file(path);
  for (const auto& key : file.keys()) {
    const auto dtype = file.info(key).dtype;
    if (dtype == datasets::detail::PtDtype::int64 || dtype == datasets::detail::PtDtype::int32)
      (void)file.read_int64(key);
    else
      (void)file.read_float(key);
  }
}

void store(Bytes input) {
  const fs::path path = scratch_dir() / "store.h5";
  write_file(path, input);
  const auto info = datasets::read_store_info(path);
  const auto data = datasets::read_store(path);
  datasets::read_feature_rows(path, 0, std::min<std::int64_t>(info.num_nodes, 2));
}

void part(Bytes input) {
  static PartFolder folder;
  write_file(folder.dir / partition::part_file_name(0), input);
  partition::load_part(folder.dir, 0, folder.manifest);
}

void checkpoint(Bytes input) {
  const fs::path dir = scratch_dir() / "checkpoint";
  fs::create_directories(dir);
  write_file(dir / "checkpoint.h5", input);
  nn::Model model(checkpoint_model());
  nn::OptimizerConfig oc;
  oc.kind = kCheckpointOptimizer;
  auto optimizer = nn::make_optimizer(oc);
  train::CheckpointMeta expect;
  expect.model_json = kCheckpointModelJson;
  expect.mode = kCheckpointMode;
  expect.seed = 1; // the seed corpus's (make_corpus.cpp): another seed is refused
  train::load_checkpoint(dir, expect, model, *optimizer);
  model.zero_grad();
  const auto params = model.parameters();
  optimizer->step(params);
}

void temporal_json(Bytes input) {
  const fs::path path = scratch_dir() / "temporal.json";
  write_file(path, input);
  datasets::TemporalConvertOptions o;
  o.lags = 1;
  (void)datasets::read_pyg_temporal_json(path, o);
}

void temporal_edges(Bytes input) {
  const fs::path path = scratch_dir() / "edges.csv";
  write_file(path, input);
  datasets::TemporalConvertOptions o;
  o.snapshots = 3;
  (void)datasets::read_temporal_edge_list(path, o);
}

void manifest(Bytes input) {
  const fs::path dir = scratch_dir() / "manifest";
  fs::create_directories(dir);
  write_file(dir / "partition.json", input);
  // As the trainer picks its reader: a temporal partition's manifest goes to
  // read_temporal_manifest, any other to read_manifest.
  if (partition::is_temporal_partition(dir))
    (void)partition::read_temporal_manifest(dir);
  else
    (void)partition::read_manifest(dir);
}

std::span<const Target> targets() {
  static const Target all[] = {{"ogb_csv", ogb_csv},
                               {"npz", npz},
                               {"pt", pt},
                               {"store", store},
                               {"part", part},
                               {"checkpoint", checkpoint},
                               {"temporal_json", temporal_json},
                               {"temporal_edges", temporal_edges},
                               {"manifest", manifest}};
  return all;
}

} // namespace tessel::fuzz
