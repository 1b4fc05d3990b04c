// Checkpoints: parameters, optimizer state, epoch, seed and the run's best-so-far, written
// atomically by rank 0.
#pragma once

#include "tessel/nn/model.hpp"
#include "tessel/nn/optimizer.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace tessel::train {

constexpr const char* kCheckpointFormat = "tessel-checkpoint";
constexpr int kCheckpointVersion = 2;
// Epoch numbers beyond this are refused (the CLI's --epochs limit).
constexpr int kMaxEpochs = 1000000;

struct CheckpointMeta {
  int epoch = 0;               // last completed epoch
  std::uint64_t seed = 0;
  std::string model_json;      // model config, to refuse resuming into another model
  std::string mode;
  // The run's summary so far, so a resumed run reports over all its epochs (version 2).
  double best_valid_acc = 0;
  double test_acc_at_best = 0;
  int best_epoch = 0;              // 0: no epoch evaluated yet
  double time_to_target_s = -1;    // -1: target not reached yet
  double wall_s = 0;               // training seconds up to the checkpoint
  // The fields the mode's metric keeps at the best epoch (ValidationMetric::kept_at_best: the
  // dynamic mode's test_mrr, whose best_valid_acc and test_acc_at_best hold its accuracy, AUC or
  // MSE), each the f64 attribute <name>_at_best in [0, 1]; load_checkpoint reads those of the
  // names in `expect` that the file holds.
  std::map<std::string, double> kept_at_best;
  // The largest value the mode's validation metric takes (ValidationMetric::max_value): what
  // load_checkpoint accepts for best_valid_acc and test_acc_at_best (an expectation only).
  double metric_max = 1.0;
};

// Writes dir/checkpoint.h5 (via a temporary file renamed into place).
void save_checkpoint(const std::filesystem::path& dir, const CheckpointMeta& meta,
                     nn::Model& model, nn::Optimizer& optimizer);
// The same for any list of parameters (modes whose models are not an nn::Model), into
// dir/file_name (best.h5 holds the best epoch's model beside the last epoch's checkpoint.h5).
void save_checkpoint(const std::filesystem::path& dir, const CheckpointMeta& meta,
                     const std::vector<nn::Parameter*>& params, nn::Optimizer& optimizer,
                     const std::string& file_name = "checkpoint.h5");
CheckpointMeta load_checkpoint(const std::filesystem::path& dir, const CheckpointMeta& expect,
                               const std::vector<nn::Parameter*>& params, nn::Optimizer& optimizer,
                               const std::string& file_name = "checkpoint.h5");
// Loads dir/checkpoint.h5 into model and optimizer after checking it matches expect's model,
// mode and seed and that every attribute is in range; returns the stored metadata. Throws
// InputError naming the file otherwise.
CheckpointMeta load_checkpoint(const std::filesystem::path& dir, const CheckpointMeta& expect,
                               nn::Model& model, nn::Optimizer& optimizer);

}  // namespace tessel::train
