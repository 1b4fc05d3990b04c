// The bubble of GPipe on two stages in closed form, written independently of the simulator.
#pragma once

#include <algorithm>

namespace tessel::test {

// GPipe, S = 2, m micro-batches; stage s costs f_s per forward and b_s per backward. Both
// phases are two-machine flow shops with constant times: the forwards end when the slower
// stage has run m of them after the faster one's first, then the backwards (newest first) the
// same, and stage 0 finishes last. Bubble = idle / (2 x makespan).
inline double gpipe_two_stage_bubble(double f0, double b0, double f1, double b1, int m) {
  const double forwards = std::max(m * f0 + f1, f0 + m * f1);
  const double backwards = std::max(m * b1 + b0, b1 + m * b0);
  const double makespan = forwards + backwards;
  return 1.0 - m * (f0 + b0 + f1 + b1) / (2.0 * makespan);
}

} // namespace tessel::test
