// Checkpoints: parameters, optimizer state, epoch and seed, written atomically by rank 0.
#pragma once

#include "tessel/nn/model.hpp"
#include "tessel/nn/optimizer.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tessel::train {

constexpr const char* kCheckpointFormat = "tessel-checkpoint";
constexpr int kCheckpointVersion = 1;

struct CheckpointMeta {
  int epoch = 0;               // last completed epoch
  std::uint64_t seed = 0;
  std::string model_json;      // model config, to refuse resuming into another model
  std::string mode;
};

// Writes dir/checkpoint.h5 (via a temporary file renamed into place).
void save_checkpoint(const std::filesystem::path& dir, const CheckpointMeta& meta,
                     nn::Model& model, nn::Optimizer& optimizer);
// The same for any list of parameters (modes whose models are not an nn::Model).
void save_checkpoint(const std::filesystem::path& dir, const CheckpointMeta& meta,
                     const std::vector<nn::Parameter*>& params, nn::Optimizer& optimizer);
CheckpointMeta load_checkpoint(const std::filesystem::path& dir, const CheckpointMeta& expect,
                               const std::vector<nn::Parameter*>& params, nn::Optimizer& optimizer);
// Loads dir/checkpoint.h5 into model and optimizer after checking it matches meta's model and
// mode; returns the stored metadata.
CheckpointMeta load_checkpoint(const std::filesystem::path& dir, const CheckpointMeta& expect,
                               nn::Model& model, nn::Optimizer& optimizer);

}  // namespace tessel::train
