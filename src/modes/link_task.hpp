// What full-batch and sampled --task link share (modes/full/link_task.cpp): the training
// negatives (--negative-sampling), the decoder (--decoder) with its parameters, the loss of
// scored pairs, and evaluation, --predictions and --embeddings from the encoder's output of the
// owned nodes.
#pragma once

#include "tessel/core/rng.hpp"
#include "tessel/core/timer.hpp"
#include "tessel/nn/link_decoder.hpp"
#include "tessel/sampling/negatives.hpp"
#include "tessel/train/trainer.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tessel::train {

// The scores of one split, gathered over ranks by edge id: positives [n], and per-pair negatives
// [m] or per-source negatives [n, K]; pairs (src, dst) of pos then neg when asked for.
struct LinkSplitScores {
  std::vector<float> pos, neg;
  std::vector<std::int64_t> pairs;
};

class LinkScorer {
 public:
  // Collective (--negative-sampling degree sums the ranks' degree counts).
  LinkScorer(comm::Communicator& comm, const TrainOptions& options,
             const partition::Manifest& manifest, const partition::Part& part);

  // The j-th training negative of training edge `edge_id` in `epoch`: its source kept, its
  // destination this node (source id), uniform or degree-biased. Keyed by (seed, epoch, edge
  // id, j), so it does not depend on the rank count, the batch or the mode.
  NodeId negative_dst(int epoch, std::int64_t edge_id, std::int64_t j) const;

  // The decoder's parameters (host tensors; none for the dot product), trained by the run's
  // optimizer after the encoder's; zero_grad() before loss(); allreduce_gradients() sums each
  // rank's share over ranks (collective).
  std::vector<nn::Parameter*> parameters();
  void zero_grad();
  void allreduce_gradients();

  // Scores the rows (src[i], dst[i]) of `z` (host f32) by the decoder: the first n pairs
  // positives, the next n * k their negatives. Adds to grad_z (shape of z, zeroed by the caller)
  // and to the decoder's parameters' grads the gradient of pos_sum / total + neg_sum / (total *
  // k), and returns {pos_sum, neg_sum} (binary cross-entropy sums).
  std::array<double, 2> loss(const Tensor& z, std::span<const LocalId> src,
                             std::span<const LocalId> dst, std::int64_t n, std::int64_t k,
                             double total, Tensor& grad_z);

  // Evaluation of the encoder's output of the owned nodes (any device): the store's metric on
  // the train, valid and test splits (train: fixed negatives). Collective.
  Accuracy evaluate(const Tensor& z_owned, PhaseTimes& phases);
  void end_epoch(EpochMetrics& m) const;
  // The closing line (`line` when no epoch was evaluated); fills result.link (the figures
  // `tessel bench` reports).
  std::string finish_line(TrainResult& result, const std::string& line) const;
  // --embeddings and --predictions from the encoder's output of the owned nodes. Collective.
  void write_outputs(const OutputFiles& files, const Tensor& z_owned);

  // [N, H] on the host, row v = node v's embedding (source ids): every rank's owned rows.
  Tensor embedding_table(const Tensor& z_owned_any, PhaseTimes& phases);

 private:
  std::int64_t train_negatives_per_source() const;
  sampling::NegativeSampler negative_sampler();
  LinkSplitScores split_scores(const Tensor& table, int s, bool with_pairs = false);

  comm::Communicator& comm_;
  const TrainOptions& options_;
  const partition::Manifest& manifest_;
  const partition::Part& part_;
  std::int64_t hidden_ = 0;
  std::optional<nn::LinkDecoder> decoder_;
  std::optional<sampling::NegativeSampler> sampler_;
  std::array<double, 3> ap_{-1, -1, -1};
};

// With --task link: the store's metric (test AP kept at the best epoch for AUC) and the setup
// line's link prediction note.
void add_link_run_info(RunInfo& info, const TrainerContext& context);

}  // namespace tessel::train
