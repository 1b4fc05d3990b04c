// Sampled mode's command-line flags and its entry in the mode table (the one line that
// registers the mode).
#include "mode_entries.hpp"
#include "tessel/modes/sampled.hpp"
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

// Sampled mode's flags (--batch-size serves pipeline mode too; it reads the pipeline's
// --max-batches as its max_steps).
void add_sampled_flags(ModeFlags& flags) {
  SampledOptions& sampled = flags.options<SampledOptions>();
  const double unbounded = std::numeric_limits<double>::infinity();
  // The text, parsed once --layers is known (finish_sampled_flags).
  flags.app.add_option_function<std::string>("--fanouts", [](const std::string&) {},
                 "sampled mode: neighbors per layer, input layer first, -1 = all (e.g. 15,10,5; default 10 per layer)");
  add_checked(flags.app, "--batch-size", sampled.batch_size,
              "sampled mode: seeds per rank per step (--task link: training edges); pipeline "
              "mode: training rows per optimizer step, whole job",
              int_range(1, std::int64_t{1} << 40));
  add_choice(flags.app, "--cache-policy", sampled.cache_policy,
             "sampled mode: feature cache ranking: degree, presample or none (on a GPU the cache "
             "is device memory and holds owned rows too)");
  CLI::Option* size_mb =
      flags.app.add_option("--cache-size-mb", sampled.cache_size_mb,
                     "sampled mode: feature cache budget per rank in MiB (not with --cache-ratio; "
                     "with neither given: on a GPU a quarter of the GPU memory free once the "
                     "graph and features are placed, shared by the ranks on that GPU; on the CPU "
                     "at more than one rank half the rank's own feature bytes, when every rank "
                     "holds its features in memory; else none)")
          ->check(finite_range(0.0, unbounded));
  flags.app.add_option("--cache-ratio", sampled.cache_ratio,
                 "sampled mode: cache this fraction of the remote rows a rank may need (on a "
                 "GPU: of its owned + halo rows; not with --cache-size-mb)")
      ->check(finite_range(0.0, 1.0))
      ->excludes(size_mb);
  add_checked(flags.app, "--cache-admit-fraction", sampled.cache_admit_fraction,
              "sampled mode on a GPU: share of the device cache budget kept for remote rows "
              "admitted once fetched from their owners (CLOCK replacement: a hit marks a row, "
              "the oldest unmarked one makes room); 0 = a static cache (on the CPU only with "
              "--sample-routing device, the GPU store's CPU twin)",
              finite_range(0.0, 1.0));
  add_choice(flags.app, "--graph-placement", sampled.graph_placement,
             "sampled mode on a GPU: where the owned graph the GPU samples lives: auto (device "
             "memory when it needs at most a quarter of the free GPU memory, else pinned; the log "
             "says which), device or pinned (host memory read over UVA)");
  add_choice(flags.app, "--sample-routing", sampled.sample_routing,
              "sampled mode: device (frontiers, the owners' answers and the blocks stay on the "
              "GPU, ids cross ranks over the data plane, counts over MPI), host (frontiers and "
              "answers in host memory over MPI, blocks built on the host; on a GPU the owners "
              "still draw there) or auto (device on a GPU, host on the CPU). device with "
              "--device cpu runs the GPU's path on the CPU twins of its device graph and feature "
              "store (slower than host; for tests)");
  flags.app.add_option("--prefetch", sampled.prefetch,
                 "sampled mode: steps sampled and gathered ahead while the GPU computes (0 = "
                 "none; default 1 on a GPU, 0 on the CPU, where nothing overlaps; the same draws "
                 "and updates at every depth; with --sample-routing device the GPU samples them "
                 "on a stream of its own beside the training step)")
      ->check(CLI::Range(0, 16));
  flags.also_reads("--max-batches", [](const CLI::Option& given, ModeOptions& own) {
    own.edit<SampledOptions>().max_steps = given.as<std::int64_t>();
  });
  // --task link: link prediction's shared options, which the dynamic and full modes register.
  for (const char* shared :
       {"--task", "--negatives", "--out-dim", "--decoder", "--negative-sampling"})
    flags.also_reads(shared);
}

// --fanouts: one per layer (default 10 each), checked against --layers.
void finish_sampled_flags(const CLI::App& app, const TrainOptions& o, ModeOptions& own) {
  SampledOptions& sampled = own.edit<SampledOptions>();
  const CLI::Option* given = app.get_option_no_throw("--fanouts");
  const std::string fanouts = given != nullptr && given->count() > 0 ? given->as<std::string>() : "";
  if (!fanouts.empty()) {
    sampled.fanouts = parse_int_list(
        "--fanouts", fanouts, [](int v) { return v > 0 || v == -1; }, "a positive integer or -1");
    TESSEL_EXPECTS(static_cast<int>(sampled.fanouts.size()) == o.model.layers,
                   "--fanouts {} has {} entries, but the model has {} layers (--layers)", fanouts,
                   sampled.fanouts.size(), o.model.layers);
  } else {
    sampled.fanouts.assign(static_cast<std::size_t>(o.model.layers), 10);
  }
}

// Known here only when --device cpu is given; the trainer checks again once the device is.
void check_sampled_flags(const TrainOptions& o, const ModeOptions& own) {
  const SampledOptions& sampled = own.get<SampledOptions>();
  check_cache_admission(sampled, o.device != DeviceChoice::cpu ||
                                     sampled.sample_routing == SampleRouting::device);
}

// The sampled mode in the mode table.
const ModeRegistrar registrar(
    {.order = 2,
     .info = mode_info({.name = "sampled", .runs_on_gpu = true, .temporal = false,
                        .benched_by_default = true, .only_model = std::nullopt, .own_flags = {},
                        .apply_defaults = nullptr},
                       {.load = load_sampled_part, .make = make_sampled_trainer,
                        .describe = sampled_run_info, .check = check_sampled_options}),
     .flags = {{50, add_sampled_flags}},
     .finish = finish_sampled_flags,
     .check_flags = check_sampled_flags});

}  // namespace

}  // namespace tessel::train
