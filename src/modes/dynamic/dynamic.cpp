// Dynamic mode: GCN per snapshot + per-node GRU/LSTM (gcn-gru, gcn-lstm) or EvolveGCN-O, trained
// across ranks with snapshot partitioning (graph phase on a block of snapshots, one all-to-all to
// vertex partitioning for the recurrent phase and back) or vertex partitioning (halo exchange
// per snapshot), for node regression, node classification or link prediction; the mode's
// metric, record fields, checkpoint fields and predictions under the shared driver (train.cpp).
#include "tessel/modes/dynamic.hpp"

#include "tessel/train/runtime.hpp"
#include "temporal_task.hpp"
#include "temporal_trainer.hpp"
#include "mode_entries.hpp"
#include "tessel/train/trainer.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/timer.hpp"
#include "tessel/kernels/dense.hpp"
#include "tessel/nn/optimizer.hpp"
#include "tessel/partition/temporal.hpp"
#include "tessel/modes/modes.hpp"

#include <algorithm>
#include <optional>

namespace tessel::train {

// The trainer keeps pointers to its own members and a reference to its options: built in place,
// next to its own copy of the options.
struct DynamicModelProbe::Impl {
  TrainOptions options;
  Runtime runtime;
  TemporalTrainer trainer;
  Impl(comm::Communicator& comm, const TrainOptions& o)
      : options(o),
        runtime{Device::cpu(), &kernels::default_context(Device::cpu()), &comm, &comm},
        trainer(comm, options, runtime, partition::read_temporal_manifest(o.part_dir)) {}
};

DynamicModelProbe::DynamicModelProbe(comm::Communicator& comm, const TrainOptions& options)
    : impl_(std::make_unique<Impl>(comm, options)) {}
DynamicModelProbe::~DynamicModelProbe() = default;
double DynamicModelProbe::loss(bool with_gradients) { return impl_->trainer.probe(with_gradients); }
double DynamicModelProbe::evaluation_loss() { return impl_->trainer.evaluation_loss(); }
std::vector<nn::Parameter*> DynamicModelProbe::parameters() { return impl_->trainer.parameters(); }

namespace {

std::string format_mb(double bytes) { return fmt::format("{:.2f} MB", bytes / 1e6); }

// The mode as the shared driver runs it: its validation metric (accuracy, AUC or MSE, by task),
// the all-to-all bytes of every epoch against the analytic volume, and link prediction's MRR
// (the driver keeps its test value at the best epoch, in checkpoints too).
class DynamicMode final : public Trainer {
public:
  DynamicMode(comm::Communicator& comm, const TrainOptions& options, const Runtime& runtime,
              const partition::TemporalManifest& manifest)
      : comm_(comm), options_(options), device_(runtime.device),
        trainer_(comm, options, runtime, manifest) {
    const auto& info = trainer_.info();
    cls_ = options.task == DynamicTask::node_classification;
    link_ = options.task == DynamicTask::link_prediction;
    // Every task's checkpoints hold test_mrr_at_best (0 for the node tasks, whose records have
    // no test_mrr).
    metric_ = {.name = cls_ ? "acc" : link_ ? "auc" : "mse",
               .higher_is_better = cls_ || link_,
               .picks_best = info.valid.size() > 0,
               .kept_at_best = {"test_mrr"},
               .max_value = cls_ || link_ ? 1.0 : 1e30};
    // Analytic all-to-all volume of one epoch: forward + backward transpositions over the
    // training snapshots, plus the evaluation forward over all snapshots.
    const std::int64_t H = trainer_.hidden();
    if (trainer_.transposes()) {
      analytic_train_ = 2 * dist::transposition_bytes(trainer_.layout(), info.train.end, H);
      analytic_eval_ = dist::transposition_bytes(trainer_.layout(), info.num_snapshots, H);
    }
  }

  RunInfo run_info() const {
    const auto& info = trainer_.info();
    const nlohmann::json model_json = {{"kind", option_word(options_.model.kind)},
                                       {"hidden", options_.model.hidden},
                                       {"layers", options_.model.layers},
                                       {"task", option_word(options_.task)},
                                       {"optimizer", option_word(options_.optimizer.kind)}};
    const auto& blocks = trainer_.layout().snapshot_offsets;
    std::string block_text;
    if (options_.mode_options.get<DynamicOptions>().partition == TemporalPartition::snapshot)
      for (int q = 0; q < comm_.size(); ++q)
        block_text += fmt::format("{}[{}, {})", q == 0 ? ", snapshot blocks " : " ", blocks[q],
                                  blocks[q + 1]);
    return {.mode = "dynamic",
            .model_json = model_json.dump(),
            .setup_line = fmt::format(
                "dynamic training: {}, {} {} layout, {} hidden {}, dropout {}, task {}, {} "
                "nodes x {} snapshots (training [{}, {})){}",
                log::counted(comm_.size(), "rank"), options_.model.kind, option_word(options_.mode_options.get<DynamicOptions>().partition),
                log::counted(options_.model.layers, "GCN layer"), options_.model.hidden,
                options_.model.dropout, option_word(options_.task),
                info.num_nodes, info.num_snapshots, info.train.begin, info.train.end,
                block_text),
            .runtime_line = "",
            .metric = metric_,
            .own_comms = {}};
  }

  std::vector<nn::Parameter*> parameters() override { return trainer_.parameters(); }
  nn::Optimizer& optimizer() override { return trainer_.optimizer(); }
  double train_epoch(int epoch, PhaseTimes& phases, nlohmann::json& extra) override {
    const std::int64_t faults = process_minor_faults();
    const double loss = trainer_.train_epoch(epoch, phases);
    // Pages faulted in by the training pass: host blocks it had to take fresh from the system.
    extra["minor_faults"] =
        comm_.allreduce_value(process_minor_faults() - faults, comm::ReduceOp::max);
    // Every rank records the same phase names, so these reductions match up.
    for (const auto& [name, s] : trainer_.cpu_phases().all())
      extra["phases_cpu"][name] = comm_.allreduce_value(s, comm::ReduceOp::max);
    return loss;
  }
  // The validation metric per split (0 for a split without targets), and the MRR per split.
  Accuracy evaluate(PhaseTimes& phases) override {
    PhaseTimes eval_phases;
    Stopwatch w;
    const Losses l = trainer_.evaluate(eval_phases);
    phases.add("eval", w.seconds());
    double split[3] = {0, 0, 0};
    for (int s = 0; s < 3; ++s) {
      split[s] = l.count[s] == 0 ? 0.0
                 : cls_          ? static_cast<double>(l.correct[s]) / static_cast<double>(l.count[s])
                 : link_         ? l.auc[s]
                                 : l.sum[s] / static_cast<double>(l.count[s]);
      mrr_[s] = l.positives[s] > 0 ? l.rr_sum[s] / static_cast<double>(l.positives[s]) : 0.0;
    }
    last_test_ = split[2];
    last_test_mrr_ = mrr_[2];
    return {split[0], split[1], split[2]};
  }
  void write_outputs(const OutputFiles& files) override { trainer_.write_outputs(files); }

  // The epoch's record: all-to-all bytes against the analytic volume, allocations, link
  // prediction's MRR, and the log line's MRR and bytes text.
  void end_epoch(EpochMetrics& m) override {
    const std::int64_t transpose_bytes = comm_.allreduce_value(trainer_.take_transpose_bytes());
    const std::int64_t analytic = analytic_train_ + (m.evaluated ? analytic_eval_ : 0);
    m.extra["transpose_bytes"] = transpose_bytes;
    m.extra["analytic_transpose_bytes"] = analytic;
    m.extra["host_allocations"] = comm_.allreduce_value(
        device_memory::host_stats().device_allocations, comm::ReduceOp::max);
    if (device_.is_cuda()) {
      kernels::default_context(device_).synchronize();
      const auto mem = device_memory::stats(device_);
      m.extra["gpu_allocations"] =
          comm_.allreduce_value(mem.device_allocations, comm::ReduceOp::max);
      m.extra["gpu_cache_hits"] = comm_.allreduce_value(mem.cache_hits, comm::ReduceOp::max);
      m.extra["gpu_peak_bytes"] =
          comm_.allreduce_value(mem.peak_bytes_in_use, comm::ReduceOp::max);
    }
    if (link_ && m.evaluated) {
      m.extra.update({{"train_mrr", mrr_[0]}, {"valid_mrr", mrr_[1]}, {"test_mrr", mrr_[2]}});
      m.log_evaluation_suffix =
          fmt::format(" | mrr train {:.4f} valid {:.4f} test {:.4f}", mrr_[0], mrr_[1], mrr_[2]);
    }
    total_analytic_ += analytic;
    total_transpose_ += transpose_bytes;
    const std::string between_hosts =
        m.several_hosts ? fmt::format("between hosts {}, ",
                                      format_mb(static_cast<double>(m.comm_bytes_between_hosts)))
                        : std::string();
    m.log_sent = fmt::format("{} ({}all-to-all {}, analytic {})",
                             format_mb(static_cast<double>(m.comm_bytes)), between_hosts,
                             format_mb(m.extra.at("transpose_bytes").get<double>()),
                             format_mb(m.extra.at("analytic_transpose_bytes").get<double>()));
  }
  // The summary: the best epoch's values, the last evaluation's test values, and bytes per
  // epoch (all of them, the all-to-all's and the analytic all-to-all volume); the closing line
  // the last evaluation's test value and the bytes per epoch.
  std::string finish(comm::Communicator& /*comm*/, const Runtime& /*runtime*/, TrainResult& result,
                     nlohmann::json& summary) override {
    const std::string& name = metric_.name;
    nlohmann::json s;
    if (result.best_epoch > 0) {
      s = {{"best_epoch", result.best_epoch},
           {"valid_" + name,
            metric_.picks_best ? nlohmann::json(result.best_valid_acc) : nlohmann::json(nullptr)},
           {"test_" + name, result.test_acc_at_best}};
      if (link_) s["test_mrr"] = result.kept_at_best.at("test_mrr");
    }
    s["final_test_" + name] = last_test_;
    if (link_) s["final_test_mrr"] = last_test_mrr_;
    std::int64_t total_bytes = 0;
    for (const EpochMetrics& m : result.epochs) total_bytes += m.comm_bytes;
    const auto epochs = static_cast<double>(std::max<std::size_t>(1, result.epochs.size()));
    s["bytes_per_epoch"] = static_cast<double>(total_bytes) / epochs;
    s["transpose_bytes_per_epoch"] = static_cast<double>(total_transpose_) / epochs;
    s["analytic_transpose_bytes_per_epoch"] = static_cast<double>(total_analytic_) / epochs;
    if (options_.mode_options.get<DynamicOptions>().partition == TemporalPartition::snapshot)
      s["snapshot_blocks"] = trainer_.layout().snapshot_offsets;
    result.summary = s;
    summary["model"] = option_word(options_.model.kind);
    summary["temporal_partition"] = option_word(options_.mode_options.get<DynamicOptions>().partition);
    summary["task"] = option_word(options_.task);
    summary.update(result.summary);
    return fmt::format(
        "final test {} {:.4f}{}; bytes per epoch {} (all-to-all {}, analytic {})", metric_.name,
        last_test_,
        result.best_epoch > 0 && metric_.picks_best
            ? fmt::format(", best valid at epoch {}", result.best_epoch)
            : std::string(),
        format_mb(result.summary["bytes_per_epoch"].get<double>()),
        format_mb(result.summary["transpose_bytes_per_epoch"].get<double>()),
        format_mb(result.summary["analytic_transpose_bytes_per_epoch"].get<double>()));
  }

private:
  comm::Communicator& comm_;
  const TrainOptions& options_;
  Device device_;
  TemporalTrainer trainer_;
  bool cls_ = false, link_ = false;
  ValidationMetric metric_;
  std::int64_t analytic_train_ = 0, analytic_eval_ = 0;
  std::int64_t total_analytic_ = 0, total_transpose_ = 0;
  double mrr_[3] = {0, 0, 0};  // of the latest evaluation
  double last_test_ = 0, last_test_mrr_ = 0;
};

}  // namespace

// Node regression's recipe, chosen so that a short series (a few dozen snapshots) does not
// overfit: one layer, no dropout, weight decay, and at most kDynamicEpochs epochs stopped by the
// validation split (the one convert temporal takes by default). --patience is set only when
// neither it nor --epochs is given, so an explicit --epochs (bench's too) trains that many.
void dynamic_defaults(TrainOptions& options,
                      const std::function<bool(const std::string&)>& given) {
  if (options.task != DynamicTask::node_regression) return;
  if (!given("--layers")) options.model.layers = 1;
  if (!given("--dropout")) options.model.dropout = 0.0f;
  if (!given("--weight-decay")) options.optimizer.weight_decay = kDynamicWeightDecay;
  if (!given("--epochs") && !given("--patience") && options.eval_every > 0)
    options.patience = kDynamicPatience;
  if (!given("--epochs")) options.epochs = kDynamicEpochs;
}

void check_dynamic_options(const TrainOptions& options, int /*ranks*/) {
  TESSEL_EXPECTS(nn::temporal_kind(options.model.kind).has_value(),
                 "--mode dynamic trains gcn-gru, gcn-lstm or evolvegcn-o, not --model {}",
                 options.model.kind);
  TESSEL_EXPECTS(options.negatives >= 1 && options.mode_options.get<DynamicOptions>().eval_negatives >= 1,
                 "--negatives and --eval-negatives must be at least 1");
  TESSEL_EXPECTS(options.model.dropout >= 0.0f && options.model.dropout < 1.0f,
                 "--dropout {} is outside [0, 1)", options.model.dropout);
}

LoadedPart load_temporal_part(comm::Communicator& /*comm*/, TrainOptions& options) {
  LoadedPart loaded;
  loaded.temporal = partition::read_temporal_manifest(options.part_dir);
  if (options.feature_memory.kind == FeatureMemory::Kind::bytes) {
    const partition::TemporalManifest& t = *loaded.temporal;
    const std::int64_t need = t.num_nodes * t.num_snapshots * t.feature_dim *
                              static_cast<std::int64_t>(sizeof(float));
    TESSEL_EXPECTS(options.feature_memory.bytes >= need,
                   "--feature-memory {}: dynamic mode holds its snapshots' features in memory "
                   "({}, {} bytes: {} nodes x {} snapshots x {} features); give at least that, "
                   "or train a static graph out of core with --mode sampled",
                   options.feature_memory.text, format_mib(need), need, t.num_nodes,
                   t.num_snapshots, t.feature_dim);
  }
  loaded.activity = fmt::format(
      "setting up dynamic training of {} with --hidden {} on {} nodes x {} snapshots x {} "
      "features (lower --hidden)",
      options.model.kind, options.model.hidden, loaded.temporal->num_nodes,
      loaded.temporal->num_snapshots, loaded.temporal->feature_dim);
  return loaded;
}

// --device and --comm as in the other modes: a GPU per rank (ranks may share one, the data
// plane then staging through pinned host memory) or the CPU.
std::unique_ptr<Trainer> make_dynamic_trainer(TrainerContext context) {
  return std::make_unique<DynamicMode>(context.comm, context.options, context.runtime,
                                       *context.loaded.temporal);
}

RunInfo dynamic_run_info(const Trainer& trainer, const TrainerContext& /*context*/) {
  return static_cast<const DynamicMode&>(trainer).run_info();
}

TrainResult train_dynamic(comm::Communicator& comm, const TrainOptions& options) {
  TrainOptions dynamic = options;
  dynamic.mode = "dynamic";
  return train(comm, dynamic);
}

}  // namespace tessel::train
