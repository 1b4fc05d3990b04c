// Pipeline schedules as data (GPipe, 1F1B, wave): per-rank ordered actions, and a simulator that
// checks them and measures their bubble.
#pragma once

#include "tessel/core/option_words.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tessel::dist {

// --schedule.
enum class ScheduleKind { gpipe, one_f_one_b, wave };
inline std::span<const OptionWord<ScheduleKind>> option_words(ScheduleKind) {
  static constexpr OptionWord<ScheduleKind> words[] = {{"gpipe", ScheduleKind::gpipe},
                                                       {"1f1b", ScheduleKind::one_f_one_b},
                                                       {"wave", ScheduleKind::wave}};
  return words;
}

enum class ActionKind {
  forward,         // forward of micro-batch `micro` through stage `stage`
  backward,        // backward of micro-batch `micro` through stage `stage`
  send_activation, // output of (micro, stage) to the rank holding stage + 1 (`peer`)
  recv_activation, // input of (micro, stage) from the rank holding stage - 1 (`peer`)
  send_gradient,   // input gradient of (micro, stage) to the rank holding stage - 1 (`peer`)
  recv_gradient,   // output gradient of (micro, stage) from the rank holding stage + 1 (`peer`)
};
const char* action_kind_name(ActionKind kind);

struct Action {
  ActionKind kind = ActionKind::forward;
  int micro = 0;
  int stage = 0; // the stage whose forward/backward this is, or whose data travels
  int peer = -1; // pipeline rank on the other end of a send/receive; -1 for compute
  bool operator==(const Action&) const = default;
};

// A schedule for one mini-batch of `micro_batches` micro-batches over `ranks` pipeline ranks.
// Stages are the model's pieces in order: `ranks` of them for gpipe and 1f1b (stage s on rank
// s), 2 * ranks for wave (Hanayo's wave: rank r holds stages r and 2 ranks - 1 - r, so a
// micro-batch goes down the ranks and comes back up, and the turn at the last rank needs no
// message). Every schedule ends with every backward done (a flush): one optimizer step per
// mini-batch, equal to the unpipelined step. forward_only schedules (evaluation) hold no
// backward and no gradient messages.
struct Schedule {
  ScheduleKind kind = ScheduleKind::gpipe;
  int ranks = 1;
  int stages = 1;
  int micro_batches = 1;
  bool forward_only = false;
  std::vector<int> stage_rank;              // [stages] rank holding each stage
  std::vector<std::vector<Action>> actions; // [ranks] in execution order
};

// Stages a schedule of this kind cuts the model into for `ranks` pipeline ranks.
int stages_for(ScheduleKind kind, int ranks);

// Builds the per-rank action lists. ranks >= 1, micro_batches >= 1.
Schedule make_schedule(ScheduleKind kind, int ranks, int micro_batches, bool forward_only = false);

// The bubble fraction with equal stages and free messages: idle time over rank time.
//   gpipe, 1f1b: (S - 1) / (m + S - 1) (exact for these schedules);
//   wave: (S - 1) / (2 m + S - 1), the bound of the V-shaped placement (two half-size stages
//   per rank halve the fill and drain). Tessel's wave order is found by list scheduling and
//   lies between this bound and the 1F1B figure: schedule_bubble() gives its exact value.
double analytic_bubble(ScheduleKind kind, int ranks, int micro_batches);
// The simulated bubble of make_schedule(kind, ranks, micro_batches) with equal stages, a
// backward twice as long as a forward, and free messages.
double schedule_bubble(ScheduleKind kind, int ranks, int micro_batches);

// Replays a schedule: every rank runs its actions in order; compute actions take
// cost(rank, index) seconds (index into actions[rank]); a send never blocks; a receive waits
// for its send. Checks every dependency (a forward has its input, a backward its forward and
// its output gradient, each message is sent once, received once and by the right rank) and
// that every (micro, stage) is computed exactly once.
struct SimulationResult {
  bool ok = false;
  std::string error;                     // the first violated rule, or the deadlock, when !ok
  double makespan = 0;                   // time the last rank finishes
  std::vector<double> busy;              // [ranks] compute time
  std::vector<double> finish;            // [ranks] time each rank finishes
  double bubble = 0;                     // sum of idle time / (ranks * makespan)
  std::vector<int> peak_in_flight_rank;  // [ranks] most forwards awaiting their backward
  std::vector<int> peak_in_flight_stage; // [stages] same, per stage
};
using ActionCost = std::function<double(int rank, std::size_t index)>;
SimulationResult simulate(const Schedule& schedule, const ActionCost& cost);
// Unit costs: a forward of a stage costs `forward`, a backward `backward`, divided by the
// number of stages per rank (so a rank's work per micro-batch is the same for every kind).
SimulationResult simulate(const Schedule& schedule, double forward = 1.0, double backward = 2.0);

} // namespace tessel::dist
