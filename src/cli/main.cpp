// The `tessel` executable: parses the subcommand, runs it, turns any error into one line and
// a non-zero exit that takes every rank of the job down.
#include "command.hpp"
#include "flag_checks.hpp"

#include "tessel/core/activity.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/interrupt.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/mpi.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace tessel::cli {
std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}

namespace {

// This process's rank as the MPI launcher announces it in the environment, read before
// MPI_Init (0 outside a launcher): a usage error is the same on every rank, so only rank 0
// prints it.
int launcher_rank() {
  for (const char* name :
       {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK", "SLURM_PROCID"})
    if (const char* value = std::getenv(name); value && *value) return std::atoi(value);
  return 0;
}

// "tessel train" etc.: the deepest subcommand the command line reached, for the --help hint.
std::string command_path(const CLI::App& app) {
  std::string path = app.get_name();
  const CLI::App* at = &app;
  while (true) {
    const auto parsed = at->get_subcommands();
    if (parsed.empty()) break;
    at = parsed.front();
    path += " " + at->get_name();
  }
  return path;
}

// A usage error (bad flag, value out of range, missing argument): one line on rank 0, exit
// code 2 on every rank, before MPI starts, so no rank aborts the others.
int usage_error_at(const std::string& path, std::string message) {
  std::replace(message.begin(), message.end(), '\n', ' ');
  if (launcher_rank() == 0) {
    std::fprintf(stderr, "tessel: error: %s (see `%s --help`)\n", message.c_str(), path.c_str());
    std::fflush(stderr);
  }
  return 2;
}

int usage_error(const CLI::App& app, std::string message) {
  return usage_error_at(command_path(app), std::move(message));
}

// Edit distance between two short words: insertions, deletions, substitutions and swaps of
// two neighbouring letters ("trian" is one edit from "train").
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] != b[j - 1] ? 1 : 0)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// The candidate nearest to `word`, if it is near enough to be a typo (at most a third of its
// letters off), else empty.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3 + 1);
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

// The deepest subcommand the command line reached (the app itself when none).
const CLI::App* deepest(const CLI::App& app) {
  const CLI::App* at = &app;
  while (!at->get_subcommands().empty()) at = at->get_subcommands().front();
  return at;
}

// CLI11's "The following arguments were not expected: 10,10 --fanout" as "unknown flag
// --fanout (did you mean --fanouts?)", the nearest among the flags of the command reached;
// other extras are left as CLI11 says them.
std::string extras_message(const CLI::App& app, const std::string& message) {
  const auto colon = message.rfind(": ");
  if (colon == std::string::npos) return message;
  std::string flag;
  std::size_t start = colon + 2;
  while (start < message.size() && flag.empty()) {
    auto end = message.find(' ', start);
    if (end == std::string::npos) end = message.size();
    const std::string word = message.substr(start, end - start);
    if (word.starts_with("-")) flag = word.substr(0, word.find('='));
    start = end + 1;
  }
  if (flag.empty()) return message;
  std::vector<std::string> flags;
  for (const CLI::Option* option : deepest(app)->get_options())
    for (const auto& name : option->get_lnames()) flags.push_back("--" + name);
  const std::string best = nearest(flag, flags);
  return fmt::format("unknown flag {}{}", flag,
                     best.empty() ? std::string() : fmt::format(" (did you mean {}?)", best));
}

}  // namespace
}  // namespace tessel::cli

int main(int argc, char** argv) {
  using namespace tessel;
  // Before any thread exists, so every thread inherits the blocked signals (see interrupt.hpp).
  interrupt::install();
  CLI::App app{"Tessel: distributed graph neural network training (METIS partitions, MPI, "
               "OpenMP, CUDA).",
               "tessel"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tessel 0.1.0");
  auto& commands = cli::registry();
  std::sort(commands.begin(), commands.end(),
            [](const auto& a, const auto& b) { return std::tie(a.order, a.name) < std::tie(b.order, b.name); });
  std::vector<std::pair<CLI::App*, std::function<void()>>> runners;
  std::vector<const cli::Command*> owners;
  for (const auto& command : commands) {
    CLI::App* sub = app.add_subcommand(command.name, command.description);
    runners.emplace_back(sub, command.setup(*sub));
    owners.push_back(&command);
  }
  // Empty values, whole numbers beyond 64 bits, non-finite numbers: for every flag alike.
  cli::add_common_checks(app);
  // Parsing also runs each command's option checks (its final callback), so every usage error
  // is reported here, before MPI_Init.
  // An unknown command word: CLI11 alone says only "A subcommand is required".
  if (argc >= 2 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const auto& command : commands) names.push_back(command.name);
    const std::string word = argv[1];
    if (std::find(names.begin(), names.end(), word) == names.end()) {
      const std::string best = cli::nearest(word, names);
      std::string list;
      for (const auto& name : names) list += (list.empty() ? "" : ", ") + name;
      return cli::usage_error(
          app, fmt::format("unknown command '{}'{}; the commands are {}", word,
                           best.empty() ? std::string() : fmt::format(" (did you mean {}?)", best),
                           list));
    }
  }
  // An unknown option before the command: CLI11 alone says "A subcommand is required".
  if (argc >= 2 && argv[1][0] == '-') {
    const std::string word = std::string(argv[1]).substr(0, std::string(argv[1]).find('='));
    std::vector<std::string> flags;
    for (const CLI::Option* option : app.get_options()) {
      for (const auto& name : option->get_lnames()) flags.push_back("--" + name);
      for (const auto& name : option->get_snames()) flags.push_back("-" + name);
    }
    if (std::find(flags.begin(), flags.end(), word) == flags.end()) {
      const std::string best = cli::nearest(word, flags);
      return cli::usage_error(
          app, fmt::format("unknown option {}{}; a command comes first (tessel COMMAND ...)",
                           word,
                           best.empty() ? std::string() : fmt::format(" (did you mean {}?)", best)));
    }
  }
  // A value on a flag (`--quiet=yes`): CLI11 would take it.
  std::string reached;
  try {
    cli::refuse_flag_values(app, argc, argv, reached);
  } catch (const InputError& e) {
    return cli::usage_error_at(reached, e.what());
  }
  try {
    app.parse(argc, argv);
    cli::check_distinct_values(app);
    for (std::size_t i = 0; i < runners.size(); ++i)
      if (runners[i].first->parsed() && owners[i]->uses_mpi) cli::check_fault_environment();
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      // --help and --version: printed once per job, not once per rank.
      if (cli::launcher_rank() == 0) return app.exit(e);
      return 0;
    }
    if (dynamic_cast<const CLI::ExtrasError*>(&e))
      return cli::usage_error(app, cli::extras_message(app, e.what()));
    return cli::usage_error(app, e.what());
  } catch (const InputError& e) {
    return cli::usage_error(app, e.what());
  }
  std::unique_ptr<mpi::Environment> mpi_env;
  try {
    for (std::size_t i = 0; i < runners.size(); ++i) {
      if (!runners[i].first->parsed()) continue;
      if (owners[i]->uses_mpi) mpi_env = std::make_unique<mpi::Environment>(&argc, &argv);
      // The outermost activity: an out-of-memory error names at least the command.
      const ScopedActivity activity(fmt::format("running `tessel {}`", owners[i]->name));
      runners[i].second();
    }
  } catch (const AgreedInputError& e) {
    mpi::exit_agreed(e.what(), 2);
  } catch (const InputError& e) {
    // Most input errors of an MPI command are met by every rank alike (a flag combination, a
    // shared file): when every rank arrives here within a moment, rank 0 prints the one line
    // and the job exits without an abort; otherwise the rank is named and the job aborted.
    if (mpi_env) mpi::exit_agreed(e.what(), 2, 2.0);
    mpi::abort_job(e.what(), 2);
  } catch (const Error& e) {
    mpi::abort_job(fmt::format("{} [{}]", e.what(), e.where()), 1);
  } catch (const std::bad_alloc&) {
    const std::string where = failed_activity();
    mpi::abort_job(where.empty() ? std::string("out of memory")
                                 : fmt::format("out of memory while {}", where),
                   1);
  } catch (const std::exception& e) {
    mpi::abort_job(e.what(), 1);
  }
  return 0;
}
