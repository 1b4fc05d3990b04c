// The valid inputs around the fuzzed bytes: a 6-node dataset, the OGB folder and partition
// made from it, and the model a checkpoint is loaded into. The seed corpus is written from the
// same fixtures, so every seed is an input the targets accept.
#pragma once

#include "tessel/datasets/dataset.hpp"
#include "tessel/nn/model.hpp"
#include "tessel/nn/optimizer.hpp"

#include <array>
#include <filesystem>
#include <string>

namespace tessel::fuzz {

// 6 nodes on a path, 2 features, labels {0, 1, unlabeled, 0, 1, 2}, split 2 / 1 / 3.
datasets::Dataset tiny_dataset();

// The files of an OGB raw folder, relative to the folder, in the order ogb_csv's selector byte
// names them (byte % 8).
constexpr std::array<const char*, 8> kOgbCsvFiles = {
    "raw/num-node-list.csv", "raw/num-edge-list.csv", "raw/edge.csv",
    "raw/node-feat.csv",     "raw/node-label.csv",    "split/fuzz/train.csv",
    "split/fuzz/valid.csv",  "split/fuzz/test.csv"};
constexpr const char* kOgbSplit = "fuzz";

// The model and optimizer a checkpoint target loads into, and what load_checkpoint expects.
nn::ModelConfig checkpoint_model();
constexpr nn::OptimizerKind kCheckpointOptimizer = nn::OptimizerKind::adam;
constexpr const char* kCheckpointModelJson =
    R"({"hidden":4,"in_dim":2,"kind":"gcn","layers":2,"optimizer":"adam","out_dim":3})";
constexpr const char* kCheckpointMode = "full";

} // namespace tessel::fuzz
