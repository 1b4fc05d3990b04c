// Registry of `tessel` subcommands: each cmd_*.cpp registers itself with a static Registrar.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace tessel::cli {

struct Command {
  std::string name;
  std::string description;
  // Runs the command inside an MPI environment (train, bench) or as a plain process.
  bool uses_mpi = false;
  // Adds options to `sub` and returns the function that runs the command once parsed.
  std::function<std::function<void()>(CLI::App& sub)> setup;
  // Sort key so `tessel --help` lists commands in a sensible order.
  int order = 100;
};

std::vector<Command>& registry();

struct Registrar {
  explicit Registrar(Command command) { registry().push_back(std::move(command)); }
};

}  // namespace tessel::cli
