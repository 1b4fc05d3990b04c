// Temporal partitions: METIS (or random) vertex ranges over the union of all snapshots, snapshot
// blocks balanced for training, a relabeled copy of the store and partition.json with
// per-snapshot halo statistics.
#include "tessel/partition/temporal.hpp"

#include "steps.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/timer.hpp"
#include "tessel/datasets/atomic_output.hpp"
#include "tessel/datasets/json_file.hpp"
#include "tessel/datasets/temporal.hpp"

#include <algorithm>
#include <fstream>
#include <numeric>

namespace tessel::partition {
namespace fs = std::filesystem;
using namespace detail;

std::vector<std::int64_t> snapshot_blocks(std::int64_t num_snapshots, int num_parts) {
  std::vector<std::int64_t> off(static_cast<std::size_t>(num_parts + 1));
  for (int p = 0; p <= num_parts; ++p) off[p] = num_snapshots * p / num_parts;
  return off;
}

namespace {

// Blocks in rank order, each as long as the caps allow: at most max_train snapshots below
// train_end and max_size in all, leaving one snapshot for each later part when there are enough.
// Taking the farthest reach at every step covers [0, T) whenever any blocks within the caps do
// (the farthest end allowed never decreases with the start), so this decides feasibility.
// Returns the offsets, or an empty vector when the parts do not reach T.
std::vector<std::int64_t> greedy_blocks(std::int64_t T, std::int64_t train_end, int P,
                                        std::int64_t max_train, std::int64_t max_size) {
  std::vector<std::int64_t> off(static_cast<std::size_t>(P + 1), 0);
  std::int64_t at = 0;
  for (int p = 0; p < P; ++p) {
    std::int64_t end = std::min(T, at + max_size);
    if (at + max_train < train_end) end = std::min(end, at + max_train);
    if (T >= P) end = std::min(end, T - (P - 1 - p));
    at = std::max(at, end);
    off[p + 1] = at;
  }
  if (at != T) return {};
  return off;
}

// The union of all snapshots' edges (without weights) as one CSR.
Csr union_graph(const std::vector<Csr>& snapshots, std::int64_t n) {
  std::vector<NodeId> src, dst;
  for (const Csr& s : snapshots)
    for (std::int64_t v = 0; v < n; ++v)
      for (EdgeId e = s.indptr[v]; e < s.indptr[v + 1]; ++e) {
        src.push_back(s.indices[e]);
        dst.push_back(v);
      }
  return Csr::from_edges(n, n, src, dst);
}

// The vertex parts over the union of all snapshots (METIS, or random), relabeled into ranges;
// the union's symmetrized edge count and METIS's cut (-1 without METIS) go to the manifest.
Relabeling assign_vertex_ranges(const datasets::TemporalDataset& data, int num_parts, Method method,
                                std::uint64_t seed, std::int64_t& union_edges,
                                std::int64_t& metis_cut) {
  const std::int64_t N = data.num_nodes;
  std::vector<std::int32_t> part;
  const GraphCsr sym = clean_graph(union_graph(data.snapshots, N), true);
  if (method == Method::metis && num_parts > 1) {
    part = run_metis(N, sym.indptr.data(), sym.indices.data(), nullptr, nullptr, 1, num_parts,
                     seed, 0.03, &metis_cut);
    fill_empty_parts(part, num_parts);
  } else {
    part = assign_random(N, num_parts, seed);
  }
  union_edges = sym.num_edges();
  return relabel(part, num_parts);
}

// Snapshot s with its nodes renumbered by rl (rows in new-id order, columns mapped), canonical.
Csr relabel_snapshot(const Csr& s, const Relabeling& rl, std::int64_t N) {
  Csr r;
  r.num_rows = r.num_cols = N;
  r.indptr.assign(static_cast<std::size_t>(N + 1), 0);
  for (std::int64_t g = 0; g < N; ++g)
    r.indptr[g + 1] = r.indptr[g] + s.degree(rl.orig_of[g]);
  r.indices.resize(s.indices.size());
  r.values.resize(s.values.size());
  for (std::int64_t g = 0; g < N; ++g) {
    const NodeId old = rl.orig_of[g];
    EdgeId at = r.indptr[g];
    for (EdgeId e = s.indptr[old]; e < s.indptr[old + 1]; ++e, ++at) {
      r.indices[at] = rl.new_id[s.indices[e]];
      r.values[at] = s.values[e];
    }
  }
  datasets::canonicalize_snapshot(r);
  return r;
}

// Per snapshot and part, the vertex halo: distinct sources outside the part of its rows' edges;
// and per part the totals over the snapshots, with the cut edges.
struct VertexHaloStats {
  VertexHaloStats(int num_parts, std::int64_t num_nodes)
      : halo_total(static_cast<std::size_t>(num_parts), 0),
        cut_total(static_cast<std::size_t>(num_parts), 0),
        seen(static_cast<std::size_t>(num_nodes), -1) {}

  // Snapshot t, relabeled (r).
  void add(const Csr& r, const Relabeling& rl, std::int64_t t) {
    const auto num_parts = static_cast<int>(halo_total.size());
    nlohmann::json per_part = nlohmann::json::array();
    for (int p = 0; p < num_parts; ++p) {
      std::int64_t h = 0, cut = 0;
      const std::uint64_t stamp = static_cast<std::uint64_t>(t * num_parts + p);
      for (NodeId g = rl.offsets[p]; g < rl.offsets[p + 1]; ++g)
        for (EdgeId e = r.indptr[g]; e < r.indptr[g + 1]; ++e) {
          const NodeId u = r.indices[e];
          if (u >= rl.offsets[p] && u < rl.offsets[p + 1]) continue;
          ++cut;
          if (seen[u] != static_cast<std::int64_t>(stamp)) {
            seen[u] = static_cast<std::int64_t>(stamp);
            ++h;
          }
        }
      per_part.push_back(h);
      halo_total[p] += h;
      cut_total[p] += cut;
    }
    halo.push_back(per_part);
  }

  nlohmann::json halo = nlohmann::json::array(); // [snapshot][part]
  std::vector<std::int64_t> halo_total, cut_total;
  std::vector<std::int64_t> seen; // the stamp (snapshot, part) a source was last counted in
};

// The store relabeled by rl: snapshots, features and targets in new-id order, each node's
// original id kept; the halo statistics of every snapshot into `halo`.
datasets::TemporalDataset relabel_store(const datasets::TemporalDataset& data, const Relabeling& rl,
                                        VertexHaloStats& halo) {
  const std::int64_t N = data.num_nodes, T = data.num_snapshots();
  datasets::TemporalDataset out;
  out.name = data.name;
  out.num_nodes = N;
  out.feature_dim = data.feature_dim;
  out.num_classes = data.num_classes;
  out.train = data.train;
  out.valid = data.valid;
  out.test = data.test;
  const std::int64_t F = data.feature_dim;
  out.features.resize(data.features.size());
  out.targets.resize(data.targets.size());
  out.orig_id.resize(static_cast<std::size_t>(N));
  for (std::int64_t g = 0; g < N; ++g) {
    const NodeId old = rl.orig_of[g];
    out.orig_id[g] = data.orig_id.empty() ? old : data.orig_id[old];
  }
  for (std::int64_t t = 0; t < T; ++t) {
    Csr r = relabel_snapshot(data.snapshots[t], rl, N);
    for (std::int64_t g = 0; g < N; ++g) {
      const NodeId old = rl.orig_of[g];
      std::copy_n(&data.features[(t * N + old) * F], F, &out.features[(t * N + g) * F]);
      out.targets[t * N + g] = data.targets[t * N + old];
    }
    halo.add(r, rl, t);
    out.snapshots.push_back(std::move(r));
  }
  return out;
}

// partition.json of a temporal partition.
nlohmann::json temporal_manifest_json(const TemporalManifest& m) {
  return {{"format", kTemporalPartitionFormat},
          {"version", kTemporalPartitionVersion},
          {"dataset", m.dataset},
          {"num_parts", m.num_parts},
          {"method", m.method},
          {"num_nodes", m.num_nodes},
          {"num_snapshots", m.num_snapshots},
          {"feature_dim", m.feature_dim},
          {"num_classes", m.num_classes},
          {"vertex_offsets", m.vertex_offsets},
          {"store", "temporal.h5"},
          {"stats", m.stats}};
}

} // namespace

TemporalManifest partition_temporal_store(const fs::path& store, const fs::path& out_dir,
                                          int num_parts, Method method, std::uint64_t seed,
                                          bool force) {
  PhaseTimes times;
  Stopwatch watch;
  datasets::TemporalDataset data = datasets::read_temporal_store(store);
  const std::int64_t N = data.num_nodes, T = data.num_snapshots();
  TESSEL_EXPECTS(num_parts >= 1 && num_parts <= N && num_parts <= T,
                 "partition: --parts {} must be in [1, min(nodes {}, snapshots {})] for a "
                 "temporal store",
                 num_parts, N, T);
  TESSEL_EXPECTS(!fs::exists(out_dir) || force || fs::is_empty(out_dir),
                 "output directory {} exists and is not empty (use --force to replace it)",
                 out_dir.string());
  times.add("read", watch.seconds());
  watch.reset();

  std::int64_t union_edges = 0, metis_cut = -1;
  const Relabeling rl = assign_vertex_ranges(data, num_parts, method, seed, union_edges, metis_cut);
  times.add(to_string(method), watch.seconds());
  watch.reset();

  VertexHaloStats halo(num_parts, N);
  const datasets::TemporalDataset out = relabel_store(data, rl, halo);
  data = {};
  times.add("relabel", watch.seconds());
  watch.reset();

  // Write the folder under a temporary name; it replaces out_dir (moved aside and removed in
  // the same step) only when complete, so an interrupt before then leaves the old one whole.
  datasets::AtomicOutput folder(out_dir, true);
  datasets::write_temporal_store(out, folder.temp_path() / "temporal.h5");
  TemporalManifest m;
  m.num_parts = num_parts;
  m.dataset = out.name;
  m.method = to_string(method);
  m.num_nodes = N;
  m.num_snapshots = T;
  m.feature_dim = out.feature_dim;
  m.num_classes = out.num_classes;
  m.vertex_offsets = rl.offsets;
  m.store = out_dir / "temporal.h5";
  std::int64_t total_edges = 0;
  for (const Csr& s : out.snapshots) total_edges += s.num_edges();
  m.stats = {{"union_edges", union_edges},
             {"union_metis_cut", metis_cut},
             {"snapshot_edges", total_edges},
             {"vertex_halo_per_snapshot", halo.halo},
             {"vertex_halo_total", halo.halo_total},
             {"vertex_cut_edges_total", halo.cut_total},
             {"seed", seed}};
  times.add("write", watch.seconds());
  nlohmann::json phases = nlohmann::json::object();
  for (const auto& [name, s] : times.all()) phases[name] = s;
  m.stats["seconds"] = phases;
  datasets::write_text_file(folder.temp_path() / "partition.json",
                            temporal_manifest_json(m).dump(2) + "\n");
  folder.commit();
  return m;
}

std::vector<std::int64_t> balanced_snapshot_blocks(std::int64_t num_snapshots,
                                                   std::int64_t train_end, int num_parts,
                                                   double evaluations_per_epoch) {
  const std::int64_t T = num_snapshots, P = num_parts;
  const std::int64_t E = std::clamp<std::int64_t>(train_end, 0, T);
  TESSEL_ASSERT(P >= 1 && T >= 0 && evaluations_per_epoch >= 0,
                "balanced_snapshot_blocks: {} snapshots, {} parts, {} evaluations per epoch", T, P,
                evaluations_per_epoch);
  if (P == 1 || T == 0) {
    std::vector<std::int64_t> off(static_cast<std::size_t>(P + 1), T);
    off[0] = 0;
    return off;
  }
  // For each cap on the training share (from the even split up), the smallest cap on the block
  // size that still covers every snapshot; the cheapest pair wins (ties: the first, which has
  // the smaller training share).
  std::vector<std::int64_t> best;
  double best_cost = 0;
  for (std::int64_t max_train = (E + P - 1) / P; max_train <= std::max<std::int64_t>(E, 1);
       ++max_train) {
    // Feasibility is monotone in max_size: binary search the smallest.
    std::int64_t lo = (T + P - 1) / P, hi = T;
    if (greedy_blocks(T, E, num_parts, max_train, hi).empty()) continue;
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (greedy_blocks(T, E, num_parts, max_train, mid).empty())
        lo = mid + 1;
      else
        hi = mid;
    }
    const double cost = 2.0 * static_cast<double>(max_train) +
                        evaluations_per_epoch * static_cast<double>(lo);
    if (best.empty() || cost < best_cost) {
      best = greedy_blocks(T, E, num_parts, max_train, lo);
      best_cost = cost;
    }
  }
  TESSEL_ASSERT(!best.empty(), "balanced_snapshot_blocks: no blocks for {} snapshots", T);
  return best;
}

bool is_temporal_partition(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_regular_file(dir / "partition.json", ec)) return false;
  try {
    const auto j = datasets::read_json_file(dir / "partition.json");
    return j.is_object() && j.value("format", std::string()) == kTemporalPartitionFormat;
  } catch (const std::exception&) {
    return false;
  }
}

TemporalManifest read_temporal_manifest(const fs::path& dir) {
  const fs::path file = dir / "partition.json";
  std::error_code ec;
  TESSEL_EXPECTS(fs::is_regular_file(file, ec), "{}: cannot open (make it with `tessel partition`)",
                 file.string());
  nlohmann::json j;
  try {
    j = datasets::read_json_file(file);
    TESSEL_EXPECTS(j.value("format", std::string()) == kTemporalPartitionFormat,
                   "{}: not a temporal partition (format is not \"{}\"); --mode dynamic needs "
                   "`tessel partition` run on a temporal store",
                   file.string(), kTemporalPartitionFormat);
    TemporalManifest m;
    m.version = j.at("version").get<int>();
    TESSEL_EXPECTS(m.version >= 1 && m.version <= kTemporalPartitionVersion,
                   "{}: version {} is not one this Tessel reads (1 to {})", file.string(),
                   m.version, kTemporalPartitionVersion);
    m.num_parts = j.at("num_parts").get<int>();
    m.dataset = j.at("dataset").get<std::string>();
    m.method = j.at("method").get<std::string>();
    m.num_nodes = j.at("num_nodes").get<std::int64_t>();
    m.num_snapshots = j.at("num_snapshots").get<std::int64_t>();
    m.feature_dim = j.at("feature_dim").get<std::int64_t>();
    m.num_classes = j.at("num_classes").get<std::int64_t>();
    m.vertex_offsets = j.at("vertex_offsets").get<std::vector<NodeId>>();
    // Version 1 also held `snapshot_offsets`, even blocks of all snapshots; the trainer
    // chooses the blocks now, so they are not read.
    m.store = dir / j.at("store").get<std::string>();
    m.stats = j.value("stats", nlohmann::json::object());
    const auto P = static_cast<std::size_t>(m.num_parts);
    TESSEL_EXPECTS(m.num_parts >= 1 && m.num_parts <= m.num_snapshots &&
                       m.vertex_offsets.size() == P + 1 && m.vertex_offsets.front() == 0 &&
                       m.vertex_offsets.back() == m.num_nodes &&
                       std::is_sorted(m.vertex_offsets.begin(), m.vertex_offsets.end()),
                   "{}: the vertex offsets do not cover the nodes, or there are more parts "
                   "than snapshots",
                   file.string());
    return m;
  } catch (const nlohmann::json::exception& e) {
    TESSEL_FAIL("{}: malformed partition manifest: {}", file.string(), e.what());
  }
}

}  // namespace tessel::partition
