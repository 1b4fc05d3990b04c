// The `tessel` executable: parses the subcommand, runs it, turns any error into one line and
// a non-zero exit that takes every rank of the job down.
#include "command.hpp"

#include "tessel/core/activity.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/interrupt.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/mpi.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>

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
int usage_error(const CLI::App& app, std::string message) {
  std::replace(message.begin(), message.end(), '\n', ' ');
  if (launcher_rank() == 0) {
    std::fprintf(stderr, "tessel: error: %s (see `%s --help`)\n", message.c_str(),
                 command_path(app).c_str());
    std::fflush(stderr);
  }
  return 2;
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
  // Parsing also runs each command's option checks (its final callback), so every usage error
  // is reported here, before MPI_Init.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      // --help and --version: printed once per job, not once per rank.
      if (cli::launcher_rank() == 0) return app.exit(e);
      return 0;
    }
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
