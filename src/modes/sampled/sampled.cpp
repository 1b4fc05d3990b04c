// Sampled mode: mini-batches of each rank's own training nodes, sampled by the data-centric
// DistributedSampler, gradients all-reduced every step in lock-step; evaluation is full-neighbor.
// On a GPU the owners draw with the CUDA sampler and the model, loss and optimizer run there.
#include "link_task.hpp"
#include "mode_entries.hpp"
#include "sampled_trainer.hpp"
#include "tessel/train/graph_mode.hpp"
#include "tessel/modes/sampled.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/mpi.hpp"
#include "tessel/core/progress.hpp"
#include "tessel/core/spill.hpp"
#include "tessel/kernels/sparse.hpp"
#include "tessel/nn/aggregation_matrices.hpp"
#include "tessel/nn/loss.hpp"
#include "tessel/sampling/block.hpp"
#include "tessel/dist/distributed_sampler.hpp"

#include <algorithm>
#include <deque>
#include <functional>
#include <numeric>

namespace tessel::train {

void check_cache_admission(const SampledOptions& options, bool device_store) {
  TESSEL_EXPECTS(device_store || options.cache_admit_fraction == 0,
                 "--cache-admit-fraction {}: admission is a GPU feature store policy; the CPU's "
                 "cache is static (use --device cuda, leave it at 0, or take the GPU's path on "
                 "its CPU twins with --sample-routing device)",
                 options.cache_admit_fraction);
}

SampledTrainer::SampledTrainer(TrainerContext ctx)
    : GraphModeTrainer(ctx, ctx.runtime.device.is_cpu()),
      path_(choose_path(ctx)),
      depth_(own(ctx).prefetch >= 0 ? own(ctx).prefetch
                                    : (ctx.runtime.device.is_cuda() ? 1 : 0)),
      sampler_data_(path_.device_resident && depth_ > 0 ? make_sampler_data(ctx) : nullptr),
      sampler_(ctx.part, ctx.manifest, ctx.comm, ctx.options.seed, own(ctx).fanouts,
               own(ctx).batch_size,
               sampler_data_ ? sampler_data_.get() : ctx.runtime.data) {
  TESSEL_EXPECTS(static_cast<int>(sampled().fanouts.size()) == options_.model.layers,
                 "sampled mode: {} fanouts for {} layers", sampled().fanouts.size(),
                 options_.model.layers);
  blocks_inference_ = true;
  // On a GPU the blocks are sampled and kept there (sample_device, at any rank count) unless
  // --sample-routing host asks for the host path. The CPU keeps its host path (the device
  // graph's CPU twin only adds copies there) unless --sample-routing device asks for the GPU's
  // path on the CPU twins (device graph, block builder, routing ops, feature store): how the
  // trainer's device-resident path, prefetch queue included, is tested without a GPU.
  if (path_.device_graph) {
    sampler_.sample_on_device(device_, sampled().graph_placement);
    sampler_.route_on_host(!path_.device_resident);
  }
  // Prefetched steps of the device-resident path are sampled and gathered on the device's side
  // stream (see prepare()); without prefetch everything stays on the main stream as before.
  if (device_.is_cuda() && path_.device_resident && depth_ > 0)
    sampler_stream_ = device_memory::side_stream(device_);
  aggregators_.resize(static_cast<std::size_t>(options_.model.layers));
  sampling::CacheBudget budget;
  if (sampled().cache_size_mb > 0) budget.size_mb = sampled().cache_size_mb;
  else if (sampled().cache_ratio > 0) budget.ratio = sampled().cache_ratio;
  else if (device_.is_cuda() && sampled().cache_policy != sampling::CachePolicy::none)
    budget = default_device_budget();
  check_cache_admission(sampled(), path_.device_graph);
  budget.admit_fraction = sampled().cache_admit_fraction;
  // The device-resident path gathers from the tiered store (its CPU twin on the CPU).
  TESSEL_EXPECTS(!feature_rows_ || !path_.device_graph,
                 "--feature-memory {}: features read from the part file serve the CPU's host "
                 "path only (this run takes the GPU feature store's path); use --device cpu "
                 "without --sample-routing device, or --feature-memory all",
                 options_.feature_memory.text);
  owned_rows_ = feature_rows_ ? feature_rows_
                              : std::shared_ptr<sampling::OwnedFeatureRows>(
                                    sampling::rows_in_memory(part_.features, part_.feature_dim));
  any_out_of_core_ = comm_.allreduce_value<std::int64_t>(feature_rows_ ? 1 : 0) > 0;
  // The CPU at more than one rank, no size given, features in memory: a host cache of half
  // the rank's own feature bytes (sampling::kDefaultHostCacheFraction). The cache changes
  // where rows come from, never the results.
  if (!device_.is_cuda() && !path_.device_graph && comm_.size() > 1 && !any_out_of_core_ &&
      sampled().cache_size_mb <= 0 && sampled().cache_ratio <= 0 &&
      sampled().cache_policy != sampling::CachePolicy::none) {
    budget.size_mb = sampling::default_host_budget(part_.num_owned * part_.feature_dim *
                                                   static_cast<std::int64_t>(sizeof(float)))
                         .size_mb;
  }
  if (path_.device_graph)
    sampler_.setup_device_store(sampled().cache_policy, budget, device_);
  else
    sampler_.setup_cache(sampled().cache_policy, budget, *owned_rows_);
  if (link_task(options_)) setup_link();
}

// Neither --cache-size-mb nor --cache-ratio on a GPU: a share of the memory free now that the
// graph and the features are placed, divided among the ranks that share this GPU (the least
// free over those ranks, so they agree).
sampling::CacheBudget SampledTrainer::default_device_budget() {
  const auto device_of_rank = comm_.allgather_value<std::int64_t>(device_.index);
  const auto host_of_rank = comm_.allgather_value<std::int64_t>(
      static_cast<std::int64_t>(std::hash<std::string>{}(mpi::hostname())));
  const std::int64_t my_host = host_of_rank[static_cast<std::size_t>(comm_.rank())];
  std::int64_t sharing = 0;
  for (std::size_t r = 0; r < device_of_rank.size(); ++r)
    sharing += host_of_rank[r] == my_host && device_of_rank[r] == device_.index ? 1 : 0;
  const std::int64_t free_bytes = comm_.allreduce_value<std::int64_t>(
      device_memory::device_free_bytes(device_), comm::ReduceOp::min);
  const std::int64_t most_sharing =
      comm_.allreduce_value<std::int64_t>(sharing, comm::ReduceOp::max);
  const sampling::CacheBudget budget =
      sampling::default_device_budget(free_bytes / std::max<std::int64_t>(most_sharing, 1));
  log::info("device cache budget: {:.0f} MiB per rank, {} of the {:.0f} MiB of GPU memory free "
            "after placing the graph and features{} (neither --cache-size-mb nor --cache-ratio "
            "given)",
            budget.size_mb, sampling::kDefaultDeviceCacheFraction,
            static_cast<double>(free_bytes) / 1048576.0,
            most_sharing > 1 ? fmt::format(", divided among the {} ranks sharing a GPU",
                                           most_sharing)
                             : std::string());
  return budget;
}

double SampledTrainer::train_epoch(int epoch, PhaseTimes& phases, nlohmann::json& extra) {
  if (link_) return train_link_epoch(epoch, phases, extra);
  sampler_.reset_counters();
  if (owned_rows_) owned_rows_->reset_stats();
  std::vector<std::vector<LocalId>> step_seeds;
  std::vector<std::int64_t> step_counts;
  sampler_.assign_steps(epoch, step_seeds, step_counts, phases);
  // The steps to run: every rank skips an empty one alike, so no collective is left waiting;
  // --max-batches keeps the first N (benchmarks).
  std::vector<std::size_t> steps;
  std::int64_t seeds_run = 0;
  for (std::size_t s = 0; s < step_counts.size(); ++s) {
    if (step_counts[s] == 0) continue;
    if (sampled().max_steps > 0 &&
        static_cast<std::int64_t>(steps.size()) >= sampled().max_steps)
      break;
    steps.push_back(s);
    seeds_run += step_counts[s];
  }
  double loss_sum = 0;
  ProgressLine progress(fmt::format("epoch {}: step", epoch),
                        static_cast<std::int64_t>(steps.size()));
  if (path_.device_graph || sampled().prefetch > 0) {
    loss_sum = train_steps_queued(epoch, step_seeds, step_counts, steps, phases, progress);
  } else if (feature_rows_) {
    loss_sum = train_steps_reading_ahead(epoch, step_seeds, step_counts, steps, phases, progress);
  } else {
    for (std::size_t k = 0; k < steps.size(); ++k) {
      if (progress.enabled()) progress.update(static_cast<std::int64_t>(k), sampling_rate(phases));
      const std::size_t s = steps[k];
      loss_sum += run_step(epoch, static_cast<std::uint32_t>(s), step_seeds[s], step_counts[s],
                           phases);
    }
  }
  progress.finish();
  {
    ScopedPhase t(phases, "communicate");
    loss_sum = comm_.allreduce_value(loss_sum);
  }
  report(extra, static_cast<std::int64_t>(steps.size()), phases);
  // The mean over the seeds trained: all training nodes unless --max-batches cut the epoch.
  return loss_sum / static_cast<double>(std::max<std::int64_t>(seeds_run, 1));
}

// The encoder's parameters, then, with --task link, the decoder's (none for the dot product).
std::vector<nn::Parameter*> SampledTrainer::parameters() {
  std::vector<nn::Parameter*> params = model_.parameters();
  if (link_)
    for (nn::Parameter* p : link_->parameters()) params.push_back(p);
  return params;
}

// --task link: evaluation, outputs and the closing line as in full mode, from layer-wise
// inference of every owned node.
Accuracy SampledTrainer::evaluate(PhaseTimes& phases) {
  if (!link_) return GraphModeTrainer::evaluate(phases);
  PhaseTimes eval_phases;
  aggregator().set_phases(&eval_phases);
  Stopwatch watch;
  const Accuracy accuracy = link_->evaluate(infer_logits(nullptr), eval_phases);
  phases.add("eval", watch.seconds());
  return accuracy;
}

std::string SampledTrainer::finish(comm::Communicator& comm, const Runtime& runtime,
                                   TrainResult& result, nlohmann::json& summary) {
  const std::string line = Trainer::finish(comm, runtime, result, summary);
  if (!link_) return line;
  const std::string link_line = link_->finish_line(result, line);
  // The edges an epoch trains (fewer than the store's with --max-batches).
  if (result.link && link_edges_per_epoch_ > 0) result.link->train_edges = link_edges_per_epoch_;
  return link_line;
}

void SampledTrainer::write_outputs(const OutputFiles& files) {
  if (!link_) return GraphModeTrainer::write_outputs(files);
  if (files.predictions.empty() && files.embeddings.empty()) return;
  PhaseTimes ignored;
  aggregator().set_phases(&ignored);
  link_->write_outputs(files, infer_logits(nullptr));
}

// Copies the sampler's host blocks, with each layer's source ids and degrees, into the batch
// (the sampler reuses its own buffers for the next step).
void SampledTrainer::take_host_blocks(Batch& batch) {
  const auto layers = static_cast<std::size_t>(options_.model.layers);
  batch.blocks = sampler_.blocks();
  batch.src_orig.resize(layers);
  batch.src_degree.resize(layers);
  for (std::size_t l = 0; l < layers; ++l) {
    const int layer = static_cast<int>(l);
    batch.src_orig[l].assign(sampler_.src_orig(layer).begin(), sampler_.src_orig(layer).end());
    batch.src_degree[l].assign(sampler_.src_degree(layer).begin(),
                               sampler_.src_degree(layer).end());
  }
}

// One step on the CPU: sample, fetch, train, in that order.
double SampledTrainer::run_step(int epoch, std::uint32_t step, const std::vector<LocalId>& seeds,
                                std::int64_t global_count, PhaseTimes& phases) {
  const int layers = options_.model.layers;
  sampler_.sample(epoch, step, seeds, phases);
  const auto& blocks = sampler_.blocks();
  const Tensor x = sampler_.fetch_features(blocks[0].src, *owned_rows_, phases,
                                           row_dropout(epoch, step, sampler_.src_orig(0)));
  std::vector<std::span<const NodeId>> orig(static_cast<std::size_t>(layers));
  std::vector<std::span<const std::int64_t>> degree(static_cast<std::size_t>(layers));
  for (int l = 0; l < layers; ++l) {
    orig[l] = sampler_.src_orig(l);
    degree[l] = sampler_.src_degree(l);
  }
  ScopedPhase compute(phases, "compute");
  const double loss_sum = forward_backward(epoch, step, seeds, global_count, blocks, orig,
                                           degree, x, nn::Model::Input::dropped);
  finish_step(phases);
  return loss_sum;
}

// The CPU's host path with features out of core: step i + 1 is sampled before step i's compute
// and its owned rows' reads start then, on the reader's thread (read_ahead), so they overlap
// the compute; its gather after the optimizer step takes them from there. Sampling and input
// rows do not depend on the parameters, and the collectives come in the same order on every
// rank, so the results are those of run_step() bit for bit.
double SampledTrainer::train_steps_reading_ahead(
    int epoch, const std::vector<std::vector<LocalId>>& step_seeds,
    const std::vector<std::int64_t>& step_counts, const std::vector<std::size_t>& steps,
    PhaseTimes& phases, ProgressLine& progress) {
  const int layers = options_.model.layers;
  double loss_sum = 0;
  if (steps.empty()) return loss_sum;
  Batch current, next;
  auto sample = [&](std::size_t k, Batch& batch) {
    const std::size_t s = steps[k];
    batch.step = static_cast<std::uint32_t>(s);
    batch.global_count = step_counts[s];
    batch.seeds = &step_seeds[s];
    sampler_.sample(epoch, batch.step, step_seeds[s], phases);
    take_host_blocks(batch);
  };
  auto gather = [&](Batch& batch) {
    batch.x = sampler_.fetch_features(batch.blocks[0].src, *owned_rows_, phases,
                                      row_dropout(epoch, batch.step, batch.src_orig[0]));
    batch.input = nn::Model::Input::dropped;
  };
  std::vector<LocalId> owned;
  auto read_ahead = [&](const Batch& batch) {
    ScopedPhase t(phases, "fetch");
    owned.clear();
    const NodeId begin = part_.offset, end = part_.offset + part_.num_owned;
    for (const NodeId g : batch.blocks[0].src)
      if (g >= begin && g < end) owned.push_back(static_cast<LocalId>(g - begin));
    owned_rows_->read_ahead(owned);
  };
  sample(0, current);
  // The first step's rows come through the read-ahead too, so every step's rows are held once,
  // in the read-ahead's buffer (the reader's own buffer only takes what it did not cover).
  read_ahead(current);
  gather(current);
  for (std::size_t k = 0; k < steps.size(); ++k) {
    if (progress.enabled()) progress.update(static_cast<std::int64_t>(k), sampling_rate(phases));
    const bool more = k + 1 < steps.size();
    if (more) {
      sample(k + 1, next);
      read_ahead(next);
    }
    std::vector<std::span<const NodeId>> orig(static_cast<std::size_t>(layers));
    std::vector<std::span<const std::int64_t>> degree(static_cast<std::size_t>(layers));
    for (int l = 0; l < layers; ++l) {
      orig[l] = current.src_orig[l];
      degree[l] = current.src_degree[l];
    }
    {
      ScopedPhase compute(phases, "compute");
      loss_sum += forward_backward(epoch, current.step, *current.seeds, current.global_count,
                                   current.blocks, orig, degree, current.x, current.input);
    }
    finish_step(phases);
    if (more) {
      current = Batch();  // its input rows and blocks go before the next step's are gathered
      gather(next);
      current = std::move(next);
      next = Batch();
    }
  }
  return loss_sum;
}

// Samples a step and gathers its input rows (on the GPU from the feature store) into a Batch of
// its own. Collective.
void SampledTrainer::prepare(int epoch, std::uint32_t step, const std::vector<LocalId>& seeds,
                             std::int64_t global_count, PhaseTimes& phases, Batch& batch) {
  batch.step = step;
  batch.global_count = global_count;
  batch.seeds = &seeds;
  if (path_.device_resident) {
    // The blocks are built on the device and stay there (routed on the device at P > 1).
    // With prefetch on a GPU, all of it runs on the side stream: the sampler's and the
    // feature fetch's exchanges are given it (they cross the sampler's own communicator), and
    // every kernel, copy, fill and allocation of the sampler and the feature store, and their
    // host waits, follow it through the StreamScope those calls open on their stream argument
    // (the frontier ops, the device graph, the block builder, the feature store and Tensor
    // enqueue on device_memory::stream). This scope covers the lines between them (the blocks
    // moved out, the ready event). So the host waits only for the side stream while the
    // previous step's backward pass, all-reduce and optimizer step run on the main one.
    // The side stream reads only what nothing writes during training (the device graph, the
    // routing tables, the feature store's rows and cache, which only its own gathers admit
    // into; their setup on the main stream waits for its uploads before returning) and its
    // own buffers, so it never waits for the main stream. Without prefetch the stream is null:
    // the main stream.
    const DeviceStream sampler_stream{sampler_stream_};
    const device_memory::StreamScope on_sampler(device_, sampler_stream_);
    sampler_.sample_device(epoch, step, seeds, phases, sampler_stream);
    // Moved out: the sampler keeps no reference it could drop on its own stream while the main
    // stream still reads the blocks (see device_memory::stream). The batch's tensors are
    // released on the main stream after its compute, and the caching allocator reuses their
    // blocks only once both streams are past them.
    batch.device_blocks = sampler_.take_device_blocks();
    batch.x = sampler_.fetch_features_device(batch.device_blocks[0].src, phases, sampler_stream);
    batch.ready.record(device_);
    return;
  }
  sampler_.sample(epoch, step, seeds, phases);
  take_host_blocks(batch);
  if (device_.is_cuda()) {
    batch.x = sampler_.fetch_features_device(batch.blocks[0].src, phases, DeviceStream::main());
    batch.input = nn::Model::Input::scratch;
  } else {
    batch.x = sampler_.fetch_features(batch.blocks[0].src, *owned_rows_, phases,
                                      row_dropout(epoch, step, batch.src_orig[0]));
    batch.input = nn::Model::Input::dropped;
  }
}

// The steps of an epoch with `depth_` steps prefetched: once step i's backward pass is
// enqueued, the host samples and gathers steps up to i + depth_ (their kernels queue behind it,
// the sampler's on a stream of its own) before it all-reduces step i's gradients. Sampling and
// input rows do not depend on the parameters, so every depth gives the same draws and the same
// updates in the same order; every rank prepares and trains the same steps in the same order,
// so the collectives stay in lock-step. On the CPU (only with an explicit --prefetch, or on
// the device-resident path's CPU twins) nothing runs alongside, but the order is the same: the
// results are those of --prefetch 0, bit for bit.
//
// Where the blocks stay on a GPU (the device-resident path) and depth_ > 0, prepare() runs on
// the side stream: the host waits there for its counts while the main stream still runs step
// i's backward pass, and the main stream waits for a step's `ready` event (on the device, not
// the host) before its compute. The host-routed path samples with the device graph's own
// stream and gathers on the main stream, as before.
//
// What the phases measure: the host's exposed seconds. "sample" and "fetch" are the host's
// time in sampling and gathering (launches, the waits for counts on the sampler's stream,
// the control plane's MPI calls); with prefetch the GPU's sampling work overlaps the main
// stream's and is in none of them beyond those waits. "compute" is the host's time to enqueue
// forward and backward (it waits for the forward pass's loss) and the optimizer step;
// "communicate" includes the wait for the rest of the backward pass behind the all-reduce.
double SampledTrainer::train_steps_queued(int epoch,
                                          const std::vector<std::vector<LocalId>>& step_seeds,
                                          const std::vector<std::int64_t>& step_counts,
                                          const std::vector<std::size_t>& steps, PhaseTimes& phases,
                                          ProgressLine& progress) {
  const int depth = depth_;
  const int layers = options_.model.layers;
  std::deque<Batch> ready;
  std::size_t next = 0;
  auto fill = [&](std::size_t count) {
    while (ready.size() < count && next < steps.size()) {
      const std::size_t s = steps[next++];
      ready.emplace_back();
      prepare(epoch, static_cast<std::uint32_t>(s), step_seeds[s], step_counts[s], phases,
              ready.back());
    }
  };
  double loss_sum = 0;
  std::int64_t done = 0;
  fill(1);
  while (!ready.empty()) {
    if (progress.enabled()) progress.update(done, sampling_rate(phases));
    const Batch batch = std::move(ready.front());
    ready.pop_front();
    // Before anything of this step is enqueued on the main stream (and before the batch can be
    // released there): the main stream waits for the sampler's stream to finish the step.
    batch.ready.wait(device_);
    if (depth == 0) {
      ScopedPhase t(phases, "fetch");
      settle();
    }
    std::vector<std::span<const NodeId>> orig(static_cast<std::size_t>(layers));
    std::vector<std::span<const std::int64_t>> degree(static_cast<std::size_t>(layers));
    if (batch.device_blocks.empty())
      for (int l = 0; l < layers; ++l) {
        orig[l] = batch.src_orig[l];
        degree[l] = batch.src_degree[l];
      }
    {
      ScopedPhase compute(phases, "compute");
      loss_sum += forward_backward(epoch, batch.step, *batch.seeds, batch.global_count,
                                   batch.blocks, orig, degree, batch.x, batch.input,
                                   &batch.device_blocks);
      // Without prefetch the step's compute is timed whole. With it, device-resident steps are
      // sampled on the side stream, whose waits for counts do not sit behind this step's
      // kernels, so nothing is waited for here (the all-reduce's phase waits for the rest).
      if (depth == 0) settle();
    }
    fill(static_cast<std::size_t>(depth));
    finish_step(phases, true);
    if (depth == 0) fill(1);
    ++done;
  }
  return loss_sum;
}

// Forward, loss and backward of one step (gradients zeroed first); returns this rank's loss
// sum. A rank without seeds in the step only zeroes its gradients.
double SampledTrainer::forward_backward(
    int epoch, std::uint32_t step, const std::vector<LocalId>& seeds, std::int64_t global_count,
    const std::vector<sampling::Block>& blocks,
    const std::vector<std::span<const NodeId>>& src_orig,
    const std::vector<std::span<const std::int64_t>>& src_degree, const Tensor& x,
    nn::Model::Input input, const std::vector<sampling::BlockTensors>* device_blocks) {
  const int layers = options_.model.layers;
  model_.zero_grad();
  if (seeds.empty()) return 0;
  std::vector<nn::Aggregator*> aggs(static_cast<std::size_t>(layers));
  const bool on_device = device_blocks != nullptr && !device_blocks->empty();
  for (int l = 0; l < layers; ++l) {
    if (on_device)
      aggregators_[l].reset((*device_blocks)[l]);
    else
      aggregators_[l].reset(blocks[l], src_orig[l], src_degree[l], device_);
    aggs[l] = &aggregators_[l];
  }
  // x is the step's own gathered rows, read by nothing after the forward pass.
  const Tensor logits = model_.forward(x, aggs, dropout_key(epoch, step), true, input);
  std::vector<LocalId> rows(seeds.size());
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<std::int64_t> labels(seeds.size());
  for (std::size_t i = 0; i < seeds.size(); ++i) labels[i] = part_.labels[seeds[i]];
  // Scaled by the global batch: the all-reduced gradient is that of the mean loss over the
  // union of every rank's seeds, as if one rank had processed them all.
  const nn::LossResult loss =
      nn::softmax_cross_entropy(logits, rows, labels, 1.0 / static_cast<double>(global_count));
  model_.backward(loss.grad);
  return loss.loss_sum;
}

// The input dropout of a training step, applied while its rows are gathered (keyed by the
// layer-0 source ids, as the model would key it).
dist::RowDropout SampledTrainer::row_dropout(int epoch, std::uint32_t step,
                                             std::span<const NodeId> row_ids) const {
  const nn::Model::InputDropout d = model_.input_dropout(dropout_key(epoch, step), true);
  return {d.key, d.p, row_ids};
}

// The gradient all-reduce and the optimizer step; time_optimizer adds the optimizer's seconds
// to "compute" (for callers that do not time the whole step as compute).
void SampledTrainer::finish_step(PhaseTimes& phases, bool time_optimizer) {
  {
    ScopedPhase t(phases, "communicate");
    allreduce_gradients(data_, model_);
    if (link_) link_->allreduce_gradients();
    settle();
  }
  Stopwatch watch;
  optimizer_->step(parameters());
  settle();
  if (time_optimizer) phases.add("compute", watch.seconds());
}

SampledTrainer::SamplePath SampledTrainer::choose_path(const TrainerContext& ctx) {
  const SampleRouting routing = own(ctx).sample_routing;
  const bool cuda = ctx.runtime.device.is_cuda();
  const bool resident = cuda ? routing != SampleRouting::host : routing == SampleRouting::device;
  return {.device_graph = cuda || resident, .device_resident = resident};
}

// The prefetching device-resident sampler's exchanges get a communicator of their own: the data
// plane split with the same ranks in the same order (a second NCCL communicator, or a second
// MPI one). On the side stream its NCCL operations then never share a communicator with the
// main stream's gradient all-reduces: NCCL operations of one communicator that run at once
// must be issued in the same order on every rank, which two streams do not promise. Both
// communicators are still issued in the same program order on every rank (one host thread),
// so neither waits for an operation another rank issues later. Collective.
std::unique_ptr<comm::Communicator> SampledTrainer::make_sampler_data(const TrainerContext& ctx) {
  comm::Communicator& data = ctx.runtime.data ? *ctx.runtime.data : ctx.comm;
  return data.split(0, data.rank());
}

// This rank's sampling rate so far in the epoch, for the progress line.
std::string SampledTrainer::sampling_rate(const PhaseTimes& phases) const {
  const double seconds = phases.get("sample");
  const double edges = static_cast<double>(sampler_.counters().sampled_edges);
  return fmt::format("{:.1f} M sampled edges/s", seconds > 0 ? edges / seconds / 1e6 : 0.0);
}

// Per-epoch numbers summed over ranks: throughput, cache, and the bytes of the data-centric
// exchange against a model-centric run that pulls whole adjacency lists and every remote row.
void SampledTrainer::report(nlohmann::json& extra, std::int64_t steps_run,
                            const PhaseTimes& phases) {
  const dist::SamplerCounters& k = sampler_.counters();
  const std::int64_t f = part_.feature_dim;
  std::int64_t c[8] = {k.sampled_edges, k.sample_bytes,      k.answer_ids,   k.remote_adjacency,
                       k.input_rows,    k.remote_input_rows, k.fetched_rows, k.cache_hits};
  comm_.allreduce(std::span<std::int64_t>(c, 8));
  const double sample_s = comm_.allreduce_value(phases.get("sample"), comm::ReduceOp::max);
  const std::int64_t row_bytes = f * 4 + 8;  // the row plus the id that asked for it
  // Requests (an id each), replies (a draw count, and an original id and degree for nodes the
  // requester's part lacks) and answers (a global id per draw), as exchanged.
  const std::int64_t dc_sample_bytes = c[1];
  const std::int64_t mc_adjacency_bytes = c[3] * 8;
  extra["steps"] = steps_run;
  extra["sampled_edges"] = c[0];
  extra["sampled_edges_per_s"] = sample_s > 0 ? static_cast<double>(c[0]) / sample_s : 0.0;
  // CPU seconds of every rank: with T threads per rank, what the single-process sampler
  // benchmark reports per CPU second at T threads.
  const double sample_cpu_s = comm_.allreduce_value(sampler_.sample_cpu_seconds());
  extra["sample_cpu_s"] = sample_cpu_s;
  extra["sampled_edges_per_cpu_s"] =
      sample_cpu_s > 0 ? static_cast<double>(c[0]) / sample_cpu_s : 0.0;
  extra["input_rows"] = c[4];
  extra["remote_input_rows"] = c[5];
  extra["cache_rows"] = comm_.allreduce_value<std::int64_t>(sampler_.cache_rows());
  extra["cache_hit_rate"] = c[5] > 0 ? static_cast<double>(c[7]) / static_cast<double>(c[5]) : 0.0;
  extra["bytes_fetched"] = c[6] * f * 4;
  extra["data_centric_bytes"] = dc_sample_bytes + c[6] * row_bytes;
  extra["model_centric_bytes"] = mc_adjacency_bytes + c[5] * row_bytes;
  if (path_.device_graph) {
    extra["graph_placement"] = option_word(sampler_.graph_placement());
    extra["sample_routing"] = path_.device_resident ? "device" : "host";
    report_tiers(extra);
  }
  if (device_.is_cuda()) {
    // The caching allocator's driver allocations so far (the slowest rank's): after the first
    // epochs they grow only with step sizes not seen before, also where prefetched steps'
    // blocks cross from the side stream to the main one.
    const auto mem = device_memory::stats(device_);
    extra["gpu_allocations"] = comm_.allreduce_value(mem.device_allocations, comm::ReduceOp::max);
    extra["gpu_reserved_bytes"] = comm_.allreduce_value(mem.bytes_reserved, comm::ReduceOp::max);
  }
  if (any_out_of_core_) report_feature_reads(extra, steps_run);
  // The largest rank's peak so far, before this epoch's evaluation (which holds every node's
  // layer outputs, and every feature row even out of core): what training itself needs.
  extra["peak_rss_before_eval_bytes"] =
      comm_.allreduce_value<std::int64_t>(peak_rss_bytes(), comm::ReduceOp::max);
  // Now, on the largest rank: anonymous memory and resident file pages (mapped part and
  // scratch files), which the kernel may drop under a memory limit.
  const RssSplit rss = current_rss_split();
  extra["rss_anon_bytes"] = comm_.allreduce_value<std::int64_t>(rss.anon_bytes, comm::ReduceOp::max);
  extra["rss_file_bytes"] = comm_.allreduce_value<std::int64_t>(rss.file_bytes, comm::ReduceOp::max);
  extra["data_centric_sample_bytes"] = dc_sample_bytes;
  extra["answer_ids"] = c[2];
  extra["model_centric_adjacency_bytes"] = mc_adjacency_bytes;
}

// The out-of-core reader's epoch, summed over ranks (seconds: the slowest rank's): owned rows
// asked for, served by the static and recency tiers, read from the part files.
void SampledTrainer::report_feature_reads(nlohmann::json& extra, std::int64_t steps_run) {
  const sampling::FeatureReadStats k = owned_rows_->stats();
  std::int64_t c[5] = {k.requests, k.static_hits, k.recent_hits, k.rows_read, k.bytes_read};
  comm_.allreduce(std::span<std::int64_t>(c, 5));
  extra["feature_requests"] = c[0];
  extra["feature_static_hits"] = c[1];
  extra["feature_recent_hits"] = c[2];
  extra["feature_hit_rate"] =
      c[0] > 0 ? static_cast<double>(c[1] + c[2]) / static_cast<double>(c[0]) : 0.0;
  extra["feature_rows_read"] = c[3];
  extra["feature_bytes_read"] = c[4];
  extra["feature_bytes_read_per_step"] =
      steps_run > 0 ? static_cast<double>(c[4]) / static_cast<double>(steps_run) : 0.0;
  extra["feature_read_s"] = comm_.allreduce_value(k.read_s, comm::ReduceOp::max);
  // Read-ahead: missed rows its reads served, and the seconds the gathers waited for them.
  extra["feature_ahead_hits"] = comm_.allreduce_value(k.ahead_hits);
  extra["feature_ahead_wait_s"] = comm_.allreduce_value(k.ahead_wait_s, comm::ReduceOp::max);
  extra["feature_memory_bytes"] = comm_.allreduce_value(owned_rows_->held_bytes());
  // The graph's column ids in scratch-file mappings (spill::Scope at load), over the ranks.
  extra["graph_scratch_bytes"] = comm_.allreduce_value(spill::mapped_bytes());
}

// Per-tier counters of the GPU feature store, summed over ranks: requests, hits, misses, bytes
// and hit rate of the device cache, the pinned host rows and the network.
void SampledTrainer::report_tiers(nlohmann::json& extra) {
  const sampling::FeatureStoreCounters& k = sampler_.device_store()->counters();
  const sampling::TierCounters* tiers[3] = {&k.device, &k.host, &k.network};
  const char* names[3] = {"device", "host", "network"};
  std::int64_t c[14];
  for (int t = 0; t < 3; ++t) {
    c[4 * t] = tiers[t]->requests;
    c[4 * t + 1] = tiers[t]->hits;
    c[4 * t + 2] = tiers[t]->misses;
    c[4 * t + 3] = tiers[t]->bytes;
  }
  c[12] = k.admitted;
  c[13] = k.evicted;
  comm_.allreduce(std::span<std::int64_t>(c, 14));
  extra["device_tier_admitted"] = c[12];
  extra["device_tier_evicted"] = c[13];
  for (int t = 0; t < 3; ++t) {
    const std::string p = std::string(names[t]) + "_tier_";
    extra[p + "requests"] = c[4 * t];
    extra[p + "hits"] = c[4 * t + 1];
    extra[p + "misses"] = c[4 * t + 2];
    extra[p + "bytes"] = c[4 * t + 3];
    extra[p + "hit_rate"] =
        c[4 * t] > 0 ? static_cast<double>(c[4 * t + 1]) / static_cast<double>(c[4 * t]) : 0.0;
  }
}

void check_sampled_options(const TrainOptions& options, int /*ranks*/) {
  if (!link_task(options)) return;
  TESSEL_EXPECTS(options.device != DeviceChoice::cuda &&
                     options.mode_options.get<SampledOptions>().sample_routing != SampleRouting::device &&
                     options.mode_options.get<SampledOptions>().prefetch <= 0,
                 "--task link in sampled mode runs on the CPU's host path: --device cuda, "
                 "--sample-routing device and --prefetch are not supported with it");
}

std::unique_ptr<Trainer> make_sampled_trainer(TrainerContext context) {
  return std::make_unique<SampledTrainer>(context);
}

RunInfo sampled_run_info(const Trainer& trainer, const TrainerContext& context) {
  RunInfo info = graph_run_info(trainer, context);
  add_link_run_info(info, context);
  if (comm::Communicator* own = static_cast<const SampledTrainer&>(trainer).sampler_data())
    info.own_comms.push_back(own);
  return info;
}

}  // namespace tessel::train
