// Entry points of the fuzz targets: each feeds one untrusted input to a Tessel reader. Invalid
// input must end in tessel::InputError; a crash, a sanitizer report or any other exception is
// a bug. Shared by the libFuzzer binaries and the regression test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

namespace tessel::fuzz {

using Bytes = std::span<const std::uint8_t>;

// An OGB raw folder (CSV, plain or gzip): the first byte picks which of its eight files the
// rest replaces (num-node-list, num-edge-list, edge, node-feat, node-label, split train,
// valid, test); the others hold a valid 6-node dataset. Read with read_ogb_folder.
void ogb_csv(Bytes input);
// An .npz archive: every member's header and elements, then the archive as the raw/data.npz
// of papers100M's binary layout, read with read_ogb_folder.
void npz(Bytes input);
// A torch.save'd .pt file (an OGB link split): the pickle, then every tensor's values.
void pt(Bytes input);
// A dataset store (.h5): read_store_info, read_store, read_feature_rows.
void store(Bytes input);
// part-0.h5 of a two-part partition of a 6-node graph, loaded with load_part against that
// partition's manifest.
void part(Bytes input);
// checkpoint.h5 of a 2-layer GCN trained with Adam: load_checkpoint, then one optimizer step
// (what a resumed run does first).
void checkpoint(Bytes input);

// A PyTorch Geometric Temporal JSON file (any of its layouts), read with
// read_pyg_temporal_json (lags 1).
void temporal_json(Bytes input);
// A timestamped edge list (src,dst,time[,weight]), read with read_temporal_edge_list into 3
// snapshots.
void temporal_edges(Bytes input);
// A partition folder's partition.json: read_manifest (a static partition), then
// is_temporal_partition and read_temporal_manifest (a temporal one).
void manifest(Bytes input);

struct Target {
  const char* name; // folder name under tests/fuzz/corpus/ and tests/fuzz/regressions/
  void (*run)(Bytes);
};
std::span<const Target> targets();

// A private folder for the files the targets write, made on first use and removed at exit.
const std::filesystem::path& scratch_dir();
void write_file(const std::filesystem::path& path, Bytes bytes);

} // namespace tessel::fuzz
