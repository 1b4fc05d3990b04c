// The training driver shared by every mode: setup, epochs, evaluation, metrics lines and files,
// checkpoints, resume, time budget and fault injection.
#include "tessel/train/train.hpp"

#include "tessel/train/checkpoint.hpp"
#include "tessel/train/runtime.hpp"
#include "tessel/train/trainer.hpp"


#include "tessel/core/activity.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/datasets/atomic_output.hpp"
#include "tessel/kernels/dense.hpp"

#include <fmt/ranges.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>
#include <utility>

namespace tessel::train {
namespace fs = std::filesystem;

namespace {

std::string model_signature(const TrainOptions& o, const nlohmann::json& mode_fields) {
  nlohmann::json j = {{"kind", option_word(o.model.kind)},
                      {"in_dim", o.model.in_dim},
                      {"hidden", o.model.hidden},
                      {"out_dim", o.model.out_dim},
                      {"layers", o.model.layers},
                      {"optimizer", option_word(o.optimizer.kind)}};
  // The mode's own model fields (the pipeline's SIGN MLP: hops, mlp_layers, operator).
  for (const auto& [key, value] : mode_fields.items()) j[key] = value;
  if (o.model.kind == nn::ModelKind::gat) {
    j["heads"] = o.model.heads;
    j["out_heads"] = o.model.out_heads;
  }
  // The input's normalization is part of what the parameters were trained on (`tessel
  // predict` applies it again); written only when there is one, so checkpoints without it
  // still resume.
  if (o.normalize_features != FeatureNormalization::none)
    j["normalize_features"] = option_word(o.normalize_features);
  // A link prediction encoder (full mode's --task link): `tessel predict` scores edges with it.
  if (o.task == DynamicTask::link_prediction) j["task"] = "link";
  // Its decoder, written only when it has parameters (a dot-product checkpoint reads as before).
  if (o.task == DynamicTask::link_prediction &&
      o.link_decoder != nn::LinkDecoderKind::dot)
    j["decoder"] = option_word(o.link_decoder);
  return j.dump();
}

// Stops training once the loss or a parameter is no longer finite: every later epoch would only
// print nan. Names the epoch and the first parameter (in layer order) holding a non-finite value.
void check_finite(comm::Communicator& comm, int epoch, double loss,
                  const std::vector<nn::Parameter*>& params, const TrainOptions& o) {
  std::string first_bad;
  for (nn::Parameter* p : params) {
    const Tensor host = p->value.device().is_cpu() ? p->value : p->value.to(Device::cpu());
    const float* values = host.data<float>();
    const std::int64_t n = host.numel();
    std::int64_t bad = n;
#pragma omp parallel for reduction(min : bad) schedule(static) if (n > (1 << 16))
    for (std::int64_t i = 0; i < n; ++i)
      if (!std::isfinite(values[i])) bad = std::min(bad, i);
    if (bad < n) {
      first_bad = fmt::format("first non-finite tensor: parameter {} ({} at flat index {}, after "
                              "this epoch's update)",
                              p->name, values[bad], bad);
      break;
    }
  }
  // Ranks may hold different parameters (pipeline stages): agree on whether any is bad.
  const std::int64_t any_bad =
      comm.allreduce_value<std::int64_t>(first_bad.empty() ? 0 : 1, comm::ReduceOp::max);
  if (std::isfinite(loss) && any_bad == 0) return;
  if (first_bad.empty() && any_bad > 0)
    first_bad = "a parameter held by another rank is no longer finite";
  TESSEL_FAIL("training diverged at epoch {}: loss {}; {}; stopping (try a smaller --lr than {}, "
              "or check the features)",
              epoch, loss, first_bad.empty() ? "every parameter is still finite" : first_bad,
              o.optimizer.lr);
}

// Runs `read` on input every rank reads alike (the manifest, a checkpoint, an all-reduced loss):
// its InputError becomes an AgreedInputError, which the job reports once instead of per rank.
template <class F> auto agreed(F&& read) {
  try {
    return read();
  } catch (const AgreedInputError&) {
    throw;
  } catch (const InputError& e) {
    throw AgreedInputError(e.what(), e.where());
  }
}

}  // namespace

void stop_if_not_finite(comm::Communicator& comm, int epoch, double loss,
                        const std::vector<nn::Parameter*>& params, const TrainOptions& options) {
  agreed([&] { check_finite(comm, epoch, loss, params, options); });
}

namespace {

std::string format_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  return fmt::format("{:.1f} {}", b, units[u]);
}

// --predictions and --embeddings of the model the trainer holds now, each with its wrote-line
// (`which` says which model: "at epoch 12, the best epoch"). Collective.
void write_run_outputs(comm::Communicator& comm, Trainer& trainer, const TrainOptions& options,
                       const std::string& which) {
  const OutputFiles files{options.predictions_path, options.embeddings_path,
                          options.predict_edges};
  if (files.predictions.empty() && files.embeddings.empty()) return;
  trainer.write_outputs(files);
  if (comm.rank() != 0) return;
  std::error_code ec;
  const auto size = [&](const fs::path& p) {
    return format_bytes(static_cast<double>(fs::file_size(p, ec)));
  };
  if (!files.predictions.empty())
    log::info("wrote {} (predictions {}; {})", files.predictions.string(), which,
              size(files.predictions));
  if (!files.embeddings.empty())
    log::info("wrote {} (embeddings {}; {})", files.embeddings.string(), which,
              size(files.embeddings));
}

}  // namespace

// The command line checks these too; a library caller (train() or a mode's own entry point,
// such as train_dynamic()) gets the same refusals.
void check_run_options(const TrainOptions& options) {
  TESSEL_EXPECTS(options.epochs >= 1 && options.epochs <= kMaxEpochs,
                 "epochs = {} is outside [1, {}]", options.epochs, kMaxEpochs);
  TESSEL_EXPECTS(options.eval_every >= 0, "--eval-every must be >= 0, got {}",
                 options.eval_every);
  // Without evaluation there is no validation metric to stop on or to reach.
  TESSEL_EXPECTS(options.eval_every > 0 || options.patience <= 0,
                 "--patience {} needs evaluation, and --eval-every 0 never evaluates",
                 options.patience);
  TESSEL_EXPECTS(options.eval_every > 0 || options.target_acc <= 0,
                 "--target-acc {} needs evaluation, and --eval-every 0 never evaluates",
                 options.target_acc);
  TESSEL_EXPECTS(options.checkpoint_every >= 0, "--checkpoint-every must be >= 1, got {}",
                 options.checkpoint_every);
  TESSEL_EXPECTS(std::isfinite(options.time_budget_s) && options.time_budget_s >= 0,
                 "--time-budget must be a positive number of seconds, got {}",
                 options.time_budget_s);
  TESSEL_EXPECTS(std::isfinite(options.optimizer.lr) && options.optimizer.lr > 0,
                 "--lr must be a positive finite number, got {}", options.optimizer.lr);
}

RunInfo graph_run_info(const Trainer& /*trainer*/, const TrainerContext& context) {
  return graph_run_info_with(context, nlohmann::json::object(), context.options.model.layers);
}

RunInfo graph_run_info_with(const TrainerContext& context, const nlohmann::json& model_fields,
                            int layers_shown) {
  const TrainOptions& options = context.options;
  return {.mode = options.mode,
          .model_json = model_signature(options, model_fields),
          .setup_line = fmt::format("{} training: {} x {}, {} {} layers hidden {}, {} "
                                    "nodes, GEMM {}",
                                    options.mode, log::counted(context.comm.size(), "rank"),
                                    log::counted(context.threads, "thread"), options.model.kind,
                                    layers_shown,
                                    options.model.hidden, context.manifest.num_nodes,
                                    kernels::cpu_gemm_backend()),
          .runtime_line = "",
          .metric = {},
          .own_comms = {}};
}

namespace {

// The host block cache's cap on idle blocks when a rank's memory is budgeted (out of core).
constexpr std::size_t kBudgetedHostCacheBytes = std::size_t{64} << 20;

// Opens the --metrics file (its folder made first): a link or a non-regular file is refused in
// the same operation as the open.
int open_metrics_file(const fs::path& path, bool* created) {
  datasets::make_parent_folders(path, "--metrics");
  return datasets::open_regular_for_writing(path, "--metrics", created);
}

// The --metrics file from the start of a run until the epochs take it over; a file this run
// made is removed if the run fails before (a setup error leaves no empty metrics file).
class EarlyMetricsFile {
public:
  EarlyMetricsFile(const comm::Communicator& comm, const TrainOptions& options)
      : path_(options.metrics_path) {
    if (comm.rank() == 0 && !path_.empty() && options.predict_from.empty())
      fd_ = open_metrics_file(path_, &created_);
  }
  ~EarlyMetricsFile() {
    if (fd_ < 0) return;
    ::close(fd_);
    std::error_code ec;
    if (created_) fs::remove(path_, ec);
  }
  EarlyMetricsFile(const EarlyMetricsFile&) = delete;
  EarlyMetricsFile& operator=(const EarlyMetricsFile&) = delete;
  int release() { return std::exchange(fd_, -1); }

private:
  fs::path path_;
  int fd_ = -1;
  bool created_ = false;
};

} // namespace

TrainResult run_mode(comm::Communicator& comm, const TrainOptions& options_in,
                     const ModeInfo& mode) {
  TrainOptions options = options_in;
  Stopwatch setup_watch;
  // Opened before anything else, so what is checked is what is written (no moment between a
  // check at the start and an open after the setup).
  EarlyMetricsFile metrics(comm, options);
  const int threads = choose_threads(options.threads);
  kernels::set_cpu_threads(threads);
  LoadedPart loaded = mode.load(comm, options);
  RuntimeHolder runtime = make_runtime(comm, options, mode);
  TrainerContext context{comm,           options, loaded.manifest, loaded.part,
                         runtime.runtime, loaded,  threads};
  std::unique_ptr<Trainer> trainer;
  {
    const ScopedActivity activity(loaded.activity);
    trainer = mode.make(context);
  }
  // Out of core the rank's memory is budgeted: the tensors the setup freed go back to the
  // system instead of waiting idle in the host block cache for sizes the steps may never ask
  // for, and the cache keeps at most 64 MiB of idle blocks (not 1 GiB): at scale 0.03 of
  // papers100M's shape, 2 ranks, 30 steps, a rank's peak fell from 2,354 to 1,641 MiB with the
  // same losses and no slower steps (A B A B, docs/performance-scale.md).
  const bool memory_budgeted = loaded.feature_rows && !loaded.feature_rows->in_memory();
  if (memory_budgeted) {
    const std::size_t freed = device_memory::host_cache_release_idle();
    device_memory::host_cache_set_limit(
        std::min(device_memory::host_cache_limit(), kBudgetedHostCacheBytes));
    log::debug("released {:.0f} MiB of idle host blocks after the setup",
               static_cast<double>(freed) / 1048576.0);
  }
  RunInfo info = mode.describe(*trainer, context);
  info.memory_budgeted = memory_budgeted;
  info.runtime_line = runtime.placement.empty()
                          ? runtime.description
                          : runtime.description + "\n" + runtime.placement;
  if (!options.predict_from.empty()) {
    // Inference only: the checkpoint's parameters, the mode's whole-graph prediction.
    CheckpointMeta expect;
    expect.model_json = info.model_json;
    expect.mode = info.mode;
    expect.seed = options.seed;
    expect.metric_max = info.metric.max_value;
    for (const std::string& name : info.metric.kept_at_best)
      expect.kept_at_best[name] = 0;
    const CheckpointMeta loaded = agreed([&] {
      return load_checkpoint(options.predict_from.parent_path(), expect, trainer->parameters(),
                             trainer->optimizer(), options.predict_from.filename().string());
    });
    write_run_outputs(comm, *trainer, options,
                      fmt::format("by the model of epoch {} in {}", loaded.epoch,
                                  options.predict_from.string()));
    TrainResult result;
    result.mode = options.mode;
    return result;
  }
  return drive_training(comm, options, runtime.runtime, *trainer, info, setup_watch,
                        metrics.release());
}

namespace {

// The parameters and optimizer state of one epoch, kept on the host (--save best).
struct KeptEpoch {
  int epoch = 0;
  std::vector<Tensor> values;
  std::vector<std::pair<std::string, Tensor>> optimizer_state;
};

// Collective (the gather).
void keep_epoch(Trainer& trainer, KeptEpoch& kept) {
  trainer.gather_parameters();
  kept.values.clear();
  for (const nn::Parameter* p : trainer.parameters())
    kept.values.push_back(p->value.device().is_cpu() ? p->value.clone()
                                                     : p->value.to(Device::cpu()));
  kept.optimizer_state.clear();
  for (const auto& [name, t] : trainer.optimizer().state())
    kept.optimizer_state.emplace_back(name, t.device().is_cpu() ? t.clone() : t.to(Device::cpu()));
}

// Puts a kept epoch back on every rank: each rank's own parameters are among them, so a mode
// that spreads its model over ranks (pipeline) gathers the same model again.
void restore_epoch(Trainer& trainer, const KeptEpoch& kept) {
  const auto params = trainer.parameters();
  TESSEL_ASSERT(params.size() == kept.values.size(), "restore_epoch: {} parameters, {} kept",
                params.size(), kept.values.size());
  for (std::size_t i = 0; i < params.size(); ++i) params[i]->value.copy_from(kept.values[i]);
  trainer.optimizer().load_state(kept.optimizer_state);
}

// One run of epochs and the state its steps share: the checkpoint metadata, the result filled
// epoch by epoch, the metrics file written as training goes and the epoch kept for --save best.
class TrainingRun {
public:
  TrainingRun(comm::Communicator& comm, const TrainOptions& options, const Runtime& runtime,
              Trainer& trainer, const RunInfo& info, int metrics_fd)
      : comm_(comm), data_(*runtime.data), options_(options), runtime_(runtime), trainer_(trainer),
        info_(info), metric_(info.metric), metrics_fd_(metrics_fd) {
    meta_.seed = options.seed;
    meta_.model_json = info.model_json;
    meta_.mode = info.mode;
    meta_.metric_max = info.metric.max_value;
    result_.mode = info.mode;
    result_.metric = metric_.name;
    result_.higher_is_better = metric_.higher_is_better;
    result_.has_valid = metric_.picks_best;
    // 0 until an epoch is the best (and the names a resume reads from the checkpoint).
    for (const std::string& name : metric_.kept_at_best)
      result_.kept_at_best[name] = 0;
    meta_.kept_at_best = result_.kept_at_best;
    // The communicators whose bytes an epoch counts, each once: the data communicator is the
    // control one on the CPU.
    for (comm::Communicator* c : {&comm_, &data_})
      if (std::find(counted_.begin(), counted_.end(), c) == counted_.end()) counted_.push_back(c);
    for (comm::Communicator* c : info.own_comms)
      if (std::find(counted_.begin(), counted_.end(), c) == counted_.end()) counted_.push_back(c);
  }

  ~TrainingRun() {
    if (metrics_ != nullptr) std::fclose(metrics_);
    if (metrics_fd_ >= 0) ::close(metrics_fd_);
  }
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  TrainResult run(const Stopwatch& setup_watch) {
    if (!options_.resume_dir.empty()) resume();
    open_metrics();
    comm_.barrier();
    result_.setup_s = setup_watch.seconds();
    log::info("{}, setup {:.2f} s", info_.setup_line, result_.setup_s);
    if (!info_.runtime_line.empty()) log::info("{}", info_.runtime_line);

    // --save best: the best epoch's model is kept as training goes, for the outputs written
    // after the last epoch (not when nothing picks a best epoch: then the last one is written).
    keep_best_ = options_.save == SaveChoice::best && metric_.picks_best && writes_outputs() &&
                 options_.eval_every > 0;
    // Whether any rank has a peer on another host: then the epoch lines split the bytes sent.
    several_hosts_ =
        comm_.allreduce_value<int>(comm_.peers_on_other_hosts(), comm::ReduceOp::max) > 0;
    last_epoch_ = first_epoch_ - 1;
    // What the epochs allocate is kept from one to the next (see run_epoch).
    host_blocks_ = device_memory::HostBlockKeeper();
    Stopwatch wall;
    for (int epoch = first_epoch_; epoch <= options_.epochs; ++epoch) {
      last_epoch_ = epoch;
      if (run_epoch(epoch, wall)) break;
    }
    finish();
    return std::move(result_);
  }

private:
  // Whether the run writes predictions, embeddings or checkpoints after its last epoch.
  bool writes_outputs() const {
    return !options_.predictions_path.empty() || !options_.embeddings_path.empty() ||
           !options_.checkpoint_dir.empty();
  }

  void resume() {
    const CheckpointMeta loaded = agreed([&] {
      CheckpointMeta m =
          load_checkpoint(options_.resume_dir, meta_, trainer_.parameters(), trainer_.optimizer());
      TESSEL_EXPECTS(options_.epochs > m.epoch,
                     "{}: the checkpoint is after epoch {}, so --epochs {} leaves nothing to "
                     "train (--epochs counts from the start of the run: give more than {})",
                     (options_.resume_dir / "checkpoint.h5").string(), m.epoch, options_.epochs,
                     m.epoch);
      return m;
    });
    first_epoch_ = loaded.epoch + 1;
    // The summary covers the whole run, not only the epochs after resuming (the best values
    // are those of the mode's validation metric).
    result_.best_valid_acc = loaded.best_valid_acc;
    result_.test_acc_at_best = loaded.test_acc_at_best;
    result_.best_epoch = loaded.best_epoch;
    result_.time_to_target_s = loaded.time_to_target_s;
    // A checkpoint without a kept field (written before it was kept) holds it as 0.
    if (loaded.best_epoch > 0)
      for (auto& [name, value] : result_.kept_at_best) {
        const auto it = loaded.kept_at_best.find(name);
        value = it == loaded.kept_at_best.end() ? 0.0 : it->second;
      }
    wall_offset_ = loaded.wall_s;
    log::info("resumed from {} after epoch {}", options_.resume_dir.string(), loaded.epoch);
  }

  void open_metrics() {
    if (comm_.rank() != 0 || options_.metrics_path.empty()) return;
    if (metrics_fd_ < 0) metrics_fd_ = open_metrics_file(options_.metrics_path, nullptr);
    metrics_ = ::fdopen(metrics_fd_, "w");
    TESSEL_EXPECTS(metrics_ != nullptr, "cannot write metrics file {}: {}",
                   options_.metrics_path.string(), std::strerror(errno));
    metrics_fd_ = -1;
  }

  // The metrics file is written as training goes (it can be watched live), so a failed write
  // (a full disk) ends the run there: the torn file is removed and the error names it.
  void write_metrics(const nlohmann::json& line, const char* what) {
    if (metrics_ == nullptr) return;
    const std::string text = line.dump() + "\n";
    errno = 0;
    if (std::fwrite(text.data(), 1, text.size(), metrics_) == text.size() &&
        std::fflush(metrics_) == 0)
      return;
    const int write_errno = errno;
    std::fclose(metrics_);
    metrics_ = nullptr;
    std::error_code ec;
    fs::remove(options_.metrics_path, ec);
    TESSEL_FAIL("cannot write metrics file {} ({}): {}; the partial file was removed",
                options_.metrics_path.string(), what,
                write_errno ? std::strerror(write_errno) : "write failed");
  }

  // Trains, evaluates, records, logs and checkpoints one epoch; whether it is the last.
  bool run_epoch(int epoch, const Stopwatch& wall) {
    maybe_inject_fault(comm_.rank(), epoch, options_.mode);
    for (comm::Communicator* c : counted_)
      c->reset_bytes_sent();
    Stopwatch epoch_watch;
    PhaseTimes phases;
    EpochMetrics m;
    m.epoch = epoch;
    m.loss = trainer_.train_epoch(epoch, phases, m.extra);
    // The host blocks of a training pass and of an evaluation stay idle in the cache between
    // them and between epochs: past its default cap (a 1M-node full-batch step holds more)
    // the cache would free them and every epoch would fault 400-500 MiB in again. Not when the
    // memory is budgeted (out of core): there the training pass's idle blocks, kept beside an
    // evaluation whose blocks have other sizes, took a rank from 2,990 to 5,132 MiB at scale
    // 0.03 of papers100M's shape; an evaluation starts with none of them.
    if (!info_.memory_budgeted) host_blocks_.keep();
    // The loss is all-reduced and the parameters are the same on every rank, so every rank
    // stops here together.
    stop_if_not_finite(comm_, epoch, m.loss, trainer_.parameters(), options_);
    const bool last = epoch == options_.epochs ||
                      (options_.time_budget_s > 0 && wall.seconds() >= options_.time_budget_s);
    Accuracy values;
    if (options_.eval_every > 0 && (epoch % options_.eval_every == 0 || last)) {
      if (info_.memory_budgeted) device_memory::host_cache_release_idle();
      values = evaluate(phases, m);
      if (info_.memory_budgeted)
        device_memory::host_cache_release_idle();
      else
        host_blocks_.keep();
    }
    measure_epoch(epoch_watch.seconds(), phases, m);
    m.wall_s = wall_offset_ + wall.seconds();
    trainer_.end_epoch(m);
    note_best(m, values);
    log_epoch(m, values);
    write_epoch_line(m);
    const double epoch_wall_s = m.wall_s;
    const bool stop = last || out_of_patience(m);
    result_.epochs.push_back(std::move(m));
    checkpoint(epoch, stop, epoch_wall_s);
    return stop;
  }

  // The trainer's evaluation, recorded in `m` under the metric's names.
  Accuracy evaluate(PhaseTimes& phases, EpochMetrics& m) {
    const Accuracy values = trainer_.evaluate(phases);
    m.evaluated = true;
    if (metric_.name == "acc") {
      m.train_acc = values.train;
      m.valid_acc = values.valid;
      m.test_acc = values.test;
    } else {
      m.extra["train_" + metric_.name] = values.train;
      m.extra["valid_" + metric_.name] = values.valid;
      m.extra["test_" + metric_.name] = values.test;
    }
    return values;
  }

  // The epoch's seconds, phases and bytes sent (by every counted communicator) over all ranks.
  // Collective.
  void measure_epoch(double local_epoch_s, const PhaseTimes& phases, EpochMetrics& m) {
    // Report the slowest rank: that is the epoch time the job sees.
    m.epoch_s = comm_.allreduce_value(local_epoch_s, comm::ReduceOp::max);
    for (const auto& [name, s] : phases.all())
      m.phases[name] = comm_.allreduce_value(s, comm::ReduceOp::max);
    std::array<std::int64_t, 2> sent_bytes = {0, 0};
    for (const comm::Communicator* c : counted_) {
      sent_bytes[0] += c->bytes_sent();
      sent_bytes[1] += c->bytes_sent_between_hosts();
    }
    comm_.allreduce(std::span<std::int64_t>(sent_bytes));
    m.comm_bytes = sent_bytes[0];
    m.comm_bytes_between_hosts = sent_bytes[1];
    m.several_hosts = several_hosts_;
  }

  // The best epoch so far and the time to the target, after an epoch.
  void note_best(const EpochMetrics& m, const Accuracy& values) {
    // The first evaluated epoch is the best so far even at accuracy 0 (e.g. no validation
    // nodes), so an evaluated run never reports "epoch 0".
    // A non-finite validation value (outputs that overflowed while the loss stayed finite) is
    // never the best: NaN would compare false against everything after it.
    if (m.evaluated && std::isfinite(values.valid) &&
        (result_.best_epoch == 0 || !metric_.picks_best ||
         (metric_.higher_is_better ? values.valid > result_.best_valid_acc
                                   : values.valid < result_.best_valid_acc))) {
      result_.best_valid_acc = values.valid;
      result_.test_acc_at_best = values.test;
      result_.best_epoch = m.epoch;
      for (auto& [name, value] : result_.kept_at_best)
        value = m.extra.contains(name) ? m.extra.at(name).get<double>() : 0.0;
      if (keep_best_) {
        keep_epoch(trainer_, best_);
        best_.epoch = m.epoch;
      }
    }
    // A target is a value to reach from below (an accuracy or an AUC).
    if (m.evaluated && metric_.higher_is_better && options_.target_acc > 0 &&
        result_.time_to_target_s < 0 && values.valid >= options_.target_acc)
      result_.time_to_target_s = m.wall_s;
  }

  // --patience: whether the validation metric has gone that many epochs without improving
  // (the best epoch and the epoch are the same on every rank, so every rank stops together).
  bool out_of_patience(const EpochMetrics& m) {
    if (options_.patience <= 0 || !metric_.picks_best || !m.evaluated ||
        result_.best_epoch == 0 || m.epoch - result_.best_epoch < options_.patience)
      return false;
    result_.stopped_early = true;
    if (!options_.quiet)
      log::info("stopping after epoch {}: the validation {} has not improved for {} epochs "
                "(--patience {}; best at epoch {})",
                m.epoch, metric_.name, m.epoch - result_.best_epoch, options_.patience,
                result_.best_epoch);
    return true;
  }

  void log_epoch(const EpochMetrics& m, const Accuracy& values) const {
    // With --eval-every N the epochs between evaluations print nothing unless --verbose.
    if (options_.quiet || !(m.evaluated || options_.verbose)) return;
    std::string split;
    for (const auto& [name, s] : m.phases)
      split += fmt::format(" {} {:.3f}", name, s);
    // The metric's values only for epochs that evaluated (--eval-every), not as zeros.
    // Without a validation split its value is "n/a", never a 0 that reads as a result.
    std::string evaluation =
        m.evaluated
            ? fmt::format("{} train {:.4f} valid {} test {:.4f}", metric_.name, values.train,
                          metric_.picks_best ? fmt::format("{:.4f}", values.valid)
                                             : std::string("n/a"),
                          values.test)
            : std::string("not evaluated");
    std::string sent = format_bytes(static_cast<double>(m.comm_bytes));
    if (m.several_hosts)
      sent += fmt::format(" ({} between hosts)",
                          format_bytes(static_cast<double>(m.comm_bytes_between_hosts)));
    if (m.evaluated) evaluation += m.log_evaluation_suffix;
    if (!m.log_sent.empty()) sent = m.log_sent;
    // Out-of-core features: the reader's hit rate, bytes and seconds.
    if (m.extra.contains("feature_hit_rate"))
      sent += fmt::format(" | features hit {:.1f}% read {} in {:.3f} s",
                          100.0 * m.extra["feature_hit_rate"].get<double>(),
                          format_bytes(m.extra["feature_bytes_read"].get<double>()),
                          m.extra["feature_read_s"].get<double>());
    log::result("epoch {:4d} | loss {:.4f} | {} | {:.3f} s ({}) | sent {}", m.epoch, m.loss,
                evaluation, m.epoch_s, split.empty() ? std::string("-") : split.substr(1), sent);
  }

  void write_epoch_line(const EpochMetrics& m) {
    nlohmann::json record = m.to_json();
    // Without a validation split the value is absent (null), not a 0 that reads as a result.
    if (m.evaluated && !metric_.picks_best) {
      record["valid_" + metric_.name] = nullptr;
      if (metric_.name == "acc") record["valid_acc"] = nullptr;
    }
    write_metrics(record, "an epoch line");
  }

  // Always after the last epoch (a resume needs it), and every N epochs when asked.
  void checkpoint(int epoch, bool last, double epoch_wall_s) {
    if (options_.checkpoint_dir.empty() ||
        !(last || (options_.checkpoint_every > 0 && epoch % options_.checkpoint_every == 0)))
      return;
    meta_.epoch = epoch;
    trainer_.gather_parameters();
    meta_.best_valid_acc = result_.best_valid_acc;
    meta_.test_acc_at_best = result_.test_acc_at_best;
    meta_.best_epoch = result_.best_epoch;
    meta_.time_to_target_s = result_.time_to_target_s;
    meta_.wall_s = epoch_wall_s;
    meta_.kept_at_best = result_.kept_at_best;
    if (comm_.rank() == 0)
      save_checkpoint(options_.checkpoint_dir, meta_, trainer_.parameters(), trainer_.optimizer());
    comm_.barrier();
  }

  // After the last epoch: the final parameters' checksums, the summary line, the chosen epoch's
  // outputs and its checkpoint.
  void finish() {
    result_.peak_rss_bytes =
        comm_.allreduce_value<std::int64_t>(peak_rss_bytes(), comm::ReduceOp::max);
    checksum_parameters();
    nlohmann::json summary = {{"summary", true},
                              {"mode", info_.mode},
                              // The run's last epoch (a resumed run counts from the start),
                              // and the epochs this process trained.
                              {"epochs", last_epoch_},
                              {"epochs_this_run", static_cast<int>(result_.epochs.size())},
                              {"stopped_early", result_.stopped_early},
                              {"peak_rss_bytes", result_.peak_rss_bytes},
                              {"setup_s", result_.setup_s}};
    // The outputs of the chosen epoch: the best one kept above (when it is not the last, its
    // model is put back first, below), else the last.
    const bool have_best = keep_best_ && best_.epoch > 0;
    const int saved_epoch = have_best ? best_.epoch : last_epoch_;
    const std::string saved_which =
        have_best ? (saved_epoch == last_epoch_ ? "best and last" : "best") : "last";
    const std::string outcome = trainer_.finish(comm_, runtime_, result_, summary);
    if (writes_outputs()) {
      summary["save"] = option_word(options_.save);
      summary["saved_epoch"] = saved_epoch;
    }
    write_metrics(summary, "the summary");
    close_metrics();
    if (have_best && best_.epoch != last_epoch_) restore_epoch(trainer_, best_);
    write_run_outputs(comm_, trainer_, options_,
                      fmt::format("at epoch {}, the {} epoch", saved_epoch, saved_which));
    if (!options_.checkpoint_dir.empty() && have_best) {
      save_best_checkpoint();
    } else if (!options_.checkpoint_dir.empty() && comm_.rank() == 0) {
      log::info("wrote {} (epoch {})", (options_.checkpoint_dir / "checkpoint.h5").string(),
                last_epoch_);
    }
    log::result("{}", outcome);
  }

  // The sum of each final parameter, in the result. Collective (the gather).
  void checksum_parameters() {
    trainer_.gather_parameters();
    for (nn::Parameter* p : trainer_.parameters()) {
      const Tensor host = p->value.device().is_cpu() ? p->value : p->value.to(Device::cpu());
      double sum = 0;
      for (std::int64_t i = 0; i < host.numel(); ++i)
        sum += host.data<float>()[i];
      result_.final_parameters_checksum.push_back(sum);
    }
  }

  void close_metrics() {
    if (metrics_ == nullptr) return;
    const bool closed = std::fclose(metrics_) == 0;
    metrics_ = nullptr;
    TESSEL_EXPECTS(closed, "cannot write metrics file {}: closing it failed",
                   options_.metrics_path.string());
  }

  // best.h5 beside the last epoch's checkpoint.h5 (which --resume continues from). Collective.
  void save_best_checkpoint() {
    CheckpointMeta best_meta = meta_;
    best_meta.epoch = best_.epoch;
    best_meta.best_valid_acc = result_.best_valid_acc;
    best_meta.test_acc_at_best = result_.test_acc_at_best;
    best_meta.best_epoch = result_.best_epoch;
    best_meta.kept_at_best = result_.kept_at_best;
    trainer_.gather_parameters();
    if (comm_.rank() == 0) {
      save_checkpoint(options_.checkpoint_dir, best_meta, trainer_.parameters(),
                      trainer_.optimizer(), "best.h5");
      log::info("wrote {} (the model at epoch {}, the best; checkpoint.h5 beside it holds epoch "
                "{} for --resume)",
                (options_.checkpoint_dir / "best.h5").string(), best_.epoch, last_epoch_);
    }
    comm_.barrier();
  }

  comm::Communicator& comm_;
  comm::Communicator& data_;
  const TrainOptions& options_;
  const Runtime& runtime_;
  Trainer& trainer_;
  const RunInfo& info_;
  const ValidationMetric metric_;
  std::vector<comm::Communicator*> counted_; // the epoch's bytes sent are theirs
  CheckpointMeta meta_;
  TrainResult result_;
  std::FILE* metrics_ = nullptr;
  int metrics_fd_ = -1; // opened at the start of the run, until open_metrics takes it
  int first_epoch_ = 1;
  int last_epoch_ = 0;
  double wall_offset_ = 0; // training seconds before this run (resumed runs)
  bool keep_best_ = false;
  bool several_hosts_ = false;
  KeptEpoch best_;
  device_memory::HostBlockKeeper host_blocks_;
};

} // namespace

TrainResult drive_training(comm::Communicator& comm, const TrainOptions& options,
                           const Runtime& runtime, Trainer& trainer, const RunInfo& info,
                           const Stopwatch& setup_watch, int metrics_fd) {
  return TrainingRun(comm, options, runtime, trainer, info, metrics_fd).run(setup_watch);
}

}  // namespace tessel::train
