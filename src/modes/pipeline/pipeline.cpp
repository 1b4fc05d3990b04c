// Pipeline mode: a SIGN MLP over precomputed hop features, its blocks cut into stages on
// different ranks, micro-batches run by a GPipe, 1F1B or wave schedule; data x pipeline parallel.
#include "mode_entries.hpp"
#include "tessel/train/trainer.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/kernels/kernels.hpp"
#include "tessel/nn/loss.hpp"
#include "tessel/nn/sign_mlp.hpp"
#include "tessel/dist/precompute.hpp"
#include "tessel/dist/schedule.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

namespace tessel::train {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// "--split 2,3,3": blocks per stage, in order, at least one each, as many as the model has.
void check_split(const std::vector<int>& counts, int blocks, int stages) {
  const std::string text = fmt::format("{}", fmt::join(counts, ","));
  for (const int value : counts)
    TESSEL_EXPECTS(value >= 1, "--split {}: '{}' is not a positive number of blocks", text, value);
  TESSEL_EXPECTS(static_cast<int>(counts.size()) == stages,
                 "--split {}: {} entries, but the schedule has {} stages", text, counts.size(),
                 stages);
  const int total = std::accumulate(counts.begin(), counts.end(), 0);
  TESSEL_EXPECTS(total == blocks,
                 "--split {}: {} blocks in all, but the model has {} (the hop maps + "
                 "--mlp-layers)",
                 text, total, blocks);
}

// Contiguous stages of at least one block each, minimizing the slowest stage (exact dynamic
// program over prefix sums; the block counts are small).
std::vector<int> balance_split(const std::vector<double>& seconds, int stages) {
  const int n = static_cast<int>(seconds.size());
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + seconds[i];
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[s][i]: slowest stage when the first i blocks form s stages; cut[s][i]: last cut.
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0;
  for (int s = 1; s <= stages; ++s)
    for (int i = s; i <= n; ++i)
      for (int j = s - 1; j < i; ++j) {
        const double v = std::max(best[s - 1][j], prefix[i] - prefix[j]);
        if (v < best[s][i]) {
          best[s][i] = v;
          cut[s][i] = j;
        }
      }
  std::vector<int> counts(stages);
  for (int s = stages, i = n; s >= 1; --s) {
    counts[s - 1] = i - cut[s][i];
    i = cut[s][i];
  }
  return counts;
}

// Each rank's list gathered on every rank, in rank order.
template <class T> std::vector<T> gather_all(comm::Communicator& comm, const std::vector<T>& mine) {
  std::vector<std::int64_t> counts(static_cast<std::size_t>(comm.size()),
                                   static_cast<std::int64_t>(mine.size()));
  std::vector<T> send;
  send.reserve(mine.size() * counts.size());
  for (std::size_t q = 0; q < counts.size(); ++q)
    send.insert(send.end(), mine.begin(), mine.end());
  return comm.alltoallv<T>(send, counts);
}

// A fixed random order of n positions (a Fisher-Yates shuffle keyed by the run's seed).
std::vector<std::int64_t> shuffled_positions(std::int64_t n, std::uint64_t seed) {
  std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  const rng::Key key{seed, rng::Stream::shuffle, 0, 0, 0};
  for (std::int64_t i = n - 1; i > 0; --i)
    std::swap(perm[i],
              perm[key.below(static_cast<std::uint64_t>(i), 0, static_cast<std::uint64_t>(i) + 1)]);
  return perm;
}

// Sorts evaluation rows by (source id, split), keeping ids and splits paired.
void sort_by_id_and_split(std::vector<NodeId>& eval_ids, std::vector<std::uint8_t>& eval_split) {
  std::vector<std::int64_t> idx(eval_ids.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](auto a, auto b) {
    return std::tie(eval_ids[a], eval_split[a]) < std::tie(eval_ids[b], eval_split[b]);
  });
  std::vector<NodeId> ids2;
  std::vector<std::uint8_t> split2;
  for (auto i : idx) {
    ids2.push_back(eval_ids[i]);
    split2.push_back(eval_split[i]);
  }
  eval_ids = std::move(ids2);
  eval_split = std::move(split2);
}

// Per-rank lists concatenated in rank order, with each rank's count (in `unit`s) in `counts`.
template <class T>
std::vector<T> flatten_per_rank(const std::vector<std::vector<T>>& per_rank,
                                std::vector<std::int64_t>& counts, std::int64_t unit) {
  std::vector<T> flat;
  const auto ranks = per_rank.size();
  counts.assign(ranks, 0);
  for (std::size_t q = 0; q < ranks; ++q) {
    counts[q] = static_cast<std::int64_t>(per_rank[q].size()) / unit;
    flat.insert(flat.end(), per_rank[q].begin(), per_rank[q].end());
  }
  return flat;
}

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
  explicit PipelineTrainer(TrainerContext ctx)
      : comm_(ctx.comm), options_(ctx.options), popts_(ctx.options.pipeline),
        manifest_(ctx.manifest), part_(ctx.part), model_(model_config(ctx)),
        optimizer_(nn::make_optimizer(ctx.options.optimizer)) {
    check_pipeline_options(options_, comm_.size());
    const int S = popts_.stages, D = popts_.data_parallel;
    group_ = comm_.rank() / S;
    pipe_rank_ = comm_.rank() % S;
    kind_ = popts_.schedule;
    schedule_ = dist::make_schedule(kind_, S, popts_.micro_batches);
    schedule_bubble_ = dist::schedule_bubble(kind_, S, popts_.micro_batches);
    eval_schedule_ = dist::make_schedule(kind_, S, popts_.micro_batches, true);
    const int stages = schedule_.stages;

    Stopwatch watch;
    dist::PrecomputeOptions pre{popts_.hops, popts_.op, options_.normalize_features};
    const auto dir = popts_.features_dir.empty() ? dist::default_sign_dir(options_.part_dir, pre)
                                                 : popts_.features_dir;
    bool computed = false;
    hop_features_ = dist::load_or_precompute(comm_, part_, manifest_.dataset, pre, dir, &computed);
    log::info("{} SIGN features (K = {}, {}) {} {} in {:.2f} s", computed ? "computed" : "read",
              popts_.hops, popts_.op, computed ? "into" : "from", dir.string(), watch.seconds());

    choose_split();
    for (int s = 0; s < stages; ++s)
      if (schedule_.stage_rank[s] == pipe_rank_) {
        my_stages_.push_back(s);
        for (int b = stage_begin_[s]; b < stage_begin_[s + 1]; ++b)
          for (nn::Parameter* p : model_.parameters(b))
            my_params_.push_back(p);
      }
    stage_comm_ = comm_.split(pipe_rank_, group_);
    distribute_rows();
    calibrate_stage_costs();
    log::info("pipeline: {} data-parallel x {} stages, {} schedule, {} micro-batches, split {}, "
              "bubble with the stage costs measured side by side {:.3f}",
              D, S, option_word(popts_.schedule), popts_.micro_batches, split_text(), calibrated_bubble_);
  }

  std::vector<nn::Parameter*> parameters() override { return model_.parameters(); }
  nn::Optimizer& optimizer() override { return optimizer_; }

  void gather_parameters() override {
    // Stage ranks of group 0 contribute their blocks; every other entry is zero, so the sum
    // is the whole model (and its optimizer state) on every rank.
    const auto params = model_.parameters();
    auto mine = [&](const nn::Parameter* p) {
      return group_ == 0 && std::find(my_params_.begin(), my_params_.end(), p) != my_params_.end();
    };
    std::vector<std::string> prefixes;
    const nn::OptimizerKind kind = options_.optimizer.kind;
    if (kind == nn::OptimizerKind::adam) prefixes = {"adam.m.", "adam.v."};
    if (kind == nn::OptimizerKind::sgd && options_.optimizer.momentum != 0.0f)
      prefixes = {"sgd.momentum."};
    std::map<std::string, Tensor> inner_state;
    for (auto& [name, t] : optimizer_.inner().state())
      inner_state[name] = t;
    std::int64_t total = 0;
    for (const nn::Parameter* p : params)
      total += p->value.numel() * (1 + static_cast<std::int64_t>(prefixes.size()));
    std::vector<float> flat(static_cast<std::size_t>(total), 0.0f);
    std::int64_t at = 0;
    for (const nn::Parameter* p : params) {
      const bool own = mine(p);
      auto put = [&](const Tensor* t) {
        if (own && t) std::copy_n(t->data<float>(), t->numel(), flat.data() + at);
        at += p->value.numel();
      };
      put(&p->value);
      for (const auto& prefix : prefixes) {
        auto it = inner_state.find(prefix + p->name);
        put(it == inner_state.end() ? nullptr : &it->second);
      }
    }
    comm_.allreduce(std::span<float>(flat));
    std::vector<std::pair<std::string, Tensor>> state;
    if (kind == nn::OptimizerKind::adam) {
      auto it = inner_state.find("adam.step");
      const std::int64_t step = it == inner_state.end() ? 0 : it->second.data<std::int64_t>()[0];
      state.emplace_back("adam.step", Tensor::from_vector<std::int64_t>({step}));
    }
    at = 0;
    for (nn::Parameter* p : params) {
      const std::int64_t n = p->value.numel();
      std::copy_n(flat.data() + at, n, p->value.data<float>());
      at += n;
      for (const auto& prefix : prefixes) {
        Tensor t = Tensor::empty(p->value.shape(), DType::f32);
        std::copy_n(flat.data() + at, n, t.data<float>());
        state.emplace_back(prefix + p->name, std::move(t));
        at += n;
      }
    }
    optimizer_.set_gathered(std::move(state));
  }

  // The gradient all-reduce across data-parallel groups runs on the stage communicator: its
  // bytes count with the epoch's (pipeline_run_info names it to the driver).
  comm::Communicator* stage_comm() const { return stage_comm_.get(); }

  double train_epoch(int epoch, PhaseTimes& phases, nlohmann::json& extra) override {
    Stopwatch epoch_watch;
    // The order of the mini-batches changes every epoch; their rows do not (each group's
    // shard of every mini-batch was sent to its first stage once).
    std::vector<int> order(static_cast<std::size_t>(num_batches_));
    std::iota(order.begin(), order.end(), 0);
    const rng::Key shuffle{options_.seed, rng::Stream::shuffle, static_cast<std::uint32_t>(epoch),
                           1, 0};
    for (int i = num_batches_ - 1; i > 0; --i)
      std::swap(order[i], order[shuffle.below(static_cast<std::uint64_t>(i), 0,
                                              static_cast<std::uint64_t>(i) + 1)]);
    if (popts_.max_batches > 0 && popts_.max_batches < num_batches_)
      order.resize(static_cast<std::size_t>(popts_.max_batches));
    EpochStats stats;
    stats.action_seconds.assign(schedule_.actions[pipe_rank_].size(), 0.0);
    double loss_sum = 0;
    std::int64_t rows = 0;
    for (int b : order) {
      rows += batch_rows_[b];
      model_.zero_grad(0, model_.num_blocks());
      loss_sum += run_batch(b, epoch, true, stats);
      {
        ScopedPhase t(phases, "allreduce");
        allreduce_stage_gradients();
      }
      ScopedPhase t(phases, "optimizer");
      optimizer_.step(my_params_);
    }
    phases.add("compute", stats.busy);
    phases.add("wait", stats.wall - stats.busy);
    comm_.wait_sends();
    const double train_s = epoch_watch.seconds();

    // Per-epoch pipeline metrics.
    const int S = popts_.stages;
    double sums[3] = {stats.wall - stats.busy, stats.wall, static_cast<double>(stats.bytes)};
    comm_.allreduce(std::span<double>(sums, 3));
    std::vector<double> stage_s(static_cast<std::size_t>(S), 0.0);
    stage_s[pipe_rank_] = stats.busy;
    comm_.allreduce(std::span<double>(stage_s), comm::ReduceOp::max);
    extra["bubble"] = sums[1] > 0 ? sums[0] / sums[1] : 0.0;
    const Replay replay = replay_bubble(stats.action_seconds);
    extra["bubble_replay"] = replay.bubble;
    extra["stage_forward_s"] = replay.forward;
    extra["stage_backward_s"] = replay.backward;
    extra["bubble_calibrated"] = calibrated_bubble_;
    extra["calibrated_forward_s"] = calibrated_forward_;
    extra["calibrated_backward_s"] = calibrated_backward_;
    extra["bubble_analytic"] = dist::analytic_bubble(kind_, S, popts_.micro_batches);
    extra["bubble_schedule"] = schedule_bubble_;
    extra["stage_s"] = stage_s;
    extra["stage_bytes"] = static_cast<std::int64_t>(sums[2]);
    extra["samples_per_s"] =
        comm_.allreduce_value(static_cast<double>(rows) / train_s, comm::ReduceOp::min);
    extra["steps"] = static_cast<std::int64_t>(order.size());
    extra["schedule"] = option_word(popts_.schedule);
    extra["stages"] = S;
    extra["micro_batches"] = popts_.micro_batches;
    extra["data_parallel"] = popts_.data_parallel;
    // Mean over the rows trained this epoch (all training rows unless --max-batches).
    return comm_.allreduce_value(loss_sum) / static_cast<double>(rows);
  }

  Accuracy evaluate(PhaseTimes& phases) override {
    Stopwatch watch;
    EpochStats stats;
    stats.action_seconds.assign(eval_schedule_.actions[pipe_rank_].size(), 0.0);
    std::int64_t correct[3] = {0, 0, 0};
    for (int b = 0; b < eval_batches_; ++b)
      run_eval_batch(b, stats, correct);
    comm_.wait_sends();
    comm_.allreduce(std::span<std::int64_t>(correct, 3));
    phases.add("eval", watch.seconds());
    auto ratio = [](std::int64_t c, std::int64_t n) {
      return n > 0 ? static_cast<double>(c) / static_cast<double>(n) : 0.0;
    };
    return {ratio(correct[0], split_sizes_[0]), ratio(correct[1], split_sizes_[1]),
            ratio(correct[2], split_sizes_[2])};
  }

  void write_outputs(const OutputFiles& files) override {
    // Every rank holds the whole model after the gather, so each predicts its own part's
    // nodes from its precomputed features, without the pipeline. The embeddings are the last
    // hidden block's output (after its ReLU), the input of the block that gives logits.
    gather_parameters();
    const std::int64_t n = part_.num_owned, width = model_.block_in_dim(0);
    const int last = model_.num_blocks() - 1;
    const std::int64_t hidden_dim = model_.block_in_dim(last);
    Tensor logits = Tensor::empty({n, manifest_.num_classes}, DType::f32);
    Tensor hidden;
    if (!files.embeddings.empty()) hidden = Tensor::empty({n, hidden_dim}, DType::f32);
    constexpr std::int64_t kChunk = 4096;
    for (std::int64_t begin = 0; begin < n; begin += kChunk) {
      const std::int64_t end = std::min(n, begin + kChunk);
      Tensor x = Tensor::empty({end - begin, width}, DType::f32);
      std::copy_n(hop_features_.data() + begin * width, (end - begin) * width, x.data<float>());
      const std::span<const NodeId> ids(part_.orig_id.data() + begin,
                                        static_cast<std::size_t>(end - begin));
      nn::SignMlp::Saved saved;
      for (int blk = 0; blk < model_.num_blocks(); ++blk) {
        if (blk == last && hidden.defined())
          std::copy_n(x.data<float>(), x.numel(), hidden.data<float>() + begin * hidden_dim);
        x = model_.forward(blk, x, ids, rng::Key{}, false, saved);
      }
      std::copy_n(x.data<float>(), x.numel(), logits.data<float>() + begin * x.cols());
    }
    if (!files.predictions.empty()) write_predictions_file(comm_, part_, logits, files.predictions);
    if (!files.embeddings.empty())
      write_embeddings_file(comm_, part_, hidden,
                            fmt::format("SIGN MLP block {} (blocks 0..{}), after its ReLU", last - 1,
                                        last),
                            files.embeddings);
  }

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
    c.hops = ctx.options.pipeline.hops;
    c.feature_dim = ctx.manifest.feature_dim;
    c.hidden = ctx.options.model.hidden;
    c.out_dim = ctx.manifest.num_classes;
    c.mlp_layers = ctx.options.pipeline.mlp_layers;
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

  void choose_split() {
    const int stages = schedule_.stages, blocks = model_.num_blocks();
    std::vector<int> counts;
    if (!popts_.split.empty()) {
      counts = popts_.split;
    } else {
      // Forward + backward seconds of each block on a micro-batch-sized input, the slowest
      // rank's measurement (so every rank picks the same split).
      const std::int64_t rows =
          std::clamp<std::int64_t>(popts_.batch_size / popts_.micro_batches, 1, 512);
      std::vector<double> seconds(static_cast<std::size_t>(blocks), 0.0);
      std::vector<NodeId> ids(static_cast<std::size_t>(rows));
      std::iota(ids.begin(), ids.end(), 0);
      for (int b = 0; b < blocks; ++b) {
        Tensor x = Tensor::zeros({rows, model_.block_in_dim(b)}, DType::f32);
        Tensor g = Tensor::zeros({rows, model_.block_out_dim(b)}, DType::f32);
        double best = std::numeric_limits<double>::infinity();
        for (int rep = 0; rep < 3; ++rep) {
          Stopwatch w;
          nn::SignMlp::Saved saved;
          (void)model_.forward(b, x, ids, rng::Key{}, true, saved);
          (void)model_.backward(b, g, saved, b > 0);
          best = std::min(best, w.seconds());
        }
        seconds[b] = best;
      }
      model_.zero_grad(0, blocks);
      comm_.allreduce(std::span<double>(seconds), comm::ReduceOp::max);
      counts = balance_split(seconds, stages);
    }
    stage_begin_.assign(1, 0);
    for (int c : counts)
      stage_begin_.push_back(stage_begin_.back() + c);
  }

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
  void distribute_rows() {
    const std::int64_t width = model_.block_in_dim(0);
    // Every split node of the graph by source id: the order does not depend on the partition.
    std::vector<NodeId> my_train, my_eval;
    std::vector<std::uint8_t> my_eval_split;
    for (LocalId v : part_.train)
      my_train.push_back(part_.orig_id[v]);
    const auto lists = split_lists();
    for (int s = 0; s < 3; ++s)
      for (LocalId v : *lists[s]) {
        my_eval.push_back(part_.orig_id[v]);
        my_eval_split.push_back(static_cast<std::uint8_t>(s));
      }
    std::vector<NodeId> train_ids = gather_all(comm_, my_train);
    std::sort(train_ids.begin(), train_ids.end());
    num_train_ = static_cast<std::int64_t>(train_ids.size());
    TESSEL_EXPECTS(num_train_ > 0, "pipeline: no training nodes");
    const TrainPlacement train = place_train_rows(std::move(train_ids));
    const EvalPlacement eval = place_eval_rows(my_eval, my_eval_split);

    const int first_rank = schedule_.stage_rank.front(), last_rank = schedule_.stage_rank.back();
    const RowsToSend out = rows_to_send(train, eval, width);
    std::vector<std::int64_t> counts;
    auto flat_slots = flatten_per_rank(out.slot_to, counts, 1);
    const auto slots = comm_.alltoallv<std::int64_t>(flat_slots, counts);
    auto flat_feats = flatten_per_rank(out.feat_to, counts, 1);
    const auto feats = comm_.alltoallv<float>(flat_feats, counts);
    auto flat_label_slots = flatten_per_rank(out.label_slot_to, counts, 1);
    const auto label_slots = comm_.alltoallv<std::int64_t>(flat_label_slots, counts);
    auto flat_labels = flatten_per_rank(out.label_to, counts, 1);
    const auto labels = comm_.alltoallv<std::int64_t>(flat_labels, counts);

    const bool first = pipe_rank_ == first_rank, last = pipe_rank_ == last_rank;
    const std::int64_t eval_n = eval.end - eval_begin_;
    if (first) store_input_rows(slots, feats, train.shard, eval_n, width);
    if (last) store_labels(label_slots, labels, train.shard, eval_n);
  }

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
  TrainPlacement place_train_rows(std::vector<NodeId> train_ids) {
    const int D = popts_.data_parallel;
    const std::vector<std::int64_t> perm = shuffled_positions(num_train_, options_.seed);
    const std::int64_t B = popts_.batch_size;
    num_batches_ = static_cast<int>((num_train_ + B - 1) / B);
    batch_rows_.resize(static_cast<std::size_t>(num_batches_));
    batch_begin_.resize(static_cast<std::size_t>(num_batches_));
    TrainPlacement train;
    train.group_of_position.resize(static_cast<std::size_t>(num_train_));
    train.local_of_position.resize(static_cast<std::size_t>(num_train_));
    std::vector<std::int64_t> group_size(static_cast<std::size_t>(D), 0);
    for (int b = 0; b < num_batches_; ++b) {
      batch_rows_[b] = std::min(B, num_train_ - static_cast<std::int64_t>(b) * B);
      for (int g = 0; g < D; ++g) {
        const auto [lo, hi] = batch_share(b, g);
        if (g == group_) batch_begin_[b] = group_size[g];
        for (std::int64_t p = lo; p < hi; ++p) {
          train.group_of_position[p] = g;
          train.local_of_position[p] = group_size[g]++;
        }
      }
    }
    shard_ids_.resize(static_cast<std::size_t>(group_size[group_]));
    for (std::int64_t p = 0; p < num_train_; ++p)
      if (train.group_of_position[p] == group_)
        shard_ids_[train.local_of_position[p]] = train_ids[perm[p]];
    train.position_of_sorted.resize(static_cast<std::size_t>(num_train_));
    for (std::int64_t p = 0; p < num_train_; ++p)
      train.position_of_sorted[perm[p]] = p;
    train.shard = group_size[group_];
    train.ids = std::move(train_ids);
    return train;
  }

  // Every rank's evaluation rows, sorted, and this group's share of them: fills split_sizes_,
  // eval_begin_, eval_ids_ and the evaluation batches. Collective.
  EvalPlacement place_eval_rows(const std::vector<NodeId>& my_eval,
                                const std::vector<std::uint8_t>& my_eval_split) {
    const int D = popts_.data_parallel;
    EvalPlacement eval;
    eval.ids = gather_all(comm_, my_eval);
    eval.split = gather_all(comm_, my_eval_split);
    sort_by_id_and_split(eval.ids, eval.split);
    const auto num_eval = static_cast<std::int64_t>(eval.ids.size());
    for (int s = 0; s < 3; ++s)
      split_sizes_[s] = std::count(eval.split.begin(), eval.split.end(), s);
    eval_begin_ = num_eval * group_ / D;
    eval.end = num_eval * (group_ + 1) / D;
    eval_ids_.assign(eval.ids.begin() + eval_begin_, eval.ids.begin() + eval.end);
    // Evaluation keeps no activations for a backward: larger batches, fewer messages.
    eval_batch_ = std::max<std::int64_t>(popts_.batch_size, kEvalBatchRows);
    eval_batches_ = static_cast<int>((eval.end - eval_begin_ + eval_batch_ - 1) / eval_batch_);
    return eval;
  }

  // Labels travel as (label + 1) * 4 + split so unlabeled (-1) rows stay non-negative.
  void add_row(RowsToSend& out, LocalId v, int g, std::int64_t slot, int split) const {
    const int S = popts_.stages;
    const std::int64_t width = out.width;
    const int dst = g * S + out.first_rank, lab = g * S + out.last_rank;
    out.slot_to[dst].push_back(slot);
    out.feat_to[dst].insert(out.feat_to[dst].end(), hop_features_.begin() + v * width,
                            hop_features_.begin() + (v + 1) * width);
    out.label_slot_to[lab].push_back(slot);
    out.label_to[lab].push_back((part_.labels[v] + 1) * 4 + split);
  }

  // Training rows: slot = local shard index; evaluation rows: slot = -1 - index in the
  // group's evaluation share, with the split in the label's low bits.
  RowsToSend rows_to_send(const TrainPlacement& train, const EvalPlacement& eval,
                          std::int64_t width) const {
    const int D = popts_.data_parallel;
    RowsToSend out(comm_.size(), width, schedule_.stage_rank.front(), schedule_.stage_rank.back());
    for (LocalId v : part_.train) {
      const auto sorted = std::lower_bound(train.ids.begin(), train.ids.end(), part_.orig_id[v]) -
                          train.ids.begin();
      const std::int64_t p = train.position_of_sorted[sorted];
      add_row(out, v, train.group_of_position[p], train.local_of_position[p], 0);
    }
    const auto num_eval = static_cast<std::int64_t>(eval.ids.size());
    const auto lists = split_lists();
    for (int s = 0; s < 3; ++s)
      for (LocalId v : *lists[s]) {
        const std::pair<NodeId, std::uint8_t> key_here{part_.orig_id[v],
                                                       static_cast<std::uint8_t>(s)};
        std::int64_t lo = 0, hi = num_eval;
        while (lo < hi) { // position of (id, split) in the sorted evaluation list
          const std::int64_t mid = (lo + hi) / 2;
          if (std::pair{eval.ids[mid], eval.split[mid]} < key_here)
            lo = mid + 1;
          else
            hi = mid;
        }
        int g = 0;
        while (g + 1 < D && lo >= num_eval * (g + 1) / D)
          ++g;
        add_row(out, v, g, -1 - (lo - num_eval * g / D), s);
      }
    return out;
  }

  // The first stage's rows: training rows into train_x_, evaluation rows into eval_x_.
  void store_input_rows(std::span<const std::int64_t> slots, std::span<const float> feats,
                        std::int64_t shard, std::int64_t eval_n, std::int64_t width) {
    train_x_ = Tensor::empty({shard, width}, DType::f32);
    eval_x_ = Tensor::empty({eval_n, width}, DType::f32);
    for (std::size_t i = 0; i < slots.size(); ++i) {
      const std::int64_t slot = slots[i];
      float* row = slot >= 0 ? train_x_.data<float>() + slot * width
                             : eval_x_.data<float>() + (-1 - slot) * width;
      std::copy_n(feats.data() + i * width, width, row);
    }
    TESSEL_ASSERT(static_cast<std::int64_t>(slots.size()) == shard + eval_n,
                  "pipeline: first stage got {} rows, expected {}", slots.size(), shard + eval_n);
  }

  // The last stage's labels (checked) and the evaluation rows' splits.
  void store_labels(std::span<const std::int64_t> label_slots, std::span<const std::int64_t> labels,
                    std::int64_t shard, std::int64_t eval_n) {
    train_labels_.assign(static_cast<std::size_t>(shard), -1);
    eval_labels_.assign(static_cast<std::size_t>(eval_n), -1);
    eval_split_.assign(static_cast<std::size_t>(eval_n), 0);
    for (std::size_t i = 0; i < label_slots.size(); ++i) {
      const std::int64_t slot = label_slots[i];
      const std::int64_t label = labels[i] / 4 - 1;
      if (slot >= 0) {
        train_labels_[slot] = label;
      } else {
        eval_labels_[-1 - slot] = label;
        eval_split_[-1 - slot] = static_cast<std::uint8_t>(labels[i] % 4);
      }
    }
    for (std::int64_t l : train_labels_)
      TESSEL_EXPECTS(l >= 0 && l < manifest_.num_classes,
                     "{}: a training node has label {}, expected 0..{}", options_.part_dir.string(),
                     l, manifest_.num_classes - 1);
  }

  int tag(int micro, int stage, bool gradient) const {
    return ((micro * schedule_.stages) + stage) * 2 + (gradient ? 1 : 0);
  }
  int peer_world(int pipe_rank) const { return group_ * popts_.stages + pipe_rank; }

  // Runs this rank's actions of one schedule over one mini-batch. rows_of(i): the micro-batch's
  // rows in the group's shard; input: the first stage's rows; labels: the last stage's.
  // Returns the loss sum (training) and adds correct counts (evaluation).
  double run_schedule(const dist::Schedule& schedule, std::int64_t batch_begin, std::int64_t batch_rows,
                      const Tensor& input, std::span<const NodeId> ids,
                      std::span<const std::int64_t> labels, std::span<const std::uint8_t> splits,
                      double loss_scale, const rng::Key& dropout_key, bool training,
                      EpochStats& stats, std::int64_t* correct) {
    const int m = schedule.micro_batches, n = schedule.stages;
    auto micro = [&](int i) {
      return Micro{batch_begin + batch_rows * i / m, batch_begin + batch_rows * (i + 1) / m};
    };
    const std::size_t slots = static_cast<std::size_t>(m * n);
    std::vector<Tensor> arrived(slots), produced(slots), grad_arrived(slots), grad_produced(slots);
    std::vector<std::vector<nn::SignMlp::Saved>> saved(slots);
    auto at = [n](int i, int s) { return static_cast<std::size_t>(i * n + s); };
    double loss_sum = 0;
    const auto start = Clock::now();
    const auto& actions = schedule.actions[pipe_rank_];
    for (std::size_t a = 0; a < actions.size(); ++a) {
      const dist::Action& act = actions[a];
      const Micro mb = micro(act.micro);
      const std::int64_t rows = mb.rows();
      const std::size_t k = at(act.micro, act.stage);
      const int b0 = stage_begin_[act.stage], b1 = stage_begin_[act.stage + 1];
      const auto t0 = Clock::now();
      const double cpu0 = process_cpu_seconds();
      const std::span<const NodeId> micro_ids =
          ids.subspan(static_cast<std::size_t>(mb.begin), static_cast<std::size_t>(rows));
      switch (act.kind) {
      case dist::ActionKind::forward: {
        Tensor x;
        if (act.stage == 0) {
          x = input.rows_slice(mb.begin, mb.end);
        } else if (schedule.stage_rank[act.stage - 1] == pipe_rank_) {
          x = std::move(produced[at(act.micro, act.stage - 1)]);
        } else {
          x = std::move(arrived[k]);
        }
        saved[k].resize(static_cast<std::size_t>(b1 - b0));
        for (int blk = b0; blk < b1; ++blk) {
          if (rows == 0) {
            x = Tensor::empty({0, model_.block_out_dim(blk)}, DType::f32);
            continue;
          }
          x = model_.forward(blk, x, micro_ids, dropout_key, training, saved[k][blk - b0]);
        }
        if (act.stage == n - 1) {
          std::vector<LocalId> local(static_cast<std::size_t>(rows));
          std::iota(local.begin(), local.end(), 0);
          const auto micro_labels =
              labels.subspan(static_cast<std::size_t>(mb.begin), static_cast<std::size_t>(rows));
          if (training) {
            if (rows > 0) {
              const nn::LossResult loss =
                  nn::softmax_cross_entropy(x, local, micro_labels, loss_scale);
              loss_sum += loss.loss_sum;
              grad_arrived[k] = loss.grad;
            } else {
              grad_arrived[k] = Tensor::empty({0, model_.block_out_dim(b1 - 1)}, DType::f32);
            }
          } else {
            for (std::int64_t r = 0; r < rows; ++r) {
              const float* row = x.data<float>() + r * x.cols();
              const std::int64_t predicted = std::max_element(row, row + x.cols()) - row;
              correct[splits[mb.begin + r]] += predicted == micro_labels[r];
            }
          }
        } else {
          produced[k] = std::move(x);
        }
        break;
      }
      case dist::ActionKind::backward: {
        Tensor g = act.stage + 1 < n && schedule.stage_rank[act.stage + 1] == pipe_rank_
                       ? std::move(grad_produced[at(act.micro, act.stage + 1)])
                       : std::move(grad_arrived[k]);
        for (int blk = b1 - 1; blk >= b0; --blk) {
          const bool need = blk > 0;
          if (rows == 0) {
            g = Tensor::empty({0, model_.block_in_dim(blk)}, DType::f32);
            continue;
          }
          g = model_.backward(blk, g, saved[k][blk - b0], need);
        }
        saved[k].clear(); // activations of this micro-batch are no longer needed
        if (act.stage > 0) grad_produced[k] = std::move(g);
        break;
      }
      case dist::ActionKind::send_activation:
      case dist::ActionKind::send_gradient: {
        const bool grad = act.kind == dist::ActionKind::send_gradient;
        Tensor& t = grad ? grad_produced[k] : produced[k];
        comm_.send(t.data<float>(), t.numel(), DType::f32, peer_world(act.peer),
                   tag(act.micro, act.stage, grad));
        stats.bytes += t.numel() * 4;
        t = Tensor();
        break;
      }
      case dist::ActionKind::recv_activation: {
        arrived[k] = Tensor::empty({rows, model_.block_in_dim(b0)}, DType::f32);
        comm_.recv(arrived[k].data<float>(), arrived[k].numel(), DType::f32, peer_world(act.peer),
                   tag(act.micro, act.stage - 1, false));
        break;
      }
      case dist::ActionKind::recv_gradient: {
        grad_arrived[k] = Tensor::empty({rows, model_.block_out_dim(b1 - 1)}, DType::f32);
        comm_.recv(grad_arrived[k].data<float>(), grad_arrived[k].numel(), DType::f32,
                   peer_world(act.peer), tag(act.micro, act.stage + 1, true));
        break;
      }
      }
      const double dt = since(t0);
      if (act.kind == dist::ActionKind::forward || act.kind == dist::ActionKind::backward) {
        stats.busy += dt;
        // The replay's costs are CPU seconds: a rank that waited for a core it shares with
        // other processes did the same work, and the schedule's bubble is about the work.
        if (a < stats.action_seconds.size())
          stats.action_seconds[a] += process_cpu_seconds() - cpu0;
      }
    }
    stats.wall += since(start);
    return loss_sum;
  }

  double run_batch(int b, int epoch, bool training, EpochStats& stats) {
    const rng::Key dropout_key{options_.seed, rng::Stream::dropout,
                               static_cast<std::uint32_t>(epoch), static_cast<std::uint32_t>(b), 0};
    const std::int64_t begin = batch_begin_[b];
    const std::int64_t rows = b + 1 < num_batches_
                                  ? batch_begin_[b + 1] - begin
                                  : static_cast<std::int64_t>(shard_ids_.size()) - begin;
    return run_schedule(schedule_, begin, rows, train_x_, shard_ids_, train_labels_, {},
                        1.0 / static_cast<double>(batch_rows_[b]), dropout_key, training, stats,
                        nullptr);
  }

  void run_eval_batch(int b, EpochStats& stats, std::int64_t* correct) {
    const std::int64_t B = eval_batch_, total = static_cast<std::int64_t>(eval_ids_.size());
    const std::int64_t begin = b * B, rows = std::min(B, total - begin);
    run_schedule(eval_schedule_, begin, rows, eval_x_, eval_ids_, eval_labels_, eval_split_, 1.0,
                 rng::Key{}, false, stats, correct);
  }

  void allreduce_stage_gradients() {
    if (stage_comm_->size() == 1) return;
    std::int64_t total = 0;
    for (const nn::Parameter* p : my_params_)
      total += p->grad.numel();
    flat_grad_.resize(static_cast<std::size_t>(total));
    std::int64_t at = 0;
    for (const nn::Parameter* p : my_params_) {
      std::copy_n(p->grad.data<float>(), p->grad.numel(), flat_grad_.data() + at);
      at += p->grad.numel();
    }
    stage_comm_->allreduce(std::span<float>(flat_grad_));
    at = 0;
    for (nn::Parameter* p : my_params_) {
      std::copy_n(flat_grad_.data() + at, p->grad.numel(), p->grad.data<float>());
      at += p->grad.numel();
    }
  }

  struct Replay {
    double bubble = 0;
    std::vector<double> forward, backward; // [stages] the cost of one micro-batch on each stage
  };

  // The bubble of group 0's schedule replayed with the CPU seconds its actions took this epoch
  // (messages free; the median per rank, action kind and stage): what the schedule costs with
  // these stage times, without the noise of ranks that wait for cores they share. Rank 0 gets
  // the numbers; the others return zeros.
  Replay replay_bubble(const std::vector<double>& seconds) {
    std::vector<std::int64_t> counts(static_cast<std::size_t>(comm_.size()), 0);
    if (group_ == 0) counts[0] = static_cast<std::int64_t>(seconds.size());
    const auto all = comm_.alltoallv<double>(
        group_ == 0 ? std::span<const double>(seconds) : std::span<const double>(), counts);
    Replay out;
    out.forward.assign(static_cast<std::size_t>(schedule_.stages), 0.0);
    out.backward = out.forward;
    if (comm_.rank() != 0) return out;
    std::vector<std::size_t> offset(static_cast<std::size_t>(popts_.stages) + 1, 0);
    for (int r = 0; r < popts_.stages; ++r)
      offset[r + 1] = offset[r] + schedule_.actions[r].size();
    // Each action costs the median of the measured seconds of its rank's actions of the same
    // kind and stage: a micro-batch's forward (or backward) on one stage is the same work every
    // time, and the median drops the few actions a rank spent waiting for a core it shares.
    std::map<std::tuple<int, int, int>, double> median;
    for (int r = 0; r < popts_.stages; ++r) {
      std::map<std::tuple<int, int, int>, std::vector<double>> samples;
      for (std::size_t i = 0; i < schedule_.actions[r].size(); ++i) {
        const dist::Action& a = schedule_.actions[r][i];
        samples[{r, static_cast<int>(a.kind), a.stage}].push_back(all[offset[r] + i]);
      }
      for (auto& [key, v] : samples)
        median[key] = median_of(v);
    }
    // A stage runs on one rank, so its cost is that rank's median.
    for (const auto& [key, value] : median) {
      const auto [r, kind, stage] = key;
      if (kind == static_cast<int>(dist::ActionKind::forward)) out.forward[stage] = value;
      if (kind == static_cast<int>(dist::ActionKind::backward)) out.backward[stage] = value;
    }
    const dist::SimulationResult sim = dist::simulate(schedule_, [&](int r, std::size_t i) {
      const dist::Action& a = schedule_.actions[r][i];
      return median.at({r, static_cast<int>(a.kind), a.stage});
    });
    out.bubble = sim.ok ? sim.bubble : -1.0;
    return out;
  }

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
  void calibrate_stage_costs() {
    const int n = schedule_.stages, m = popts_.micro_batches, D = popts_.data_parallel;
    const std::int64_t largest = *std::max_element(batch_rows_.begin(), batch_rows_.end());
    // One micro-batch of the largest mini-batch's shard, capped so that big runs spend little
    // time here (the costs grow linearly in rows above a few hundred).
    const std::int64_t rows = std::clamp<std::int64_t>(largest / (D * m), 1, 2048);
    std::vector<NodeId> ids(static_cast<std::size_t>(rows));
    std::iota(ids.begin(), ids.end(), 0);
    std::vector<LocalId> local(static_cast<std::size_t>(rows));
    std::iota(local.begin(), local.end(), 0);
    const std::vector<std::int64_t> labels(static_cast<std::size_t>(rows), 0);
    const rng::Key key{options_.seed, rng::Stream::dropout, 0xffffffffu, 0, 0};
    std::vector<std::vector<double>> fwd(static_cast<std::size_t>(n)), bwd(fwd.size());
    // A first round that is not counted, then at least kMinRounds rounds and kMinSeconds of work,
    // so that small models get enough samples; at most kMaxRounds.
    constexpr int kMinRounds = 8, kMaxRounds = 400;
    constexpr double kMinSeconds = 0.05;
    double spent = 0;
    for (int round = 0; round < kMaxRounds && (round <= kMinRounds || spent < kMinSeconds);
         ++round) {
      for (int s = 0; s < n; ++s) {
        const int b0 = stage_begin_[s], b1 = stage_begin_[s + 1];
        std::vector<nn::SignMlp::Saved> saved(static_cast<std::size_t>(b1 - b0));
        // The input and the output gradient exist before the actions start, as in a run.
        Tensor x = Tensor::zeros({rows, model_.block_in_dim(b0)}, DType::f32);
        Tensor g = Tensor::zeros({rows, model_.block_out_dim(b1 - 1)}, DType::f32);
        const double t0 = process_cpu_seconds();
        for (int blk = b0; blk < b1; ++blk)
          x = model_.forward(blk, x, ids, key, true, saved[blk - b0]);
        if (s == n - 1) // the last stage's forward computes the loss and its gradient
          g = nn::softmax_cross_entropy(x, local, labels, 1.0 / static_cast<double>(rows)).grad;
        const double t1 = process_cpu_seconds();
        for (int blk = b1 - 1; blk >= b0; --blk)
          g = model_.backward(blk, g, saved[blk - b0], blk > 0);
        const double t2 = process_cpu_seconds();
        if (round == 0) continue; // first use: allocations and kernel set-up
        fwd[s].push_back(t1 - t0);
        bwd[s].push_back(t2 - t1);
        spent += t2 - t0;
      }
    }
    model_.zero_grad(0, model_.num_blocks());
    std::vector<double> costs(static_cast<std::size_t>(2 * n));
    for (int s = 0; s < n; ++s) {
      costs[s] = median_of(fwd[s]);
      costs[n + s] = median_of(bwd[s]);
    }
    comm_.allreduce(std::span<double>(costs));
    for (double& c : costs)
      c /= comm_.size();
    calibrated_forward_.assign(costs.begin(), costs.begin() + n);
    calibrated_backward_.assign(costs.begin() + n, costs.end());
    const dist::SimulationResult sim = dist::simulate(schedule_, [&](int r, std::size_t i) {
      const dist::Action& a = schedule_.actions[r][i];
      return (a.kind == dist::ActionKind::forward ? calibrated_forward_ : calibrated_backward_)[a.stage];
    });
    calibrated_bubble_ = sim.ok ? sim.bubble : -1.0;
  }

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

} // namespace

void check_pipeline_options(const TrainOptions& options, int ranks) {
  const PipelineOptions& p = options.pipeline;
  const int S = p.stages, D = p.data_parallel;
  TESSEL_EXPECTS(options.model.kind == nn::ModelKind::sign_mlp,
                 "--mode pipeline trains --model sign-mlp, not {}", options.model.kind);
  TESSEL_EXPECTS(S >= 1 && D >= 1 && S * D == ranks,
                 "--data-parallel {} x --stages {} = {} ranks, but {} are running", D, S, S * D,
                 ranks);
  TESSEL_EXPECTS(p.micro_batches >= 1, "--micro-batches {} must be >= 1", p.micro_batches);
  TESSEL_EXPECTS(p.batch_size >= 1, "--batch-size {} must be >= 1", p.batch_size);
  const int blocks = p.mlp_layers + 1;  // the hop maps, then each MLP layer
  const int stages = dist::stages_for(p.schedule, S);
  TESSEL_EXPECTS(blocks >= stages,
                 "the model has {} blocks (hop maps + {} MLP layers) but the {} schedule on {} "
                 "ranks needs {} stages: raise --mlp-layers",
                 blocks, p.mlp_layers, option_word(p.schedule), S, stages);
  if (!p.split.empty()) check_split(p.split, blocks, stages);
}

std::unique_ptr<Trainer> make_pipeline_trainer(TrainerContext context) {
  return std::make_unique<PipelineTrainer>(context);
}

RunInfo pipeline_run_info(const Trainer& trainer, const TrainerContext& context) {
  RunInfo info = graph_run_info(trainer, context);
  info.own_comms.push_back(static_cast<const PipelineTrainer&>(trainer).stage_comm());
  return info;
}

} // namespace tessel::train
