// Wall-clock timers, named phase accumulators and process memory readings.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace tessel {

class Stopwatch {
 public:
  Stopwatch() : start_(Clock::now()) {}
  void reset() { start_ = Clock::now(); }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_;
};

// CPU seconds used so far by all threads of this process: unlike wall time, not inflated while
// the process waits for a core that other processes share.
double process_cpu_seconds();

// Accumulates seconds per named phase ("sample", "aggregate", ...), in first-use order.
class PhaseTimes {
 public:
  void add(const std::string& phase, double seconds);
  double get(const std::string& phase) const;
  double total() const;
  void clear() { seconds_.clear(); }
  const std::map<std::string, double>& all() const { return seconds_; }

 private:
  std::map<std::string, double> seconds_;
};

// RAII: adds the scope's duration to a phase.
class ScopedPhase {
 public:
  ScopedPhase(PhaseTimes& times, std::string phase) : times_(times), phase_(std::move(phase)) {}
  ~ScopedPhase() { times_.add(phase_, watch_.seconds()); }
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  PhaseTimes& times_;
  std::string phase_;
  Stopwatch watch_;
};

// Peak resident set size of this process in bytes (getrusage).
std::int64_t peak_rss_bytes();
// Current resident set size in bytes (/proc/self/statm), 0 where unknown.
std::int64_t current_rss_bytes();
// This process's resident memory now, split as /proc/self/status does: anonymous (the heap,
// which only swap can take back) and file-backed (mapped files, spill's scratch mappings
// included: the kernel may drop those pages). Zeros where it cannot be read.
struct RssSplit {
  std::int64_t anon_bytes = 0;
  std::int64_t file_bytes = 0;
};
RssSplit current_rss_split();
// Minor page faults of this process so far (getrusage): pages the kernel mapped in on first
// touch, e.g. of host blocks freshly allocated instead of reused.
std::int64_t process_minor_faults();

}  // namespace tessel
