// The interface each training mode implements; the shared driver (train.cpp) runs epochs,
// metrics, checkpoints and fault injection around it.
#pragma once

#include "tessel/train/checkpoint.hpp"

#include "tessel/comm/communicator.hpp"
#include "tessel/core/error.hpp"
#include "tessel/kernels/context.hpp"
#include "tessel/core/timer.hpp"
#include "tessel/nn/model.hpp"
#include "tessel/nn/optimizer.hpp"
#include "tessel/partition/part.hpp"
#include "tessel/partition/temporal.hpp"
#include "tessel/sampling/feature_rows.hpp"
#include "tessel/train/train.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessel::train {

// The train, valid and test values of a mode's validation metric (accuracy in the graph modes).
struct Accuracy {
  double train = 0, valid = 0, test = 0;
};

// The validation metric a mode reports and picks its best epoch by. "acc" fills the records'
// train_acc, valid_acc and test_acc; any other name adds train_<name>, valid_<name> and
// test_<name> to them instead. Without a validation range (picks_best false) the latest
// evaluation stands as the best. `kept_at_best` names fields of the records' `extra` that the
// driver keeps at the best epoch beside the metric's values: in the result
// (TrainResult::kept_at_best), in checkpoints (attribute <name>_at_best, a value in [0, 1]) and
// across a resume; a field the best epoch's record lacks is kept as 0.
struct ValidationMetric {
  std::string name = "acc";
  bool higher_is_better = true;
  bool picks_best = true;
  std::vector<std::string> kept_at_best;
  double max_value = 1.0;  // the metric's largest value (an MSE: unbounded)
};

// Where a trainer runs: its device, the device's kernel context, the control communicator
// (MPI, host memory: counts, metrics, barriers) and the data communicator (tensors: NCCL, or
// MPI staged through pinned host buffers; the control communicator itself on the CPU).
struct Runtime {
  Device device = Device::cpu();
  kernels::Context* context = nullptr;
  comm::Communicator* control = nullptr;
  comm::Communicator* data = nullptr;
};

// What a run writes after its last epoch (or `tessel predict`): --predictions, --embeddings.
struct OutputFiles {
  std::filesystem::path predictions;
  std::filesystem::path embeddings;
  // Link prediction: the (src, dst) pairs to score into `predictions` (`tessel predict
  // --edges`); empty: the test split.
  std::filesystem::path edges;
};

// A training mode as the shared driver runs it. The driver does what every mode shares (epochs,
// evaluation schedule, best epoch, metrics records, bytes sent, checkpoints, resume, outputs);
// what only one mode does stays inside that mode.
class Trainer {
 public:
  virtual ~Trainer() = default;
  // Every parameter of the whole model, in a fixed order (checkpoints, checksums): this rank's
  // view, not collective (see gather_parameters).
  virtual std::vector<nn::Parameter*> parameters() = 0;
  virtual nn::Optimizer& optimizer() = 0;
  // Collective, before parameters() and optimizer() state are read for a checkpoint or the
  // final checksum: modes that spread the model over ranks gather it here.
  virtual void gather_parameters() {}
  // One epoch of training (all its steps, optimizer updates included); returns the mean
  // training loss over the whole graph's training nodes. Adds seconds per phase to `phases`
  // and mode-specific numbers to `extra`. Collective.
  virtual double train_epoch(int epoch, PhaseTimes& phases, nlohmann::json& extra) = 0;
  // The validation metric's train, valid and test values of the current parameters over the
  // whole graph (no dropout). Collective.
  virtual Accuracy evaluate(PhaseTimes& phases) = 0;
  // After the driver filled an epoch's record (its bytes counted, before the best epoch is
  // picked): the mode's own fields, and its wording of the epoch's log line
  // (EpochMetrics::log_evaluation_suffix, log_sent). Collective.
  virtual void end_epoch(EpochMetrics& /*m*/) {}
  // The files named (an empty path is not written): predicted class and logits of every node,
  // and the last hidden layer's output of every node, written by rank 0 in source node order.
  // Collective.
  virtual void write_outputs(const OutputFiles& files) = 0;
  // After the last epoch: fills the mode's part of `result` and of the metrics file's summary
  // record (`summary` already holds the mode, epochs, peak RSS and setup seconds) and returns
  // the run's closing log line, which the driver logs once the outputs are written. Collective.
  // The graph modes': the best epoch, the GEMM backend, time to target and device memory.
  virtual std::string finish(comm::Communicator& comm, const Runtime& runtime, TrainResult& result,
                             nlohmann::json& summary);
};

// What a mode's setup hands the shared driver besides its trainer.
struct RunInfo {
  std::string mode;        // the name records, checkpoints and the result carry
  std::string model_json;  // the model signature a checkpoint must match to resume
  std::string setup_line;  // logged once set up, followed by ", setup <seconds> s"
  std::string runtime_line;  // logged after it when not empty
  ValidationMetric metric;   // what evaluate() returns, and how the best epoch is picked
  // Communicators of the mode's own beside the runtime's control and data ones: the driver
  // resets their bytes sent at each epoch's start and counts them with the epoch's.
  std::vector<comm::Communicator*> own_comms;
  // Features read from the part file within --feature-memory: the rank's memory is budgeted,
  // so the host block cache keeps at most 64 MiB of idle blocks and the driver frees them
  // before and after each evaluation (see run_mode and drive_training).
  bool memory_budgeted = false;
};

// Refuses options no mode can run with (epochs, --eval-every, --checkpoint-every, --time-budget,
// --lr), with the command line's messages; every entry point calls it before its setup.
void check_run_options(const TrainOptions& options);

// The epochs of a run: resume, training, evaluation, best epoch, metrics records, checkpoints,
// time budget, fault injection, then the summary and predictions. `setup_watch` started with
// the run's setup. `metrics_fd`: the --metrics file (rank 0), opened at the start of the run
// and owned by the run from here; -1 opens it here. Collective.
TrainResult drive_training(comm::Communicator& comm, const TrainOptions& options,
                           const Runtime& runtime, Trainer& trainer, const RunInfo& info,
                           const Stopwatch& setup_watch, int metrics_fd = -1);

// What a mode's load step read of the partition folder for this rank, before its runtime is
// chosen: the graph modes' manifest and part, or the temporal mode's manifest.
struct LoadedPart {
  partition::Manifest manifest;  // the graph modes (empty in the temporal mode)
  partition::Part part;
  std::optional<partition::TemporalManifest> temporal;  // the temporal mode
  // What building the trainer does, for the message of an allocation that fails there.
  std::string activity;
  // Set: part.features is empty and the owned rows are read from the part file through this
  // (--feature-memory out of core, sampled mode).
  std::shared_ptr<sampling::OwnedFeatureRows> feature_rows;
};

// Shared state a mode is built from. `comm` is the runtime's control communicator.
struct TrainerContext {
  comm::Communicator& comm;
  const TrainOptions& options;
  const partition::Manifest& manifest;
  partition::Part& part;
  const Runtime& runtime;
  const LoadedPart& loaded;
  int threads = 1;  // this rank's OpenMP threads
};

// The graph modes' load step: read_rank_partition, the model's input and output widths from the
// manifest, and --normalize-features applied to the part's rows. Collective.
// --feature-memory: a budget below the part's features is refused (these modes hold every row).
LoadedPart load_graph_part(comm::Communicator& comm, TrainOptions& options);
// Sampled mode's load step: load_graph_part, but a rank whose --feature-memory (given, or auto:
// the memory limit, see memory_headroom) does not hold its part's features reads them from the
// part file within that budget (LoadedPart::feature_rows). Collective.
LoadedPart load_sampled_part(comm::Communicator& comm, TrainOptions& options);
// The graph modes' run description: the model signature and the setup line.
RunInfo graph_run_info(const Trainer& trainer, const TrainerContext& context);
// The same with the mode's own model fields added to model_json and `layers_shown` as the
// setup line's layer count (the pipeline: its SIGN MLP's hops, operator and MLP layers).
RunInfo graph_run_info_with(const TrainerContext& context, const nlohmann::json& model_fields,
                            int layers_shown);
// Pieces the modes share.
// TESSEL_FAULT_RANK=r TESSEL_FAULT_EPOCH=e: rank r fails at the start of epoch e (tests of the
// whole-job abort); TESSEL_FAULT_KIND=kill makes it die by SIGKILL; TESSEL_FAULT_MODE=m limits
// the fault to mode m (a later mode of a bench).
void maybe_inject_fault(int rank, int epoch, const std::string& mode);
// After an epoch's update: stops training with an error every rank reports alike (an
// AgreedInputError) naming the epoch and the first non-finite parameter when the all-reduced
// loss or a parameter is no longer finite. Collective.
void stop_if_not_finite(comm::Communicator& comm, int epoch, double loss,
                        const std::vector<nn::Parameter*>& params, const TrainOptions& options);
// Labels of the part's train, valid and test nodes, in split order.
std::vector<std::vector<std::int64_t>> split_labels(const partition::Part& part);
// Whole-graph accuracies of logits over the part's owned nodes (summed over ranks). Collective.
Accuracy split_accuracy(comm::Communicator& comm, const Tensor& logits,
                        const partition::Part& part, const partition::Manifest& manifest,
                        const std::vector<std::vector<std::int64_t>>& labels);
// Layer-wise full-neighbor inference over every owned node (Model::infer), with a progress
// line per layer on a terminal. Collective (the aggregators exchange halos).
// last_hidden, when given, receives the last hidden layer's output (Model::infer).
Tensor infer_all_nodes(nn::Model& model, const Tensor& features,
                       std::span<nn::Aggregator* const> aggregators,
                       Tensor* last_hidden = nullptr);
// Sums every parameter gradient over ranks: one allreduce of the model's flat gradient buffer
// on the model's device, on its main stream.
void allreduce_gradients(comm::Communicator& comm, nn::Model& model);
// Gathers (orig id, logits row) of owned nodes at rank 0 and writes the predictions file, one
// range of source ids per round (rank 0 holds a round's rows, never all). Collective.
void write_predictions_file(comm::Communicator& comm, const partition::Part& part,
                            const Tensor& logits_owned, const std::filesystem::path& path);
void write_predictions_file(comm::Communicator& comm, const partition::Part& part,
                            sampling::OwnedFeatureRows& logits, const std::filesystem::path& path);
// Gathers (orig id, row) of owned nodes at rank 0 and writes the embeddings file likewise;
// `layer` says which layer's output the rows are (the file's "layer" attribute). Collective.
void write_embeddings_file(comm::Communicator& comm, const partition::Part& part,
                           const Tensor& rows_owned, const std::string& layer,
                           const std::filesystem::path& path);
void write_embeddings_file(comm::Communicator& comm, const partition::Part& part,
                           sampling::OwnedFeatureRows& rows, const std::string& layer,
                           const std::filesystem::path& path);

}  // namespace tessel::train
