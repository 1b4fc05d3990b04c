// Rank-aware logging to stderr: info on rank 0 only, warnings and errors from any rank.
#pragma once

#include <fmt/format.h>

#include <string>

namespace tessel::log {

enum class Level { debug = 0, info = 1, warn = 2, error = 3, quiet = 4 };

// Set once the process knows its MPI rank (defaults: rank 0 of 1).
void set_rank(int rank, int size);
int rank();
int size();
void set_level(Level level);
Level level();
// True when stderr is a terminal (progress bars are shown only then).
bool stderr_is_tty();

void write(Level level, bool all_ranks, const std::string& message);
// "1 rank", "2 ranks": a count with its noun in the right number (nouns taking a plain -s).
inline std::string counted(long long n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}
// A result line (an epoch's figures, a run's summary): on stdout from rank 0, so `> out.txt`
// keeps results while diagnostics stay on stderr. Shown at info level and above.
void write_result(const std::string& message);

template <class... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  write(Level::info, false, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void result(fmt::format_string<Args...> f, Args&&... args) {
  write_result(fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  write(Level::debug, true, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  write(Level::warn, true, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  write(Level::error, true, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace tessel::log
