// Full-batch mode: every layer aggregates over the whole partition with a halo exchange;
// the loss is the mean over all training nodes of the whole graph.
#include "mode_entries.hpp"
#include "tessel/train/graph_mode.hpp"
#include "tessel/modes/full.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/nn/loss.hpp"
#include "tessel/dist/halo.hpp"

namespace tessel::train {

namespace {

class FullTrainer final : public GraphModeTrainer {
 public:
  explicit FullTrainer(TrainerContext ctx) : GraphModeTrainer(ctx) {
    // The aggregation matrices are built now, not in the first epoch: building the transpose
    // takes temporaries of 16 bytes per edge, which then go back to the driver, so the
    // device's memory during training is what a step holds (the peaks restart here).
    if (options_.model.kind == nn::ModelKind::gat) {
      // Attention reads the pattern itself (with self loops), built now for the same reason.
      (void)aggregator().attention_graph(device_);
    } else {
      aggregator().prepare(norm());
      aggregator().aggregate_halos(full().halo_aggregation, norm(), comm_);
    }
    if (device_.is_cuda()) {
      kernels::default_context(device_).synchronize();
      setup_peak_bytes_ = device_memory::stats(device_).peak_bytes_in_use;
      device_memory::release_cached(device_);
      device_memory::reset_peak(device_);
    }
  }

  double train_epoch(int epoch, PhaseTimes& phases, nlohmann::json& extra) override {
    aggregator().set_phases(&phases);
    // Training exchanges halos in --halo-dtype, counting their bytes; evaluation and inference
    // (which share the aggregator, outside this scope) in f32, so predictions do not depend on
    // the wire.
    dist::HaloBytes halo_bytes;
    const auto exchange =
        aggregator().exchange_with({.codec = full().halo_dtype, .bytes = &halo_bytes});
    dist::HaloExchange& halo = aggregator().halo();
    halo.set_stale(full().stale_halo, static_cast<float>(full().stale_smoothing));
    halo.begin_epoch();
    aggregator().reset_halo_seconds();
    // --boundary-sampling: the epoch's graph keeps a fraction of the boundary nodes.
    const double boundary = full().boundary_sampling;
    if (boundary > 0)
      aggregator().sample_boundary(
          rng::Key{options_.seed, rng::Stream::boundary, static_cast<std::uint32_t>(epoch), 0, 0},
          boundary, norm());
    Stopwatch compute;
    model_.zero_grad();
    const rng::Key dropout_key{options_.seed, rng::Stream::dropout,
                               static_cast<std::uint32_t>(epoch), 0, 0};
    Tensor logits = model_.forward(features_, layer_aggregators(), dropout_key, true);
    const nn::LossResult loss =
        nn::softmax_cross_entropy(logits, part_.train, split_labels_[0],
                                  1.0 / static_cast<double>(manifest_.num_train));
    logits = Tensor(); // the loss gradient is all backward reads
    model_.backward(loss.grad);
    if (device_.is_cuda()) kernels::default_context(device_).synchronize();
    // Dense work is what forward/backward spent outside aggregation and halo exchange.
    phases.add("dense", compute.seconds() - phases.get("aggregate") - phases.get("communicate"));
    {
      ScopedPhase t(phases, "communicate");
      allreduce_gradients(data_, model_);
      if (device_.is_cuda()) kernels::default_context(device_).synchronize();
    }
    {
      ScopedPhase t(phases, "dense");
      optimizer_->step(model_.parameters());
    }
    HaloEpoch& h = halo_epoch_;
    h.rows_sent = comm_.allreduce_value<std::int64_t>(halo.rows_sent());
    h.boundary_sampling = boundary;
    if (boundary > 0) aggregator().use_full_graph();
    halo.set_stale(false);
    h.dtype = full().halo_dtype;
    h.aggregation = full().halo_aggregation;
    if (full().halo_aggregation != dist::HaloAggregation::post)
      h.pre_rows = comm_.allreduce_value<std::int64_t>(aggregator().pre_rows());
    h.stale = full().stale_halo;
    h.stale_smoothing = full().stale_smoothing;
    // The slowest rank's seconds in the halo exchange (what it did not hide behind compute).
    h.exposed_s = comm_.allreduce_value(aggregator().halo_seconds(), comm::ReduceOp::max);
    // The epoch's halo traffic by kind, all ranks: rows forward, gradients backward.
    h.bytes = comm_.allreduce_value<std::int64_t>(halo_bytes.rows);
    h.grad_bytes = comm_.allreduce_value<std::int64_t>(halo_bytes.grads);
    if (device_.is_cuda()) {
      kernels::default_context(device_).synchronize();
      const auto mem = device_memory::stats(device_);
      extra["gpu_allocations"] = comm_.allreduce_value(mem.device_allocations, comm::ReduceOp::max);
      extra["gpu_cache_hits"] = comm_.allreduce_value(mem.cache_hits, comm::ReduceOp::max);
      // Peaks since setup (features, graph and everything a step holds at once), and the
      // device's own count (cudaMemGetInfo: the CUDA context and library handles too).
      extra["gpu_peak_bytes"] = comm_.allreduce_value(mem.peak_bytes_in_use, comm::ReduceOp::max);
      extra["gpu_reserved_bytes"] = comm_.allreduce_value(mem.bytes_reserved, comm::ReduceOp::max);
      extra["gpu_peak_reserved_bytes"] =
          comm_.allreduce_value(mem.peak_bytes_reserved, comm::ReduceOp::max);
      extra["gpu_device_used_bytes"] = comm_.allreduce_value(
          device_memory::device_used_bytes(device_), comm::ReduceOp::max);
      extra["gpu_setup_peak_bytes"] = comm_.allreduce_value(setup_peak_bytes_, comm::ReduceOp::max);
    }
    const double loss_sum = comm_.allreduce_value(loss.loss_sum);
    return loss_sum / static_cast<double>(manifest_.num_train);
  }

  void end_epoch(EpochMetrics& m) override { m.halo = halo_epoch_; }

 private:
  const FullOptions& full() const { return options_.mode_options.get<FullOptions>(); }
  nn::Norm norm() const {
    return options_.model.kind == nn::ModelKind::gcn ? nn::Norm::gcn : nn::Norm::mean;
  }
  std::int64_t setup_peak_bytes_ = 0;
  HaloEpoch halo_epoch_;  // the last train_epoch's, for end_epoch
};

}  // namespace

void check_full_options(const TrainOptions& options, int /*ranks*/) {
  const FullOptions& full = options.mode_options.get<FullOptions>();
  if (options.model.kind == nn::ModelKind::gat) {
    // Each destination's softmax needs every in-neighbour's row, exact and current.
    TESSEL_EXPECTS(full.halo_dtype == kernels::RowCodec::f32,
                   "--model gat exchanges its halo rows in f32: --halo-dtype {} is not supported",
                   kernels::row_codec_name(full.halo_dtype));
    TESSEL_EXPECTS(full.boundary_sampling == 0,
                   "--model gat does not support --boundary-sampling (its softmax needs every "
                   "in-neighbour)");
    TESSEL_EXPECTS(full.halo_aggregation == dist::HaloAggregation::post,
                   "--model gat does not support --halo-aggregation {} (owner-side sums cannot "
                   "carry per-edge attention)",
                   option_word(full.halo_aggregation));
    TESSEL_EXPECTS(!full.stale_halo, "--model gat does not support --stale-halo");
  }
  if (link_task(options)) {
    TESSEL_EXPECTS(full.boundary_sampling == 0 && !full.stale_halo &&
                       full.halo_aggregation == dist::HaloAggregation::post,
                   "--task link does not support --boundary-sampling, --stale-halo or "
                   "--halo-aggregation {}",
                   option_word(full.halo_aggregation));
  }
  TESSEL_EXPECTS(full.boundary_sampling == 0 || full.halo_aggregation == dist::HaloAggregation::post,
                 "--boundary-sampling cannot be combined with --halo-aggregation {}: the sums "
                 "of a pre-aggregated cut do not follow the epoch's sampled boundary",
                 option_word(full.halo_aggregation));
  TESSEL_EXPECTS(full.boundary_sampling == 0 || !full.stale_halo,
                 "--boundary-sampling cannot be combined with --stale-halo: the stale rows of "
                 "one epoch's boundary are not the next epoch's");
  TESSEL_EXPECTS(full.stale_smoothing >= 0 && full.stale_smoothing < 1 &&
                     (full.stale_smoothing == 0 || full.stale_halo),
                 "--stale-smoothing {} needs --stale-halo and a value in [0, 1)",
                 full.stale_smoothing);
}

std::unique_ptr<Trainer> make_full_trainer(TrainerContext context) {
  if (link_task(context.options)) return make_link_trainer(context);
  return std::make_unique<FullTrainer>(context);
}

}  // namespace tessel::train
