// The mode table, filled by the registrars of the mode folders (one each), each mode's flags,
// and train(), which runs the mode options.mode names.
#include "tessel/modes/modes.hpp"

#include "tessel/core/error.hpp"
#include "tessel/train/runtime.hpp"

#include <fmt/ranges.h>

#include <algorithm>

#include <string>
#include <vector>

namespace tessel::train {

namespace {

std::vector<ModeRegistration>& registry() {
  static std::vector<ModeRegistration> modes;
  return modes;
}

// The registrations in table order.
std::vector<const ModeRegistration*> registrations() {
  std::vector<const ModeRegistration*> sorted;
  for (const auto& r : registry()) sorted.push_back(&r);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto* a, const auto* b) { return a->order < b->order; });
  return sorted;
}

std::string flag_name(const CLI::Option& option) {
  return "--" + (option.get_lnames().empty() ? std::string() : option.get_lnames().front());
}

// The flags one mode reads: those its groups add, and those it reads from other modes.
std::vector<std::string> derive_own_flags(const ModeRegistration& mode) {
  CLI::App scratch;
  TrainOptions shared;
  ModeOptions own;
  std::vector<std::string> flags;
  for (const ModeFlagGroup& group : mode.flags) {
    const std::size_t before = scratch.get_options().size();
    ModeFlags adder(scratch, shared, own);
    group.add(adder);
    const auto options = scratch.get_options();
    for (std::size_t i = before; i < options.size(); ++i) flags.push_back(flag_name(*options[i]));
    for (const auto& [flag, copy] : adder.reads) flags.push_back(flag);
  }
  return flags;
}

// The mode table: every registered mode, in order, its own_flags derived from its flags.
const std::vector<ModeInfo>& mode_table() {
  static const std::vector<ModeInfo> table = [] {
    std::vector<ModeInfo> modes;
    for (const ModeRegistration* r : registrations()) {
      modes.push_back(r->info);
      modes.back().own_flags = derive_own_flags(*r);
    }
    return modes;
  }();
  return table;
}

}  // namespace

ModeRegistrar::ModeRegistrar(ModeRegistration registration) {
  registry().push_back(std::move(registration));
}

void add_mode_flags(CLI::App& app, TrainOptions& shared, ModeFlagValues& values) {
  struct Placed {
    int position;
    const std::string* mode;
    const ModeFlagGroup* group;
  };
  std::vector<Placed> groups;
  for (const ModeRegistration* r : registrations())
    for (const ModeFlagGroup& g : r->flags) groups.push_back({g.position, &r->info.name, &g});
  std::stable_sort(groups.begin(), groups.end(),
                   [](const Placed& a, const Placed& b) { return a.position < b.position; });
  for (const Placed& placed : groups) {
    ModeFlags adder(app, shared, values.by_mode[*placed.mode]);
    placed.group->add(adder);
    auto& reads = values.reads[*placed.mode];
    reads.insert(reads.end(), adder.reads.begin(), adder.reads.end());
  }
}

void finish_mode_flags(const CLI::App& app, const TrainOptions& shared, ModeFlagValues& values) {
  for (const ModeRegistration* r : registrations()) {
    ModeOptions& own = values.by_mode[r->info.name];
    for (const auto& [flag, copy] : values.reads[r->info.name]) {
      const CLI::Option* option = app.get_option_no_throw(flag);
      if (copy && option != nullptr && option->count() > 0) copy(*option, own);
    }
    if (r->finish) r->finish(app, shared, own);
  }
}

void check_mode_flag_values(const TrainOptions& shared, const ModeFlagValues& values) {
  for (const ModeRegistration* r : registrations()) {
    if (!r->check_flags) continue;
    const auto found = values.by_mode.find(r->info.name);
    r->check_flags(shared, found != values.by_mode.end() ? found->second : ModeOptions{});
  }
}

void select_mode_options(TrainOptions& options, const ModeFlagValues& values) {
  const auto found = values.by_mode.find(options.mode);
  options.mode_options = found != values.by_mode.end() ? found->second : ModeOptions{};
}

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
