// A partition folder (partition.json + part-<p>.h5): the manifest and one part as the training
// modes load it.
#pragma once

#include "tessel/core/csr.hpp"
#include "tessel/core/option_words.hpp"
#include "tessel/datasets/feature_dtype.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace tessel::partition {

constexpr const char* kManifestFormat = "tessel-partition";
constexpr int kManifestVersion = 1;

// --normalize-features: the part's feature rows as stored, or each row divided by the sum of the
// absolute values of its entries (training, evaluation and SIGN precompute read them so).
enum class FeatureNormalization { none, row };
inline std::span<const OptionWord<FeatureNormalization>> option_words(FeatureNormalization) {
  static constexpr OptionWord<FeatureNormalization> words[] = {
      {"none", FeatureNormalization::none}, {"row", FeatureNormalization::row}};
  return words;
}

// Link prediction splits of a partition made from a link store (partition.json's "link"): the
// whole graph's counts. Splits are indexed 0 train, 1 valid, 2 test.
struct LinkCounts {
  bool present = false;
  std::string metric;               // "auc", "mrr" or "hits@K"
  std::int64_t neg_per_source = 0;  // K of per-source negatives; 0: per-pair negatives
  std::int64_t pos[3] = {0, 0, 0};  // positive edges per split
  std::int64_t neg[3] = {0, 0, 0};  // per-pair negatives per split (train: 0)
};

// partition.json. Part p owns the relabeled global ids [offsets[p], offsets[p+1]).
struct Manifest {
  std::string dataset;
  int num_parts = 0;
  std::string method;
  std::uint64_t seed = 0;
  std::int64_t num_nodes = 0;
  std::int64_t num_edges = 0;       // edges of the training graph (after symmetrization)
  std::int64_t feature_dim = 0;
  std::int64_t num_classes = 0;
  bool symmetrized = true;
  std::int64_t num_train = 0, num_valid = 0, num_test = 0;  // whole-graph split sizes
  std::vector<NodeId> offsets;  // num_parts + 1 entries
  LinkCounts link;              // link prediction splits (present only for a link store)
  nlohmann::json raw;           // the whole file (statistics, timings, ...)

  // Part that owns relabeled global id g (binary search over offsets).
  int owner_of(NodeId g) const;
};

Manifest read_manifest(const std::filesystem::path& dir);

// A part's share of the link prediction splits: the positive edges whose source the part owns
// and the per-pair negatives whose first endpoint it owns, as (src, dst) in SOURCE ids, row-major
// [n, 2], each with its row in the store's list (its edge id, which keys its training negatives);
// per-source negatives [n, K] follow their positive's rows. Index 0 train, 1 valid, 2 test.
struct PartLinks {
  bool present = false;
  std::int64_t neg_per_source = 0;  // K of neg_dst; 0: per-pair negatives
  std::vector<NodeId> pos[3];
  std::vector<std::int64_t> pos_id[3];
  std::vector<NodeId> neg[3];
  std::vector<std::int64_t> neg_id[3];
  std::vector<NodeId> neg_dst[3];
};
inline constexpr const char* kLinkSplitNames[3] = {"train", "valid", "test"};

// One part. Local ids: owned nodes [0, num_owned), halo nodes [num_owned, num_owned + num_halo).
// Owned local id i is relabeled global id offset + i. Halo node h (local num_owned + h) is
// owned by part halo_owner[h] with local id halo_owner_local[h] there.
struct Part {
  int part_id = 0;
  int num_parts = 0;
  std::int64_t num_owned = 0;
  std::int64_t num_halo = 0;
  NodeId offset = 0;
  std::int64_t feature_dim = 0;
  std::int64_t num_classes = 0;
  std::vector<NodeId> orig_id;          // [owned + halo] id in the source dataset
  std::vector<std::int64_t> degree;     // [owned + halo] in-degree in the whole training graph
  std::vector<std::int32_t> halo_owner;        // [halo]
  std::vector<std::int32_t> halo_owner_local;  // [halo]
  LocalCsr graph;  // rows: owned; cols: owned + halo; row v = in-neighbors of v
  std::vector<float> features;          // [owned, feature_dim], empty if not loaded
  // How the part file stores /node/feat (features above are float32 either way).
  datasets::FeatureDtype feature_dtype = datasets::FeatureDtype::float32;
  std::vector<std::int64_t> labels;     // [owned], -1 = unlabeled
  std::vector<LocalId> train, valid, test;
  PartLinks link;

  std::int64_t num_local() const { return num_owned + num_halo; }
  // Relabeled global id of local id l (owned or halo).
  NodeId global_id(LocalId l, const Manifest& manifest) const;
};

struct LoadOptions {
  bool features = true;
  // A dataset whose CRC-32 differs from the one partition.json records is an InputError, unless
  // this is set: then the first mismatch is written here and loading goes on (so a caller can
  // run its more specific checks first).
  std::string* checksum_mismatch = nullptr;
};
// Reads and validates part p of the folder: sizes, index ranges, owners; halo nodes in
// increasing (owner, owner_local) order; rows strictly increasing without self-loops, each as
// long as its node's degree; finite features; and each dataset's CRC-32 against
// partition.json's parts[p].checksums when the manifest records them (/node/feat only when
// features are loaded).
Part load_part(const std::filesystem::path& dir, int p, const Manifest& manifest,
               const LoadOptions& options = {});
// Reads /node/feat of part p into part.features (a part loaded without them), checked as
// load_part checks it.
void load_part_features(const std::filesystem::path& dir, int p, const Manifest& manifest,
                        Part& part);
// "crc32:<8 hex>" partition.json records for part p's /node/feat, or "" when it records none.
std::string recorded_feature_checksum(const Manifest& manifest, int p);

// A running CRC-32 (zlib's), printed as "crc32:<8 hex digits>".
class Crc32 {
public:
  Crc32();
  void update(const void* data, std::size_t bytes);
  template <class T, class A> void update(const std::vector<T, A>& values) {
    update(values.data(), values.size() * sizeof(T));
  }
  std::string str() const;

private:
  unsigned long crc_;
};

// Dataset name -> "crc32:<8 hex>" of its values as stored (little-endian), as partition.json
// records them under parts[p].checksums.
using PartChecksums = std::map<std::string, std::string>;
// The checksums of every dataset of `part`; /node/feat only when `with_features` (the
// partitioner streams feature rows in separately and adds that one itself).
PartChecksums part_checksums(const Part& part, bool with_features);

// Format header of part-<p>.h5 (root attributes "format" and "version").
constexpr const char* kPartFormat = "tessel-part";
constexpr int kPartVersion = 1;

// "part-<p>.h5".
std::string part_file_name(int p);

// Writes one part file (the layout load_part reads; features may be empty only when
// feature_dim is 0). `dataset` is recorded as an attribute. Not atomic by itself: the
// partitioner writes into a temporary folder that is renamed when complete.
void write_part(const Part& part, const std::string& dataset, const std::filesystem::path& file);

}  // namespace tessel::partition
