// Dynamic mode: dynamic GNNs over graph snapshots, snapshot-partitioned (SC'21: graph phase per
// rank's snapshot block, one all-to-all to vertex partitioning for the recurrent phase and back)
// or vertex-partitioned (halo exchange per snapshot, recurrence local).
#pragma once

#include "tessel/comm/communicator.hpp"
#include "tessel/core/option_words.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/core/types.hpp"
#include "tessel/dist/transposition.hpp"
#include "tessel/train/train.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace tessel::train {

// --temporal-partition: each rank a block of snapshots, or a range of vertices.
enum class TemporalPartition { snapshot, vertex };

// Dynamic mode's own options (TrainOptions::mode_options holds them for --mode dynamic; --task
// and --negatives are TrainOptions' own).
struct DynamicOptions {
  TemporalPartition partition = TemporalPartition::snapshot;
  int eval_negatives = 10;  // link prediction: negatives per edge in evaluation (AUC, MRR)
};

inline std::span<const OptionWord<TemporalPartition>> option_words(TemporalPartition) {
  static constexpr OptionWord<TemporalPartition> words[] = {
      {"snapshot", TemporalPartition::snapshot}, {"vertex", TemporalPartition::vertex}};
  return words;
}

// Dynamic node regression's defaults when not given (train --mode dynamic): at most this many
// epochs, stopped after kDynamicPatience epochs without a better validation MSE, with this
// weight decay (measured on short synthetic series: docs/modes.md).
inline constexpr int kDynamicEpochs = 100;
inline constexpr int kDynamicPatience = 10;
inline constexpr float kDynamicWeightDecay = 5e-4f;

// The dynamic model on a temporal partition, for gradient checks (on the CPU, with `comm` as
// control and data communicator): the mean training loss at the current parameters and, with gradients, every parameter's gradient of it (all-reduced over
// ranks, like training does before the optimizer step). Collective.
class DynamicModelProbe {
public:
  DynamicModelProbe(comm::Communicator& comm, const TrainOptions& options);
  ~DynamicModelProbe();
  DynamicModelProbe(const DynamicModelProbe&) = delete;
  DynamicModelProbe& operator=(const DynamicModelProbe&) = delete;
  // Training forward (dropout masks and negatives of epoch 1).
  double loss(bool with_gradients);
  // The mean loss of an evaluation over all snapshots and splits (no dropout).
  double evaluation_loss();
  std::vector<nn::Parameter*> parameters();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Trains options.model.kind (gcn-gru, gcn-lstm, evolvegcn-o) on the temporal partition folder
// options.part_dir: train() in --mode dynamic. Collective.
TrainResult train_dynamic(comm::Communicator& comm, const TrainOptions& options);

}  // namespace tessel::train
