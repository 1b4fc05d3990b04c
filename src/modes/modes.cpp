// The mode table: the one place a mode is registered (its traits and steps), and train(), which
// runs the mode options.mode names.
#include "tessel/modes/modes.hpp"

#include "mode_entries.hpp"

#include "tessel/core/error.hpp"
#include "tessel/train/runtime.hpp"

#include <fmt/ranges.h>

#include <string>
#include <vector>

namespace tessel::train {

namespace {

// The steps of a mode on the graph partitions are load_graph_part and graph_run_info.
struct ModeSteps {
  decltype(ModeInfo::load) load = load_graph_part;
  decltype(ModeInfo::make) make;
  decltype(ModeInfo::describe) describe = graph_run_info;
  decltype(ModeInfo::check) check = nullptr;
};

ModeInfo mode(ModeTraits traits, ModeSteps steps) {
  ModeInfo m;
  static_cast<ModeTraits&>(m) = std::move(traits);
  m.load = std::move(steps.load);
  m.make = std::move(steps.make);
  m.describe = std::move(steps.describe);
  m.check = std::move(steps.check);
  return m;
}

// The one place a mode's name is written: each entry registers a mode's traits and its entry.
const std::vector<ModeInfo>& mode_table() {
  static const std::vector<ModeInfo> table = {
      mode({.name = "full", .runs_on_gpu = true, .temporal = false, .benched_by_default = true,
            .only_model = std::nullopt,
            .own_flags = {"--halo-dtype", "--boundary-sampling", "--halo-aggregation",
                          "--stale-halo", "--stale-smoothing", "--task", "--negatives",
                          "--out-dim", "--decoder", "--negative-sampling"},
            .apply_defaults = nullptr},
           {.make = make_full_trainer, .describe = full_run_info, .check = check_full_options}),
      mode({.name = "sampled", .runs_on_gpu = true, .temporal = false,
            .benched_by_default = true, .only_model = std::nullopt,
            .own_flags = {"--fanouts", "--cache-policy", "--cache-size-mb", "--cache-ratio",
                          "--cache-admit-fraction", "--graph-placement", "--sample-routing",
                          "--prefetch", "--batch-size", "--max-batches", "--task",
                          "--negatives", "--out-dim", "--decoder", "--negative-sampling"},
            .apply_defaults = nullptr},
           {.load = load_sampled_part, .make = make_sampled_trainer,
            .describe = sampled_run_info, .check = check_sampled_options}),
      mode({.name = "pipeline", .runs_on_gpu = false, .temporal = false,
            .benched_by_default = false, .only_model = nn::ModelKind::sign_mlp,
            .own_flags = {"--hops", "--operator", "--mlp-layers", "--stages", "--data-parallel",
                          "--micro-batches", "--schedule", "--split", "--features",
                          "--batch-size", "--max-batches"},
            .apply_defaults = nullptr},
           {.make = make_pipeline_trainer,
            .describe = pipeline_run_info,
            .check = check_pipeline_options}),
      mode({.name = "dynamic", .runs_on_gpu = true, .temporal = true, .benched_by_default = false,
            .only_model = std::nullopt,
            .own_flags = {"--temporal-partition", "--task", "--negatives", "--eval-negatives"},
            .apply_defaults = dynamic_defaults},
           {.load = load_temporal_part,
            .make = make_dynamic_trainer,
            .describe = dynamic_run_info,
            .check = check_dynamic_options}),
  };
  return table;
}

}  // namespace

std::vector<std::string> mode_names() {
  std::vector<std::string> names;
  for (const auto& m : mode_table()) names.push_back(m.name);
  return names;
}

const ModeTraits& mode_traits(const std::string& name) { return find_mode(name); }

void check_mode_options(const TrainOptions& options, int ranks) {
  check_run_options(options);
  const ModeInfo& mode = find_mode(options.mode);
  TESSEL_EXPECTS(options.device != DeviceChoice::cuda || mode.runs_on_gpu,
                 "--device cuda: {} mode runs on the CPU only; use --device cpu", mode.name);
  if (mode.check) mode.check(options, ranks);
}

std::vector<std::string> default_bench_modes() {
  std::vector<std::string> names;
  for (const auto& m : mode_table())
    if (m.benched_by_default) names.push_back(m.name);
  return names;
}

const ModeInfo& find_mode(const std::string& name) {
  for (const auto& m : mode_table())
    if (m.name == name) return m;
  TESSEL_FAIL("unknown training mode '{}': expected one of {}", name,
              fmt::join(mode_names(), ", "));
}

TrainResult train(comm::Communicator& comm, const TrainOptions& options) {
  check_mode_options(options, comm.size());
  return run_mode(comm, options, find_mode(options.mode));
}

}  // namespace tessel::train
