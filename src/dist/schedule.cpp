// Pipeline schedule generators (GPipe, 1F1B, wave) and the simulator that checks and times them.
#include "tessel/dist/schedule.hpp"

#include "tessel/core/error.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

namespace tessel::dist {

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

namespace {

std::string describe(int r, const Action& a) {
  return fmt::format("rank {} {}(micro {}, stage {})", r, action_kind_name(a.kind), a.micro,
                     a.stage);
}

// One simulation of a schedule: each rank's clock, when each (micro-batch, stage) finished its
// forward and backward and when its input arrived, and the messages in flight. The first broken
// rule ends it with out_.ok false and the figures gathered until then.
class Simulator {
public:
  Simulator(const Schedule& s, const ActionCost& cost)
      : s_(s), cost_(cost), ranks_(s.ranks), n_(s.stages), m_(s.micro_batches),
        fwd_end_(static_cast<std::size_t>(m_ * n_), kNone), bwd_end_(fwd_end_.size(), kNone),
        act_in_(fwd_end_.size(), kNone), grad_in_(fwd_end_.size(), kNone),
        next_(static_cast<std::size_t>(ranks_), 0), clock_(static_cast<std::size_t>(ranks_), 0.0),
        live_rank_(static_cast<std::size_t>(ranks_), 0),
        live_stage_(static_cast<std::size_t>(n_), 0) {
    out_.busy.assign(static_cast<std::size_t>(ranks_), 0.0);
    out_.peak_in_flight_rank.assign(static_cast<std::size_t>(ranks_), 0);
    out_.peak_in_flight_stage.assign(static_cast<std::size_t>(n_), 0);
  }

  SimulationResult run() {
    if (!run_actions() || !check_complete()) return std::move(out_);
    out_.finish = clock_;
    out_.makespan = *std::max_element(clock_.begin(), clock_.end());
    double idle = 0;
    for (int r = 0; r < ranks_; ++r)
      idle += out_.makespan - out_.busy[r];
    out_.bubble = out_.makespan > 0 ? idle / (ranks_ * out_.makespan) : 0.0;
    out_.ok = true;
    return std::move(out_);
  }

private:
  static constexpr double kNone = -1;
  // What one action did: ran, or waits for a message not sent yet, or broke a rule.
  enum class Step { done, blocked, failed };
  // (time sent, destination rank, received)
  struct Message {
    double time;
    int dest;
    bool received;
  };

  bool fail(std::string message) {
    out_.ok = false;
    out_.error = std::move(message);
    return false;
  }
  Step failed(std::string message) {
    fail(std::move(message));
    return Step::failed;
  }
  std::size_t at(int micro, int stage) const {
    return static_cast<std::size_t>(micro * n_ + stage);
  }

  // Runs every rank's actions as far as it can, round after round, until all ran or none can.
  bool run_actions() {
    bool progress = true;
    std::size_t remaining = 0;
    for (const auto& list : s_.actions)
      remaining += list.size();
    while (remaining > 0) {
      if (!progress) {
        std::string blocked;
        for (int r = 0; r < ranks_; ++r)
          if (next_[r] < s_.actions[r].size())
            blocked += (blocked.empty() ? "" : "; ") + describe(r, s_.actions[r][next_[r]]);
        return fail("deadlock: every unfinished rank waits for a message never sent: " + blocked);
      }
      progress = false;
      for (int r = 0; r < ranks_; ++r) {
        while (next_[r] < s_.actions[r].size()) {
          const Step step = run_action(r, s_.actions[r][next_[r]]);
          if (step == Step::failed) return false;
          if (step == Step::blocked) break;
          ++next_[r];
          --remaining;
          progress = true;
        }
      }
    }
    return true;
  }

  Step run_action(int r, const Action& a) {
    if (a.micro < 0 || a.micro >= m_ || a.stage < 0 || a.stage >= n_)
      return failed(describe(r, a) + ": micro-batch or stage out of range");
    const std::size_t k = at(a.micro, a.stage);
    const bool compute = a.kind == ActionKind::forward || a.kind == ActionKind::backward;
    if (compute && s_.stage_rank[a.stage] != r)
      return failed(describe(r, a) + ": the stage is held by rank " +
                    std::to_string(s_.stage_rank[a.stage]));
    if (a.kind == ActionKind::forward) return forward(r, a, k);
    if (a.kind == ActionKind::backward) return backward(r, a, k);
    if (a.kind == ActionKind::send_activation || a.kind == ActionKind::send_gradient)
      return send(r, a, k);
    return receive(r, a, k);
  }

  Step forward(int r, const Action& a, std::size_t k) {
    if (fwd_end_[k] != kNone) return failed(describe(r, a) + ": computed twice");
    double ready = 0;
    if (a.stage > 0) {
      ready = s_.stage_rank[a.stage - 1] == r ? fwd_end_[at(a.micro, a.stage - 1)] : act_in_[k];
      if (ready == kNone) return failed(describe(r, a) + ": its input is not here yet");
    }
    const double c = cost_(r, next_[r]);
    clock_[r] = std::max(clock_[r], ready) + c;
    out_.busy[r] += c;
    fwd_end_[k] = clock_[r];
    if (!s_.forward_only) {
      out_.peak_in_flight_rank[r] = std::max(out_.peak_in_flight_rank[r], ++live_rank_[r]);
      out_.peak_in_flight_stage[a.stage] =
          std::max(out_.peak_in_flight_stage[a.stage], ++live_stage_[a.stage]);
    }
    return Step::done;
  }

  Step backward(int r, const Action& a, std::size_t k) {
    if (s_.forward_only) return failed(describe(r, a) + ": backward in a forward-only schedule");
    if (bwd_end_[k] != kNone) return failed(describe(r, a) + ": computed twice");
    if (fwd_end_[k] == kNone) return failed(describe(r, a) + ": before its forward");
    double ready = fwd_end_[k];
    if (a.stage + 1 < n_) {
      const double g =
          s_.stage_rank[a.stage + 1] == r ? bwd_end_[at(a.micro, a.stage + 1)] : grad_in_[k];
      if (g == kNone) return failed(describe(r, a) + ": its output gradient is not here yet");
      ready = std::max(ready, g);
    }
    const double c = cost_(r, next_[r]);
    clock_[r] = std::max(clock_[r], ready) + c;
    out_.busy[r] += c;
    bwd_end_[k] = clock_[r];
    --live_rank_[r];
    --live_stage_[a.stage];
    return Step::done;
  }

  Step send(int r, const Action& a, std::size_t k) {
    const bool grad = a.kind == ActionKind::send_gradient;
    const int to_stage = grad ? a.stage - 1 : a.stage + 1;
    if (to_stage < 0 || to_stage >= n_) return failed(describe(r, a) + ": no stage to send to");
    if (s_.stage_rank[to_stage] != a.peer || a.peer == r)
      return failed(describe(r, a) + ": sent to rank " + std::to_string(a.peer) +
                    ", the next stage is on rank " + std::to_string(s_.stage_rank[to_stage]));
    if ((grad ? bwd_end_[k] : fwd_end_[k]) == kNone)
      return failed(describe(r, a) + ": sends data not computed yet");
    if (!messages_
             .emplace(std::tuple{grad ? 1 : 0, a.micro, a.stage}, Message{clock_[r], a.peer, false})
             .second)
      return failed(describe(r, a) + ": sent twice");
    return Step::done;
  }

  Step receive(int r, const Action& a, std::size_t k) {
    const bool grad = a.kind == ActionKind::recv_gradient;
    const int from_stage = grad ? a.stage + 1 : a.stage - 1;
    if (from_stage < 0 || from_stage >= n_)
      return failed(describe(r, a) + ": no stage to receive from");
    if (s_.stage_rank[from_stage] != a.peer)
      return failed(describe(r, a) + ": expects rank " + std::to_string(a.peer) +
                    ", the stage is on rank " + std::to_string(s_.stage_rank[from_stage]));
    auto it = messages_.find(std::tuple{grad ? 1 : 0, a.micro, from_stage});
    if (it == messages_.end()) return Step::blocked; // until the peer sends
    if (it->second.dest != r || it->second.received)
      return failed(describe(r, a) + ": the message was sent elsewhere or already received");
    it->second.received = true;
    clock_[r] = std::max(clock_[r], it->second.time);
    (grad ? grad_in_ : act_in_)[k] = it->second.time;
    return Step::done;
  }

  // Every forward (and backward) ran, and every message sent was received.
  bool check_complete() {
    for (int i = 0; i < m_; ++i)
      for (int stage = 0; stage < n_; ++stage) {
        if (fwd_end_[at(i, stage)] == kNone)
          return fail(fmt::format("forward(micro {}, stage {}) never runs", i, stage));
        if (!s_.forward_only && bwd_end_[at(i, stage)] == kNone)
          return fail(fmt::format("backward(micro {}, stage {}) never runs", i, stage));
      }
    for (const auto& [key, message] : messages_)
      if (!message.received)
        return fail(fmt::format("a message (micro {}, stage {}) is sent but never received",
                                std::get<1>(key), std::get<2>(key)));
    return true;
  }

  const Schedule& s_;
  const ActionCost& cost_;
  const int ranks_, n_, m_;
  SimulationResult out_;
  std::vector<double> fwd_end_, bwd_end_;
  std::vector<double> act_in_, grad_in_;
  // (is_gradient, micro, from_stage) -> the message
  std::map<std::tuple<int, int, int>, Message> messages_;
  std::vector<std::size_t> next_;
  std::vector<double> clock_;
  std::vector<int> live_rank_, live_stage_;
};

} // namespace

SimulationResult simulate(const Schedule& s, const ActionCost& cost) {
  if (static_cast<int>(s.actions.size()) != s.ranks ||
      static_cast<int>(s.stage_rank.size()) != s.stages) {
    SimulationResult out;
    out.ok = false;
    out.error = "schedule: action lists or stage owners do not match the rank and stage counts";
    return out;
  }
  return Simulator(s, cost).run();
}

SimulationResult simulate(const Schedule& s, double forward, double backward) {
  const double per_rank = static_cast<double>(s.stages) / s.ranks;
  return simulate(s, [&](int r, std::size_t i) {
    const Action& a = s.actions[r][i];
    return (a.kind == ActionKind::forward ? forward : backward) / per_rank;
  });
}

} // namespace tessel::dist
