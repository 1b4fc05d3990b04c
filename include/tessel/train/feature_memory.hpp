// --feature-memory: how many bytes of its part's feature rows a rank may hold, and the choice
// between holding them all and reading them from the part file (out of core).
#pragma once

#include "tessel/core/usable_memory.hpp"

#include <cstdint>
#include <filesystem>
#include <string>

namespace tessel::train {

struct FeatureMemory {
  enum class Kind { automatic, all, bytes };
  Kind kind = Kind::automatic;
  std::int64_t bytes = 0; // Kind::bytes
  std::string text = "auto";
};

// "auto", "all", or a number of bytes with an optional K, M or G suffix (powers of 1024), e.g.
// 64K, 2G, 1.5M. Throws InputError naming the flag and what it expects.
FeatureMemory parse_feature_memory(const std::string& text);

// memory_headroom() (tessel/core/usable_memory.hpp) says how much more memory the process
// may take.
using tessel::memory_headroom;
using tessel::MemoryHeadroom;

// "2.0 MiB" and the like, for the setup line and the refusals.
std::string format_mib(std::int64_t bytes);

// Where an out-of-core run's scratch files go: TMPDIR, else /tmp.
std::filesystem::path scratch_folder();

} // namespace tessel::train
