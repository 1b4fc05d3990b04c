// OGB link property prediction folders (ogbl-*): their training graph, optional node features
// and edge splits (.pt files) converted into a store with the /link group.
#pragma once

#include "tessel/datasets/ogb.hpp"

#include <cstdint>
#include <filesystem>
#include <string>

namespace tessel::datasets {

// An ogbl raw folder:
//   raw/edge.csv.gz            E lines "src,dst": the training graph (OGB's convention)
//   raw/num-node-list.csv.gz   one line: N
//   raw/num-edge-list.csv.gz   one line: E
//   raw/node-feat.csv.gz       optional, N lines of F numbers (absent in ogbl-ddi)
//   split/<name>/{train,valid,test}.pt   torch.save'd dicts of tensors:
//     edge [n, 2] and, in valid/test, edge_neg [m, 2] (collab, ppa, ddi); or
//     source_node [n], target_node [n] and, in valid/test, target_node_neg [n, K] (citation2);
//     optional weight [n] and year [n] (collab). Other keys are ignored.
// raw/edge_weight, raw/edge_year and other raw/ files are not read (the store's graph has no
// edge values). Plain .csv is accepted in place of .csv.gz.

// True when `dir` holds split/<name>/train.pt (the split chosen as OgbOptions::split chooses).
bool is_ogb_link_folder(const std::filesystem::path& dir, const OgbOptions& options = {});

struct OgbLinkOptions {
  // Default evaluation written to /link metric: empty = from the dataset's name (collab
  // hits@50, ddi hits@20, ppa hits@100, citation2 mrr, vessel auc), else mrr with per-source
  // negatives and auc with pair negatives.
  std::string metric;
};

struct OgbLinkReport {
  ConvertReport convert; // info: num_classes 0; num_train/valid/test count the node splits (0)
  std::int64_t train_pos = 0, valid_pos = 0, test_pos = 0;
  std::int64_t valid_neg = 0, test_neg = 0; // rows of *_neg, or of *_neg_dst
  std::int64_t neg_per_source = 0;          // K of *_neg_dst; 0 with pair negatives
  std::string metric;
  bool weight = false, year = false; // some split had weight / year
  bool features = true;              // false: no raw/node-feat, the store has feature_dim 0
};

// Converts an ogbl folder to a store at `out` (written whole or not at all): /graph from
// raw/edge, /node/feat (or [N, 0]), /node/label all -1, empty node splits, and the /link
// group (source "ogb"). Throws InputError naming the file (and row) for anything malformed: a
// node id outside [0, N), a tensor of the wrong shape or dtype, a missing key.
OgbLinkReport convert_ogb_link_folder(const std::filesystem::path& dir,
                                      const std::filesystem::path& out,
                                      const OgbOptions& options = {},
                                      const OgbLinkOptions& link = {});

} // namespace tessel::datasets
