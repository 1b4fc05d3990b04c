// The memory a process may at most take, for generators sized by flags.
#pragma once

#include <cstdint>
#include <string>

namespace tessel {

// Physical memory plus swap, or the cgroup's memory.max if lower; INT64_MAX when unknown. A
// size beyond it is refused naming the flags that asked for it, instead of failing later as a
// bare "out of memory".
std::int64_t usable_memory_bytes();

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

}  // namespace tessel
