// The sampled mode's trainer, declared for its two source files: sampled.cpp (set-up, the
// node-classification steps, evaluation and the epoch's reports) and sampled_link.cpp (--task
// link's set-up, epoch and step).
#pragma once

#include "link_task.hpp"
#include "tessel/train/graph_mode.hpp"
#include "tessel/modes/sampled.hpp"

#include "tessel/core/progress.hpp"
#include "tessel/kernels/sparse.hpp"
#include "tessel/nn/aggregation_matrices.hpp"
#include "tessel/sampling/block.hpp"
#include "tessel/dist/distributed_sampler.hpp"

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tessel::train {

// Aggregation over one sampled block: its matrices are rebuilt every step from the block and
// the whole-graph degrees of its source nodes, on the device the model runs on.
class BlockAggregator final : public nn::Aggregator {
 public:
  // src_orig, src_degree: per source of the block; src_orig must outlive the step.
  void reset(const sampling::Block& block, std::span<const NodeId> src_orig,
             std::span<const std::int64_t> src_degree, Device device) {
    src_orig_ = src_orig;
    src_orig_device_ = Tensor();
    Tensor degree = Tensor::empty({static_cast<std::int64_t>(src_degree.size())}, DType::i64);
    std::copy(src_degree.begin(), src_degree.end(), degree.data<std::int64_t>());
    matrices_.reset(kernels::SparseMatrix::from_csr(block.adj, device),
                    device.is_cpu() ? std::move(degree) : degree.to(device));
    edges_.reset(matrices_.pattern(),
                 Tensor::from_vector(std::vector<NodeId>(src_orig.begin(), src_orig.end())));
  }

  // A block that stays on the device: its pattern, the sources' degrees and their original ids
  // (dropout keys) are used where they are, nothing is uploaded.
  void reset(const sampling::BlockTensors& block) {
    src_orig_ = {};
    src_orig_device_ = block.src_orig;
    kernels::SparseMatrix pattern;
    pattern.num_rows = block.num_dst;
    pattern.num_cols = block.num_src;
    pattern.indptr = block.indptr;
    pattern.indices = block.indices;
    matrices_.reset(pattern, block.src_degree);
    edges_.reset(std::move(pattern), block.src_orig);
  }

  std::int64_t num_src() const override { return matrices_.num_src(); }
  std::int64_t num_dst() const override { return matrices_.num_dst(); }
  std::span<const NodeId> src_ids() const override {
    TESSEL_EXPECTS(!src_orig_device_.defined(),
                   "sampled block: its source ids are on {}, not on the host",
                   src_orig_device_.device().str());
    return src_orig_;
  }
  const Tensor* src_ids_on(Device device) override {
    return src_orig_device_.defined() && src_orig_device_.device() == device ? &src_orig_device_
                                                                             : nullptr;
  }

  Tensor aggregate(const Tensor& x, nn::Norm norm) override {
    Tensor y;
    matrices_.aggregate(x, norm, y);
    return y;
  }
  Tensor aggregate_backward(const Tensor& grad_out, nn::Norm norm) override {
    Tensor g;
    matrices_.aggregate_backward(grad_out, norm, g);
    return g;
  }

  // GAT: the softmax runs over the block's sampled in-neighbours and the self loop.
  const kernels::SparseMatrix& attention_graph(Device device) override {
    return edges_.graph(device);
  }
  const Tensor& attention_ids(Device device) override { return edges_.ids(device); }
  Tensor exchange_rows(const Tensor& x) override { return x; }
  Tensor exchange_rows_backward(const Tensor& grad) override { return grad; }

 private:
  std::span<const NodeId> src_orig_;
  Tensor src_orig_device_;  // set: the block's source ids on its device (src_orig_ empty)
  nn::AggregationMatrices matrices_;
  nn::AttentionEdges edges_;
};

class SampledTrainer final : public GraphModeTrainer {
 public:
  explicit SampledTrainer(TrainerContext ctx);

  sampling::CacheBudget default_device_budget();

  // The sampler's own data plane (when it has one) carries the sampling exchanges: its bytes
  // count with the epoch's (sampled_run_info names it to the driver).
  comm::Communicator* sampler_data() const { return sampler_data_.get(); }

  double train_epoch(int epoch, PhaseTimes& phases, nlohmann::json& extra) override;

  std::vector<nn::Parameter*> parameters() override;

  Accuracy evaluate(PhaseTimes& phases) override;
  void end_epoch(EpochMetrics& m) override {
    if (link_) link_->end_epoch(m);
  }
  std::string finish(comm::Communicator& comm, const Runtime& runtime, TrainResult& result,
                     nlohmann::json& summary) override;
  void write_outputs(const OutputFiles& files) override;

 private:
  const SampledOptions& sampled() const { return options_.mode_options.get<SampledOptions>(); }
  static const SampledOptions& own(const TrainerContext& ctx) {
    return ctx.options.mode_options.get<SampledOptions>();
  }
  void setup_link();

  double train_link_epoch(int epoch, PhaseTimes& phases, nlohmann::json& extra);

  double run_link_step(int epoch, std::uint32_t step, const std::vector<std::int64_t>& edges,
                       std::int64_t global_count, PhaseTimes& phases);

  // A sampled step ready to train: its blocks, the original ids and degrees of their sources, and
  // its input rows. Prefetched steps own copies of the sampler's blocks (it reuses its buffers).
  struct Batch {
    std::uint32_t step = 0;
    std::int64_t global_count = 0;
    const std::vector<LocalId>* seeds = nullptr;
    std::vector<sampling::Block> blocks;
    std::vector<std::vector<NodeId>> src_orig;
    std::vector<std::vector<std::int64_t>> src_degree;
    std::vector<sampling::BlockTensors> device_blocks;  // set: the blocks stayed on the GPU
    Tensor x;
    // Recorded on the sampler's stream after the step's last sampling and gathering work: the
    // main stream waits for it before the step's compute reads the blocks and x.
    device_memory::StreamEvent ready;
    // Whether x holds the input dropout already (gathered with it on the CPU) or is the step's
    // own copy for the model to drop in place.
    nn::Model::Input input = nn::Model::Input::scratch;
  };

  void take_host_blocks(Batch& batch);

  double run_step(int epoch, std::uint32_t step, const std::vector<LocalId>& seeds,
                  std::int64_t global_count, PhaseTimes& phases);

  double train_steps_reading_ahead(int epoch, const std::vector<std::vector<LocalId>>& step_seeds,
                                   const std::vector<std::int64_t>& step_counts,
                                   const std::vector<std::size_t>& steps, PhaseTimes& phases,
                                   ProgressLine& progress);

  void prepare(int epoch, std::uint32_t step, const std::vector<LocalId>& seeds,
               std::int64_t global_count, PhaseTimes& phases, Batch& batch);

  double train_steps_queued(int epoch, const std::vector<std::vector<LocalId>>& step_seeds,
                            const std::vector<std::int64_t>& step_counts,
                            const std::vector<std::size_t>& steps, PhaseTimes& phases,
                            ProgressLine& progress);

  double forward_backward(int epoch, std::uint32_t step, const std::vector<LocalId>& seeds,
                          std::int64_t global_count, const std::vector<sampling::Block>& blocks,
                          const std::vector<std::span<const NodeId>>& src_orig,
                          const std::vector<std::span<const std::int64_t>>& src_degree,
                          const Tensor& x, nn::Model::Input input,
                          const std::vector<sampling::BlockTensors>* device_blocks = nullptr);

  rng::Key dropout_key(int epoch, std::uint32_t step) const {
    return {options_.seed, rng::Stream::dropout, static_cast<std::uint32_t>(epoch), step, 0};
  }

  dist::RowDropout row_dropout(int epoch, std::uint32_t step,
                                             std::span<const NodeId> row_ids) const;

  void finish_step(PhaseTimes& phases, bool time_optimizer = false);

  // On a GPU, waits for the enqueued work so each phase's seconds measure it, not its launch.
  void settle() {
    if (device_.is_cuda()) kernels::default_context(device_).synchronize();
  }

  // Which way a step goes, decided once. The blocks stay on the device (sample_device) on a
  // GPU unless --sample-routing host, and on the CPU only with --sample-routing device (its CPU
  // twins); the device graph samples and the tiered store gathers on a GPU and on that twin path.
  struct SamplePath {
    bool device_graph = false;     // DeviceGraph + DeviceFeatureStore (or their CPU twins)
    bool device_resident = false;  // the blocks are built and kept on the device
  };
  static SamplePath choose_path(const TrainerContext& ctx);

  static std::unique_ptr<comm::Communicator> make_sampler_data(const TrainerContext& ctx);

  std::string sampling_rate(const PhaseTimes& phases) const;

  void report(nlohmann::json& extra, std::int64_t steps_run, const PhaseTimes& phases);

  void report_feature_reads(nlohmann::json& extra, std::int64_t steps_run);

  void report_tiers(nlohmann::json& extra);

  const SamplePath path_;
  int depth_ = 0;  // steps prepared ahead (--prefetch, or its default)
  std::unique_ptr<comm::Communicator> sampler_data_;  // set: the sampler's own data plane
  dist::DistributedSampler sampler_;
  // Set (a CUDA device's side stream): prepare() samples and gathers device-resident steps on it.
  void* sampler_stream_ = nullptr;
  std::vector<BlockAggregator> aggregators_;
  // Every owned row the sampler reads: feature_rows_ (out of core) or part_.features.
  std::shared_ptr<sampling::OwnedFeatureRows> owned_rows_;
  bool any_out_of_core_ = false;  // some rank reads its features from its part file
  std::unique_ptr<LinkScorer> link_;     // set: --task link
  std::vector<NodeId> global_of_orig_;  // --task link: relabeled global id by source id
  std::int64_t link_edges_per_epoch_ = 0;  // --task link: the last epoch's edges trained
};

}  // namespace tessel::train
