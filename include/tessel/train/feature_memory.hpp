// --feature-memory: how many bytes of its part's feature rows a rank may hold, and the choice
// between holding them all and reading them from the part file (out of core).
#pragma once

#include <cstdint>
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

// How much more memory this process may take: the tightest cgroup limit less its usage over
// the process's cgroup and their ancestors where one is set (cgroup v2 memory.max less
// memory.current; cgroup v1 memory.limit_in_bytes less memory.usage_in_bytes), else the
// kernel's MemAvailable. `source` names which ("cgroup memory.max", "cgroup v1
// memory.limit_in_bytes" or "MemAvailable"); bytes < 0 when none could be read.
struct MemoryHeadroom {
  std::int64_t bytes = -1;
  std::string source;
};
MemoryHeadroom memory_headroom();

// "2.0 MiB" and the like, for the setup line and the refusals.
std::string format_mib(std::int64_t bytes);

} // namespace tessel::train
