// What the process is doing right now, in words ("reading raw/edge.csv.gz"), so that an error
// without context of its own (out of memory) can still say where it happened.
#pragma once

#include <string>

namespace tessel {

// Pushes `what` for its lifetime. When an exception unwinds through it, the activity stack at
// that moment is remembered (failed_activity()), since the catch site runs after unwinding.
// Meant for coarse phases on the main thread (a file being read, a pipeline phase), not loops.
class ScopedActivity {
 public:
  explicit ScopedActivity(std::string what);
  ~ScopedActivity();
  ScopedActivity(const ScopedActivity&) = delete;
  ScopedActivity& operator=(const ScopedActivity&) = delete;

 private:
  int uncaught_at_start_;
};

// The activities in progress, innermost first, joined with ", in ": "reading raw/edge.csv.gz,
// in convert ogb data/". Empty when none.
std::string current_activity();
// current_activity() as it was when the last exception started unwinding through a
// ScopedActivity; empty if none did. Cleared by clear_failed_activity().
std::string failed_activity();
void clear_failed_activity();

}  // namespace tessel
