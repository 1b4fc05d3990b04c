// Pipeline mode: a SIGN MLP over precomputed hop features, its blocks cut into stages on
// different ranks, micro-batches run by a GPipe, 1F1B or wave schedule; data x pipeline parallel.
#include "pipeline_trainer.hpp"

#include "mode_entries.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/dist/precompute.hpp"
#include "tessel/nn/loss.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>

namespace tessel::train {
namespace {

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

} // namespace

namespace pipeline_mode {

PipelineTrainer::PipelineTrainer(TrainerContext ctx)
    : comm_(ctx.comm), options_(ctx.options), popts_(ctx.options.mode_options.get<PipelineOptions>()), manifest_(ctx.manifest),
      part_(ctx.part), model_(model_config(ctx)),
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
            D, S, option_word(popts_.schedule), popts_.micro_batches, split_text(),
            calibrated_bubble_);
}

void PipelineTrainer::gather_parameters() {
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

double PipelineTrainer::train_epoch(int epoch, PhaseTimes& phases, nlohmann::json& extra) {
  Stopwatch epoch_watch;
  // The order of the mini-batches changes every epoch; their rows do not (each group's
  // shard of every mini-batch was sent to its first stage once).
  std::vector<int> order(static_cast<std::size_t>(num_batches_));
  std::iota(order.begin(), order.end(), 0);
  const rng::Key shuffle{options_.seed, rng::Stream::shuffle, static_cast<std::uint32_t>(epoch), 1,
                         0};
  for (int i = num_batches_ - 1; i > 0; --i)
    std::swap(
        order[i],
        order[shuffle.below(static_cast<std::uint64_t>(i), 0, static_cast<std::uint64_t>(i) + 1)]);
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

Accuracy PipelineTrainer::evaluate(PhaseTimes& phases) {
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

void PipelineTrainer::write_outputs(const OutputFiles& files) {
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
    write_embeddings_file(
        comm_, part_, hidden,
        fmt::format("SIGN MLP block {} (blocks 0..{}), after its ReLU", last - 1, last),
        files.embeddings);
}

void PipelineTrainer::choose_split() {
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

} // namespace pipeline_mode

void check_pipeline_options(const TrainOptions& options, int ranks) {
  const PipelineOptions& p = options.mode_options.get<PipelineOptions>();
  const int S = p.stages, D = p.data_parallel;
  TESSEL_EXPECTS(options.model.kind == nn::ModelKind::sign_mlp,
                 "--mode pipeline trains --model sign-mlp, not {}", options.model.kind);
  TESSEL_EXPECTS(S >= 1 && D >= 1 && S * D == ranks,
                 "--data-parallel {} x --stages {} = {} ranks, but {} are running", D, S, S * D,
                 ranks);
  TESSEL_EXPECTS(p.micro_batches >= 1, "--micro-batches {} must be >= 1", p.micro_batches);
  TESSEL_EXPECTS(p.batch_size >= 1, "--batch-size {} must be >= 1", p.batch_size);
  const int blocks = p.mlp_layers + 1; // the hop maps, then each MLP layer
  const int stages = dist::stages_for(p.schedule, S);
  TESSEL_EXPECTS(blocks >= stages,
                 "the model has {} blocks (hop maps + {} MLP layers) but the {} schedule on {} "
                 "ranks needs {} stages: raise --mlp-layers",
                 blocks, p.mlp_layers, option_word(p.schedule), S, stages);
  if (!p.split.empty()) check_split(p.split, blocks, stages);
}

std::unique_ptr<Trainer> make_pipeline_trainer(TrainerContext context) {
  return std::make_unique<pipeline_mode::PipelineTrainer>(context);
}

RunInfo pipeline_run_info(const Trainer& trainer, const TrainerContext& context) {
  const PipelineOptions& p = context.options.mode_options.get<PipelineOptions>();
  RunInfo info = graph_run_info_with(
      context, {{"hops", p.hops}, {"mlp_layers", p.mlp_layers}, {"operator", option_word(p.op)}},
      p.mlp_layers);
  info.own_comms.push_back(
      static_cast<const pipeline_mode::PipelineTrainer&>(trainer).stage_comm());
  return info;
}

} // namespace tessel::train
