// Temporal (discrete-time dynamic) datasets: a sequence of graph snapshots over one node set,
// their HDF5 store (base snapshot + per-step edge differences), converters and a generator.
#pragma once

#include "tessel/core/csr.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace tessel::datasets {

constexpr const char* kTemporalFormat = "tessel-temporal";
constexpr int kTemporalVersion = 1;

// Snapshots [begin, end) of a temporal dataset.
struct SnapshotRange {
  std::int64_t begin = 0, end = 0;
  std::int64_t size() const { return end - begin; }
  bool operator==(const SnapshotRange&) const = default;
};

// T snapshots over N nodes. Snapshot t: an in-neighbor CSR (row v lists the sources u of edges
// u -> v, ascending, no duplicates; values = edge weights), node features [N, F] and one target
// per node (a value for regression; a class id in [0, num_classes) or -1 for classification).
struct TemporalDataset {
  std::string name = "temporal";
  std::int64_t num_nodes = 0;
  std::int64_t feature_dim = 0;
  std::int64_t num_classes = 0;  // 0: regression targets
  std::vector<Csr> snapshots;    // [T]
  std::vector<float> features;   // [T, N, F], snapshot-major
  std::vector<float> targets;    // [T, N]
  SnapshotRange train, valid, test;
  // Node v's id in the dataset this one was relabeled from (a partitioned copy); empty: v.
  std::vector<NodeId> orig_id;
  // Series layouts (what the converter says in its summary; not stored): whether the values
  // were z-scored per node (--standardize) and whether the raw targets were counts
  // (non-negative integers), which the usual recipes train on standardized.
  struct Series {
    bool present = false;
    bool standardized = false;
    bool counts = false;
  } series;
  // JSON layouts (what the converter says in its summary; not stored): keys present in the
  // file beside the ones the layout reads, as patterns ("node_ids", "<snapshot>.extra",
  // "nodes[].extra"), sorted.
  std::vector<std::string> ignored_keys;

  std::int64_t num_snapshots() const { return static_cast<std::int64_t>(snapshots.size()); }
  // Throws InputError naming `what` if any size, index, weight, target or range is inconsistent.
  void validate(const std::string& what) const;
};

// Sorts each snapshot's rows and merges duplicate (u, v) pairs by adding their weights.
void canonicalize_snapshot(Csr& snapshot);

// A snapshot's changes from its predecessor, as (dst, src) pairs in ascending order. An edge
// whose weight changes is removed and added again.
struct SnapshotDelta {
  std::vector<NodeId> added_dst, added_src;
  std::vector<float> added_weight;
  std::vector<NodeId> removed_dst, removed_src;
};
SnapshotDelta snapshot_delta(const Csr& before, const Csr& after);
// before + delta. Throws InputError naming `what` if a removed edge is absent or an added one is
// already present.
Csr apply_delta(const Csr& before, const SnapshotDelta& delta, const std::string& what);

struct TemporalWriteOptions {
  bool full_snapshots = false;  // also store every snapshot whole (no rebuild on read)
};

// Writes the store atomically (temporary file renamed into place; removed on any error).
// Layout and version: docs/formats.md, "Temporal store".
void write_temporal_store(const TemporalDataset& data, const std::filesystem::path& path,
                          const TemporalWriteOptions& options = {});

struct TemporalStoreInfo {
  std::string name;
  int version = 0;
  std::int64_t num_nodes = 0, num_snapshots = 0, feature_dim = 0, num_classes = 0;
  bool full_snapshots = false;
  SnapshotRange train, valid, test;
  std::int64_t base_edges = 0, added_edges = 0, removed_edges = 0;
  std::int64_t total_edges = 0;  // sum of the snapshots' edge counts
  std::int64_t file_bytes = 0;
};

// True when `path` is an HDF5 file whose format attribute says tessel-temporal.
bool is_temporal_store(const std::filesystem::path& path);

// Reads a temporal store piece by piece: snapshots (rebuilt from the base and the deltas, or
// read whole when stored so), and feature/target rows of one snapshot. Validates every array
// it reads; a corrupt file is an InputError naming it.
class TemporalStoreReader {
public:
  explicit TemporalStoreReader(std::filesystem::path path);
  ~TemporalStoreReader();
  TemporalStoreReader(const TemporalStoreReader&) = delete;
  TemporalStoreReader& operator=(const TemporalStoreReader&) = delete;

  const TemporalStoreInfo& info() const { return info_; }
  const std::filesystem::path& path() const { return path_; }
  // Snapshots [begin, end).
  std::vector<Csr> snapshots(std::int64_t begin, std::int64_t end);
  // Snapshot t rebuilt from the base and deltas even when full snapshots are stored (tests).
  std::vector<Csr> rebuild_snapshots(std::int64_t begin, std::int64_t end);
  // Features of nodes [row_begin, row_end) at snapshot t, [rows, F] row-major.
  std::vector<float> features(std::int64_t t, std::int64_t row_begin, std::int64_t row_end);
  // Source ids of every node (/node/orig_id, or 0..N-1 when the store has none).
  std::vector<NodeId> orig_ids();
  // Targets of nodes [row_begin, row_end) at snapshot t.
  std::vector<float> targets(std::int64_t t, std::int64_t row_begin, std::int64_t row_end);

private:
  struct Impl;
  std::filesystem::path path_;
  TemporalStoreInfo info_;
  Impl* impl_;
};

TemporalStoreInfo read_temporal_info(const std::filesystem::path& path);
TemporalDataset read_temporal_store(const std::filesystem::path& path);

// ---- converters ----

// The validation split convert takes by default from the end of the training span.
inline constexpr double kDefaultValidShare = 0.15;
inline constexpr std::int64_t kMinSpanForValid = 5;

struct TemporalConvertOptions {
  std::string name;             // default: the input file's stem
  int lags = 4;                 // series layouts: features are the previous `lags` values
  bool standardize = false;     // series layouts: z-score each node's series first
  double train_frac = 0.8;      // first snapshots: the training span, the rest is test
  // Given: the next floor(valid_frac * T) snapshots after the training span validate (0: none).
  // Unset: the last kDefaultValidShare of a training span of at least kMinSpanForValid
  // snapshots validate (at least one), so that training can choose an epoch.
  std::optional<double> valid_frac;
  std::int64_t snapshots = 0;   // edge lists: bin into this many snapshots, or
  double snapshot_span = 0;     // edge lists: snapshots of this many time units
  std::filesystem::path node_features;  // edge lists: CSV of N rows x F features (optional)
  std::vector<std::string> features;    // node-link with named series: which, in this order
};

// PyTorch Geometric Temporal JSON (dynamic edges with "edge_mapping", static edges with a signal
// "FX"/"X", one object per snapshot, networkx node-link). The layout is detected by its keys;
// an unknown one is refused with the keys found. Keys beside the ones a layout reads are
// ignored and listed in the result's ignored_keys; what is read is checked strictly.
TemporalDataset read_pyg_temporal_json(const std::filesystem::path& path,
                                       const TemporalConvertOptions& options);
// Timestamped edges "src,dst,time[,weight]" (comma or whitespace separated, '#' comments, plain
// or gzip), sorted by time, binned into snapshots.
TemporalDataset read_temporal_edge_list(const std::filesystem::path& path,
                                        const TemporalConvertOptions& options);

// An evolving planted-partition graph. Nodes belong to num_communities communities; every step
// a fraction `drift` of the nodes moves to another community and a fraction `rewire` of the
// edges is redrawn (a new edge joins two nodes of one community with probability homophily).
// Each node carries a signal s_t(v) with
//   s_{t+1}(v) = tanh(a * mean_{u in N_t(v)} s_t(u) + b * s_{t-1}(v) + c_{m_t(v)}) + noise,
// the target of (t, v) is s_{t+1}(v) and the features are s_t(v) followed by F - 1 noisy
// coordinates of the community centroid: the target needs the neighbours (graph) and the node's
// own past (recurrence). Undirected (both directions stored), weight 1. Deterministic from seed.
struct SyntheticTemporalOptions {
  std::int64_t num_nodes = 10000;
  std::int64_t num_snapshots = 16;
  double avg_degree = 10;
  std::int64_t feature_dim = 8;
  std::uint64_t seed = 1;
  std::int64_t num_communities = 8;
  double homophily = 0.8;
  double drift = 0.02;
  double rewire = 0.1;
  double train_frac = 0.7, valid_frac = 0.15;
  std::string name = "synthetic-temporal";
};
TemporalDataset make_synthetic_temporal(const SyntheticTemporalOptions& options);

}  // namespace tessel::datasets
