// Pipeline mode's own options (TrainOptions::mode_options holds them for --mode pipeline).
#pragma once

#include "tessel/dist/schedule.hpp"
#include "tessel/nn/model.hpp"

#include <cstdint>
#include <filesystem>
#include <vector>

namespace tessel::train {

// --mode pipeline: a SIGN MLP (--model sign-mlp) over precomputed hop features, its blocks cut
// into stages on different ranks; ranks = data_parallel x stages.
struct PipelineOptions {
  int hops = 2;                    // K: features [X, AX, ..., A^K X]
  nn::Norm op = nn::Norm::gcn;     // propagation operator (--operator gcn | mean)
  int mlp_layers = 2;              // linear layers after the per-hop maps
  int stages = 1;                  // S pipeline ranks per data-parallel group
  // Blocks per stage (--split 2,3); empty: balance the measured block times (--split auto).
  std::vector<int> split;
  int micro_batches = 4;           // m per mini-batch
  dist::ScheduleKind schedule = dist::ScheduleKind::one_f_one_b;
  int data_parallel = 1;           // D groups
  std::int64_t batch_size = 1024;  // training rows per optimizer step, whole job
  int max_batches = 0;             // > 0: at most this many mini-batches per epoch (benchmarks)
  std::filesystem::path features_dir;  // precomputed features (default: inside the partition)
};

}  // namespace tessel::train
