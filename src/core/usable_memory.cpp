// The memory a process may at most take (see usable_memory.hpp).
#include "tessel/core/usable_memory.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <string>

namespace tessel {

std::int64_t usable_memory_bytes() {
  std::int64_t total = 0;
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  std::int64_t kib = 0;
  while (meminfo >> key >> kib) {
    std::getline(meminfo, unit);
    if (key == "MemTotal:" || key == "SwapTotal:") total += kib * 1024;
  }
  if (total <= 0) return std::numeric_limits<std::int64_t>::max();
  std::ifstream cgroup("/sys/fs/cgroup/memory.max");
  std::int64_t limit = 0;
  if (cgroup >> limit && limit > 0) total = std::min(total, limit);
  return total;
}

}  // namespace tessel
