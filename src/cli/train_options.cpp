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

CLI::Validator finite_range(double lo, double hi, bool lo_open, bool hi_open) {
  const std::string description =
      std::isinf(hi) ? fmt::format("finite, {} {}", lo_open ? ">" : ">=", lo)
                     : fmt::format("{}{}, {}{}", lo_open ? "(" : "[", lo, hi, hi_open ? ")" : "]");
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double value = 0;
        // CLI11's own Range lets NaN through (every comparison with NaN is false), and inf
        // passes an unbounded one: both are refused here.
        if (!CLI::detail::lexical_cast(text, value) || !std::isfinite(value))
          return fmt::format("'{}' is not a finite number", text);
        if (value < lo || value > hi || (lo_open && value == lo) || (hi_open && value == hi))
          return fmt::format("{} is outside {}", text,
                             std::isinf(hi) ? "[" + fmt::format("{}", lo) + ", inf)" : description);
        return std::string();
      },
      description);
}

CLI::Validator int_range(std::int64_t lo, std::int64_t hi) {
  const std::string description = fmt::format("[{}, {}]", lo, hi);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        std::int64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [at, ec] = std::from_chars(text.data(), end, value);
        if (ec == std::errc::result_out_of_range) return fmt::format("{} is outside {}", text, description);
        if (ec != std::errc() || at != end) return fmt::format("'{}' is not a whole number", text);
        if (value < lo || value > hi) return fmt::format("{} is outside {}", text, description);
        return std::string();
      },
      description);
}

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

// Most flags here: checked by CLI11 as they are parsed, their default shown in --help.
template <class T>
CLI::Option* add_checked(CLI::App& app, const std::string& name, T& value, const std::string& help,
                         const CLI::Validator& check) {
  return app.add_option(name, value, help)->check(check)->capture_default_str();
}

// The whole numbers of a comma-separated list such as "15,10,5"; InputError "<flag> <text>:
// '<item>' is not <expected>" for an item that is not one or that `ok` refuses.
std::vector<int> parse_int_list(const std::string& flag, const std::string& text,
                                const std::function<bool(int)>& ok, const char* expected) {
  std::vector<int> values;
  std::size_t start = 0;
  while (true) {
    const auto comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    int value = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    TESSEL_EXPECTS(ec == std::errc() && ptr == item.data() + item.size() && ok(value),
                   "{} {}: '{}' is not {}", flag, text, item, expected);
    values.push_back(value);
    if (comma == std::string::npos) return values;
    start = comma + 1;
  }
}

// --split: "auto" (no list), or blocks per stage "2,3,3"; check_pipeline_options checks the
// numbers against the schedule and the model.
std::vector<int> parse_split(const std::string& text) {
  if (text == "auto") return {};
  return parse_int_list("--split", text, [](int) { return true; }, "a positive number of blocks");
}

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
              "evaluate valid/test accuracy every N >= 1 epochs (and always after the last)",
              CLI::Range(1, 1000000));
}

// Dynamic mode.
void add_dynamic_flags(CLI::App& app, train::TrainOptions& o) {
  add_choice(app, "--temporal-partition", o.dynamic.partition,
             "dynamic mode: snapshot (each rank a block of snapshots, balanced over the "
             "training range and the evaluations, all-to-all to vertices for the recurrence) or "
             "vertex (each rank a vertex range, halo exchange per snapshot)");
  add_choice(app, "--task", o.dynamic.task,
             "dynamic mode: node-regression (MSE), node-classification, or link-prediction (the "
             "edges of snapshot t+1 from the embeddings at t against sampled negatives; AUC and "
             "MRR). Full and sampled modes: link (= link-prediction) trains link prediction on a "
             "partition of a link store (convert --edge-split): GNN encoder, --decoder, binary "
             "cross-entropy, evaluated by the store's metric (AUC and AP, Hits@K or MRR); "
             "sampled mode batches training edges (--batch-size edges per rank per step) and "
             "samples the neighbourhoods of both endpoints and of the negatives (CPU only)");
  add_checked(app, "--negatives", o.dynamic.negatives,
              "link prediction: negatives sampled per edge in training (dynamic mode: the "
              "source replaced by a uniform node that is not an in-neighbour; full and sampled "
              "modes: the destination replaced by a node drawn by the edge's id, see "
              "--negative-sampling)",
              CLI::Range(1, 1000));
  add_choice(app, "--decoder", o.full.link_decoder,
             "--task link (full and sampled modes): dot (inner product of the two embeddings) "
             "or mlp (their elementwise product through a 2-layer MLP of the embedding width, "
             "ReLU between)");
  add_choice(app, "--negative-sampling", o.full.link_negatives,
             "--task link (full and sampled modes): the training negatives' destinations, "
             "uniform over the nodes or degree (in proportion to degree^0.75, degree over the "
             "whole graph's training edges)");
  add_checked(app, "--out-dim", o.full.link_out_dim,
              "--task link (full and sampled modes): width of the encoder's output (the node "
              "embeddings)",
              CLI::Range(1, 1 << 16));
  add_checked(app, "--eval-negatives", o.dynamic.eval_negatives,
              "dynamic link prediction: negatives per edge in evaluation (fixed draws; MRR "
              "ranks each edge among its negatives)",
              CLI::Range(1, 1000));
}

// Full-batch mode.
void add_full_flags(CLI::App& app, train::TrainOptions& o) {
  app.add_option_function<std::string>(
         "--halo-dtype",
         [&o](const std::string& name) { o.full.halo_dtype = kernels::parse_row_codec(name); },
         "full mode: how halo rows and halo gradients travel: f32 (as they are), bf16 or f16 (2 "
         "bytes a value, rounded to nearest even), or int8 (a byte a value and an f32 scale per "
         "row: max |x| / 127); decoded on arrival, so only the wire is smaller (evaluation "
         "exchanges f32)")
      ->check(CLI::IsMember(kernels::row_codec_names()))
      ->default_str("f32");
  app.add_option("--boundary-sampling", o.full.boundary_sampling,
                 "full mode: BNS-GCN boundary-node sampling: each training epoch keeps this "
                 "fraction p in (0, 1] of the boundary nodes (the same nodes on both sides of a "
                 "cut, drawn per epoch from --seed), drops the edges from the others and "
                 "normalizes by the degrees of the graph that remains; evaluation uses the whole "
                 "graph (default: off)")
      ->check(finite_range(0.0, 1.0, true));
  add_choice(app, "--halo-aggregation", o.full.halo_aggregation,
             "full mode: which rows cross each cut: post (every boundary row a peer reads), pre "
             "(for each node, the owner sends the sum of the rows it reads from that owner) or "
             "auto (per pair of ranks the fewest rows, a minimum vertex cover of the cut); the "
             "aggregation is the same up to rounding, in training and evaluation");
  CLI::Option* stale = app.add_flag("--stale-halo", o.full.stale_halo,
               "full mode: PipeGCN: each training epoch aggregates the halo rows and halo "
               "gradients of the previous epoch, exchanged while it computes (the first epoch "
               "is exact; evaluation exchanges exactly)");
  app.add_option("--stale-smoothing", o.full.stale_smoothing,
                 "full mode with --stale-halo: gamma in [0, 1): the stale rows and gradients "
                 "are the moving average gamma * previous + (1 - gamma) * arrived (default 0: "
                 "the arrived ones)")
      ->check(finite_range(0.0, 1.0, false, true))
      ->needs(stale);
}

// Sampled mode (--batch-size serves pipeline mode too; --fanouts stays text for
// finish_train_options).
void add_sampled_flags(CLI::App& app, train::TrainOptions& o, std::string& fanouts) {
  const double unbounded = std::numeric_limits<double>::infinity();
  app.add_option("--fanouts", fanouts,
                 "sampled mode: neighbors per layer, input layer first, -1 = all (e.g. 15,10,5; default 10 per layer)");
  add_checked(app, "--batch-size", o.sampled.batch_size,
              "sampled mode: seeds per rank per step (--task link: training edges); pipeline "
              "mode: training rows per optimizer step, whole job",
              int_range(1, std::int64_t{1} << 40));
  add_choice(app, "--cache-policy", o.sampled.cache_policy,
             "sampled mode: feature cache ranking: degree, presample or none (on a GPU the cache "
             "is device memory and holds owned rows too)");
  CLI::Option* size_mb =
      app.add_option("--cache-size-mb", o.sampled.cache_size_mb,
                     "sampled mode: feature cache budget per rank in MiB (not with --cache-ratio; "
                     "on a GPU, with neither given: a quarter of the GPU memory free once the "
                     "graph and features are placed, shared by the ranks on that GPU)")
          ->check(finite_range(0.0, unbounded));
  app.add_option("--cache-ratio", o.sampled.cache_ratio,
                 "sampled mode: cache this fraction of the remote rows a rank may need (on a "
                 "GPU: of its owned + halo rows; not with --cache-size-mb)")
      ->check(finite_range(0.0, 1.0))
      ->excludes(size_mb);
  add_checked(app, "--cache-admit-fraction", o.sampled.cache_admit_fraction,
              "sampled mode on a GPU: share of the device cache budget kept for remote rows "
              "admitted once fetched from their owners (CLOCK replacement: a hit marks a row, "
              "the oldest unmarked one makes room); 0 = a static cache (on the CPU only with "
              "--sample-routing device, the GPU store's CPU twin)",
              finite_range(0.0, 1.0));
  add_choice(app, "--graph-placement", o.sampled.graph_placement,
             "sampled mode on a GPU: where the owned graph the GPU samples lives: auto (device "
             "memory when it needs at most a quarter of the free GPU memory, else pinned; the log "
             "says which), device or pinned (host memory read over UVA)");
  add_choice(app, "--sample-routing", o.sampled.sample_routing,
              "sampled mode: device (frontiers, the owners' answers and the blocks stay on the "
              "GPU, ids cross ranks over the data plane, counts over MPI), host (frontiers and "
              "answers in host memory over MPI, blocks built on the host; on a GPU the owners "
              "still draw there) or auto (device on a GPU, host on the CPU). device with "
              "--device cpu runs the GPU's path on the CPU twins of its device graph and feature "
              "store (slower than host; for tests)");
  app.add_option("--prefetch", o.sampled.prefetch,
                 "sampled mode: steps sampled and gathered ahead while the GPU computes (0 = "
                 "none; default 1 on a GPU, 0 on the CPU, where nothing overlaps; the same draws "
                 "and updates at every depth; with --sample-routing device the GPU samples them "
                 "on a stream of its own beside the training step)")
      ->check(CLI::Range(0, 16));
}

// Pipeline mode (--max-batches serves sampled mode too).
void add_pipeline_flags(CLI::App& app, train::TrainOptions& o) {
  auto& p = o.pipeline;
  add_checked(app, "--hops", p.hops, "pipeline mode: propagated hops K of the SIGN features",
              CLI::Range(0, 16));
  add_choice(app, "--operator", p.op, "pipeline mode: propagation operator, gcn or mean");
  add_checked(app, "--mlp-layers", p.mlp_layers,
              "pipeline mode: linear layers after the per-hop maps (the last gives logits)",
              CLI::Range(1, 1024));
  add_checked(app, "--stages", p.stages, "pipeline mode: pipeline ranks per data-parallel group",
              CLI::Range(1, 4096));
  add_checked(app, "--data-parallel", p.data_parallel,
              "pipeline mode: data-parallel groups (ranks = data-parallel x stages)",
              CLI::Range(1, 4096));
  add_checked(app, "--micro-batches", p.micro_batches,
              "pipeline mode: micro-batches per mini-batch", CLI::Range(1, 4096));
  add_choice(app, "--schedule", p.schedule,
              "pipeline mode: gpipe, 1f1b or wave (two stages per rank, down and back up)");
  // The words become numbers here; check_pipeline_options() checks them against the model.
  app.add_option_function<std::string>(
         "--split", [&p](const std::string& text) { p.split = parse_split(text); },
         "pipeline mode: auto (balance measured block times) or blocks per stage, e.g. 2,3 "
         "(blocks: the hop maps, then each MLP layer)")
      ->default_str("auto");
  app.add_option("--max-batches", p.max_batches,
                 "pipeline and sampled modes: train at most N mini-batches (steps) per epoch (0 = "
                 "all; for benchmarks; the epoch's loss is then the mean over those steps' seeds)")
      ->check(int_range(0, std::int64_t{1} << 40));
  app.add_option("--features", p.features_dir,
                 "pipeline mode: folder of precomputed SIGN features (default: "
                 "DIR/sign-<operator>-k<K>[-row], computed there when missing)")
      // A file here was reported as a missing folder.
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            std::error_code ec;
            if (std::filesystem::exists(text, ec) && !std::filesystem::is_directory(text, ec))
              return fmt::format("{} is a file, expected a folder of precomputed SIGN features "
                                 "(made by `tessel precompute`, or a new folder to compute "
                                 "them in)",
                                 text);
            return std::string();
          },
          std::string()));
}

} // namespace

void add_model_flags(CLI::App& app, train::TrainOptions& o, std::string& fanouts) {
  add_common_flags(app, o);
  add_dynamic_flags(app, o);
  add_full_flags(app, o);
  add_sampled_flags(app, o, fanouts);
  add_pipeline_flags(app, o);
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
  const bool static_link = o.dynamic.task == train::DynamicTask::link_prediction && !traits.temporal;
  TESSEL_EXPECTS(static_link || o.full.link_decoder == nn::LinkDecoderKind::dot,
                 "--decoder {} applies to --task link on a static graph only",
                 o.full.link_decoder);
  TESSEL_EXPECTS(static_link || o.full.link_negatives == sampling::NegativeSampling::uniform,
                 "--negative-sampling {} applies to --task link on a static graph only",
                 o.full.link_negatives);
  if (!o.embeddings_path.empty() && !traits.temporal && !traits.only_model &&
      o.dynamic.task != train::DynamicTask::link_prediction)
    TESSEL_EXPECTS(o.model.layers >= 2,
                   "--embeddings writes the last hidden layer's output, and a {}-layer {} model "
                   "has no hidden layer (use --layers 2 or more)",
                   o.model.layers, o.model.kind);
}

void finish_train_options(train::TrainOptions& o, const std::string& fanouts) {
  if (!fanouts.empty()) {
    o.sampled.fanouts = parse_int_list(
        "--fanouts", fanouts, [](int v) { return v > 0 || v == -1; }, "a positive integer or -1");
    TESSEL_EXPECTS(static_cast<int>(o.sampled.fanouts.size()) == o.model.layers,
                   "--fanouts {} has {} entries, but the model has {} layers (--layers)", fanouts,
                   o.sampled.fanouts.size(), o.model.layers);
  } else {
    o.sampled.fanouts.assign(static_cast<std::size_t>(o.model.layers), 10);
  }
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
    o.pipeline.batch_size = o.sampled.batch_size;
  } else {
    o.sampled.max_steps = o.pipeline.max_batches;
    for (const std::string& name : train::mode_names()) {
      const std::optional<nn::ModelKind> owned = train::mode_traits(name).only_model;
      TESSEL_EXPECTS(!owned || o.model.kind != *owned,
                     "--model {} runs in --mode {}, not --mode {}", o.model.kind, name, o.mode);
    }
  }
  // Known here only when --device cpu is given; the trainer checks again once the device is.
  train::check_cache_admission(o, o.device != train::DeviceChoice::cpu ||
                                      o.sampled.sample_routing == train::SampleRouting::device);
  TESSEL_EXPECTS(std::isfinite(o.optimizer.weight_decay) && o.optimizer.weight_decay >= 0,
                 "--weight-decay must be >= 0, got {}",
                 o.optimizer.weight_decay);
}

}  // namespace tessel::cli
