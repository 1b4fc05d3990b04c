// Shared model/optimizer/sampling flags of `tessel train` and `tessel bench`.
#include "train_options.hpp"

#include "tessel/core/error.hpp"
#include "tessel/datasets/atomic_output.hpp"
#include "tessel/modes/modes.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace tessel::cli {



CLI::Validator partition_folder() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::error_code ec;
        if (std::filesystem::is_directory(text, ec)) return std::string();
        if (std::filesystem::exists(text, ec))
          return fmt::format("{} is a file, expected a partition folder (make one with `tessel "
                             "partition {} --parts K --out DIR`)",
                             text, text);
        return fmt::format("{}: no such folder (a partition folder made by `tessel partition`)",
                           text);
      },
      "DIR");
}

CLI::Validator seed_check() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::uint64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [at, ec] = std::from_chars(text.data(), end, value);
        if (text.empty() || text[0] == '-' || text[0] == '+' || ec != std::errc() || at != end)
          return fmt::format("'{}' is not a seed (a whole number in [0, 2^64 - 1])", text);
        return std::string();
      },
      "[0, 2^64 - 1]");
}

namespace {



// The model, the optimizer and what every mode reads (seed, threads, device, evaluation).
void add_common_flags(CLI::App& app, train::TrainOptions& o) {
  add_choice(app, "--model", o.model.kind,
             "gcn, sage or gat; with --mode dynamic: gcn-gru, gcn-lstm or evolvegcn-o; with "
             "--mode pipeline: sign-mlp (the default there)");
  add_checked(app, "--layers", o.model.layers,
              "number of GNN layers (dynamic node regression: 1 unless given)", CLI::Range(1, 16));
  add_checked(app, "--hidden", o.model.hidden,
              "hidden feature size (--model gat: the width of one head)", CLI::Range(1, 1 << 16));
  add_checked(app, "--heads", o.model.heads,
              "--model gat: attention heads of each hidden layer (concatenated)", CLI::Range(1, 64));
  add_checked(app, "--out-heads", o.model.out_heads,
              "--model gat: attention heads of the output layer (averaged)", CLI::Range(1, 64));
  add_checked(app, "--attn-dropout", o.model.attn_dropout,
              "--model gat: dropout probability on the attention coefficients",
              finite_range(0.0, 0.95));
  add_checked(app, "--dropout", o.model.dropout,
              "dropout probability on each layer's input (dynamic node regression: 0 unless "
              "given)",
              finite_range(0.0, 0.95));
  add_choice(app, "--optimizer", o.optimizer.kind, "adam or sgd");
  add_checked(app, "--lr", o.optimizer.lr, "learning rate",
              finite_range(0.0, kMaxLearningRate, true));
  add_checked(app, "--weight-decay", o.optimizer.weight_decay, "L2 weight decay",
              finite_range(0.0, 1.0));
  add_checked(app, "--momentum", o.optimizer.momentum, "SGD momentum", finite_range(0.0, 1.0, false, true));
  app.add_option("--seed", o.seed, "seed for initialization, dropout and sampling")
      ->check(seed_check())
      ->capture_default_str();
  app.add_option("--threads", o.threads,
                 fmt::format("OpenMP threads per rank, GEMM included, at most {} (4x this "
                             "node's hardware threads; default: OMP_NUM_THREADS if set, else "
                             "cores of the node / ranks on it)",
                             train::max_threads()))
      ->check(CLI::Range(1, train::max_threads()));
  add_choice(app, "--normalize-features", o.normalize_features,
             "input feature normalization: none or row (each row divided by the sum of the "
             "absolute values of its entries; all-zero rows stay zero)");
  app.add_option_function<std::string>(
         "--feature-memory",
         [&o](const std::string& text) { o.feature_memory = train::parse_feature_memory(text); },
         "bytes of its part's feature rows a rank holds (K, M, G suffixes: 64K, 2G), all, or "
         "auto (all when they fit the memory limit left after the graph and the model: cgroup "
         "memory.max or v1 memory.limit_in_bytes, else MemAvailable). Sampled mode on the CPU "
         "reads the rows that do not fit from the part file through a cache, and evaluation "
         "reads them in row blocks (GCN, SAGE), with the same results; the other modes refuse a "
         "budget below their features")
      ->default_str("auto");
  add_choice(app, "--device", o.device,
             "auto (a GPU when every rank sees one; rank takes GPU local_rank % visible), cpu or "
             "cuda; full, sampled and dynamic modes train on GPUs, pipeline mode on the CPU");
  add_choice(app, "--comm", o.comm,
             "data plane for tensors on GPUs: auto (NCCL with one GPU per rank, else MPI "
             "staged through pinned host memory), nccl or mpi");
  add_checked(app, "--eval-every", o.eval_every,
              "evaluate valid/test accuracy every N >= 1 epochs (and always after the last); 0: "
              "never (training only, e.g. to time it on a graph whose evaluation is long)",
              CLI::Range(0, 1000000));
}

} // namespace

void add_model_flags(CLI::App& app, train::TrainOptions& o, train::ModeFlagValues& modes) {
  add_common_flags(app, o);
  train::add_mode_flags(app, o, modes);
}

void check_mode_flags(const CLI::App& app, const std::vector<std::string>& modes) {
  for (const CLI::Option* option : app.get_options()) {
    if (option->count() == 0) continue;
    const std::string flag = "--" + (option->get_lnames().empty() ? std::string()
                                                                  : option->get_lnames().front());
    auto reads = [&flag](const std::string& mode) {
      const auto& own = train::mode_traits(mode).own_flags;
      return std::find(own.begin(), own.end(), flag) != own.end();
    };
    if (std::any_of(modes.begin(), modes.end(), reads)) continue;
    std::string owners;
    for (const auto& other : train::mode_names())
      if (reads(other)) owners += (owners.empty() ? "--mode " : " or --mode ") + other;
    TESSEL_EXPECTS(owners.empty(), "{} applies to {}, not {} {} (choose that mode or leave the "
                   "flag out)",
                   flag, owners, modes.size() == 1 ? "--mode" : "--modes",
                   fmt::format("{}", fmt::join(modes, ",")));
  }
}

void apply_mode_defaults(const CLI::App& app, train::TrainOptions& o) {
  const auto& defaults = train::mode_traits(o.mode).apply_defaults;
  if (!defaults) return;
  defaults(o, [&app](const std::string& flag) {
    const CLI::Option* option = app.get_option_no_throw(flag);
    return option != nullptr && option->count() > 0;
  });
}

void check_train_outputs(const train::TrainOptions& o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!o.checkpoint_dir.empty()) {
    const fs::path named = o.checkpoint_dir.has_filename() ? o.checkpoint_dir
                                                           : o.checkpoint_dir.parent_path();
    TESSEL_EXPECTS(!fs::is_symlink(named, ec),
                   "--checkpoint {}: is a symbolic link; give the folder itself",
                   o.checkpoint_dir.string());
    TESSEL_EXPECTS(!fs::exists(o.checkpoint_dir, ec) || fs::is_directory(o.checkpoint_dir, ec),
                   "--checkpoint {}: exists and is not a folder (a checkpoint is a folder that "
                   "holds checkpoint.h5)",
                   o.checkpoint_dir.string());
    datasets::refuse_overwriting_inputs(o.checkpoint_dir / "checkpoint.h5", {o.part_dir},
                                        "--checkpoint");
    datasets::refuse_overwriting_inputs(o.checkpoint_dir / "best.h5", {o.part_dir},
                                        "--checkpoint");
  }
  // The metrics file is written as training goes, not renamed into place: a FIFO would block
  // the run and a link or device would be written through. Checked here for one early line;
  // the open at the start of training checks again in the same operation (O_NOFOLLOW).
  if (!o.metrics_path.empty()) {
    const auto status = fs::symlink_status(o.metrics_path, ec);
    TESSEL_EXPECTS(!fs::exists(status) || fs::is_regular_file(status),
                   "--metrics {}: exists and is not a regular file; give another file name",
                   o.metrics_path.string());
  }
  // The run's inputs (the partition folder: parts, manifest, stores, precomputed features; the
  // checkpoint it resumes from) and its other outputs (the checkpoint it writes).
  std::vector<fs::path> inputs = {o.part_dir};
  if (!o.resume_dir.empty()) inputs.push_back(o.resume_dir);
  if (!o.checkpoint_dir.empty()) inputs.push_back(o.checkpoint_dir);
  if (!o.predict_from.empty()) inputs.push_back(o.predict_from);
  if (!o.predict_edges.empty()) inputs.push_back(o.predict_edges);
  const std::pair<const char*, fs::path> outputs[] = {{"--predictions", o.predictions_path},
                                                      {"--embeddings", o.embeddings_path},
                                                      {"--metrics", o.metrics_path}};
  for (const auto& [flag, path] : outputs)
    if (!path.empty()) datasets::refuse_overwriting_inputs(path, inputs, flag);
  for (std::size_t a = 0; a < std::size(outputs); ++a)
    for (std::size_t b = a + 1; b < std::size(outputs); ++b)
      if (!outputs[a].second.empty() && !outputs[b].second.empty())
        TESSEL_EXPECTS(fs::weakly_canonical(outputs[a].second, ec) !=
                           fs::weakly_canonical(outputs[b].second, ec),
                       "{} and {} name the same file {}", outputs[a].first, outputs[b].first,
                       outputs[b].second.string());
  // The graph modes' embeddings are the last hidden layer's output: a 1-layer GNN has none
  // (a link prediction encoder's are its output).
  const auto& traits = train::mode_traits(o.mode);
  const bool static_link = o.task == train::DynamicTask::link_prediction && !traits.temporal;
  TESSEL_EXPECTS(static_link || o.link_decoder == nn::LinkDecoderKind::dot,
                 "--decoder {} applies to --task link on a static graph only",
                 o.link_decoder);
  TESSEL_EXPECTS(static_link || o.link_negatives == sampling::NegativeSampling::uniform,
                 "--negative-sampling {} applies to --task link on a static graph only",
                 o.link_negatives);
  if (!o.embeddings_path.empty() && !traits.temporal && !traits.only_model &&
      o.task != train::DynamicTask::link_prediction)
    TESSEL_EXPECTS(o.model.layers >= 2,
                   "--embeddings writes the last hidden layer's output, and a {}-layer {} model "
                   "has no hidden layer (use --layers 2 or more)",
                   o.model.layers, o.model.kind);
}

void finish_train_options(const CLI::App& app, train::TrainOptions& o,
                          train::ModeFlagValues& modes) {
  train::finish_mode_flags(app, o, modes);
  // The graph modes train node classification or, with --task link, link prediction; node
  // regression is the dynamic mode's (it was run as classification).
  const CLI::Option* task = app.get_option_no_throw("--task");
  TESSEL_EXPECTS(task == nullptr || task->count() == 0 || train::mode_traits(o.mode).temporal ||
                     o.task != train::DynamicTask::node_regression,
                 "--task node-regression is dynamic mode's; --mode {} trains node-classification "
                 "(the default) or link",
                 o.mode);
  // The validators above refuse these already; kept for callers that fill options directly.
  TESSEL_EXPECTS(std::isfinite(o.optimizer.lr) && o.optimizer.lr > 0 &&
                     o.optimizer.lr <= kMaxLearningRate,
                 "--lr must be in (0, {}], got {}", kMaxLearningRate, o.optimizer.lr);
  TESSEL_EXPECTS(o.model.kind == nn::ModelKind::gat ||
                     (o.model.heads == 1 && o.model.out_heads == 1 && o.model.attn_dropout == 0),
                 "--heads, --out-heads and --attn-dropout are options of --model gat, not {}",
                 o.model.kind);
  // A mode that trains one model kind (the pipeline's SIGN MLP) takes it in place of the
  // default gcn; the GNN modes refuse the kinds such a mode owns.
  const std::optional<nn::ModelKind> only_model = train::mode_traits(o.mode).only_model;
  if (only_model) {
    if (o.model.kind == nn::ModelKind::gcn) o.model.kind = *only_model;
    TESSEL_EXPECTS(o.model.kind == *only_model, "--mode {} trains --model {}, not {}", o.mode,
                   *only_model, o.model.kind);
  } else {
    for (const std::string& name : train::mode_names()) {
      const std::optional<nn::ModelKind> owned = train::mode_traits(name).only_model;
      TESSEL_EXPECTS(!owned || o.model.kind != *owned,
                     "--model {} runs in --mode {}, not --mode {}", o.model.kind, name, o.mode);
    }
  }
  // The modes' checks of their flags (sampled: cache admission with --device cpu).
  train::check_mode_flag_values(o, modes);
  TESSEL_EXPECTS(std::isfinite(o.optimizer.weight_decay) && o.optimizer.weight_decay >= 0,
                 "--weight-decay must be >= 0, got {}",
                 o.optimizer.weight_decay);
  train::select_mode_options(o, modes);
}

}  // namespace tessel::cli
