// Full-batch mode's command-line flags and its entry in the mode table (the one line that
// registers the mode).
#include "mode_entries.hpp"
#include "tessel/modes/full.hpp"
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

// Full mode's flags: --decoder, --negative-sampling and --out-dim (link prediction, listed
// among the dynamic mode's link flags), then the halo flags. It reads --task and --negatives, which the dynamic mode registers.
void add_full_link_flags(ModeFlags& flags) {
  add_choice(flags.app, "--decoder", flags.shared.link_decoder,
             "--task link (full and sampled modes): dot (inner product of the two embeddings) "
             "or mlp (their elementwise product through a 2-layer MLP of the embedding width, "
             "ReLU between)");
  add_choice(flags.app, "--negative-sampling", flags.shared.link_negatives,
             "--task link (full and sampled modes): the training negatives' destinations, "
             "uniform over the nodes or degree (in proportion to degree^0.75, degree over the "
             "whole graph's training edges)");
  add_checked(flags.app, "--out-dim", flags.shared.link_out_dim,
              "--task link (full and sampled modes): width of the encoder's output (the node "
              "embeddings)",
              CLI::Range(1, 1 << 16));
  flags.also_reads("--task");
  flags.also_reads("--negatives");
}

void add_full_flags(ModeFlags& flags) {
  FullOptions& full = flags.options<FullOptions>();
  flags.app.add_option_function<std::string>(
         "--halo-dtype",
         [&full](const std::string& name) { full.halo_dtype = kernels::parse_row_codec(name); },
         "full mode: how halo rows and halo gradients travel: f32 (as they are), bf16 or f16 (2 "
         "bytes a value, rounded to nearest even), or int8 (a byte a value and an f32 scale per "
         "row: max |x| / 127); decoded on arrival, so only the wire is smaller (evaluation "
         "exchanges f32)")
      ->check(CLI::IsMember(kernels::row_codec_names()))
      ->default_str("f32");
  flags.app.add_option("--boundary-sampling", full.boundary_sampling,
                 "full mode: BNS-GCN boundary-node sampling: each training epoch keeps this "
                 "fraction p in (0, 1] of the boundary nodes (the same nodes on both sides of a "
                 "cut, drawn per epoch from --seed), drops the edges from the others and "
                 "normalizes by the degrees of the graph that remains; evaluation uses the whole "
                 "graph (default: off)")
      ->check(finite_range(0.0, 1.0, true));
  add_choice(flags.app, "--halo-aggregation", full.halo_aggregation,
             "full mode: which rows cross each cut: post (every boundary row a peer reads), pre "
             "(for each node, the owner sends the sum of the rows it reads from that owner) or "
             "auto (per pair of ranks the fewest rows, a minimum vertex cover of the cut); the "
             "aggregation is the same up to rounding, in training and evaluation");
  CLI::Option* stale = flags.app.add_flag("--stale-halo", full.stale_halo,
               "full mode: PipeGCN: each training epoch aggregates the halo rows and halo "
               "gradients of the previous epoch, exchanged while it computes (the first epoch "
               "is exact; evaluation exchanges exactly)");
  flags.app.add_option("--stale-smoothing", full.stale_smoothing,
                 "full mode with --stale-halo: gamma in [0, 1): the stale rows and gradients "
                 "are the moving average gamma * previous + (1 - gamma) * arrived (default 0: "
                 "the arrived ones)")
      ->check(finite_range(0.0, 1.0, false, true))
      ->needs(stale);
}

// The full mode in the mode table.
const ModeRegistrar registrar(
    {.order = 1,
     .info = mode_info({.name = "full", .runs_on_gpu = true, .temporal = false,
                        .benched_by_default = true, .only_model = std::nullopt, .own_flags = {},
                        .apply_defaults = nullptr},
                       {.make = make_full_trainer, .describe = full_run_info,
                        .check = check_full_options}),
     .flags = {{20, add_full_link_flags}, {40, add_full_flags}},
     .finish = nullptr,
     .check_flags = nullptr});

}  // namespace

}  // namespace tessel::train
