// OGB raw folders (node property prediction layout): reading them into a Dataset, converting
// them to a store with bounded memory, and writing them (for tests and benchmarks).
#pragma once

#include "tessel/datasets/dataset.hpp"

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace tessel::datasets {

// How to read an OGB raw folder:
//   raw/edge.csv.gz            E lines "src,dst" (edge src -> dst)
//   raw/num-node-list.csv.gz   one line: N
//   raw/num-edge-list.csv.gz   one line: E
//   raw/node-feat.csv.gz       N lines of F comma-separated numbers
//   raw/node-label.csv.gz      N lines: class id, or nan / empty for unlabeled
//   split/<name>/{train,valid,test}.csv.gz   one node id per line
// Plain .csv files are accepted in place of .csv.gz. papers100M's binary layout (raw/data.npz
// with edge_index, num_nodes_list, node_feat, and raw/node-label.npz with node_label) is read
// when raw/edge.csv(.gz) is absent.
struct OgbOptions {
  std::string split;       // split/<split>; empty: the only folder under split/
  bool symmetrize = false; // store both directions of every edge (no self-loops, no duplicates)
  bool directed = false;   // the edges are directed (ogbn-arxiv); ignored with symmetrize
  std::string name;        // dataset name; empty: the folder's name
  FeatureDtype feature_dtype = FeatureDtype::float32; // how the store keeps /node/feat
};

// What a conversion did, for `tessel convert` and the benchmark.
struct ConvertReport {
  DatasetInfo info;
  std::int64_t text_bytes = 0;  // uncompressed bytes parsed (CSV text, or npz array bytes)
  std::int64_t input_bytes = 0; // bytes read from disk
  double seconds = 0;
  std::vector<std::pair<std::string, double>> phases; // seconds per phase, in order
  bool npz = false;                                   // read the binary (npz) layout
  std::string split;                                  // the split folder used
};

// Reads a whole OGB raw folder into memory, features included. Throws InputError naming the
// file and line for anything malformed or inconsistent.
Dataset read_ogb_folder(const std::filesystem::path& dir, const OgbOptions& options = {});

// Converts an OGB raw folder into a store at `out`. Features are streamed into the file in
// row blocks, so peak memory is about the edge list plus the CSR, not the feature matrix.
// The output appears only when complete (temporary name, then rename).
ConvertReport convert_ogb_folder(const std::filesystem::path& dir, const std::filesystem::path& out,
                                 const OgbOptions& options = {});

// How to write an OGB raw folder.
struct OgbWriteOptions {
  std::string split_name = "random"; // split/<split_name>/
  bool gzip = true;                  // .csv.gz (else plain .csv)
  int gzip_level = 1;                // 1 = fastest (ISA-L's level 1 when built with it)
  bool npz = false;                  // papers100M layout: raw/data.npz + raw/node-label.npz
  bool npz_deflate = false;          // compress npz members (np.savez_compressed) or store them
  bool npz_zip64 = false;            // write zip64 records even when not needed
};

// Writes `data` as an OGB raw folder at dir, which must not exist yet or be empty; the folder
// appears only when complete. Unlabeled nodes are written as "nan". Edges are
// written as "u,v" for every u in row v of the in-neighbor CSR, so reading the folder back
// gives the same graph. Floats are written in their shortest exact form. gzip output is a
// series of independently compressed members (as pigz writes) made in parallel; the bytes do
// not depend on the thread count.
void write_ogb_folder(const Dataset& data, const std::filesystem::path& dir,
                      const OgbWriteOptions& options = {});

} // namespace tessel::datasets
