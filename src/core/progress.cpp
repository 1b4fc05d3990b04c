// Live progress lines on a terminal: the formatter and the '\r' redraw.
#include "tessel/core/progress.hpp"

#include "tessel/core/log.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>

namespace tessel {

namespace {

std::string format_duration(double seconds) {
  const auto s = static_cast<std::int64_t>(std::llround(std::max(seconds, 0.0)));
  if (s >= 3600) return fmt::format("{}:{:02d}:{:02d}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{}:{:02d}", s / 60, s % 60);
}

bool is_terminal(std::FILE* out) {
  return out != nullptr && isatty(fileno(out)) == 1;
}

}  // namespace

std::string format_progress(std::string_view label, std::int64_t done, std::int64_t total,
                            double elapsed_s, std::string_view detail) {
  if (total <= 0) return fmt::format("{}: {} elapsed", label, format_duration(elapsed_s));
  const double fraction = static_cast<double>(done) / static_cast<double>(total);
  std::string line = fmt::format("{}: {}/{} {:.0f}%", label, done, total, 100.0 * fraction);
  if (!detail.empty()) line += fmt::format(" | {}", detail);
  const std::string eta =
      done > 0 ? format_duration(elapsed_s / static_cast<double>(done) *
                                 static_cast<double>(total - done))
               : std::string("?");
  line += fmt::format(" | {} elapsed, ETA {}", format_duration(elapsed_s), eta);
  return line;
}

ProgressLine::ProgressLine(std::string label, std::int64_t total)
    : ProgressLine(std::move(label), total,
                   log::rank() == 0 && log::level() <= log::Level::info ? stderr : nullptr) {}

ProgressLine::ProgressLine(std::string label, std::int64_t total, std::FILE* out)
    : label_(std::move(label)), total_(total), out_(out), enabled_(is_terminal(out)) {
  if (enabled_ && total_ <= 0) ticker_ = std::thread([this] { tick(); });
}

ProgressLine::~ProgressLine() {
  finish();
}

void ProgressLine::tick() {
  std::unique_lock lock(mutex_);
  while (!finished_) {
    draw(format_progress(label_, 0, 0, watch_.seconds()));
    wake_.wait_for(lock, std::chrono::milliseconds(500), [this] { return finished_; });
  }
}

void ProgressLine::update(std::int64_t done, std::string_view detail) {
  if (!enabled_) return;
  std::lock_guard lock(mutex_);
  if (finished_) return;
  const double now = watch_.seconds();
  if (done < total_ && now - last_draw_ < kRedrawSeconds) return;
  last_draw_ = now;
  draw(format_progress(label_, done, total_, now, detail));
}

void ProgressLine::finish() {
  if (!enabled_) return;
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    finished_ = true;
    // Clear the line so the next log line starts on an empty one.
    if (drawn_) {
      std::fputs("\r\033[K", out_);
      std::fflush(out_);
    }
  }
  wake_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

void ProgressLine::draw(const std::string& text) {
  // \033[K erases what a longer previous line left to the right.
  std::fprintf(out_, "\r%s\033[K", text.c_str());
  std::fflush(out_);
  drawn_ = true;
}

}  // namespace tessel
