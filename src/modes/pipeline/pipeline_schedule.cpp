// Pipeline mode: running one schedule's actions over a mini-batch (forward, backward, sends and
// receives of activations and gradients), the data-parallel gradient all-reduce, and the replays
// of the schedule with measured and calibrated stage costs.
#include "pipeline_trainer.hpp"

#include "tessel/nn/loss.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>
#include <tuple>

namespace tessel::train::pipeline_mode {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}
} // namespace

double PipelineTrainer::run_schedule(const dist::Schedule& schedule, std::int64_t batch_begin,
                                     std::int64_t batch_rows, const Tensor& input,
                                     std::span<const NodeId> ids,
                                     std::span<const std::int64_t> labels,
                                     std::span<const std::uint8_t> splits, double loss_scale,
                                     const rng::Key& dropout_key, bool training, EpochStats& stats,
                                     std::int64_t* correct) {
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
      if (a < stats.action_seconds.size()) stats.action_seconds[a] += process_cpu_seconds() - cpu0;
    }
  }
  stats.wall += since(start);
  return loss_sum;
}

double PipelineTrainer::run_batch(int b, int epoch, bool training, EpochStats& stats) {
  const rng::Key dropout_key{options_.seed, rng::Stream::dropout, static_cast<std::uint32_t>(epoch),
                             static_cast<std::uint32_t>(b), 0};
  const std::int64_t begin = batch_begin_[b];
  const std::int64_t rows = b + 1 < num_batches_
                                ? batch_begin_[b + 1] - begin
                                : static_cast<std::int64_t>(shard_ids_.size()) - begin;
  return run_schedule(schedule_, begin, rows, train_x_, shard_ids_, train_labels_, {},
                      1.0 / static_cast<double>(batch_rows_[b]), dropout_key, training, stats,
                      nullptr);
}

void PipelineTrainer::run_eval_batch(int b, EpochStats& stats, std::int64_t* correct) {
  const std::int64_t B = eval_batch_, total = static_cast<std::int64_t>(eval_ids_.size());
  const std::int64_t begin = b * B, rows = std::min(B, total - begin);
  run_schedule(eval_schedule_, begin, rows, eval_x_, eval_ids_, eval_labels_, eval_split_, 1.0,
               rng::Key{}, false, stats, correct);
}

void PipelineTrainer::allreduce_stage_gradients() {
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

PipelineTrainer::Replay PipelineTrainer::replay_bubble(const std::vector<double>& seconds) {
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

void PipelineTrainer::calibrate_stage_costs() {
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
  for (int round = 0; round < kMaxRounds && (round <= kMinRounds || spent < kMinSeconds); ++round) {
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
    return (a.kind == dist::ActionKind::forward ? calibrated_forward_
                                                : calibrated_backward_)[a.stage];
  });
  calibrated_bubble_ = sim.ok ? sim.bubble : -1.0;
}

} // namespace tessel::train::pipeline_mode
