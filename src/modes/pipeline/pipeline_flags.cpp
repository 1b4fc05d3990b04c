// Pipeline mode's command-line flags and its entry in the mode table (the one line that
// registers the mode).
#include "mode_entries.hpp"
#include "tessel/modes/pipeline.hpp"
#include "tessel/modes/modes.hpp"
#include "tessel/train/flags.hpp"

#include "tessel/core/error.hpp"

#include <fmt/format.h>

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

// The pipeline mode in the mode table.
const ModeRegistrar registrar(
    {.order = 3,
     .info = mode_info({.name = "pipeline", .runs_on_gpu = false, .temporal = false,
                        .benched_by_default = false, .only_model = nn::ModelKind::sign_mlp,
                        .own_flags = {}, .apply_defaults = nullptr},
                       {.make = make_pipeline_trainer, .describe = pipeline_run_info,
                        .check = check_pipeline_options}),
     .flags = {{60, add_pipeline_flags}},
     .finish = nullptr,
     .check_flags = nullptr});

}  // namespace

}  // namespace tessel::train
