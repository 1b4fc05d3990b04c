// The training modes: the table that registers them, each mode's command-line flags, and
// train(), the entry point that runs the one options.mode names.
#pragma once

#include "tessel/comm/communicator.hpp"
#include "tessel/train/mode_options.hpp"
#include "tessel/train/runtime.hpp"
#include "tessel/train/train.hpp"

#include <CLI/CLI.hpp>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tessel::train {

// Runs training in the mode named by options.mode on this rank's part. Collective.
TrainResult train(comm::Communicator& comm, const TrainOptions& options);

// The training modes, in the order of their table.
std::vector<std::string> mode_names();
// Throws InputError naming the known modes for an unknown name.
const ModeTraits& mode_traits(const std::string& name);
// What can be refused of options.mode without reading data, for `ranks` ranks: the options
// every mode checks and the mode's own (the pipeline's stages and split). train() does the
// same; `tessel bench` calls it for every mode before training any.
void check_mode_options(const TrainOptions& options, int ranks);
// The modes `tessel bench` compares when --modes is not given, in table order.
std::vector<std::string> default_bench_modes();
// The registered mode of this name, with its steps; throws naming the known ones otherwise.
const ModeInfo& find_mode(const std::string& name);

// What a mode's flag group adds its flags with: the command line, the options every mode shares
// (--task, --negatives, --out-dim write there) and this mode's own options. Every flag the group
// adds is the mode's own (ModeTraits::own_flags): a flag no mode registers applies to every mode.
class ModeFlags {
public:
  ModeFlags(CLI::App& app, TrainOptions& shared, ModeOptions& own) : app(app), shared(shared), own_(own) {}
  CLI::App& app;
  TrainOptions& shared;
  // This mode's options (T: its type in tessel/modes/<mode>.hpp), for the flags to write into.
  template <class T> T& options() { return own_.edit<T>(); }
  // A flag another mode registers that this mode reads too (the pipeline reads sampled mode's
  // --batch-size). After parsing, `copy` (when given) copies a value given on the command line
  // into this mode's options.
  using Copy = std::function<void(const CLI::Option&, ModeOptions&)>;
  void also_reads(std::string flag, Copy copy = nullptr) {
    reads.emplace_back(std::move(flag), std::move(copy));
  }
  std::vector<std::pair<std::string, Copy>> reads;

private:
  ModeOptions& own_;
};

// Some of a mode's flags and where --help lists them: groups of every mode are added in order of
// `position` (so the help text keeps the order it had when the flags were one list).
struct ModeFlagGroup {
  int position = 0;
  std::function<void(ModeFlags&)> add;
};

// A mode as its folder registers it (one ModeRegistrar in the folder): its traits and steps (own_flags
// left empty: they come from its flags), where it stands in the mode table, its flags, and the
// command line's steps after parsing.
struct ModeRegistration {
  int order = 0;  // position in the mode table (mode_names(), the lists in error messages)
  ModeInfo info;
  std::vector<ModeFlagGroup> flags;
  // After parsing, before the shared checks: settles the mode's options from what was given
  // (sampled: the --fanouts list against --layers). May be empty.
  std::function<void(const CLI::App&, const TrainOptions&, ModeOptions&)> finish;
  // The mode's refusals of its flags that need the shared options (sampled: cache admission off
  // a GPU), run after the model's checks. May be empty.
  std::function<void(const TrainOptions&, const ModeOptions&)> check_flags;
};
// A mode's steps on the graph partitions default to load_graph_part and graph_run_info.
struct ModeSteps {
  decltype(ModeInfo::load) load = load_graph_part;
  decltype(ModeInfo::make) make;
  decltype(ModeInfo::describe) describe = graph_run_info;
  decltype(ModeInfo::check) check = nullptr;
};
inline ModeInfo mode_info(ModeTraits traits, ModeSteps steps) {
  ModeInfo m;
  static_cast<ModeTraits&>(m) = std::move(traits);
  m.load = std::move(steps.load);
  m.make = std::move(steps.make);
  m.describe = std::move(steps.describe);
  m.check = std::move(steps.check);
  return m;
}
struct ModeRegistrar {
  explicit ModeRegistrar(ModeRegistration registration);
};

// Every mode's own options as one command line fills them (it carries the flags of all modes).
struct ModeFlagValues {
  std::map<std::string, ModeOptions> by_mode;
  std::map<std::string, std::vector<std::pair<std::string, ModeFlags::Copy>>> reads;
  // The options of the mode whose options are a T (the bench report's sampled fanouts).
  template <class T> const T& find() const {
    for (const auto& [name, options] : by_mode)
      if (options.template holds<T>()) return options.template get<T>();
    return ModeOptions{}.get<T>();
  }
};
// Adds every registered mode's flags to `app`, in help order, writing into `shared` and `values`.
void add_mode_flags(CLI::App& app, TrainOptions& shared, ModeFlagValues& values);
// After parsing: every mode's finish step (the copies of flags it reads from other modes, then
// its own step), in table order.
void finish_mode_flags(const CLI::App& app, const TrainOptions& shared, ModeFlagValues& values);
// Every mode's check_flags on its options.
void check_mode_flag_values(const TrainOptions& shared, const ModeFlagValues& values);
// Sets options.mode_options to the options of options.mode from `values`.
void select_mode_options(TrainOptions& options, const ModeFlagValues& values);

}  // namespace tessel::train
