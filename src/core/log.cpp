// Rank-aware logging: diagnostics to stderr, results to stdout.
#include "tessel/core/log.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace tessel::log {
namespace {
int g_rank = 0;
int g_size = 1;
Level g_level = [] {
  const char* env = std::getenv("TESSEL_LOG");
  if (!env) return Level::info;
  const std::string v(env);
  if (v == "debug") return Level::debug;
  if (v == "warn") return Level::warn;
  if (v == "error") return Level::error;
  if (v == "quiet") return Level::quiet;
  return Level::info;
}();
std::mutex g_mutex;
}  // namespace

void set_rank(int rank, int size) {
  g_rank = rank;
  g_size = size;
}
int rank() { return g_rank; }
int size() { return g_size; }
void set_level(Level level) { g_level = level; }
Level level() { return g_level; }
bool stderr_is_tty() {
  static const bool tty = isatty(STDERR_FILENO) == 1;
  return tty;
}

void write(Level lvl, bool all_ranks, const std::string& message) {
  if (lvl < g_level) return;
  if (!all_ranks && g_rank != 0) return;
  const char* tag = lvl == Level::error ? "error: " : lvl == Level::warn ? "warning: " : "";
  // On a terminal a progress line may be drawn (tessel/core/progress.hpp): erase it first so
  // the message starts at column 0; the progress line redraws below it.
  const char* clear = stderr_is_tty() ? "\r\033[K" : "";
  std::lock_guard lock(g_mutex);
  if (g_size > 1 && all_ranks)
    std::fprintf(stderr, "%s[rank %d] %s%s\n", clear, g_rank, tag, message.c_str());
  else
    std::fprintf(stderr, "%s%s%s\n", clear, tag, message.c_str());
  std::fflush(stderr);
}

void write_result(const std::string& message) {
  if (Level::info < g_level || g_rank != 0) return;
  std::lock_guard lock(g_mutex);
  // A progress line drawn on a terminal stderr is erased first, so the two do not interleave.
  if (stderr_is_tty()) {
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  }
  std::fprintf(stdout, "%s\n", message.c_str());
  std::fflush(stdout);
}

}  // namespace tessel::log
