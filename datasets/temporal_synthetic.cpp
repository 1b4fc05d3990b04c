// Synthetic temporal datasets: an evolving planted-partition graph whose node targets depend on
// the neighbours' past signal and the node's own history; deterministic from the seed.
#include "tessel/datasets/temporal.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/rng.hpp"

#include <algorithm>
#include <cmath>

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

}  // namespace

TemporalDataset make_synthetic_temporal(const SyntheticTemporalOptions& o) {
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
                 "synthetic-temporal: communities must be in [1, nodes], got {}",
                 o.num_communities);
  for (const auto& [flag, value] : {std::pair{"--homophily", o.homophily},
                                    std::pair{"--drift", o.drift}, std::pair{"--rewire", o.rewire}})
    TESSEL_EXPECTS(value >= 0 && value <= 1, "synthetic-temporal: {} must be in [0, 1], got {}",
                   flag, value);
  const std::int64_t N = o.num_nodes, T = o.num_snapshots, F = o.feature_dim,
                     C = o.num_communities;
  const auto step_key = [&](rng::Stream stream, std::int64_t t, std::uint32_t layer) {
    return Draw{rng::Key{o.seed, stream, static_cast<std::uint32_t>(t), 0, layer}};
  };

  // Community memberships per step, and per community its members (for homophilous draws).
  std::vector<std::int32_t> member(static_cast<std::size_t>(N));
  const Draw init = step_key(rng::Stream::synthetic, 0, 1);
  for (std::int64_t v = 0; v < N; ++v) member[v] = static_cast<std::int32_t>(init.below(v, 0, C));
  // Community effects on the signal and feature centroids.
  std::vector<double> effect(static_cast<std::size_t>(C));
  std::vector<float> centroid(static_cast<std::size_t>(C * F));
  for (std::int64_t c = 0; c < C; ++c) {
    rng::Sequence seq(rng::Key{o.seed, rng::Stream::synthetic, 0, 0, 2}, static_cast<std::uint64_t>(c));
    effect[c] = 0.5 * seq.next_normal();
    for (std::int64_t f = 0; f < F; ++f) centroid[c * F + f] = seq.next_normal();
  }

  const auto num_edges = static_cast<std::int64_t>(std::llround(o.avg_degree * N / 2.0));
  std::vector<NodeId> eu(static_cast<std::size_t>(num_edges)), ev(eu.size());
  std::vector<std::vector<NodeId>> members;
  auto index_members = [&] {
    members.assign(static_cast<std::size_t>(C), {});
    for (std::int64_t v = 0; v < N; ++v) members[member[v]].push_back(v);
  };
  // Edge i at step t: a uniform endpoint u, then v in u's community with probability homophily.
  auto draw_edge = [&](std::int64_t i, std::int64_t t) {
    const Draw d = step_key(rng::Stream::synthetic, t, 3);
    for (std::uint32_t attempt = 0; attempt < 64; attempt += 3) {
      const NodeId u = static_cast<NodeId>(d.below(i, attempt, N));
      const auto& same = members[member[u]];
      NodeId v;
      if (d.uniform(i, attempt + 1) < o.homophily && same.size() > 1)
        v = same[d.below(i, attempt + 2, same.size())];
      else
        v = static_cast<NodeId>(d.below(i, attempt + 2, N));
      if (u != v) {
        eu[i] = u;
        ev[i] = v;
        return;
      }
    }
    eu[i] = 0;
    ev[i] = 1;
  };
  index_members();
  for (std::int64_t i = 0; i < num_edges; ++i) draw_edge(i, 0);

  TemporalDataset d;
  d.name = o.name;
  d.num_nodes = N;
  d.feature_dim = F;
  d.features.resize(static_cast<std::size_t>(T * N * F));
  d.targets.resize(static_cast<std::size_t>(T * N));
  std::vector<double> s_prev(static_cast<std::size_t>(N), 0.0), s(static_cast<std::size_t>(N));
  {
    const Draw d0 = step_key(rng::Stream::synthetic, 0, 4);
    for (std::int64_t v = 0; v < N; ++v) s[v] = 2 * d0.uniform(v, 0) - 1;
  }
  for (std::int64_t t = 0; t < T; ++t) {
    if (t > 0) {
      const Draw move = step_key(rng::Stream::synthetic, t, 5);
      for (std::int64_t v = 0; v < N; ++v)
        if (move.uniform(v, 0) < o.drift) member[v] = static_cast<std::int32_t>(move.below(v, 1, C));
      index_members();
      const Draw re = step_key(rng::Stream::synthetic, t, 6);
      for (std::int64_t i = 0; i < num_edges; ++i)
        if (re.uniform(i, 0) < o.rewire) draw_edge(i, t);
    }
    // Both directions of every edge, weight 1; repeats merge (weight = multiplicity).
    Csr snap;
    snap.num_rows = snap.num_cols = N;
    snap.indptr.assign(static_cast<std::size_t>(N + 1), 0);
    for (std::int64_t i = 0; i < num_edges; ++i) {
      ++snap.indptr[eu[i] + 1];
      ++snap.indptr[ev[i] + 1];
    }
    for (std::int64_t v = 0; v < N; ++v) snap.indptr[v + 1] += snap.indptr[v];
    snap.indices.resize(static_cast<std::size_t>(2 * num_edges));
    std::vector<EdgeId> fill(snap.indptr.begin(), snap.indptr.end() - 1);
    for (std::int64_t i = 0; i < num_edges; ++i) {
      snap.indices[fill[ev[i]]++] = eu[i];
      snap.indices[fill[eu[i]]++] = ev[i];
    }
    canonicalize_snapshot(snap);
    // Repeated pairs count once: the graph is unweighted.
    std::fill(snap.values.begin(), snap.values.end(), 1.0f);

    // Features of step t: the signal s_t(v), then the community centroid plus noise.
    const Draw noise = step_key(rng::Stream::synthetic, t, 7);
    for (std::int64_t v = 0; v < N; ++v) {
      float* row = &d.features[static_cast<std::size_t>((t * N + v) * F)];
      row[0] = static_cast<float>(s[v]);
      for (std::int64_t f = 1; f < F; ++f)
        row[f] = centroid[member[v] * F + f] + static_cast<float>(noise.uniform(v, static_cast<std::uint32_t>(f)) - 0.5);
    }
    // Next signal from this snapshot's neighbours and the node's own past.
    const Draw eps = step_key(rng::Stream::synthetic, t, 8);
    std::vector<double> next(static_cast<std::size_t>(N));
    for (std::int64_t v = 0; v < N; ++v) {
      double mean = 0;
      const EdgeId b = snap.indptr[v], e = snap.indptr[v + 1];
      for (EdgeId k = b; k < e; ++k) mean += s[snap.indices[k]];
      if (e > b) mean /= static_cast<double>(e - b);
      next[v] = std::tanh(kNeighbourGain * mean + kMemoryGain * s_prev[v] + effect[member[v]]) +
                kNoise * (2 * eps.uniform(v, 0) - 1);
      d.targets[static_cast<std::size_t>(t * N + v)] = static_cast<float>(next[v]);
    }
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
