// The memory a process may at most take (see usable_memory.hpp).
#include "tessel/core/usable_memory.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

namespace tessel {

namespace {

std::int64_t read_number(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return -1;
  try {
    return std::stoll(word);
  } catch (...) {
    return -1;
  }
}

// Takes the room left under one cgroup's limit when it is the tightest so far.
void take_room(MemoryHeadroom& out, std::int64_t limit, std::int64_t usage, const char* source) {
  if (limit < 0 || usage < 0) return;
  const std::int64_t room = std::max<std::int64_t>(0, limit - usage);
  if (out.bytes < 0 || room < out.bytes) {
    out.bytes = room;
    out.source = source;
  }
}

// Calls visit(dir) for the cgroup folder of `path` under `root` and each ancestor's.
template <class Visit> void for_cgroup_and_ancestors(const std::string& root, std::string path,
                                                     Visit visit) {
  while (true) {
    visit(root + (path == "/" ? std::string() : path));
    if (path.empty() || path == "/") break;
    const auto slash = path.find_last_of('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
}

} // namespace

MemoryHeadroom memory_headroom() {
  MemoryHeadroom out;
  // cgroup v2: "0::/path" in /proc/self/cgroup; cgroup v1: "N:memory:/path" (the controller
  // possibly listed with others, "N:a,memory:/path"). A limit may sit on any ancestor; v1's
  // "no limit" is a number near 2^63.
  std::ifstream cg("/proc/self/cgroup");
  std::string line;
  while (std::getline(cg, line)) {
    if (line.rfind("0::", 0) == 0) {
      for_cgroup_and_ancestors("/sys/fs/cgroup", line.substr(3), [&](const std::string& dir) {
        take_room(out, read_number(dir + "/memory.max"), read_number(dir + "/memory.current"),
                  "cgroup memory.max");
      });
      continue;
    }
    const auto first = line.find(':');
    const auto second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = "," + line.substr(first + 1, second - first - 1) + ",";
    if (controllers.find(",memory,") == std::string::npos) continue;
    for_cgroup_and_ancestors(
        "/sys/fs/cgroup/memory", line.substr(second + 1), [&](const std::string& dir) {
          const std::int64_t limit = read_number(dir + "/memory.limit_in_bytes");
          if (limit >= (std::int64_t{1} << 62)) return;
          take_room(out, limit, read_number(dir + "/memory.usage_in_bytes"),
                    "cgroup v1 memory.limit_in_bytes");
        });
  }
  if (out.bytes >= 0) return out;
  std::ifstream meminfo("/proc/meminfo");
  while (std::getline(meminfo, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream words(line.substr(13));
    std::int64_t kib = -1;
    if (words >> kib) {
      out.bytes = kib * 1024;
      out.source = "MemAvailable";
    }
  }
  return out;
}


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
