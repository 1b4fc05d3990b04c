// Partitioning a dataset into a partition folder (METIS k-way or random), its statistics, and
// the checker that re-verifies a folder's invariants.
#pragma once

#include "tessel/core/timer.hpp"
#include "tessel/core/types.hpp"
#include "tessel/datasets/dataset.hpp"
#include "tessel/partition/part.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

namespace tessel::partition {

enum class Method { metis, random };
// "metis" or "random"; anything else is an InputError naming the accepted values.
Method parse_method(const std::string& name);
std::string to_string(Method method);

// --order: how each part numbers its owned nodes. none keeps increasing source id; rcm (reverse
// Cuthill-McKee), bfs (breadth first from the highest degree) and community (label propagation
// clusters of at most 512 nodes in RCM order of the cluster graph, RCM order inside) place
// neighbours near each other, on the part's own edges. Only the numbering changes: outputs stay in
// source ids, random draws are keyed by source id.
enum class Order { none, rcm, bfs, community };
// "none", "rcm", "bfs" or "community"; anything else is an InputError naming them.
Order parse_order(const std::string& name);
std::string to_string(Order order);

// Which vertex weights METIS balances across parts (one METIS constraint each).
struct Balance {
  bool nodes = true; // owned node count
  bool train = true; // owned training nodes
  bool edges = true; // owned in-edges (in-degree in the training graph)
};
// Parses a comma-separated subset of "nodes,train,edges" (at least one).
Balance parse_balance(const std::string& list);
std::string to_string(const Balance& balance);

struct PartitionOptions {
  int num_parts = 1;
  Method method = Method::metis;
  Balance balance;
  Order order = Order::none;
  std::uint64_t seed = 0;
  // Store the symmetrized graph. An undirected dataset is always symmetrized (it stores each
  // edge once); the METIS input is always the symmetrized graph.
  bool symmetrize = true;
  bool force = false;      // replace a non-empty output folder
  double imbalance = 0.03; // METIS load imbalance tolerance per constraint (ubvec - 1)
  // METIS is given at most this many directed edges: a larger graph is coarsened by Tessel
  // first (size-constrained label propagation), and METIS's partition of the coarsest level is
  // projected back and refined level by level. METIS 5 keeps all its own coarsening levels in
  // memory (about 50-60 bytes per directed edge on weakly clustered graphs); this bounds that.
  std::int64_t metis_max_edges = std::int64_t{1} << 23;
  // Largest node or edge count METIS is given (its idx_t is 32-bit). Lowered only by tests.
  std::int64_t max_index = std::numeric_limits<std::int32_t>::max();
  // With an order other than none, the feature rows of every part are written in windows of
  // local rows, one pass over the source each, the windows together at most this many bytes.
  // Lowered only by tests.
  std::int64_t feature_window_bytes = std::int64_t{256} << 20;
};

struct PartStats {
  std::int64_t owned = 0, halo = 0;
  std::int64_t edges = 0;     // local in-edges (rows of the part's CSR)
  std::int64_t cut_edges = 0; // of those, edges whose source is a halo node
  std::int64_t train = 0, valid = 0, test = 0;
  PartChecksums checksums; // CRC-32 of each dataset of the part file (load_part verifies them)
};

// What partition_dataset did; to_json() is partition.json minus the format header.
struct PartitionStats {
  std::string dataset;
  int num_parts = 0;
  Method method = Method::metis;
  Order order = Order::none;
  std::uint64_t seed = 0;
  Balance balance;
  bool symmetrized = true;
  bool source_directed = false;
  std::int64_t num_nodes = 0, num_edges = 0, feature_dim = 0, num_classes = 0;
  std::int64_t num_train = 0, num_valid = 0, num_test = 0;
  std::vector<NodeId> offsets;
  nlohmann::json link;  // link store: partition.json's "link" counts (null otherwise)
  std::vector<PartStats> parts;
  std::int64_t edge_cut = 0;    // directed training-graph edges between different parts
  double edge_cut_fraction = 0; // edge_cut / num_edges
  double node_balance = 1, train_balance = 1, edge_balance = 1; // max / mean over parts
  double replication_factor = 1;                                // sum(owned + halo) / num_nodes
  std::int64_t metis_objval = -1; // METIS's undirected cut, -1 when METIS did not run
  std::vector<std::string> metis_constraints;
  // Multilevel (more directed edges than metis_max_edges): Tessel's coarse levels (nodes,
  // edges; METIS partitioned the last), the undirected cut after refinement and the moves made.
  std::int64_t metis_max_edges = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> coarse_levels;
  std::int64_t refined_cut = -1;
  std::int64_t refine_moves = 0;
  std::string source_checksum;    // "crc32:<8 hex>" of the source file (or of the content)
  std::string source_checksum_of; // "file" or "content"
  std::string source_name;        // file name of the source, empty for in-memory data
  PhaseTimes times; // read, checksum, symmetrize, [coarsen], metis|random, [refine], build,
                    // [order], features, write
  std::int64_t peak_rss_bytes = 0;
  // Peak RSS of the process when each phase ended (read, symmetrize, metis|random, build,
  // features), to see which phase sets the peak.
  std::vector<std::pair<std::string, std::int64_t>> peak_rss_after;

  nlohmann::json to_json() const;
  // A few lines for people: sizes, per-part table, cut, balance, replication, times, memory.
  std::string summary() const;
};

// Partitions an in-memory dataset (graph, labels, splits; features if feature_dim > 0) into
// out_dir. Taken by value so the caller can move it in and the graph is freed as soon as the
// relabeled graph exists. Throws InputError on a refused request (num_parts < 1 or > nodes,
// non-empty out_dir without force, a graph too large for METIS) and leaves nothing behind.
PartitionStats partition_dataset(datasets::Dataset data, const std::filesystem::path& out_dir,
                                 const PartitionOptions& options);

// Same from a dataset store: reads the graph, labels and splits, and only the feature rows each
// part owns (one part at a time), so the whole feature matrix is never in memory.
PartitionStats partition_store(const std::filesystem::path& store,
                               const std::filesystem::path& out_dir,
                               const PartitionOptions& options);

struct CheckOptions {
  // When set, also compare with the source: the edge set, features, labels, splits and the
  // source checksum (file) must match what was partitioned.
  std::filesystem::path source_store;
  const datasets::Dataset* source_data = nullptr; // in-memory alternative to source_store
  // When not empty, verify only these parts (what one host holds when each host keeps the parts
  // of its own ranks): each part on its own, and halos whose owner is among them. The
  // invariants that need every part (each node owned once over all parts, the edge total and
  // cut, symmetry) are left out.
  std::vector<int> only_parts;
};

struct CheckReport {
  int num_parts = 0;
  // Totals over the parts checked (all of them unless CheckOptions::only_parts).
  std::int64_t num_nodes = 0, num_edges = 0, edge_cut = 0, total_halo = 0;
  bool compared_with_source = false;
  std::vector<int> checked_parts;  // the parts checked, ascending
};

// Re-reads a partition folder and verifies every invariant: each node owned exactly once, the
// relabeled ranges, halos (exactly the non-owned in-neighbors of owned nodes, owner and owner
// local id right), degrees, no self-loops or duplicate edges, symmetry when the manifest says
// so, labels/splits in range and the manifest's counts and edge cut. Throws InputError naming
// the file and the first violated invariant. With options.only_parts, the listed parts only.
CheckReport check_partition(const std::filesystem::path& dir, const CheckOptions& options = {});

} // namespace tessel::partition
