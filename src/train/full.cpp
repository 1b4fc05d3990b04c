// Full-batch mode: every layer aggregates over the whole partition with a halo exchange;
// the loss is the mean over all training nodes of the whole graph.
#include "full_aggregator.hpp"
#include "trainer.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/nn/loss.hpp"
#include "tessel/train/halo.hpp"

namespace tessel::train {

namespace {

class FullTrainer final : public Trainer {
 public:
  explicit FullTrainer(TrainerContext ctx)
      : comm_(ctx.comm),
        data_(ctx.runtime.data ? *ctx.runtime.data : ctx.comm),
        device_(ctx.runtime.device),
        options_(ctx.options),
        manifest_(ctx.manifest),
        part_(ctx.part),
        aggregator_(ctx.part, ctx.comm, &data_, ctx.runtime.device),
        model_(model_config(ctx)),
        optimizer_(nn::make_optimizer(ctx.options.optimizer)) {
    // Features go to the device once; every epoch step then stays there.
    Tensor host = Tensor::empty({part_.num_owned, part_.feature_dim}, DType::f32);
    std::copy(part_.features.begin(), part_.features.end(), host.data<float>());
    features_ = device_.is_cpu() ? host : host.to(device_);
    split_labels_ = split_labels(part_);
    layer_aggregators_.assign(static_cast<std::size_t>(options_.model.layers), &aggregator_);
    // The aggregation matrices are built now, not in the first epoch: building the transpose
    // takes temporaries of 16 bytes per edge, which then go back to the driver, so the
    // device's memory during training is what a step holds (the peaks restart here).
    aggregator_.prepare(options_.model.kind == "gcn" ? nn::Norm::gcn : nn::Norm::mean);
    if (device_.is_cuda()) {
      kernels::default_context(device_).synchronize();
      setup_peak_bytes_ = device_memory::stats(device_).peak_bytes_in_use;
      device_memory::release_cached(device_);
      device_memory::reset_peak(device_);
    }
  }

  nn::Model& model() override { return model_; }
  nn::Optimizer& optimizer() override { return *optimizer_; }

  double train_epoch(int epoch, PhaseTimes& phases, nlohmann::json& extra) override {
    aggregator_.set_phases(&phases);
    Stopwatch compute;
    model_.zero_grad();
    const rng::Key dropout_key{options_.seed, rng::Stream::dropout,
                               static_cast<std::uint32_t>(epoch), 0, 0};
    Tensor logits = model_.forward(features_, layer_aggregators_, dropout_key, true);
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
    extra["halo_rows_sent"] = comm_.allreduce_value<std::int64_t>(aggregator_.halo().rows_sent());
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

  Accuracy evaluate(PhaseTimes& phases) override {
    PhaseTimes eval_phases;
    aggregator_.set_phases(&eval_phases);
    Stopwatch watch;
    logits_ = infer_all_nodes(model_, features_, layer_aggregators_);
    const Accuracy accuracy = split_accuracy(comm_, logits_, part_, manifest_, split_labels_);
    phases.add("eval", watch.seconds());
    return accuracy;
  }

  void write_predictions(const std::filesystem::path& path) override {
    PhaseTimes ignored;
    aggregator_.set_phases(&ignored);
    Tensor logits = infer_all_nodes(model_, features_, layer_aggregators_);
    write_predictions_file(comm_, part_, logits, path);
  }

 private:
  static nn::ModelConfig model_config(const TrainerContext& ctx) {
    nn::ModelConfig config = ctx.options.model;
    config.device = ctx.runtime.device;
    return config;
  }

  comm::Communicator& comm_;
  comm::Communicator& data_;
  Device device_;
  const TrainOptions& options_;
  const partition::Manifest& manifest_;
  partition::Part& part_;
  FullAggregator aggregator_;
  nn::Model model_;
  std::unique_ptr<nn::Optimizer> optimizer_;
  Tensor features_;
  Tensor logits_;
  std::int64_t setup_peak_bytes_ = 0;
  std::vector<std::vector<std::int64_t>> split_labels_;
  std::vector<nn::Aggregator*> layer_aggregators_;
};

}  // namespace

std::unique_ptr<Trainer> make_full_trainer(TrainerContext context) {
  return std::make_unique<FullTrainer>(context);
}

}  // namespace tessel::train
