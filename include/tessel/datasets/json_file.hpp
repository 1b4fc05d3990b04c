// Reads a JSON file with limits: a nesting depth and a size no input can exceed, and errors that
// name the file, the byte and what was expected.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>

namespace tessel::datasets {

// The deepest nesting any Tessel input needs is 4 (a snapshot list of edge lists of pairs);
// 64 leaves room and stops a hostile file before anything recursive walks it.
inline constexpr int kMaxJsonDepth = 64;

// The largest JSON file read (the parsed document takes several times its size in memory):
// PyTorch Geometric Temporal's largest distributed file is under 100 MB.
inline constexpr std::uintmax_t kMaxJsonBytes = std::uintmax_t{2} << 30;

// Parses the whole file (a leading UTF-8 byte-order mark is skipped). Throws InputError
// "FILE: not valid JSON at byte N: ..." for a syntax error, a number out of range (1e400) or
// nesting deeper than max_depth, "FILE: cannot open" when it cannot be read, and names the
// size when the file is larger than kMaxJsonBytes.
nlohmann::json read_json_file(const std::filesystem::path& path, int max_depth = kMaxJsonDepth);

} // namespace tessel::datasets
