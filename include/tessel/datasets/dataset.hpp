// The in-memory dataset (graph, features, labels, splits) and the HDF5 dataset store API.
#pragma once

#include "tessel/datasets/feature_dtype.hpp"
#include "tessel/core/csr.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tessel::datasets {

constexpr const char* kStoreFormat = "tessel-dataset";
constexpr int kStoreVersion = 1;

// Link prediction splits (the store's optional /link group; docs/formats.md). Edge lists are
// row-major [n, 2] (src, dst); per-source negatives are row-major [n, K] destinations, row i for
// the source of positive i. A split holds per-pair negatives (*_neg) or per-source ones
// (*_neg_dst, neg_per_source = K), the same kind in valid and test. When present, the dataset's
// graph is the message-passing graph: no valid or test positive is one of its edges.
struct LinkSplits {
  std::string source;          // "random" (--edge-split) or "ogb"; empty: no link splits
  std::string metric = "auc";  // "auc" (AUC and AP), "hits@K" or "mrr"
  std::int64_t seed = -1;      // random splits: the seed
  std::string fractions;       // random splits: "85,5,10"
  std::vector<NodeId> train_pos, valid_pos, test_pos;
  std::vector<NodeId> valid_neg, test_neg;
  std::vector<NodeId> valid_neg_dst, test_neg_dst;
  std::int64_t neg_per_source = 0;  // K of *_neg_dst; 0: per-pair negatives
  // Optional, one per positive row (empty: absent).
  std::vector<float> train_weight, valid_weight, test_weight;
  std::vector<std::int64_t> train_year, valid_year, test_year;

  bool present() const { return !source.empty(); }
  static std::int64_t rows(const std::vector<NodeId>& pairs) {
    return static_cast<std::int64_t>(pairs.size()) / 2;
  }
};

// Throws InputError "<what>: /link/<dataset> row R: ..." for an id outside [0, num_nodes), a
// shape that does not fit, an unknown metric, or a valid/test positive that is an edge of graph
// (either direction when the graph is undirected).
void check_link_splits(const std::string& what, const LinkSplits& link, const Csr& graph,
                       bool directed, std::int64_t num_nodes);


// A whole graph dataset. graph is the in-neighbor CSR (row v lists u for every stored edge
// u -> v). When directed is false the source stores each undirected edge once (as OGB's
// undirected datasets do) unless it was symmetrized; consumers that need both directions
// symmetrize. features is row-major [num_nodes, feature_dim] (empty when not loaded).
struct Dataset {
  std::string name;
  std::int64_t num_nodes = 0;
  std::int64_t num_classes = 0;
  std::int64_t feature_dim = 0;
  bool directed = false;
  Csr graph;
  std::vector<float> features;
  std::vector<std::int64_t> labels; // -1 = unlabeled
  std::vector<NodeId> train, valid, test;
  LinkSplits link;  // link prediction splits (empty unless the store has /link)

  std::int64_t num_edges() const { return graph.num_edges(); }
  // Throws InputError naming `what` if any size, index or label is inconsistent.
  void validate(const std::string& what) const;
};

// --edge-split: splits the undirected edges of data (each pair once, self-loops and duplicates
// dropped) at random into train/valid/test positives in the proportions given (percentages
// summing to 100; valid and test are floor(E * p / 100), train the rest, as PyG's
// RandomLinkSplit), draws as many negatives as positives for valid and test (uniform pairs
// u != v that are no edge and not drawn twice), and replaces data.graph by the training edges
// (each once, u < v as u -> v). Deterministic from seed. Refuses directed graphs.
void random_link_split(Dataset& data, int train_pct, int valid_pct, int test_pct,
                       std::uint64_t seed);

// Summary of a store read from its attributes and small datasets only.
struct DatasetInfo {
  std::string name;
  std::int64_t num_nodes = 0, num_edges = 0, num_classes = 0, feature_dim = 0;
  bool directed = false;
  std::int64_t num_train = 0, num_valid = 0, num_test = 0;
  int version = 0;
  std::int64_t file_bytes = 0; // size of the store file
  FeatureDtype feature_dtype = FeatureDtype::float32; // how /node/feat is stored
};

// Row-length statistics of a CSR: for the in-neighbor CSR, in-degrees; for a symmetrized
// graph, degrees.
struct DegreeStats {
  std::int64_t min = 0;
  std::int64_t max = 0;
  double mean = 0;
  std::int64_t zero = 0; // rows with no entries (isolated nodes once symmetrized)
};
DegreeStats degree_stats(const Csr& graph);

// Writes `data` to `path` atomically (a temporary file in the same folder, renamed at the end;
// removed on any error).
// feature_dtype: how /node/feat is stored (16-bit: rounded to nearest even; a value beyond the
// dtype's range is an InputError naming the row, and no file is left).
void write_store(const Dataset& data, const std::filesystem::path& path,
                 FeatureDtype feature_dtype = FeatureDtype::float32);

struct ReadOptions {
  bool features = true; // false: leave Dataset::features empty
  // false: leave Dataset::graph's indptr and indices empty (its shape set) for a reader that
  // streams /graph itself; a store with link splits is read whole (their checks need the graph)
  bool graph = true;
};
// Reads and validates a whole store.
Dataset read_store(const std::filesystem::path& path, const ReadOptions& options = {});
DatasetInfo read_store_info(const std::filesystem::path& path);
// Rows [begin, end) of /node/feat, row-major, without reading the rest of the file. Throws
// InputError naming the file and row if a value is NaN or infinite.
std::vector<float> read_feature_rows(const std::filesystem::path& path, std::int64_t begin,
                                     std::int64_t end);
// Reads all of /node/feat in row blocks (bounded memory) and throws InputError naming the file,
// row and column of the first value that is NaN or infinite, or if the features are not
// floating-point. read_store checks the same when it loads features.
void check_store_features(const std::filesystem::path& path);

// Index of the first NaN or infinite value of values[0, count), or -1. Parallel.
std::int64_t first_non_finite(const float* values, std::int64_t count);
// Throws InputError "<what>: /node/feat row R column C is nan, expected a finite number" for the
// first non-finite value of rows [first_row, first_row + num_rows) held row-major in rows.
void check_feature_values(const std::string& what, const float* rows, std::int64_t first_row,
                          std::int64_t num_rows, std::int64_t feature_dim);

// The graph with both directions of every edge, self-loops and duplicates removed, rows sorted.
// graph must be square; edge values are dropped. Parallel (OpenMP); the result does not depend
// on the thread count. Peak memory: the input plus about 2x its indices.
Csr symmetrize(const Csr& graph);

// Chunk height of /node/feat: rows per HDF5 chunk (about 1 MiB per chunk).
std::int64_t feature_chunk_rows(std::int64_t feature_dim, std::int64_t value_bytes = 4);

} // namespace tessel::datasets
