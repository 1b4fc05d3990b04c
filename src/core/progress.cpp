// Progress lines: the formatter, the '\r' redraw on a terminal, plain lines elsewhere.
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
                   log::rank() == 0 && log::level() <= log::Level::info ? stderr : nullptr,
                   kPlainSeconds) {}

ProgressLine::ProgressLine(std::string label, std::int64_t total, std::FILE* out,
                           double plain_every_s)
    : label_(std::move(label)), total_(total), out_(out), enabled_(is_terminal(out)) {
  if (!enabled_ && out_ != nullptr && plain_every_s > 0) {
    enabled_ = plain_ = true;
    plain_every_s_ = plain_every_s;
    last_draw_ = 0;  // the first plain line comes after plain_every_s
  }
  if (enabled_ && total_ <= 0) ticker_ = std::thread([this] { tick(); });
}

ProgressLine::~ProgressLine() {
  finish();
}

void ProgressLine::tick() {
  std::unique_lock lock(mutex_);
  const auto pause = std::chrono::duration<double>(plain_ ? plain_every_s_ : 0.5);
  if (plain_ && wake_.wait_for(lock, pause, [this] { return finished_; })) return;
  while (!finished_) {
    draw(format_progress(label_, 0, 0, watch_.seconds()));
    wake_.wait_for(lock, pause, [this] { return finished_; });
  }
}

void ProgressLine::update(std::int64_t done, std::string_view detail) {
  if (!enabled_) return;
  std::lock_guard lock(mutex_);
  if (finished_) return;
  const double now = watch_.seconds();
  if (plain_ ? now - last_draw_ < plain_every_s_
             : done < total_ && now - last_draw_ < kRedrawSeconds)
    return;
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
    if (drawn_ && !plain_) {
      std::fputs("\r\033[K", out_);
      std::fflush(out_);
    }
  }
  wake_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

void ProgressLine::draw(const std::string& text) {
  // \033[K erases what a longer previous line left to the right.
  if (plain_)
    std::fprintf(out_, "%s\n", text.c_str());
  else
    std::fprintf(out_, "\r%s\033[K", text.c_str());
  std::fflush(out_);
  drawn_ = true;
}

}  // namespace tessel
