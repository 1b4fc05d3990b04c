// Pipeline mode's command-line flags and its entry in the mode table (the one line that
// registers the mode).
#include "mode_entries.hpp"
#include "tessel/modes/pipeline.hpp"
#include "tessel/modes/modes.hpp"
#include "tessel/train/flags.hpp"

#include "tessel/core/error.hpp"
#include "tessel/partition/part.hpp"
#include "tessel/train/feature_memory.hpp"
#include "tessel/train/trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace tessel::train {

namespace {

// --split: "auto" (no list), or blocks per stage "2,3,3"; check_pipeline_options checks the
// numbers against the schedule and the model.
std::vector<int> parse_split(const std::string& text) {
  if (text == "auto") return {};
  return parse_int_list("--split", text, [](int) { return true; }, "a positive number of blocks");
}

// Pipeline mode's flags (--max-batches serves sampled mode too; it reads sampled mode's
// --batch-size as its batch_size).
void add_pipeline_flags(ModeFlags& flags) {
  PipelineOptions& p = flags.options<PipelineOptions>();
  add_checked(flags.app, "--hops", p.hops, "pipeline mode: propagated hops K of the SIGN features",
              CLI::Range(0, 16));
  add_choice(flags.app, "--operator", p.op, "pipeline mode: propagation operator, gcn or mean");
  add_checked(flags.app, "--mlp-layers", p.mlp_layers,
              "pipeline mode: linear layers after the per-hop maps (the last gives logits)",
              CLI::Range(1, 1024));
  add_checked(flags.app, "--stages", p.stages, "pipeline mode: pipeline ranks per data-parallel group",
              CLI::Range(1, 4096));
  add_checked(flags.app, "--data-parallel", p.data_parallel,
              "pipeline mode: data-parallel groups (ranks = data-parallel x stages)",
              CLI::Range(1, 4096));
  add_checked(flags.app, "--micro-batches", p.micro_batches,
              "pipeline mode: micro-batches per mini-batch", CLI::Range(1, 4096));
  add_choice(flags.app, "--schedule", p.schedule,
              "pipeline mode: gpipe, 1f1b or wave (two stages per rank, down and back up)");
  // The words become numbers here; check_pipeline_options() checks them against the model.
  flags.app.add_option_function<std::string>(
         "--split", [&p](const std::string& text) { p.split = parse_split(text); },
         "pipeline mode: auto (balance measured block times) or blocks per stage, e.g. 2,3 "
         "(blocks: the hop maps, then each MLP layer)")
      ->default_str("auto");
  flags.app.add_option("--max-batches", p.max_batches,
                 "pipeline and sampled modes: train at most N mini-batches (steps) per epoch (0 = "
                 "all; for benchmarks; the epoch's loss is then the mean over those steps' seeds)")
      ->check(int_range(0, std::int64_t{1} << 40));
  flags.app.add_option("--features", p.features_dir,
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
  flags.also_reads("--batch-size", [](const CLI::Option& given, ModeOptions& own) {
    own.edit<PipelineOptions>().batch_size = given.as<std::int64_t>();
  });
}

// Pipeline mode holds every rank's SIGN features [X, AX, ..., A^K X] in memory (and its first
// stages the rows of their mini-batches): a --feature-memory below them is refused in one line
// naming what they take on the largest part. `tessel precompute --feature-memory` computes them
// within a smaller budget. Collective (every rank reads the same partition.json).
LoadedPart load_pipeline_part(comm::Communicator& comm, TrainOptions& options) {
  const FeatureMemory& memory = options.feature_memory;
  if (memory.kind == FeatureMemory::Kind::bytes) {
    std::optional<partition::Manifest> manifest;
    try {
      manifest = partition::read_manifest(options.part_dir);
    } catch (const InputError&) {
      // The load step reports a folder it cannot read, agreed across the ranks.
    }
    if (manifest) {
      std::int64_t largest = 0;
      for (std::size_t p = 0; p + 1 < manifest->offsets.size(); ++p)
        largest = std::max<std::int64_t>(
            largest, static_cast<std::int64_t>(manifest->offsets[p + 1] - manifest->offsets[p]));
      const int hops = options.mode_options.get<PipelineOptions>().hops;
      const std::int64_t need = largest * (hops + 1) * manifest->feature_dim *
                                static_cast<std::int64_t>(sizeof(float));
      if (memory.bytes < need)
        throw AgreedInputError(
            fmt::format("--feature-memory {}: pipeline mode holds a rank's SIGN features in "
                        "memory (X and {} hops: {} on the largest part, {} bytes); give at "
                        "least that (tessel precompute --feature-memory computes them within "
                        "less)",
                        memory.text, hops, format_mib(need), need),
            "");
    }
  }
  return load_graph_part(comm, options);
}

// The pipeline mode in the mode table.
const ModeRegistrar registrar(
    {.order = 3,
     .info = mode_info({.name = "pipeline", .runs_on_gpu = false, .temporal = false,
                        .benched_by_default = false, .only_model = nn::ModelKind::sign_mlp,
                        .own_flags = {}, .apply_defaults = nullptr},
                       {.load = load_pipeline_part, .make = make_pipeline_trainer,
                        .describe = pipeline_run_info,
                        .check = check_pipeline_options}),
     .flags = {{60, add_pipeline_flags}},
     .finish = nullptr,
     .check_flags = nullptr});

}  // namespace

}  // namespace tessel::train
