// Dynamic mode's command-line flags and its entry in the mode table (the one line that
// registers the mode).
#include "mode_entries.hpp"
#include "tessel/modes/dynamic.hpp"
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

// Dynamic mode's flags (--task and --negatives write the shared options; full mode reads them
// too). Two groups: --help lists full mode's --out-dim between them.
void add_dynamic_flags(ModeFlags& flags) {
  add_choice(flags.app, "--temporal-partition", flags.options<DynamicOptions>().partition,
             "dynamic mode: snapshot (each rank a block of snapshots, balanced over the "
             "training range and the evaluations, all-to-all to vertices for the recurrence) or "
             "vertex (each rank a vertex range, halo exchange per snapshot)");
  add_choice(flags.app, "--task", flags.shared.task,
             "dynamic mode: node-regression (MSE), node-classification, or link-prediction (the "
             "edges of snapshot t+1 from the embeddings at t against sampled negatives; AUC and "
             "MRR). Full and sampled modes: link (= link-prediction) trains link prediction on a "
             "partition of a link store (convert --edge-split): GNN encoder, --decoder, binary "
             "cross-entropy, evaluated by the store's metric (AUC and AP, Hits@K or MRR); "
             "sampled mode batches training edges (--batch-size edges per rank per step) and "
             "samples the neighbourhoods of both endpoints and of the negatives (CPU only)");
  add_checked(flags.app, "--negatives", flags.shared.negatives,
              "link prediction: negatives sampled per edge in training (dynamic mode: the "
              "source replaced by a uniform node that is not an in-neighbour; full and sampled "
              "modes: the destination replaced by a node drawn by the edge's id, see "
              "--negative-sampling)",
              CLI::Range(1, 1000));
}

void add_dynamic_eval_flags(ModeFlags& flags) {
  add_checked(flags.app, "--eval-negatives", flags.options<DynamicOptions>().eval_negatives,
              "dynamic link prediction: negatives per edge in evaluation (fixed draws; MRR "
              "ranks each edge among its negatives)",
              CLI::Range(1, 1000));
}

// The dynamic mode in the mode table.
const ModeRegistrar registrar(
    {.order = 4,
     .info = mode_info({.name = "dynamic", .runs_on_gpu = true, .temporal = true,
                        .benched_by_default = false, .only_model = std::nullopt, .own_flags = {},
                        .apply_defaults = dynamic_defaults},
                       {.load = load_temporal_part, .make = make_dynamic_trainer,
                        .describe = dynamic_run_info, .check = check_dynamic_options}),
     .flags = {{10, add_dynamic_flags}, {30, add_dynamic_eval_flags}},
     .finish = nullptr,
     .check_flags = nullptr});

}  // namespace

}  // namespace tessel::train
