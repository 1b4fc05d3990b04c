// A live one-line progress report on stderr for long work (epochs, evaluation, partition
// phases): rank 0 only, and only when stderr is a terminal, so logs and pipes stay clean.
#pragma once

#include "tessel/core/timer.hpp"

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace tessel {

// The text of one progress line. With total > 0:
//   "<label>: <done>/<total> <percent>% | <detail> | <elapsed> elapsed, ETA <remaining>"
// (the ETA extrapolates the mean rate so far; "ETA ?" before the first unit is done; the
// detail part is left out when empty). With total == 0 (work of unknown length):
//   "<label>: <elapsed> elapsed".
// Durations print as m:ss, or h:mm:ss from one hour on.
std::string format_progress(std::string_view label, std::int64_t done, std::int64_t total,
                            double elapsed_s, std::string_view detail = {});

// On a terminal: redraws one line with '\r' as work advances and clears it when done
// (destructor or finish()); update() redraws at most every `kRedrawSeconds` (the last unit
// always). Elsewhere (a log file, mpirun's forwarded stderr): a plain line with a newline at
// most every `kPlainSeconds`, the first after that long, so short work prints nothing and long
// work shows it is alive. With total == 0 a background thread reports the elapsed time instead,
// for one blocking call (METIS) that cannot report its own progress. Only on rank 0, at log
// level info or below.
class ProgressLine {
 public:
  static constexpr double kRedrawSeconds = 0.2;
  static constexpr double kPlainSeconds = 5.0;

  ProgressLine(std::string label, std::int64_t total);
  // For tests: writes to `out`; on a terminal as a live line, elsewhere as plain lines every
  // plain_every_s seconds (never when 0).
  ProgressLine(std::string label, std::int64_t total, std::FILE* out, double plain_every_s = 0);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool enabled() const { return enabled_; }
  void update(std::int64_t done, std::string_view detail = {});
  // Clears the line (no-op when nothing was drawn); later updates are ignored.
  void finish();

 private:
  void draw(const std::string& text);
  void tick();

  std::string label_;
  std::int64_t total_;
  std::FILE* out_;
  bool enabled_;
  bool plain_ = false;
  double plain_every_s_ = 0;
  bool drawn_ = false;
  bool finished_ = false;
  Stopwatch watch_;
  double last_draw_ = -1.0;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread ticker_;
};

}  // namespace tessel
