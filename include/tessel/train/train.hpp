// Training entry points shared by every mode: options, per-epoch metrics, results.
#pragma once

#include "tessel/comm/communicator.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/option_words.hpp"
#include "tessel/core/timer.hpp"
#include "tessel/kernels/row_codec.hpp"
#include "tessel/nn/link_decoder.hpp"
#include "tessel/nn/model.hpp"
#include "tessel/nn/optimizer.hpp"
#include "tessel/partition/part.hpp"
#include "tessel/sampling/negatives.hpp"
#include "tessel/train/feature_memory.hpp"
#include "tessel/train/mode_options.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessel::dist {
enum class HaloAggregation;  // tessel/dist/halo_aggregation.hpp
}

namespace tessel::train {

// --task: what the run learns. The graph modes train node classification (the default) or,
// with --task link, link prediction; dynamic mode also node regression (its default). The
// driver reads it (a link run loads a link store and its model outputs embeddings), so it is
// shared rather than one mode's.
enum class DynamicTask { node_regression, node_classification, link_prediction };

// --device: GPUs when every rank sees one (automatic), the CPU, or GPUs.
enum class DeviceChoice { automatic, cpu, cuda };
// --comm, the data plane for tensors on GPUs: NCCL with one GPU per rank, else MPI (automatic);
// NCCL; MPI, staged through pinned host memory.
enum class CommChoice { automatic, nccl, mpi };

// --normalize-features: none, or each row divided by its sum. --save: which epoch's model the
// outputs hold.
using partition::FeatureNormalization;
enum class SaveChoice { best, last };

// The command-line words of these options' values (tessel/core/option_words.hpp).
inline std::span<const OptionWord<DeviceChoice>> option_words(DeviceChoice) {
  static constexpr OptionWord<DeviceChoice> words[] = {
      {"auto", DeviceChoice::automatic}, {"cpu", DeviceChoice::cpu}, {"cuda", DeviceChoice::cuda}};
  return words;
}
inline std::span<const OptionWord<CommChoice>> option_words(CommChoice) {
  static constexpr OptionWord<CommChoice> words[] = {
      {"auto", CommChoice::automatic}, {"nccl", CommChoice::nccl}, {"mpi", CommChoice::mpi}};
  return words;
}
inline std::span<const OptionWord<DynamicTask>> option_words(DynamicTask) {
  static constexpr OptionWord<DynamicTask> words[] = {
      {"node-regression", DynamicTask::node_regression},
      {"node-classification", DynamicTask::node_classification},
      {"link-prediction", DynamicTask::link_prediction},
      {"link", DynamicTask::link_prediction}};
  return words;
}
inline std::span<const OptionWord<SaveChoice>> option_words(SaveChoice) {
  static constexpr OptionWord<SaveChoice> words[] = {{"best", SaveChoice::best},
                                                     {"last", SaveChoice::last}};
  return words;
}

struct TrainOptions {
  std::filesystem::path part_dir;
  std::string mode = "full";  // one of mode_names()
  DeviceChoice device = DeviceChoice::automatic;
  CommChoice comm = CommChoice::automatic;
  nn::ModelConfig model;
  nn::OptimizerConfig optimizer;
  int epochs = 200;
  std::uint64_t seed = 0;
  int threads = 0;                 // 0: cores of this node / ranks on this node
  FeatureNormalization normalize_features = FeatureNormalization::none;
  // --feature-memory: bytes of its part's feature rows a rank may hold (sampled mode reads the
  // rest from the part file; the other modes refuse a budget below their features).
  FeatureMemory feature_memory;
  double time_budget_s = 0;        // stop after this many seconds of training (0: no limit)
  double target_acc = 0;           // record when validation accuracy first reaches this
  int eval_every = 1;              // evaluate valid/test every N epochs (and at the last)
  // Stop once the validation metric has not improved for this many epochs (0: never; only
  // with a validation split). --mode dynamic sets it when not given.
  int patience = 0;
  std::filesystem::path metrics_path;      // JSON lines, rank 0
  std::filesystem::path checkpoint_dir;
  int checkpoint_every = 0;
  std::filesystem::path resume_dir;
  std::filesystem::path predictions_path;  // HDF5, rank 0
  std::filesystem::path embeddings_path;   // HDF5, rank 0: the last hidden layer of every node
  // `tessel predict`: no training; the model of this checkpoint file (its folder's best.h5 or
  // checkpoint.h5) predicts every node of the partition into predictions_path.
  std::filesystem::path predict_from;
  // `tessel predict --edges`: a link prediction model scores these (src, dst) pairs into
  // predictions_path instead of the test split (a text file of `src dst` or `src,dst` lines).
  std::filesystem::path predict_edges;
  bool quiet = false;                      // no per-epoch line
  bool verbose = false;                    // also the lines of epochs not evaluated
  // "best": --predictions, --embeddings (and DIR/best.h5 beside --checkpoint's checkpoint.h5) hold the epoch
  // with the best validation metric, or the last when nothing picks one; "last": the last.
  SaveChoice save = SaveChoice::best;
  // --task and link prediction's options: the full and dynamic modes read them.
  DynamicTask task = DynamicTask::node_regression;
  int negatives = 1;               // link prediction: sampled negatives per edge in training
  std::int64_t link_out_dim = 16;  // --task link: the width of the encoder's output
  // --task link: the decoder (--decoder) and the training negatives' distribution
  // (--negative-sampling).
  nn::LinkDecoderKind link_decoder = nn::LinkDecoderKind::dot;
  sampling::NegativeSampling link_negatives = sampling::NegativeSampling::uniform;
  // The options of options.mode alone, read as that mode's own type
  // (tessel/modes/<mode>.hpp: FullOptions, SampledOptions, PipelineOptions, DynamicOptions).
  ModeOptions mode_options;
};

// The full-batch mode's halo settings and traffic in one epoch, summed over the ranks (the
// exposed seconds: the slowest rank's). The metrics file records them under the names in the
// comments; `tessel bench` reads them from here.
struct HaloEpoch {
  kernels::RowCodec dtype = kernels::RowCodec::f32;                // halo_dtype
  dist::HaloAggregation aggregation{};  // halo_aggregation (post)
  std::int64_t pre_rows = 0;   // halo_pre_rows (written unless the aggregation is post)
  double boundary_sampling = 0;  // boundary_sampling (written when > 0)
  bool stale = false;            // stale_halo, stale_smoothing (written when stale)
  double stale_smoothing = 0;
  std::int64_t rows_sent = 0;    // halo_rows_sent: rows per forward exchange
  std::int64_t bytes = 0;        // halo_bytes: rows forward, as encoded
  std::int64_t grad_bytes = 0;   // halo_grad_bytes: gradients backward
  double exposed_s = 0;          // halo_exposed_s: seconds not hidden behind compute
  void write(nlohmann::json& record) const;
};

struct EpochMetrics {
  int epoch = 0;
  double loss = 0;
  double train_acc = 0, valid_acc = 0, test_acc = 0;
  bool evaluated = false;
  double epoch_s = 0;          // wall seconds of the epoch (max over ranks)
  double wall_s = 0;           // seconds since training started (after setup)
  std::int64_t comm_bytes = 0; // bytes sent by all ranks during the epoch
  // Of comm_bytes, those that went to a rank on another host (the rest stayed inside a host).
  std::int64_t comm_bytes_between_hosts = 0;
  bool several_hosts = false;  // the job's ranks run on more than one host
  std::map<std::string, double> phases;  // seconds per phase (max over ranks)
  nlohmann::json extra;        // mode-specific numbers (cache hit rate, bytes fetched, ...)
  std::optional<HaloEpoch> halo;  // the full-batch mode's (set by its end_epoch)
  // A mode's wording of the epoch's log line (not in to_json()): text after the validation
  // metric's values of an evaluated epoch, and the bytes-sent text in place of the usual one
  // (when not empty).
  std::string log_evaluation_suffix;
  std::string log_sent;
  nlohmann::json to_json() const;
};

// What a static-graph --task link run reports beside its metric (tessel bench's link rows).
struct LinkFigures {
  nn::LinkDecoderKind decoder = nn::LinkDecoderKind::dot;
  sampling::NegativeSampling negative_sampling = sampling::NegativeSampling::uniform;
  int negatives = 1;             // per training positive
  // The training positives an epoch trains: the whole graph's (full batch), those of the steps
  // the last epoch ran (sampled mode; fewer with --max-batches).
  std::int64_t train_edges = 0;
  // Test average precision at the best epoch (stores whose metric is AUC; none otherwise).
  std::optional<double> test_ap_at_best;
};

struct TrainResult {
  std::string mode;
  std::vector<EpochMetrics> epochs;
  // The validation metric that picks the best epoch, and whether higher is better: accuracy
  // ("acc") in every mode and task but dynamic mode's node regression ("mse", lower is better)
  // and link prediction ("auc"). best_valid_acc and test_acc_at_best hold that metric's
  // validation and test values at the best epoch.
  std::string metric = "acc";
  bool higher_is_better = true;
  bool has_valid = true;  // false: no validation split, best_valid_acc means nothing (n/a)
  double best_valid_acc = 0;
  double test_acc_at_best = 0;
  int best_epoch = 0;
  bool stopped_early = false;  // --patience ended the run before --epochs
  // The metric's other fields kept at the best epoch (dynamic mode: test_mrr), by name.
  std::map<std::string, double> kept_at_best;
  double time_to_target_s = -1;  // -1: target never reached
  std::int64_t peak_rss_bytes = 0;  // max over ranks
  double setup_s = 0;
  std::vector<double> final_parameters_checksum;  // sum of each parameter, for comparisons
  nlohmann::json summary;  // mode-specific results (dynamic: test MSE, bytes vs analytic, ...)
  std::optional<LinkFigures> link;  // a static-graph --task link run
};

// A rank's view of a partition folder: the manifest and its own part.
struct RankPartition {
  partition::Manifest manifest;
  partition::Part part;
};
// Reads `dir`/partition.json and `dir`/part-<rank>.h5 on every rank, each from the folder on its
// own host (shared storage, or a copy holding that host's parts). The ranks gather each other's
// outcome, so a file missing, damaged or of another partition on any rank, a partition.json
// that differs between hosts, or a part count other than the rank count stops every rank with
// one AgreedInputError that names each failing rank, its host and its file. Collective.
// features = false: the part without /node/feat (its shape is still checked).
// spill_graph, when given, is called with the agreed manifest before the part is read (on every
// rank: it may be collective, and any error it throws must be thrown alike on every rank, as an
// AgreedInputError); where it returns true, the part's column ids are read into a
// scratch-file mapping in TMPDIR (spill::Scope), which the kernel can write back and drop under
// memory pressure, instead of anonymous memory.
RankPartition read_rank_partition(
    comm::Communicator& comm, const std::filesystem::path& dir, bool features = true,
    const std::function<bool(const partition::Manifest&)>& spill_graph = nullptr);

// What the command line and other callers need to know of a mode; the table that holds these
// lives with the modes (one entry per mode), so no caller compares mode names.
struct ModeTraits {
  std::string name;
  bool runs_on_gpu = false;         // has a CUDA path: --device cuda (and auto) may pick a GPU
  bool temporal = false;            // trains on a temporal partition, and alone in a bench
  bool benched_by_default = false;  // in `tessel bench`'s default --modes
  std::optional<nn::ModelKind> only_model;  // the one model kind it trains (none: the GNNs)
  // Command-line flags only some modes read: those this mode reads. A flag named by no mode
  // applies to every mode; one named by others only is refused with this mode.
  std::vector<std::string> own_flags;
  // Defaults that fit the mode (and its task), for the flags the command line did not give:
  // given("--layers") says whether a flag was. Applied before the options are checked; may be
  // empty.
  std::function<void(TrainOptions&, const std::function<bool(const std::string&)>& given)>
      apply_defaults;
};
// Threads for OpenMP and OpenBLAS: requested, else OMP_NUM_THREADS when set, else this node's
// cores divided by the ranks running on it (so ranks, OpenMP and OpenBLAS never oversubscribe).
// Throws InputError when the requested or OMP_NUM_THREADS count exceeds max_threads().
int choose_threads(int requested);
// The most threads per rank Tessel accepts: 4x this node's hardware threads. Far beyond that,
// OpenMP fails to create threads or crashes while starting them.
int max_threads();

}  // namespace tessel::train
