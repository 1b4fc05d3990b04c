// The partitioner's steps (graph cleaning, assignment, relabeling, building one part), exposed
// to the layer's own sources and tests.
#pragma once

#include "tessel/core/csr.hpp"
#include "tessel/datasets/dataset.hpp"
#include "tessel/datasets/h5.hpp"
#include "tessel/partition/part.hpp"
#include "tessel/partition/partitioner.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace tessel::partition::detail {

// The whole graph with 32-bit node ids (METIS and the part format need them) and 64-bit offsets.
using GraphCsr = CsrT<std::int32_t>;

// The training graph of `graph` (square, in-neighbor rows): rows sorted ascending, self-loops
// and duplicate edges dropped; with symmetrize, u is in row v iff v is in row u. Throws
// InputError if the graph has more than max_nodes nodes. Parallel (OpenMP); extra memory is one
// int64 per node beyond the result.
template <class Index>
GraphCsr clean_graph(const CsrT<Index>& graph, bool symmetrize,
                     std::int64_t max_nodes = std::numeric_limits<std::int32_t>::max());

// clean_graph of a store's /graph read in blocks of at most block_edges edges (each offset and
// column checked as read: InputError naming the file and row), so that only the result is held
// beside one cursor per node.
GraphCsr clean_store_graph(const std::filesystem::path& store, std::int64_t num_nodes,
                           std::int64_t num_edges, bool symmetrize,
                           std::int64_t max_nodes = std::numeric_limits<std::int32_t>::max(),
                           std::int64_t block_edges = std::int64_t{1} << 23);

// Balanced random assignment: a seeded permutation cut into num_parts near-equal blocks.
std::vector<std::int32_t> assign_random(std::int64_t num_nodes, int num_parts, std::uint64_t seed);

// One vertex weight per balance constraint, interleaved: values[v * ncon + c].
struct VertexWeights {
  int ncon = 0;
  std::vector<std::int32_t> values;
  std::vector<std::string> names; // "nodes", "train", "edges"
};
// The weights METIS balances: 1 (nodes), is_train[v] (train) and the in-degree in `training`
// (edges). Constraints with zero total weight are dropped (METIS divides by the totals); if
// none is left, node count is used.
VertexWeights vertex_weights(const GraphCsr& training, const std::vector<std::uint8_t>& is_train,
                             const Balance& balance);

struct LevelSize {
  std::int64_t nodes = 0, edges = 0;
  bool built = false; // its edges were held (else visited through a finer built level)
};

struct MetisResult {
  std::vector<std::int32_t> part; // [N] in [0, num_parts)
  std::int64_t objval = 0; // METIS's cut (undirected; on a coarse graph the weighted cut there)
  std::vector<std::string> constraints; // the vertex weights it balanced
  // Set when the graph was coarsened first (more directed edges than metis_max_edges):
  std::vector<LevelSize> levels; // Tessel's coarse levels, finest first; METIS got the last
  std::int64_t refined_cut = -1; // undirected cut after projection and refinement
  std::int64_t moved = 0;        // node moves made by the refinement, all levels
  double coarsen_seconds = 0, metis_seconds = 0, refine_seconds = 0;
};

// METIS_PartGraphKway on one graph (xadj with 64-bit offsets, converted to idx_t; adjwgt may be
// null). Checks every status code and that each part id is in range; *objval gets the cut.
std::vector<std::int32_t> run_metis(std::int64_t n, const EdgeId* xadj, const std::int32_t* adjncy,
                                    const std::int32_t* adjwgt, const std::int32_t* vwgt, int ncon,
                                    int num_parts, std::uint64_t seed, double imbalance,
                                    std::int64_t* objval);

// METIS k-way on `symmetric` (the METIS input) with the vertex_weights of `training`. Throws
// InputError if the graph has more nodes than max_index, before allocating anything for METIS;
// LibraryError naming the status if METIS fails. A graph with more than
// min(metis_max_edges, max_index) directed edges goes through partition_multilevel.
MetisResult assign_metis(const GraphCsr& symmetric, const GraphCsr& training,
                         const std::vector<std::uint8_t>& is_train, const Balance& balance,
                         int num_parts, std::uint64_t seed, double imbalance,
                         std::int64_t max_index,
                         std::int64_t metis_max_edges = std::numeric_limits<std::int64_t>::max());

// A symmetric graph with edge weights and ncon vertex weights per node (a coarse level).
struct WeightedGraph {
  std::int64_t num_nodes = 0;
  int ncon = 1;
  std::vector<EdgeId> xadj{0};
  std::vector<std::int32_t> adjncy;
  std::vector<std::int32_t> adjwgt; // empty: every edge weighs 1
  std::vector<std::int32_t> vwgt;   // [num_nodes * ncon]
  std::int64_t num_edges() const { return static_cast<std::int64_t>(adjncy.size()); }
};

// Multilevel partitioning (multilevel.cpp): coarsen by size-constrained label propagation
// until at most metis_max_edges directed edges remain, METIS k-way on the coarsest level
// (weights scaled down where their totals would overflow METIS's 32-bit sums), then project back
// and refine at every level. The coarsest level is built; a finer one only while the built
// levels hold at most built_share of the fine graph's bytes: the others are visited through the
// nearest built level below and a map per level (slower: each pass reads the finer graph's
// edges). The result does not depend on built_share. Deterministic for a seed, whatever the
// thread count. Throws InputError if the coarsest level still has more than max_index edges.
MetisResult partition_multilevel(const GraphCsr& symmetric, const VertexWeights& weights,
                                 int num_parts, std::uint64_t seed, double imbalance,
                                 std::int64_t metis_max_edges, std::int64_t max_index,
                                 double built_share = 0.5);

// The steps of partition_multilevel, on a WeightedGraph (for tests).
// Cluster label per node (a node id in the cluster); no cluster exceeds max_weight[c] in any
// constraint c unless a single node does.
std::vector<std::int32_t> cluster_label_propagation(const WeightedGraph& graph,
                                                    std::span<const std::int64_t> max_weight,
                                                    std::uint64_t seed, int level);
// The graph with each cluster contracted to one node (ids in order of first member); `cluster`
// is rewritten to the coarse id of each node. Vertex weights and parallel edge weights add up;
// edges inside a cluster vanish.
WeightedGraph contract(const WeightedGraph& graph, std::vector<std::int32_t>& cluster);
// Moves boundary nodes to the adjacent part that cuts the least, keeping every part's weight
// within max_part_weight (an overloaded part may shed nodes at a loss). Returns moves made.
std::int64_t refine_kway(const WeightedGraph& graph, std::vector<std::int32_t>& part, int num_parts,
                         std::span<const std::int64_t> max_part_weight, std::uint64_t seed,
                         int level);
// Divides the weights w[0], w[stride], ... (count of them) so their total is at most
// max(max_total, number of positive weights), rounding up: a positive weight stays positive,
// 0 stays 0, and the order of weights is kept. Unchanged if the total already fits.
void fit_weight_column(std::int32_t* w, std::int64_t count, int stride, std::int64_t max_total);
// Weighted cut of `part`, each undirected edge once.
std::int64_t weighted_cut(const WeightedGraph& graph, const std::vector<std::int32_t>& part);

// Gives every empty part one node from the largest part (num_parts <= N). Returns nodes moved.
int fill_empty_parts(std::vector<std::int32_t>& part, int num_parts);

// Relabeled ids: part p owns [offsets[p], offsets[p+1]), in increasing original id order
// (relabel), or in a locality order (reorder_parts).
struct Relabeling {
  int num_parts = 0;
  std::vector<NodeId> offsets;       // [num_parts + 1]
  std::vector<std::int32_t> part;    // [N] part of original node v
  std::vector<std::int32_t> new_id;  // [N] relabeled id of original node v
  std::vector<std::int32_t> orig_of; // [N] original id of relabeled node g
};
Relabeling relabel(std::vector<std::int32_t> part, int num_parts);

// A part's own nodes and the edges between them, by position in the part (order.cpp).
struct LocalGraph {
  std::int64_t n = 0;
  std::vector<EdgeId> xadj{0};
  std::vector<std::int32_t> adj;
  std::int64_t degree(std::int32_t v) const { return xadj[v + 1] - xadj[v]; }
};
// The edges of `graph` (rows and columns by original id, before relabel_columns) between nodes
// of part p, as positions in the part; with symmetrize, each edge both ways once.
LocalGraph owned_subgraph(const GraphCsr& graph, const Relabeling& relabeling, int p,
                          bool symmetrize);
// The order of a part's nodes: order[k] is the position placed at k (a permutation).
std::vector<std::int32_t> local_order(const LocalGraph& graph, Order order, std::uint64_t seed);
// Renumbers each part's owned nodes in `relabeling` (orig_of and new_id within the part's
// range) by `order` on the part's own edges; `symmetric`: the graph holds each edge both ways.
void reorder_parts(Relabeling& relabeling, const GraphCsr& graph, Order order, std::uint64_t seed,
                   bool symmetric);

// Rewrites the graph's column ids (neighbors) from original to relabeled ids, in place; rows
// stay indexed by original id. build_part expects a graph rewritten this way.
void relabel_columns(GraphCsr& graph, const Relabeling& relabeling);

// Feature rows of the source, read in contiguous row blocks by original id.
class FeatureSource {
public:
  virtual ~FeatureSource() = default;
  virtual std::int64_t dim() const = 0;
  // Rows per block that rows() is called with at most.
  virtual std::int64_t block_rows() const = 0;
  // Rows [begin, end), row-major; valid until the next call.
  virtual const float* rows(std::int64_t begin, std::int64_t end) = 0;
  // How the source stores the rows; the parts store them the same way.
  virtual datasets::FeatureDtype dtype() const { return datasets::FeatureDtype::float32; }
  // Rows ids[0], ids[1], ... (ascending) into out, row-major [ids.size(), dim()].
  void gather(std::span<const std::int32_t> ids, float* out);
};

// Rows of an in-memory row-major matrix [N, dim] (no copies).
class MemoryFeatures final : public FeatureSource {
public:
  MemoryFeatures(const std::vector<float>& features, std::int64_t dim)
      : features_(features), dim_(dim) {}
  std::int64_t dim() const override { return dim_; }
  std::int64_t block_rows() const override { return std::int64_t{1} << 16; }
  const float* rows(std::int64_t begin, std::int64_t end) override {
    return features_.data() + begin * dim_;
  }

private:
  const std::vector<float>& features_;
  std::int64_t dim_;
};

// Rows of /node/feat of a dataset store, in blocks of about block_bytes.
class StoreFeatures final : public FeatureSource {
public:
  StoreFeatures(std::filesystem::path store, std::int64_t dim,
                std::int64_t block_bytes = std::int64_t{32} << 20,
                datasets::FeatureDtype dtype = datasets::FeatureDtype::float32)
      : store_(std::move(store)), dim_(dim), dtype_(dtype),
        block_rows_(std::max<std::int64_t>(1, block_bytes / std::max<std::int64_t>(4 * dim, 1))) {}
  std::int64_t dim() const override { return dim_; }
  datasets::FeatureDtype dtype() const override { return dtype_; }
  std::int64_t block_rows() const override { return block_rows_; }
  const float* rows(std::int64_t begin, std::int64_t end) override;

private:
  std::filesystem::path store_;
  std::int64_t dim_;
  datasets::FeatureDtype dtype_;
  std::int64_t block_rows_;
  std::vector<float> buffer_;
};

// Scratch arrays over all nodes, reused from one part to the next.
struct BuildScratch {
  std::vector<std::uint8_t> is_halo;    // [N] by relabeled id, all 0 between parts
  std::vector<std::int32_t> halo_local; // [N] by relabeled id, valid where is_halo
};

// Builds part p without features: owned nodes, halo (sorted by relabeled id, so grouped by
// owner), local CSR with rows sorted by local id, degrees, labels, splits (sorted local ids).
// `graph` rows are indexed by original id and hold relabeled neighbor ids (relabel_columns).
// `data` supplies labels, splits, num_classes and feature_dim; its graph is not used.
Part build_part(int p, const GraphCsr& graph, const Relabeling& relabeling,
                const datasets::Dataset& data, BuildScratch& scratch);

// Writes everything of a part file except the feature values, and creates /node/feat for
// write_rows (part.features is ignored).
void write_part_layout(h5::File& file, const Part& part, const std::string& dataset);

// Each source feature row written to /node/feat of the part owning it (files[p] is part p's
// open file, made by write_part_layout). Parts in increasing original id: one pass over the
// source in blocks. Reordered parts: one pass per window of local rows, the windows of all
// parts together at most window_bytes (at least one row each). Returns the CRC-32 of each
// part's /node/feat.
std::vector<std::string> write_part_features(FeatureSource& features,
                                             const Relabeling& relabeling,
                                             std::vector<h5::File>& files,
                                             std::int64_t window_bytes = std::int64_t{256} << 20);

PartStats part_stats(const Part& part);

// CRC-32 (zlib) of a file's bytes, as "crc32:<8 hex digits>".
std::string file_checksum(const std::filesystem::path& file);
// CRC-32 of an in-memory dataset's graph, features, labels and splits.
std::string content_checksum(const datasets::Dataset& data);

} // namespace tessel::partition::detail
