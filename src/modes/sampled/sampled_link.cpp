// Sampled mode's --task link: each rank's training edges in steps drawn from (seed, epoch, edge
// id), their negatives, the neighbourhoods of every endpoint sampled, the encoder on the blocks
// and the decoder on the pairs.
#include "sampled_trainer.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/progress.hpp"
#include "tessel/core/rng.hpp"

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace tessel::train {

// rank: an endpoint of a training edge or a negative may be any node). Collective.
void SampledTrainer::setup_link() {
  TESSEL_EXPECTS(!path_.device_graph && depth_ == 0,
                 "--task link in sampled mode runs on the CPU's host path: --device cuda, "
                 "--sample-routing device and --prefetch are not supported with it");
  link_ = std::make_unique<LinkScorer>(comm_, options_, manifest_, part_);
  global_of_orig_.assign(static_cast<std::size_t>(manifest_.num_nodes), 0);
  for (std::int64_t i = 0; i < part_.num_owned; ++i)
    global_of_orig_[static_cast<std::size_t>(part_.orig_id[static_cast<std::size_t>(i)])] =
        part_.offset + i;
  // Exact: each entry is written by its owner alone, the other ranks add zeros.
  if (comm_.size() > 1) comm_.allreduce(std::span<NodeId>(global_of_orig_));
}

// One epoch of --task link: each training edge goes to the step drawn from (seed, epoch, its
// edge id), so a step's global batch of edges is the same set at any rank count, and each rank
// takes the edges it holds (their sources are its own). Returns the mean over the edges
// trained of the positive's loss plus the mean of its K negatives' losses.
double SampledTrainer::train_link_epoch(int epoch, PhaseTimes& phases, nlohmann::json& extra) {
  sampler_.reset_counters();
  if (owned_rows_) owned_rows_->reset_stats();
  const auto& ids = part_.link.pos_id[0];
  const std::int64_t global_batch = sampled().batch_size * comm_.size();
  const std::int64_t num_steps =
      std::max<std::int64_t>(1, (manifest_.link.pos[0] + global_batch - 1) / global_batch);
  std::vector<std::vector<std::int64_t>> step_edges(static_cast<std::size_t>(num_steps));
  const rng::Key shuffle{options_.seed, rng::Stream::shuffle, static_cast<std::uint32_t>(epoch),
                         1, 0};
  for (std::size_t i = 0; i < ids.size(); ++i)
    step_edges[shuffle.below(static_cast<std::uint64_t>(ids[i]), 0,
                             static_cast<std::uint64_t>(num_steps))]
        .push_back(static_cast<std::int64_t>(i));
  std::vector<std::int64_t> step_counts(static_cast<std::size_t>(num_steps));
  for (std::int64_t s = 0; s < num_steps; ++s) {
    auto& edges = step_edges[s];
    std::sort(edges.begin(), edges.end(), [&](auto a, auto b) { return ids[a] < ids[b]; });
    step_counts[s] = static_cast<std::int64_t>(edges.size());
  }
  {
    ScopedPhase t(phases, "communicate");
    comm_.allreduce(std::span<std::int64_t>(step_counts));
  }
  double loss_sum = 0;
  std::int64_t steps_run = 0, edges_run = 0;
  ProgressLine progress(fmt::format("epoch {}: step", epoch), num_steps);
  for (std::int64_t s = 0; s < num_steps; ++s) {
    if (step_counts[s] == 0) continue;
    if (sampled().max_steps > 0 && steps_run >= sampled().max_steps) break;
    if (progress.enabled()) progress.update(steps_run, sampling_rate(phases));
    loss_sum += run_link_step(epoch, static_cast<std::uint32_t>(s), step_edges[s],
                              step_counts[s], phases);
    ++steps_run;
    edges_run += step_counts[s];
  }
  progress.finish();
  {
    ScopedPhase t(phases, "communicate");
    loss_sum = comm_.allreduce_value(loss_sum);
  }
  report(extra, steps_run, phases);
  extra["task"] = "link";
  extra["negatives"] = options_.negatives;
  extra["train_edges"] = edges_run;
  link_edges_per_epoch_ = edges_run;
  return loss_sum / static_cast<double>(std::max<std::int64_t>(edges_run, 1));
}

// One step of --task link: this rank's edges of the step (rows of part_.link's training split),
// their K negatives each, the neighbourhoods of every endpoint sampled (owners draw for nodes
// of other ranks) and their rows fetched, the encoder on the blocks, the decoder on the
// pairs, backward; then the gradient all-reduce and the optimizer step. Returns this rank's
// sum of (positive loss + mean of its negatives' losses).
double SampledTrainer::run_link_step(int epoch, std::uint32_t step,
                                     const std::vector<std::int64_t>& edges,
                                     std::int64_t global_count, PhaseTimes& phases) {
  const int layers = options_.model.layers;
  const auto& pos = part_.link.pos[0];
  const auto& ids = part_.link.pos_id[0];
  const auto n = static_cast<std::int64_t>(edges.size());
  const std::int64_t k = options_.negatives;
  // Pairs in relabeled global ids: the positives, then K negatives of each.
  std::vector<NodeId> src(static_cast<std::size_t>(n * (1 + k))), dst(src.size());
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t e = edges[static_cast<std::size_t>(i)];
    src[i] = global_of_orig_[static_cast<std::size_t>(pos[2 * e])];
    dst[i] = global_of_orig_[static_cast<std::size_t>(pos[2 * e + 1])];
    for (std::int64_t j = 0; j < k; ++j) {
      src[n + i * k + j] = src[i];
      dst[n + i * k + j] =
          global_of_orig_[static_cast<std::size_t>(link_->negative_dst(epoch, ids[e], j))];
    }
  }
  // The step's seeds: every endpoint once, ascending.
  std::vector<NodeId> seeds(src);
  seeds.insert(seeds.end(), dst.begin(), dst.end());
  std::sort(seeds.begin(), seeds.end());
  seeds.erase(std::unique(seeds.begin(), seeds.end()), seeds.end());
  sampler_.sample_nodes(epoch, step, seeds, phases);
  const auto& blocks = sampler_.blocks();
  const Tensor x = sampler_.fetch_features(blocks[0].src, *owned_rows_, phases,
                                           row_dropout(epoch, step, sampler_.src_orig(0)));
  double loss_sum = 0;
  {
    ScopedPhase compute(phases, "compute");
    model_.zero_grad();
    link_->zero_grad();
    if (n > 0) {
      std::vector<nn::Aggregator*> aggs(static_cast<std::size_t>(layers));
      for (int l = 0; l < layers; ++l) {
        aggregators_[l].reset(blocks[l], sampler_.src_orig(l), sampler_.src_degree(l), device_);
        aggs[l] = &aggregators_[l];
      }
      const Tensor z = model_.forward(x, aggs, dropout_key(epoch, step), true,
                                      nn::Model::Input::dropped);
      auto row = [&](NodeId g) {
        return static_cast<LocalId>(std::lower_bound(seeds.begin(), seeds.end(), g) -
                                    seeds.begin());
      };
      std::vector<LocalId> src_row(src.size()), dst_row(dst.size());
      for (std::size_t i = 0; i < src.size(); ++i) {
        src_row[i] = row(src[i]);
        dst_row[i] = row(dst[i]);
      }
      // Scaled by the global batch: the all-reduced gradient is that of the mean loss over
      // every rank's edges of the step, as if one rank had them all.
      Tensor grad_z = Tensor::zeros({z.rows(), z.cols()}, DType::f32);
      const auto [pos_sum, neg_sum] = link_->loss(z, src_row, dst_row, n, k,
                                                  static_cast<double>(global_count), grad_z);
      model_.backward(grad_z);
      loss_sum = pos_sum + neg_sum / static_cast<double>(k);
    }
  }
  finish_step(phases);
  return loss_sum;
}

}  // namespace tessel::train
