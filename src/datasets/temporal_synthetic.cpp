// Synthetic temporal datasets: an evolving planted-partition graph whose node targets depend on
// the neighbours' past signal and the node's own history; deterministic from the seed.
#include "tessel/datasets/temporal.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/rng.hpp"
#include "tessel/core/usable_memory.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <string>

namespace tessel::datasets {

namespace {

constexpr double kNeighbourGain = 1.6;  // a: weight of the neighbours' mean signal
constexpr double kMemoryGain = -0.8;    // b: weight of the node's own signal two steps back
constexpr double kNoise = 0.05;

struct Draw {
  rng::Key key;
  // Uniform double in [0, 1) for draw i of item `item`.
  double uniform(std::uint64_t item, std::uint32_t i) const {
    const auto b = key.block(item, i);
    return static_cast<double>((static_cast<std::uint64_t>(b[0]) << 21) ^ b[1]) /
           9007199254740992.0;
  }
  std::uint64_t below(std::uint64_t item, std::uint32_t i, std::uint64_t n) const {
    return key.below(item, i, n);
  }
};

void check_options(const SyntheticTemporalOptions& o) {
  TESSEL_EXPECTS(o.num_nodes >= 2, "synthetic-temporal: --nodes must be at least 2, got {}",
                 o.num_nodes);
  TESSEL_EXPECTS(o.num_snapshots >= 2 && o.num_snapshots <= 100000,
                 "synthetic-temporal: --snapshots must be in [2, 100000], got {}",
                 o.num_snapshots);
  TESSEL_EXPECTS(o.avg_degree > 0 && o.avg_degree < static_cast<double>(o.num_nodes),
                 "synthetic-temporal: --avg-degree must be in (0, nodes), got {}", o.avg_degree);
  TESSEL_EXPECTS(o.feature_dim >= 1 && o.feature_dim <= 4096,
                 "synthetic-temporal: --feat-dim must be in [1, 4096], got {}", o.feature_dim);
  TESSEL_EXPECTS(o.num_communities >= 1 && o.num_communities <= o.num_nodes,
                 "synthetic-temporal: --communities must be in [1, nodes], got {}",
                 o.num_communities);
  for (const auto& [flag, value] : {std::pair{"--homophily", o.homophily},
                                    std::pair{"--drift", o.drift}, std::pair{"--rewire", o.rewire}})
    TESSEL_EXPECTS(value >= 0 && value <= 1, "synthetic-temporal: {} must be in [0, 1], got {}",
                   flag, value);
  // What the series and the snapshots take, checked before anything is sized by it: a large
  // --nodes was a bare "out of memory" (or the C++ library's max_size() message).
  const double T = static_cast<double>(o.num_snapshots), N = static_cast<double>(o.num_nodes);
  const double needed = T * N * (static_cast<double>(o.feature_dim) + 1) * 4 +
                        T * (N + 1) * 8 + T * N * o.avg_degree * 12;
  const double usable = static_cast<double>(usable_memory_bytes());
  TESSEL_EXPECTS(needed <= usable,
                 "synthetic-temporal: --nodes {} with --snapshots {}, --feat-dim {} and "
                 "--avg-degree {} needs about {:.1f} GB of memory (features, targets and "
                 "snapshots), more than the {:.1f} GB of memory and swap here",
                 o.num_nodes, o.num_snapshots, o.feature_dim, o.avg_degree, needed / 1e9,
                 usable / 1e9);
}

// The evolving graph: community memberships, their effects and feature centroids, and the
// edges of the current step (redrawn in part at each step).
class EvolvingGraph {
public:
  explicit EvolvingGraph(const SyntheticTemporalOptions& o)
      : o_(o), N_(o.num_nodes), F_(o.feature_dim), C_(o.num_communities),
        member_(static_cast<std::size_t>(N_)), effect_(static_cast<std::size_t>(C_)),
        centroid_(static_cast<std::size_t>(C_ * F_)),
        num_edges_(static_cast<std::int64_t>(std::llround(o.avg_degree * N_ / 2.0))),
        eu_(static_cast<std::size_t>(num_edges_)), ev_(eu_.size()) {
    // Community memberships per step, and per community its members (for homophilous draws).
    const Draw init = step_key(rng::Stream::synthetic, 0, 1);
    for (std::int64_t v = 0; v < N_; ++v)
      member_[v] = static_cast<std::int32_t>(init.below(v, 0, C_));
    // Community effects on the signal and feature centroids.
    for (std::int64_t c = 0; c < C_; ++c) {
      rng::Sequence seq(rng::Key{o.seed, rng::Stream::synthetic, 0, 0, 2},
                        static_cast<std::uint64_t>(c));
      effect_[c] = 0.5 * seq.next_normal();
      for (std::int64_t f = 0; f < F_; ++f)
        centroid_[c * F_ + f] = seq.next_normal();
    }
    index_members();
    for (std::int64_t i = 0; i < num_edges_; ++i)
      draw_edge(i, 0);
  }

  Draw step_key(rng::Stream stream, std::int64_t t, std::uint32_t layer) const {
    return Draw{rng::Key{o_.seed, stream, static_cast<std::uint32_t>(t), 0, layer}};
  }

  // Step t > 0: some nodes change community (--drift), some edges are drawn again (--rewire).
  void evolve(std::int64_t t) {
    const Draw move = step_key(rng::Stream::synthetic, t, 5);
    for (std::int64_t v = 0; v < N_; ++v)
      if (move.uniform(v, 0) < o_.drift)
        member_[v] = static_cast<std::int32_t>(move.below(v, 1, C_));
    index_members();
    const Draw re = step_key(rng::Stream::synthetic, t, 6);
    for (std::int64_t i = 0; i < num_edges_; ++i)
      if (re.uniform(i, 0) < o_.rewire) draw_edge(i, t);
  }

  // Both directions of every edge, weight 1; repeats merge (weight = multiplicity).
  Csr snapshot() const {
    Csr snap;
    snap.num_rows = snap.num_cols = N_;
    snap.indptr.assign(static_cast<std::size_t>(N_ + 1), 0);
    for (std::int64_t i = 0; i < num_edges_; ++i) {
      ++snap.indptr[eu_[i] + 1];
      ++snap.indptr[ev_[i] + 1];
    }
    for (std::int64_t v = 0; v < N_; ++v)
      snap.indptr[v + 1] += snap.indptr[v];
    snap.indices.resize(static_cast<std::size_t>(2 * num_edges_));
    std::vector<EdgeId> fill(snap.indptr.begin(), snap.indptr.end() - 1);
    for (std::int64_t i = 0; i < num_edges_; ++i) {
      snap.indices[fill[ev_[i]]++] = eu_[i];
      snap.indices[fill[eu_[i]]++] = ev_[i];
    }
    canonicalize_snapshot(snap);
    // Repeated pairs count once: the graph is unweighted.
    std::fill(snap.values.begin(), snap.values.end(), 1.0f);
    return snap;
  }

  // Features of step t: the signal s_t(v), then the community centroid plus noise.
  void write_features(std::int64_t t, const std::vector<double>& s, TemporalDataset& d) const {
    const Draw noise = step_key(rng::Stream::synthetic, t, 7);
    for (std::int64_t v = 0; v < N_; ++v) {
      float* row = &d.features[static_cast<std::size_t>((t * N_ + v) * F_)];
      row[0] = static_cast<float>(s[v]);
      for (std::int64_t f = 1; f < F_; ++f)
        row[f] = centroid_[member_[v] * F_ + f] +
                 static_cast<float>(noise.uniform(v, static_cast<std::uint32_t>(f)) - 0.5);
    }
  }

  // Next signal from this snapshot's neighbours and the node's own past; it is step t's target.
  std::vector<double> next_signal(std::int64_t t, const Csr& snap, const std::vector<double>& s,
                                  const std::vector<double>& s_prev, TemporalDataset& d) const {
    const Draw eps = step_key(rng::Stream::synthetic, t, 8);
    std::vector<double> next(static_cast<std::size_t>(N_));
    for (std::int64_t v = 0; v < N_; ++v) {
      double mean = 0;
      const EdgeId b = snap.indptr[v], e = snap.indptr[v + 1];
      for (EdgeId k = b; k < e; ++k)
        mean += s[snap.indices[k]];
      if (e > b) mean /= static_cast<double>(e - b);
      next[v] = std::tanh(kNeighbourGain * mean + kMemoryGain * s_prev[v] + effect_[member_[v]]) +
                kNoise * (2 * eps.uniform(v, 0) - 1);
      d.targets[static_cast<std::size_t>(t * N_ + v)] = static_cast<float>(next[v]);
    }
    return next;
  }

private:
  void index_members() {
    members_.assign(static_cast<std::size_t>(C_), {});
    for (std::int64_t v = 0; v < N_; ++v)
      members_[member_[v]].push_back(v);
  }

  // Edge i at step t: a uniform endpoint u, then v in u's community with probability homophily.
  void draw_edge(std::int64_t i, std::int64_t t) {
    const Draw d = step_key(rng::Stream::synthetic, t, 3);
    for (std::uint32_t attempt = 0; attempt < 64; attempt += 3) {
      const NodeId u = static_cast<NodeId>(d.below(i, attempt, N_));
      const auto& same = members_[member_[u]];
      NodeId v;
      if (d.uniform(i, attempt + 1) < o_.homophily && same.size() > 1)
        v = same[d.below(i, attempt + 2, same.size())];
      else
        v = static_cast<NodeId>(d.below(i, attempt + 2, N_));
      if (u != v) {
        eu_[i] = u;
        ev_[i] = v;
        return;
      }
    }
    eu_[i] = 0;
    ev_[i] = 1;
  }

  const SyntheticTemporalOptions& o_;
  const std::int64_t N_, F_, C_;
  std::vector<std::int32_t> member_;
  std::vector<double> effect_;
  std::vector<float> centroid_;
  const std::int64_t num_edges_;
  std::vector<NodeId> eu_, ev_;
  std::vector<std::vector<NodeId>> members_;
};

} // namespace

TemporalDataset make_synthetic_temporal(const SyntheticTemporalOptions& o) {
  check_options(o);
  const std::int64_t N = o.num_nodes, T = o.num_snapshots, F = o.feature_dim;
  EvolvingGraph graph(o);
  TemporalDataset d;
  d.name = o.name;
  d.num_nodes = N;
  d.feature_dim = F;
  d.features.resize(static_cast<std::size_t>(T * N * F));
  d.targets.resize(static_cast<std::size_t>(T * N));
  std::vector<double> s_prev(static_cast<std::size_t>(N), 0.0), s(static_cast<std::size_t>(N));
  {
    const Draw d0 = graph.step_key(rng::Stream::synthetic, 0, 4);
    for (std::int64_t v = 0; v < N; ++v) s[v] = 2 * d0.uniform(v, 0) - 1;
  }
  for (std::int64_t t = 0; t < T; ++t) {
    if (t > 0) graph.evolve(t);
    Csr snap = graph.snapshot();
    graph.write_features(t, s, d);
    std::vector<double> next = graph.next_signal(t, snap, s, s_prev, d);
    s_prev = s;
    s = std::move(next);
    d.snapshots.push_back(std::move(snap));
  }
  const auto n_train = std::max<std::int64_t>(1, static_cast<std::int64_t>(o.train_frac * T));
  const auto n_valid = static_cast<std::int64_t>(o.valid_frac * T);
  d.train = {0, std::min(n_train, T)};
  d.valid = {d.train.end, std::min(T, d.train.end + n_valid)};
  d.test = {d.valid.end, T};
  d.validate("synthetic-temporal");
  return d;
}

}  // namespace tessel::datasets
