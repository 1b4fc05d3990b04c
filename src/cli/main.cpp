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
#include <memory>
#include <new>

namespace tessel::cli {
std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
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
