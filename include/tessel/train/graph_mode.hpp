// What the two graph modes (full-batch and sampled) share: the part's features on the training
// device, the GNN model and its optimizer, and evaluation by whole-part inference.
#pragma once

#include "tessel/dist/full_aggregator.hpp"
#include "tessel/train/trainer.hpp"

#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

namespace tessel::train {

// A graph mode's trainer: the GNN model the options describe on the runtime's device, the
// part's features there, and a whole-part aggregator (halo rows over the data plane) through
// which evaluate() and write_outputs() infer every owned node layer by layer, as DGL
// evaluates; full-batch training aggregates through it too.
class GraphModeTrainer : public Trainer {
 public:
  std::vector<nn::Parameter*> parameters() override { return model_.parameters(); }
  nn::Optimizer& optimizer() override { return *optimizer_; }
  Accuracy evaluate(PhaseTimes& phases) override;
  void write_outputs(const OutputFiles& files) override;

 protected:
  // `aggregator_on_first_use`: build aggregator() when first used rather than now (sampled mode
  // on the CPU: its steps never use it).
  explicit GraphModeTrainer(const TrainerContext& ctx, bool aggregator_on_first_use = false);

  comm::Communicator& comm_;
  comm::Communicator& data_;
  Device device_;
  const TrainOptions& options_;
  const partition::Manifest& manifest_;
  partition::Part& part_;
  // The whole-part aggregator: built with the trainer, or on first use when the mode asks (the
  // first evaluation or output of sampled mode on the CPU, whose steps never use it: a run that
  // does not evaluate never holds its matrices and halo exchange, a second copy of the graph).
  // All ranks reach the first use together: building it is collective.
  dist::FullAggregator& aggregator();
  // aggregator(), once per layer.
  const std::vector<nn::Aggregator*>& layer_aggregators();
  nn::Model model_;
  std::unique_ptr<nn::Optimizer> optimizer_;
  Tensor features_;  // undefined when feature_rows_ reads them from the part file
  std::shared_ptr<sampling::OwnedFeatureRows> feature_rows_;  // set: out of core
  // The input of whole-part inference: features_, or every row read from the part file.
  Tensor eval_features();
  // Whole-part inference (evaluation, predictions, embeddings). Sampled mode on the CPU with a
  // GCN or GraphSAGE model runs every layer in row blocks (infer_in_blocks), in memory and out of
  // core alike; the rest infers from eval_features().
  bool infers_in_blocks() const;
  bool blocks_inference_ = false;  // set by a mode that infers in blocks (sampled)
  Tensor infer_logits(Tensor* last_hidden);
  // Whole-part inference over row blocks, every layer (see common.cpp): the last layer's rows
  // and, when asked, the last hidden layer's. A layer whose output is narrower than its input
  // transforms first (its owners' rows, before the halo exchange), the others aggregate first.
  // A layer's rows (and transformed rows) go to a scratch file when the features are out of
  // core and [num_owned, width] of them exceeds the features' budget.
  struct BlockOutputs;
  BlockOutputs infer_in_blocks(bool keep_hidden);
  bool scratch_noted_ = false;  // the log line on the first layer written to a scratch file
  bool halo_noted_ = false;     // and on the first halo written to one

 public:
  // Elements of one block of a layer's input in inference over row blocks (4 MiB of f32):
  // rows = this / the input's width; the output files gather 4 such blocks a round.
  // TESSEL_INFER_BLOCK_ELEMENTS sets another size (tests use small blocks to cross many block
  // boundaries); never the budget.
  static std::int64_t infer_block_elements();

 protected:
  std::vector<std::vector<std::int64_t>> split_labels_;

 private:
  std::optional<dist::FullAggregator> aggregator_;
  std::vector<nn::Aggregator*> layer_aggregators_;
  // Every row of the part's graph lists its columns in ascending local id as loaded (the
  // partitioner's order): an aggregator built after the sampler sorted them by source id reads
  // them in that order again, so it aggregates as one built before would, bit for bit. When
  // the file's rows are in another order the aggregator is built at once instead.
  bool rows_ascending_ = false;
};

}  // namespace tessel::train
