// The memory a process may at most take, for generators sized by flags.
#pragma once

#include <cstdint>

namespace tessel {

// Physical memory plus swap, or the cgroup's memory.max if lower; INT64_MAX when unknown. A
// size beyond it is refused naming the flags that asked for it, instead of failing later as a
// bare "out of memory".
std::int64_t usable_memory_bytes();

}  // namespace tessel
