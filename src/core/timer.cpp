// Phase accumulation and process memory readings.
#include "tessel/core/timer.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>

namespace tessel {

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

void PhaseTimes::add(const std::string& phase, double seconds) { seconds_[phase] += seconds; }

double PhaseTimes::get(const std::string& phase) const {
  const auto it = seconds_.find(phase);
  return it == seconds_.end() ? 0.0 : it->second;
}

double PhaseTimes::total() const {
  double sum = 0;
  for (const auto& [name, s] : seconds_) sum += s;
  return sum;
}

std::int64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

std::int64_t process_minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::int64_t>(usage.ru_minflt);
}

std::int64_t current_rss_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long total = 0, resident = 0;
  const int n = std::fscanf(f, "%ld %ld", &total, &resident);
  std::fclose(f);
  if (n != 2) return 0;
  return static_cast<std::int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

RssSplit current_rss_split() {
  RssSplit out;
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return out;
  char line[256];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    long long kib = 0;
    if (std::sscanf(line, "RssAnon: %lld kB", &kib) == 1) out.anon_bytes = kib * 1024;
    if (std::sscanf(line, "RssFile: %lld kB", &kib) == 1) out.file_bytes = kib * 1024;
  }
  std::fclose(f);
  return out;
}

}  // namespace tessel
