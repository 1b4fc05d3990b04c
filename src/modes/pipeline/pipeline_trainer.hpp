// Pipeline mode's trainer: a SIGN MLP over precomputed hop features, its blocks cut into stages on
// different ranks, micro-batches run by a GPipe, 1F1B or wave schedule; data x pipeline parallel.
// Its set-up, epochs and outputs are in pipeline.cpp, the placement of the rows on the stages in
// pipeline_rows.cpp, the schedule's execution and its replays in pipeline_schedule.cpp.
#pragma once

#include "tessel/train/trainer.hpp"
#include "tessel/modes/pipeline.hpp"

#include "tessel/dist/schedule.hpp"
#include "tessel/nn/sign_mlp.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace tessel::train::pipeline_mode {

// The optimizer the driver sees: steps this rank's parameters through the real optimizer, and
// for checkpoints holds the whole model's state gathered by gather_parameters().
class GatheredOptimizer final : public nn::Optimizer {
public:
  explicit GatheredOptimizer(std::unique_ptr<nn::Optimizer> inner) : inner_(std::move(inner)) {}
  void step(std::span<nn::Parameter* const> params) override { inner_->step(params); }
  std::vector<std::pair<std::string, Tensor>> state() override { return gathered_; }
  void load_state(const std::vector<std::pair<std::string, Tensor>>& state) override {
    inner_->load_state(state);
  }
  nn::Optimizer& inner() { return *inner_; }
  void set_gathered(std::vector<std::pair<std::string, Tensor>> state) {
    gathered_ = std::move(state);
  }

private:
  std::unique_ptr<nn::Optimizer> inner_;
  std::vector<std::pair<std::string, Tensor>> gathered_;
};
class PipelineTrainer final : public Trainer {
public:
  explicit PipelineTrainer(TrainerContext ctx);

  std::vector<nn::Parameter*> parameters() override { return model_.parameters(); }
  nn::Optimizer& optimizer() override { return optimizer_; }

  void gather_parameters() override;

  // The gradient all-reduce across data-parallel groups runs on the stage communicator: its
  // bytes count with the epoch's (pipeline_run_info names it to the driver).
  comm::Communicator* stage_comm() const { return stage_comm_.get(); }

  double train_epoch(int epoch, PhaseTimes& phases, nlohmann::json& extra) override;

  Accuracy evaluate(PhaseTimes& phases) override;

  void write_outputs(const OutputFiles& files) override;

private:
  struct EpochStats {
    double busy = 0;                    // compute seconds
    double wall = 0;                    // seconds inside the schedules
    std::int64_t bytes = 0;             // activations and gradients sent to other stages
    std::vector<double> action_seconds; // per action of this rank's schedule, CPU seconds, summed
  };

  // One micro-batch's rows as this rank sees them.
  struct Micro {
    std::int64_t begin = 0, end = 0; // rows of this group's shard
    std::int64_t rows() const { return end - begin; }
  };

  static nn::SignMlpConfig model_config(const TrainerContext& ctx) {
    nn::SignMlpConfig c;
    c.hops = ctx.options.mode_options.get<PipelineOptions>().hops;
    c.feature_dim = ctx.manifest.feature_dim;
    c.hidden = ctx.options.model.hidden;
    c.out_dim = ctx.manifest.num_classes;
    c.mlp_layers = ctx.options.mode_options.get<PipelineOptions>().mlp_layers;
    c.dropout = ctx.options.model.dropout;
    c.seed = ctx.options.seed;
    return c;
  }

  std::string split_text() const {
    std::string s;
    for (std::size_t i = 0; i + 1 < stage_begin_.size(); ++i)
      s += fmt::format("{}{}", i ? "," : "", stage_begin_[i + 1] - stage_begin_[i]);
    return s;
  }

  void choose_split();

  // Where the shuffled training order puts each training node (distribute_rows).
  struct TrainPlacement {
    std::vector<NodeId> ids;                      // every training node's source id, sorted
    std::vector<std::int64_t> position_of_sorted; // shuffled position of ids[i]
    std::vector<int> group_of_position;           // the group of each shuffled position
    std::vector<std::int64_t> local_of_position;  // its row in that group's shard
    std::int64_t shard = 0;                       // rows of this group's shard
  };
  // Every evaluation row of the graph sorted by (source id, split), and the end of this group's
  // share of them (which starts at eval_begin_).
  struct EvalPlacement {
    std::vector<NodeId> ids;
    std::vector<std::uint8_t> split;
    std::int64_t end = 0;
  };
  // Rows bound for each rank with their destination slot: features to first stages, labels to
  // last stages.
  struct RowsToSend {
    RowsToSend(int ranks, std::int64_t width, int first_rank, int last_rank)
        : width(width), first_rank(first_rank), last_rank(last_rank),
          slot_to(static_cast<std::size_t>(ranks)), feat_to(static_cast<std::size_t>(ranks)),
          label_slot_to(static_cast<std::size_t>(ranks)),
          label_to(static_cast<std::size_t>(ranks)) {}
    std::int64_t width;
    int first_rank, last_rank;
    std::vector<std::vector<std::int64_t>> slot_to;
    std::vector<std::vector<float>> feat_to;
    std::vector<std::vector<std::int64_t>> label_slot_to;
    std::vector<std::vector<std::int64_t>> label_to;
  };

  // The train, valid and test lists of the part, in split order.
  std::array<const std::vector<LocalId>*, 3> split_lists() const {
    return {&part_.train, &part_.valid, &part_.test};
  }

  // Sends each training row's features to its group's first stage and its label to the last
  // stage, once; the same for the evaluation rows (train, valid and test nodes).
  void distribute_rows();

  // Group g's share of batch b: positions [b B + n_b g / D, b B + n_b (g + 1) / D).
  std::pair<std::int64_t, std::int64_t> batch_share(int b, int g) const {
    const std::int64_t B = popts_.batch_size;
    const int D = popts_.data_parallel;
    const std::int64_t start = static_cast<std::int64_t>(b) * B;
    const std::int64_t nb = std::min(B, num_train_ - start);
    return std::pair{start + nb * g / D, start + nb * (g + 1) / D};
  }

  // A fixed random order of the training rows, cut into mini-batches of batch_size rows, each
  // shared among the groups; fills the batches (num_batches_, batch_rows_, batch_begin_) and
  // this group's shard_ids_.
  TrainPlacement place_train_rows(std::vector<NodeId> train_ids);

  // Every rank's evaluation rows, sorted, and this group's share of them: fills split_sizes_,
  // eval_begin_, eval_ids_ and the evaluation batches. Collective.
  EvalPlacement place_eval_rows(const std::vector<NodeId>& my_eval,
                                const std::vector<std::uint8_t>& my_eval_split);

  // Labels travel as (label + 1) * 4 + split so unlabeled (-1) rows stay non-negative.
  void add_row(RowsToSend& out, LocalId v, int g, std::int64_t slot, int split) const;

  // Training rows: slot = local shard index; evaluation rows: slot = -1 - index in the
  // group's evaluation share, with the split in the label's low bits.
  RowsToSend rows_to_send(const TrainPlacement& train, const EvalPlacement& eval,
                          std::int64_t width) const;

  // The first stage's rows: training rows into train_x_, evaluation rows into eval_x_.
  void store_input_rows(std::span<const std::int64_t> slots, std::span<const float> feats,
                        std::int64_t shard, std::int64_t eval_n, std::int64_t width);

  // The last stage's labels (checked) and the evaluation rows' splits.
  void store_labels(std::span<const std::int64_t> label_slots, std::span<const std::int64_t> labels,
                    std::int64_t shard, std::int64_t eval_n);

  int tag(int micro, int stage, bool gradient) const {
    return ((micro * schedule_.stages) + stage) * 2 + (gradient ? 1 : 0);
  }
  int peer_world(int pipe_rank) const { return group_ * popts_.stages + pipe_rank; }

  // Runs this rank's actions of one schedule over one mini-batch. rows_of(i): the micro-batch's
  // rows in the group's shard; input: the first stage's rows; labels: the last stage's.
  // Returns the loss sum (training) and adds correct counts (evaluation).
  double run_schedule(const dist::Schedule& schedule, std::int64_t batch_begin,
                      std::int64_t batch_rows, const Tensor& input, std::span<const NodeId> ids,
                      std::span<const std::int64_t> labels, std::span<const std::uint8_t> splits,
                      double loss_scale, const rng::Key& dropout_key, bool training,
                      EpochStats& stats, std::int64_t* correct);

  double run_batch(int b, int epoch, bool training, EpochStats& stats);

  void run_eval_batch(int b, EpochStats& stats, std::int64_t* correct);

  void allreduce_stage_gradients();

  struct Replay {
    double bubble = 0;
    std::vector<double> forward, backward; // [stages] the cost of one micro-batch on each stage
  };

  // The bubble of group 0's schedule replayed with the CPU seconds its actions took this epoch
  // (messages free; the median per rank, action kind and stage): what the schedule costs with
  // these stage times, without the noise of ranks that wait for cores they share. Rank 0 gets
  // the numbers; the others return zeros.
  Replay replay_bubble(const std::vector<double>& seconds);

  static double median_of(std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  }

  // Measures every stage's forward and backward of one micro-batch on every rank, the stages in
  // turn on the same core, and replays the schedule with these costs. The replay of an epoch's
  // own actions (bubble_replay) reads each stage on the rank that holds it, so it also reads the
  // ranks' speeds: on cores shared with other processes one rank was measured 20-40% slower
  // than its peer for whole epochs, doing the same work, which is no property of the split.
  // Timed side by side on one core, the ratio of the stages' costs is the ratio of their work;
  // the costs are averaged over ranks.
  void calibrate_stage_costs();

  comm::Communicator& comm_;
  const TrainOptions& options_;
  const PipelineOptions& popts_;
  const partition::Manifest& manifest_;
  partition::Part& part_;
  nn::SignMlp model_;
  GatheredOptimizer optimizer_;
  dist::ScheduleKind kind_ = dist::ScheduleKind::one_f_one_b;
  dist::Schedule schedule_, eval_schedule_;
  double schedule_bubble_ = 0; // simulated with equal stages
  // Stage costs timed side by side before training (calibrate_stage_costs) and their bubble.
  std::vector<double> calibrated_forward_, calibrated_backward_;
  double calibrated_bubble_ = 0;
  int group_ = 0, pipe_rank_ = 0;
  std::vector<int> stage_begin_; // [stages + 1] first block of each stage
  std::vector<int> my_stages_;
  std::vector<nn::Parameter*> my_params_;
  std::unique_ptr<comm::Communicator> stage_comm_;
  std::vector<float> hop_features_; // [owned, (K+1) F] of this part
  std::int64_t num_train_ = 0;
  int num_batches_ = 0;
  std::vector<std::int64_t> batch_rows_;  // [batches] rows of each mini-batch, whole job
  std::vector<std::int64_t> batch_begin_; // [batches] first shard row of each, this group
  std::vector<NodeId> shard_ids_;         // [shard] source id of each shard row
  Tensor train_x_, eval_x_;               // first stage: shard rows
  std::vector<std::int64_t> train_labels_, eval_labels_; // last stage
  std::vector<std::uint8_t> eval_split_;
  std::vector<NodeId> eval_ids_;
  std::int64_t eval_begin_ = 0;
  int eval_batches_ = 0;
  std::int64_t eval_batch_ = 0;
  static constexpr std::int64_t kEvalBatchRows = 4096;
  std::int64_t split_sizes_[3] = {0, 0, 0};
  std::vector<float> flat_grad_;
};

} // namespace tessel::train::pipeline_mode
