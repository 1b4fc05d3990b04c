// Pipeline schedule generators (GPipe, 1F1B, wave) and the simulator that checks and times them.
#include "tessel/train/schedule.hpp"

#include "tessel/core/error.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

namespace tessel::train {

const char* action_kind_name(ActionKind kind) {
  switch (kind) {
  case ActionKind::forward:
    return "forward";
  case ActionKind::backward:
    return "backward";
  case ActionKind::send_activation:
    return "send_activation";
  case ActionKind::recv_activation:
    return "recv_activation";
  case ActionKind::send_gradient:
    return "send_gradient";
  case ActionKind::recv_gradient:
    return "recv_gradient";
  }
  return "?";
}

int stages_for(ScheduleKind kind, int ranks) {
  return kind == ScheduleKind::wave ? 2 * ranks : ranks;
}

double analytic_bubble(ScheduleKind kind, int ranks, int micro_batches) {
  const double s = ranks, m = micro_batches;
  if (kind == ScheduleKind::wave) return (s - 1) / (2 * m + s - 1);
  return (s - 1) / (m + s - 1);
}

double schedule_bubble(ScheduleKind kind, int ranks, int micro_batches) {
  return simulate(make_schedule(kind, ranks, micro_batches), 1.0, 2.0).bubble;
}

namespace {

// Appends the actions of one compute step on `rank`, with the receive of its input before it
// and the send of its output after it when that data crosses ranks.
struct Builder {
  Schedule& s;
  void forward(int rank, int micro, int stage) {
    auto& list = s.actions[rank];
    if (stage > 0 && s.stage_rank[stage - 1] != rank)
      list.push_back({ActionKind::recv_activation, micro, stage, s.stage_rank[stage - 1]});
    list.push_back({ActionKind::forward, micro, stage, -1});
    if (stage + 1 < s.stages && s.stage_rank[stage + 1] != rank)
      list.push_back({ActionKind::send_activation, micro, stage, s.stage_rank[stage + 1]});
  }
  void backward(int rank, int micro, int stage) {
    auto& list = s.actions[rank];
    if (stage + 1 < s.stages && s.stage_rank[stage + 1] != rank)
      list.push_back({ActionKind::recv_gradient, micro, stage, s.stage_rank[stage + 1]});
    list.push_back({ActionKind::backward, micro, stage, -1});
    if (stage > 0 && s.stage_rank[stage - 1] != rank)
      list.push_back({ActionKind::send_gradient, micro, stage, s.stage_rank[stage - 1]});
  }
};

// Wave: the order on each rank comes from list scheduling in unit time (forward 1, backward 2
// per stage): a free rank starts a ready backward first (frees activations, like 1F1B), else
// the ready forward of the oldest micro-batch, deeper stage first. The orders are recorded
// and then fixed; any real timing runs them without deadlock because a receive only ever waits
// for a send that precedes it in this acyclic replay.
void build_wave(Schedule& s) {
  Builder b{s};
  const int m = s.micro_batches, n = s.stages, ranks = s.ranks;
  constexpr int kUnset = std::numeric_limits<int>::max();
  std::vector<int> fwd_end(static_cast<std::size_t>(m * n), kUnset);
  std::vector<int> bwd_end(fwd_end.size(), kUnset);
  std::vector<int> busy_until(static_cast<std::size_t>(ranks), 0);
  auto at = [n](int micro, int stage) { return static_cast<std::size_t>(micro * n + stage); };
  const int total = s.forward_only ? m * n : 2 * m * n;
  int done = 0;
  for (int t = 0; done < total; ++t) {
    for (int r = 0; r < ranks; ++r) {
      if (busy_until[r] > t) continue;
      const int stages_here[2] = {r, n - 1 - r};
      // Backward candidates.
      int best_micro = -1, best_stage = -1;
      if (!s.forward_only) {
        for (int i = 0; i < m && best_micro < 0; ++i)
          for (int stage : {stages_here[1], stages_here[0]}) {
            if (bwd_end[at(i, stage)] != kUnset || fwd_end[at(i, stage)] > t) continue;
            if (stage + 1 < n && bwd_end[at(i, stage + 1)] > t) continue;
            best_micro = i;
            best_stage = stage;
            break;
          }
        if (best_micro >= 0) {
          busy_until[r] = t + 2;
          bwd_end[at(best_micro, best_stage)] = t + 2;
          b.backward(r, best_micro, best_stage);
          ++done;
          continue;
        }
      }
      for (int i = 0; i < m && best_micro < 0; ++i)
        for (int stage : {stages_here[1], stages_here[0]}) {
          if (fwd_end[at(i, stage)] != kUnset) continue;
          if (stage > 0 && fwd_end[at(i, stage - 1)] > t) continue;
          best_micro = i;
          best_stage = stage;
          break;
        }
      if (best_micro >= 0) {
        busy_until[r] = t + 1;
        fwd_end[at(best_micro, best_stage)] = t + 1;
        b.forward(r, best_micro, best_stage);
        ++done;
      }
    }
  }
}

} // namespace

Schedule make_schedule(ScheduleKind kind, int ranks, int micro_batches, bool forward_only) {
  TESSEL_EXPECTS(ranks >= 1, "pipeline schedule: {} ranks, need at least 1", ranks);
  TESSEL_EXPECTS(micro_batches >= 1, "pipeline schedule: {} micro-batches, need at least 1",
                 micro_batches);
  Schedule s;
  s.kind = kind;
  s.ranks = ranks;
  s.stages = stages_for(kind, ranks);
  s.micro_batches = micro_batches;
  s.forward_only = forward_only;
  s.actions.resize(static_cast<std::size_t>(ranks));
  s.stage_rank.resize(static_cast<std::size_t>(s.stages));
  for (int stage = 0; stage < s.stages; ++stage)
    s.stage_rank[stage] = stage < ranks ? stage : 2 * ranks - 1 - stage;
  Builder b{s};
  const int m = micro_batches;
  switch (kind) {
  case ScheduleKind::gpipe:
    for (int r = 0; r < ranks; ++r) {
      for (int i = 0; i < m; ++i)
        b.forward(r, i, r);
      // Newest first: the last stage starts backward right after its last forward.
      if (!forward_only)
        for (int i = m - 1; i >= 0; --i)
          b.backward(r, i, r);
    }
    break;
  case ScheduleKind::one_f_one_b:
    for (int r = 0; r < ranks; ++r) {
      if (forward_only) {
        for (int i = 0; i < m; ++i)
          b.forward(r, i, r);
        continue;
      }
      // PipeDream-Flush: S - 1 - r warm-up forwards, then one forward and one backward in
      // turn, then the remaining backwards. At most S - r activations are held.
      const int warmup = std::min(ranks - 1 - r, m);
      for (int i = 0; i < warmup; ++i)
        b.forward(r, i, r);
      for (int j = 0; j + warmup < m; ++j) {
        b.forward(r, j + warmup, r);
        b.backward(r, j, r);
      }
      for (int j = m - warmup; j < m; ++j)
        b.backward(r, j, r);
    }
    break;
  case ScheduleKind::wave:
    build_wave(s);
    break;
  }
  return s;
}

SimulationResult simulate(const Schedule& s, const ActionCost& cost) {
  SimulationResult out;
  const int ranks = s.ranks, n = s.stages, m = s.micro_batches;
  auto fail = [&out](std::string message) {
    out.ok = false;
    out.error = std::move(message);
    return out;
  };
  if (static_cast<int>(s.actions.size()) != ranks || static_cast<int>(s.stage_rank.size()) != n)
    return fail("schedule: action lists or stage owners do not match the rank and stage counts");
  constexpr double kNone = -1;
  auto at = [n](int micro, int stage) { return static_cast<std::size_t>(micro * n + stage); };
  std::vector<double> fwd_end(static_cast<std::size_t>(m * n), kNone),
      bwd_end(fwd_end.size(), kNone);
  std::vector<double> act_in(fwd_end.size(), kNone), grad_in(fwd_end.size(), kNone);
  // (is_gradient, micro, from_stage) -> (time sent, destination rank, received)
  struct Message {
    double time;
    int dest;
    bool received;
  };
  std::map<std::tuple<int, int, int>, Message> messages;
  std::vector<std::size_t> next(static_cast<std::size_t>(ranks), 0);
  std::vector<double> clock(static_cast<std::size_t>(ranks), 0.0);
  out.busy.assign(static_cast<std::size_t>(ranks), 0.0);
  out.peak_in_flight_rank.assign(static_cast<std::size_t>(ranks), 0);
  out.peak_in_flight_stage.assign(static_cast<std::size_t>(n), 0);
  std::vector<int> live_rank(static_cast<std::size_t>(ranks), 0),
      live_stage(static_cast<std::size_t>(n), 0);

  auto describe = [](int r, const Action& a) {
    return fmt::format("rank {} {}(micro {}, stage {})", r, action_kind_name(a.kind), a.micro,
                       a.stage);
  };
  bool progress = true;
  std::size_t remaining = 0;
  for (const auto& list : s.actions)
    remaining += list.size();
  while (remaining > 0) {
    if (!progress) {
      std::string blocked;
      for (int r = 0; r < ranks; ++r)
        if (next[r] < s.actions[r].size())
          blocked += (blocked.empty() ? "" : "; ") + describe(r, s.actions[r][next[r]]);
      return fail("deadlock: every unfinished rank waits for a message never sent: " + blocked);
    }
    progress = false;
    for (int r = 0; r < ranks; ++r) {
      while (next[r] < s.actions[r].size()) {
        const Action& a = s.actions[r][next[r]];
        if (a.micro < 0 || a.micro >= m || a.stage < 0 || a.stage >= n)
          return fail(describe(r, a) + ": micro-batch or stage out of range");
        const std::size_t k = at(a.micro, a.stage);
        const bool compute = a.kind == ActionKind::forward || a.kind == ActionKind::backward;
        if (compute && s.stage_rank[a.stage] != r)
          return fail(describe(r, a) + ": the stage is held by rank " +
                      std::to_string(s.stage_rank[a.stage]));
        if (a.kind == ActionKind::forward) {
          if (fwd_end[k] != kNone) return fail(describe(r, a) + ": computed twice");
          double ready = 0;
          if (a.stage > 0) {
            ready = s.stage_rank[a.stage - 1] == r ? fwd_end[at(a.micro, a.stage - 1)] : act_in[k];
            if (ready == kNone) return fail(describe(r, a) + ": its input is not here yet");
          }
          const double c = cost(r, next[r]);
          clock[r] = std::max(clock[r], ready) + c;
          out.busy[r] += c;
          fwd_end[k] = clock[r];
          if (!s.forward_only) {
            out.peak_in_flight_rank[r] = std::max(out.peak_in_flight_rank[r], ++live_rank[r]);
            out.peak_in_flight_stage[a.stage] =
                std::max(out.peak_in_flight_stage[a.stage], ++live_stage[a.stage]);
          }
        } else if (a.kind == ActionKind::backward) {
          if (s.forward_only) return fail(describe(r, a) + ": backward in a forward-only schedule");
          if (bwd_end[k] != kNone) return fail(describe(r, a) + ": computed twice");
          if (fwd_end[k] == kNone) return fail(describe(r, a) + ": before its forward");
          double ready = fwd_end[k];
          if (a.stage + 1 < n) {
            const double g =
                s.stage_rank[a.stage + 1] == r ? bwd_end[at(a.micro, a.stage + 1)] : grad_in[k];
            if (g == kNone) return fail(describe(r, a) + ": its output gradient is not here yet");
            ready = std::max(ready, g);
          }
          const double c = cost(r, next[r]);
          clock[r] = std::max(clock[r], ready) + c;
          out.busy[r] += c;
          bwd_end[k] = clock[r];
          --live_rank[r];
          --live_stage[a.stage];
        } else if (a.kind == ActionKind::send_activation || a.kind == ActionKind::send_gradient) {
          const bool grad = a.kind == ActionKind::send_gradient;
          const int to_stage = grad ? a.stage - 1 : a.stage + 1;
          if (to_stage < 0 || to_stage >= n) return fail(describe(r, a) + ": no stage to send to");
          if (s.stage_rank[to_stage] != a.peer || a.peer == r)
            return fail(describe(r, a) + ": sent to rank " + std::to_string(a.peer) +
                        ", the next stage is on rank " + std::to_string(s.stage_rank[to_stage]));
          if ((grad ? bwd_end[k] : fwd_end[k]) == kNone)
            return fail(describe(r, a) + ": sends data not computed yet");
          if (!messages
                   .emplace(std::tuple{grad ? 1 : 0, a.micro, a.stage},
                            Message{clock[r], a.peer, false})
                   .second)
            return fail(describe(r, a) + ": sent twice");
        } else {
          const bool grad = a.kind == ActionKind::recv_gradient;
          const int from_stage = grad ? a.stage + 1 : a.stage - 1;
          if (from_stage < 0 || from_stage >= n)
            return fail(describe(r, a) + ": no stage to receive from");
          if (s.stage_rank[from_stage] != a.peer)
            return fail(describe(r, a) + ": expects rank " + std::to_string(a.peer) +
                        ", the stage is on rank " + std::to_string(s.stage_rank[from_stage]));
          auto it = messages.find(std::tuple{grad ? 1 : 0, a.micro, from_stage});
          if (it == messages.end()) break; // blocks until the peer sends
          if (it->second.dest != r || it->second.received)
            return fail(describe(r, a) + ": the message was sent elsewhere or already received");
          it->second.received = true;
          clock[r] = std::max(clock[r], it->second.time);
          (grad ? grad_in : act_in)[k] = it->second.time;
        }
        ++next[r];
        --remaining;
        progress = true;
      }
    }
  }
  for (int i = 0; i < m; ++i)
    for (int stage = 0; stage < n; ++stage) {
      if (fwd_end[at(i, stage)] == kNone)
        return fail(fmt::format("forward(micro {}, stage {}) never runs", i, stage));
      if (!s.forward_only && bwd_end[at(i, stage)] == kNone)
        return fail(fmt::format("backward(micro {}, stage {}) never runs", i, stage));
    }
  for (const auto& [key, message] : messages)
    if (!message.received)
      return fail(fmt::format("a message (micro {}, stage {}) is sent but never received",
                              std::get<1>(key), std::get<2>(key)));
  out.finish = clock;
  out.makespan = *std::max_element(clock.begin(), clock.end());
  double idle = 0;
  for (int r = 0; r < ranks; ++r)
    idle += out.makespan - out.busy[r];
  out.bubble = out.makespan > 0 ? idle / (ranks * out.makespan) : 0.0;
  out.ok = true;
  return out;
}

SimulationResult simulate(const Schedule& s, double forward, double backward) {
  const double per_rank = static_cast<double>(s.stages) / s.ranks;
  return simulate(s, [&](int r, std::size_t i) {
    const Action& a = s.actions[r][i];
    return (a.kind == ActionKind::forward ? forward : backward) / per_rank;
  });
}

} // namespace tessel::train
