// Synthetic node classification datasets: planted-partition graphs with power-law-ish degrees
// and class-correlated features, deterministic from a seed.
#pragma once

#include "tessel/core/rng.hpp"
#include "tessel/datasets/dataset.hpp"

#include <filesystem>

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::datasets {

// The model, per node v (every draw keyed by (seed, v), so the result does not depend on the
// thread count):
//   class c(v) uniform in [0, num_classes); label = c(v).
//   weight w(v) from a Pareto law with exponent degree_exponent (capped), so expected degrees
//   are proportional to w(v): a few hubs, many low-degree nodes.
//   v draws about avg_degree/2 * w(v)/mean(w) edges. Each picks its other end with probability
//   proportional to weight (Chung-Lu): with probability homophily inside c(v) -- half of those
//   (locality) among v's neighbours in the class's id order, so the graph also has small
//   communities that a partitioner can keep together -- else in a uniformly chosen other class.
//   Self-loops and repeated pairs are dropped; each undirected edge is stored once (u < v,
//   edge u -> v, directed = false).
//   features: x(v) = mu(c(v)) + N(0, I), class centroids mu(c) ~ N(0, feature_signal^2 / F I),
//   so two centroids are about feature_signal * sqrt(2) noise units apart: features alone
//   classify far above chance yet imperfectly, and averaging over same-class neighbours helps.
//   split: train with probability train_frac, valid with valid_frac, else test
//   (default 10% / 10% / 80%); with test_frac >= 0, test with that probability, else none.
// With uniform_in_degree = K > 0 the graph is instead directed with exactly K in-neighbors per
// node (the shape GPU kernels are usually measured on): each draw takes, with probability
// homophily, a uniformly chosen node of v's class, else a uniformly chosen node; self-loops are
// redrawn, repeats kept. Degrees, classes, features and splits then follow the rules above.
struct SyntheticOptions {
  FeatureDtype feature_dtype = FeatureDtype::float32; // how the store keeps /node/feat
  std::int64_t num_nodes = 100000;
  double avg_degree = 16; // mean degree once symmetrized (about num_nodes * avg_degree / 2 edges)
  std::int64_t num_classes = 16;
  std::int64_t feature_dim = 64;
  std::uint64_t seed = 1;
  double homophily = 0.8;
  double locality = 0.5;
  double degree_exponent = 2.5;
  double feature_signal = 1.0;
  double train_frac = 0.1;
  double valid_frac = 0.1;
  // < 0: every node not in train or valid is in test. Else the test set's fraction, and the
  // nodes past train + valid + test are in no split (as most of ogbn-papers100M's nodes).
  double test_frac = -1;
  std::int64_t uniform_in_degree = 0;  // > 0: directed, exactly this many in-neighbors per node
  // Relabel the nodes by a random permutation (shuffle_node_ids with this seed) once built, so
  // that ids carry no locality, as in a real graph whose ids were handed out in any order.
  bool shuffle_ids = false;
  std::string name = "synthetic";
};

// Builds the dataset in memory. Throws InputError for options out of range.
Dataset make_synthetic(const SyntheticOptions& options);

// The same dataset without its features (features empty, feature_dim set): graph, labels,
// splits, ids shuffled when asked.
Dataset make_synthetic_graph(const SyntheticOptions& options);

// The feature rows of make_synthetic, a few at a time: row i of out is the features of the
// node generated as nodes[i] (its id before any shuffle) with class labels[i].
class SyntheticFeatures {
public:
  explicit SyntheticFeatures(const SyntheticOptions& options);
  void rows(const NodeId* nodes, const std::int64_t* labels, std::int64_t count,
            float* out) const;

private:
  std::int64_t dim_;
  std::vector<float> centroid_; // [classes, dim]
  rng::Key key_;
};

struct SyntheticStoreSummary {
  std::int64_t num_nodes = 0, num_edges = 0, feature_dim = 0, num_classes = 0;
  std::int64_t num_train = 0, num_valid = 0, num_test = 0;
  std::int64_t feature_block_rows = 0; // rows generated and written at a time
};

// Writes make_synthetic(options) as a store at path (read_store gives the same dataset) while
// holding only the graph, labels and splits: features are generated and written in row blocks
// of about block_bytes. The file appears only when complete.
SyntheticStoreSummary write_synthetic_store(const SyntheticOptions& options,
                                            const std::filesystem::path& path,
                                            std::int64_t block_bytes = std::int64_t{64} << 20);

// Relabels every node v as perm[v], perm a uniform random permutation drawn from seed: the
// graph (each undirected edge again stored once, u < v, rows sorted), labels, features and
// splits (ascending) follow, so the dataset is the same up to its node ids.
void shuffle_node_ids(Dataset& data, std::uint64_t seed);

// Named shapes of well-known datasets, for benchmarks at their scale (`convert synthetic
// --preset NAME`). "products": ogbn-products' size -- 2,449,029 nodes, about 62M undirected
// edges (power-law degrees, mean about 50 once symmetrized), 100 features, 47 classes, its
// 8% / 1.6% / 90.4% split -- with this generator's homophily and features (it is not the
// real graph). "papers100m": ogbn-papers100M's -- 111,059,956 nodes, about 1.6 B undirected
// edges, 128 features, 172 classes, 1,207,179 / 125,265 / 214,338 train / valid / test nodes
// and the rest in no split. scale multiplies the node count (and so the edge count and the
// split sizes, the mean degree staying); the name gets "-x<scale>". Throws InputError naming
// the known presets for another name, and for a scale outside (0, 1000].
SyntheticOptions synthetic_preset(const std::string& name, double scale = 1.0);
std::vector<std::string> synthetic_preset_names();

} // namespace tessel::datasets
