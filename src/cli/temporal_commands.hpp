// Hooks of the temporal (dynamic-graph) commands into `tessel convert`, `info` and `partition`.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

namespace tessel::cli {

// Adds `convert temporal` and `convert synthetic-temporal` under `convert`; the returned
// function runs whichever of them was parsed.
std::function<void()> add_temporal_convert_commands(CLI::App& convert);
// `tessel info` and `tessel partition` on a temporal store: true when `path` is one (and the
// command was handled).
bool temporal_info(const std::string& path, bool json);
bool temporal_partition(const std::string& input, const std::string& out, int parts,
                        const std::string& method, std::uint64_t seed, bool force);

}  // namespace tessel::cli
