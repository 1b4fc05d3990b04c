// `tessel partition --check`: re-reads a partition folder and verifies its invariants, optionally
// against the source dataset.
#include "tessel/partition/partitioner.hpp"

#include "steps.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/partition/part.hpp"

#include <algorithm>
#include <memory>
#include <numeric>
#include <optional>
#include <unordered_map>

namespace tessel::partition {

namespace {

using namespace detail;

// A strong 64-bit mixer (splitmix64 finalizer): sums of mixed (source, destination) pairs over
// all edges equal the sums over reversed pairs iff, with overwhelming probability, the edge set
// is symmetric.
std::uint64_t edge_hash(std::uint64_t src, std::uint64_t dst) {
  std::uint64_t x = (src << 32) ^ dst ^ 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

struct HaloRecord {
  std::int32_t part, owner, owner_local;
  std::int64_t index; // halo position in its part
  NodeId orig;
  std::int64_t degree;
};

std::int64_t json_int(const nlohmann::json& j, std::initializer_list<const char*> path,
                      std::int64_t fallback) {
  const nlohmann::json* at = &j;
  for (const char* key : path) {
    if (!at->is_object() || !at->contains(key)) return fallback;
    at = &(*at)[key];
  }
  return at->is_number_integer() ? at->get<std::int64_t>() : fallback;
}

std::string json_string(const nlohmann::json& j, const char* object, const char* key) {
  if (!j.contains(object) || !j[object].is_object() || !j[object].contains(key) ||
      !j[object][key].is_string())
    return "";
  return j[object][key].get<std::string>();
}

// Split membership of the source, one flag array per split.
std::vector<std::uint8_t> split_mask(const std::vector<NodeId>& ids, std::int64_t n) {
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(n), 0);
  for (const NodeId v : ids)
    mask[v] = 1;
  return mask;
}

// One check of a partition folder: the state gathered part by part (who owns which source node,
// the halo records, the edge sums), one method per invariant, and the totals at the end.
class PartitionChecker {
 public:
  PartitionChecker(const std::filesystem::path& dir, const CheckOptions& options)
      : dir_(dir), options_(options), m_(read_manifest(dir)),
        manifest_name_((dir / "partition.json").string()) {
    n_ = m_.num_nodes;
    TESSEL_EXPECTS(n_ <= std::numeric_limits<std::int32_t>::max(),
                   "{}: {} nodes do not fit 32-bit ids", manifest_name_, n_);
    load_source();
    orig_of_new_.assign(static_cast<std::size_t>(n_), -1);
    degree_of_.assign(static_cast<std::size_t>(n_), -1);
    out_degree_.assign(m_.symmetrized ? static_cast<std::size_t>(n_) : 0, 0);
    have_part_stats_ = m_.raw.contains("parts") && m_.raw["parts"].is_array() &&
                       static_cast<int>(m_.raw["parts"].size()) == m_.num_parts;
    choose_parts();
  }

  CheckReport run() {
    for (const int p : parts_) check_part(p);
    check_halo_owners();
    check_order();
    CheckReport report;
    report.num_parts = m_.num_parts;
    report.checked_parts = parts_;
    report.compared_with_source = source_ != nullptr;
    if (every_part_) check_totals();
    // Checksum mismatches are reported after every invariant, which say more precisely what is
    // wrong; the checksums then catch edits that keep every invariant (a label, say).
    TESSEL_EXPECTS(checksum_mismatch_.empty(), "{}", checksum_mismatch_);
    report.num_nodes = every_part_ ? n_ : nodes_checked_;
    report.num_edges = num_edges_;
    report.edge_cut = edge_cut_;
    report.total_halo = static_cast<std::int64_t>(halos_.size());
    return report;
  }

 private:
  // Optional source: its training graph, labels, splits and feature rows to compare with.
  void load_source() {
    source_ = options_.source_data;
    if (!options_.source_store.empty()) {
      datasets::ReadOptions read;
      read.features = false;
      loaded_ = datasets::read_store(options_.source_store, read);
      source_ = &*loaded_;
      if (json_string(m_.raw, "source", "checksum_of") == "file") {
        const auto sum = file_checksum(options_.source_store);
        const auto recorded = json_string(m_.raw, "source", "checksum");
        TESSEL_EXPECTS(sum == recorded,
                       "{}: source {} has checksum {}, but the partition was made from {}",
                       manifest_name_, options_.source_store.string(), sum, recorded);
      }
      source_features_ =
          std::make_unique<StoreFeatures>(options_.source_store, source_->feature_dim);
    } else if (source_) {
      source_features_ = std::make_unique<MemoryFeatures>(source_->features, source_->feature_dim);
    }
    if (!source_) return;
    TESSEL_EXPECTS(source_->num_nodes == n_ && source_->feature_dim == m_.feature_dim &&
                       source_->num_classes == m_.num_classes,
                   "{}: {} nodes, {} features, {} classes; the source has {}, {}, {}",
                   manifest_name_, n_, m_.feature_dim, m_.num_classes, source_->num_nodes,
                   source_->feature_dim, source_->num_classes);
    source_->graph.validate("source graph");
    expected_ = clean_graph(source_->graph, m_.symmetrized);
    in_train_ = split_mask(source_->train, n_);
    in_valid_ = split_mask(source_->valid, n_);
    in_test_ = split_mask(source_->test, n_);
  }

  // Every part, or the --only ones (sorted, each once, each one of the partition's).
  void choose_parts() {
    parts_ = options_.only_parts;
    every_part_ = parts_.empty();
    if (every_part_)
      for (int p = 0; p < m_.num_parts; ++p) parts_.push_back(p);
    std::sort(parts_.begin(), parts_.end());
    parts_.erase(std::unique(parts_.begin(), parts_.end()), parts_.end());
    for (const int p : parts_)
      TESSEL_EXPECTS(p >= 0 && p < m_.num_parts,
                     "{}: there is no part {} (the partition has parts 0 to {})", manifest_name_,
                     p, m_.num_parts - 1);
  }

  void check_part(int p) {
    LoadOptions load;
    load.features = true;  // their values are checked even without a source to compare with
    load.checksum_mismatch = &checksum_mismatch_;
    const std::string name = (dir_ / part_file_name(p)).string();
    std::error_code exists_ec;
    TESSEL_EXPECTS(!every_part_ || std::filesystem::exists(name, exists_ec),
                   "{}: no such file (a folder that holds only some of the parts, as each host "
                   "does when it keeps the parts of its own ranks, is checked with --only P,Q,...)",
                   name);
    const Part part = load_part(dir_, p, m_, load);
    nodes_checked_ += part.num_owned;
    datasets::check_feature_values(name, part.features.data(), 0, part.num_owned,
                                   part.feature_dim);
    check_ownership(name, part);
    check_halo_order(name, p, part);
    const std::int64_t part_cut = check_rows(name, part);
    num_edges_ += part.graph.num_edges();
    edge_cut_ += part_cut;
    check_split_order(name, part);
    if (m_.link.present) check_links(name, part);
    if (have_part_stats_) check_part_stats(name, p, part, part_cut);
    if (source_) {
      check_labels(name, part);
      check_splits_against_source(name, part);
      check_features_against_source(name, part);
    }
  }

  // Each source node is owned by one part; records its new id and degree.
  void check_ownership(const std::string& name, const Part& part) {
    for (std::int64_t i = 0; i < part.num_owned; ++i) {
      const NodeId v = part.orig_id[i];
      TESSEL_EXPECTS(degree_of_[v] < 0,
                     "{}: source node {} (local {}) is owned by another part too", name, v, i);
      orig_of_new_[part.offset + i] = v;
      degree_of_[v] = part.degree[i];
    }
    // Without --order (partition.json "order" none or absent), owned nodes ascend in source id;
    // reported after the other invariants, which name a damaged part more precisely.
    if (unsorted_part_.empty() &&
        !std::is_sorted(part.orig_id.begin(), part.orig_id.begin() + part.num_owned))
      unsorted_part_ = name;
  }

  // The order partition.json names; with none, each part's owned nodes ascend in source id.
  void check_order() const {
    const auto order = m_.raw.contains("order") && m_.raw["order"].is_string()
                           ? m_.raw["order"].get<std::string>()
                           : std::string("none");
    (void)parse_order(order); // an order this build does not know is the manifest's fault
    TESSEL_EXPECTS(order != "none" || unsorted_part_.empty(),
                   "{}: owned nodes are not in increasing source id order (partition.json says "
                   "order none)",
                   unsorted_part_);
  }

  // Halo nodes ascend by (owner, owner_local); records them for check_halo_owners.
  void check_halo_order(const std::string& name, int p, const Part& part) {
    const std::int64_t owned = part.num_owned;
    for (std::int64_t h = 0; h < part.num_halo; ++h) {
      if (h > 0) {
        const auto prev = std::pair(part.halo_owner[h - 1], part.halo_owner_local[h - 1]);
        const auto cur = std::pair(part.halo_owner[h], part.halo_owner_local[h]);
        TESSEL_EXPECTS(prev < cur,
                       "{}: halo nodes {} and {} are not in increasing (owner, owner_local) order",
                       name, h - 1, h);
      }
      halos_.push_back({p, part.halo_owner[h], part.halo_owner_local[h], h,
                        part.orig_id[owned + h], part.degree[owned + h]});
    }
  }

  // Rows: degree, no self-loop, strictly increasing columns, every halo node used, the source's
  // in-neighbors; adds the symmetry sums. Returns the part's cut edges.
  std::int64_t check_rows(const std::string& name, const Part& part) {
    const std::int64_t owned = part.num_owned, halo = part.num_halo;
    std::vector<std::uint8_t> halo_used(static_cast<std::size_t>(halo), 0);
    std::int64_t part_cut = 0;
    for (std::int64_t i = 0; i < owned; ++i) {
      const EdgeId b = part.graph.indptr[i], e = part.graph.indptr[i + 1];
      TESSEL_EXPECTS(e - b == part.degree[i],
                     "{}: owned node {} has {} in-edges, but its degree is {}", name, i, e - b,
                     part.degree[i]);
      const NodeId dst = part.orig_id[i];
      for (EdgeId x = b; x < e; ++x) {
        const LocalId c = part.graph.indices[x];
        TESSEL_EXPECTS(c != i, "{}: owned node {} has a self-loop", name, i);
        TESSEL_EXPECTS(x == b || part.graph.indices[x - 1] < c,
                       "{}: row {} is not strictly increasing at position {} (duplicate or "
                       "unsorted edge)",
                       name, i, x - b);
        if (c >= owned) {
          halo_used[c - owned] = 1;
          ++part_cut;
        }
        const NodeId src = part.orig_id[c];
        if (m_.symmetrized) {
          forward_sum_ +=
              edge_hash(static_cast<std::uint64_t>(src), static_cast<std::uint64_t>(dst));
          backward_sum_ +=
              edge_hash(static_cast<std::uint64_t>(dst), static_cast<std::uint64_t>(src));
          ++out_degree_[src];
        }
      }
      if (source_) check_row_against_source(name, part, i);
    }
    for (std::int64_t h = 0; h < halo; ++h)
      TESSEL_EXPECTS(halo_used[h],
                     "{}: halo node {} (source node {}) is not an in-neighbor of "
                     "any owned node",
                     name, owned + h, part.orig_id[owned + h]);
    return part_cut;
  }

  void check_row_against_source(const std::string& name, const Part& part, std::int64_t i) {
    const EdgeId b = part.graph.indptr[i], e = part.graph.indptr[i + 1];
    const NodeId dst = part.orig_id[i];
    row_orig_.clear();
    for (EdgeId x = b; x < e; ++x) row_orig_.push_back(part.orig_id[part.graph.indices[x]]);
    std::sort(row_orig_.begin(), row_orig_.end());
    const auto eb = expected_.indptr[dst], ee = expected_.indptr[dst + 1];
    TESSEL_EXPECTS(
        static_cast<EdgeId>(row_orig_.size()) == ee - eb &&
            std::equal(row_orig_.begin(), row_orig_.end(), expected_.indices.begin() + eb),
        "{}: the in-neighbors of owned node {} (source node {}) differ from the "
        "source graph's",
        name, i, dst);
  }

  // Each split lists local ids in increasing order, each once; adds the split sizes.
  void check_split_order(const std::string& name, const Part& part) {
    for (const auto* split : {&part.train, &part.valid, &part.test})
      for (std::size_t x = 1; x < split->size(); ++x)
        TESSEL_EXPECTS((*split)[x - 1] < (*split)[x],
                       "{}: a split lists local ids out of order or twice ({} then {})", name,
                       (*split)[x - 1], (*split)[x]);
    num_train_ += static_cast<std::int64_t>(part.train.size());
    num_valid_ += static_cast<std::int64_t>(part.valid.size());
    num_test_ += static_cast<std::int64_t>(part.test.size());
  }

  // The part's halo, edge and cut counts are those partition.json records.
  void check_part_stats(const std::string& name, int p, const Part& part, std::int64_t part_cut) {
    const auto& js = m_.raw["parts"][p];
    const std::int64_t halo = part.num_halo;
    TESSEL_EXPECTS(json_int(js, {"halo"}, halo) == halo &&
                       json_int(js, {"edges"}, part.graph.num_edges()) ==
                           part.graph.num_edges() &&
                       json_int(js, {"cut_edges"}, part_cut) == part_cut,
                   "{}: part {} has {} halo nodes, {} edges, {} cut edges; partition.json says "
                   "{}, {}, {}",
                   name, p, halo, part.graph.num_edges(), part_cut, json_int(js, {"halo"}, -1),
                   json_int(js, {"edges"}, -1), json_int(js, {"cut_edges"}, -1));
    // So are its owned node and split counts (a negative training count passed --check).
    const std::int64_t counts[] = {part.num_owned, static_cast<std::int64_t>(part.train.size()),
                                   static_cast<std::int64_t>(part.valid.size()),
                                   static_cast<std::int64_t>(part.test.size())};
    const char* keys[] = {"owned", "train", "valid", "test"};
    for (int k = 0; k < 4; ++k)
      TESSEL_EXPECTS(json_int(js, {keys[k]}, counts[k]) == counts[k],
                     "{}: part {} has {} {} nodes; partition.json parts[{}].{} says {}", name, p,
                     counts[k], keys[k], p, keys[k], js.contains(keys[k]) ? js[keys[k]].dump() : "");
  }

  void check_labels(const std::string& name, const Part& part) {
    for (std::int64_t i = 0; i < part.num_owned; ++i) {
      const NodeId v = part.orig_id[i];
      const std::int64_t label = source_->labels.empty() ? -1 : source_->labels[v];
      TESSEL_EXPECTS(part.labels[i] == label,
                     "{}: owned node {} (source node {}) has label {}, the source says {}", name,
                     i, v, part.labels[i], label);
    }
  }

  void check_splits_against_source(const std::string& name, const Part& part) {
    const std::pair<const std::vector<LocalId>*, const std::vector<std::uint8_t>*> splits[] = {
        {&part.train, &in_train_}, {&part.valid, &in_valid_}, {&part.test, &in_test_}};
    for (const auto& [local, mask] : splits) {
      std::int64_t owned_in_source = 0;
      for (std::int64_t i = 0; i < part.num_owned; ++i)
        owned_in_source += (*mask)[part.orig_id[i]];
      TESSEL_EXPECTS(static_cast<std::int64_t>(local->size()) == owned_in_source,
                     "{}: a split lists {} owned nodes, the source has {} of them", name,
                     local->size(), owned_in_source);
      for (const LocalId l : *local)
        TESSEL_EXPECTS((*mask)[part.orig_id[l]],
                       "{}: local node {} (source node {}) is in a "
                       "split it is not in in the source",
                       name, l, part.orig_id[l]);
    }
  }

  void check_features_against_source(const std::string& name, const Part& part) {
    if (m_.feature_dim <= 0) return;
    const std::int64_t owned = part.num_owned;
    // gather reads ascending source ids: owned nodes by source id (their local order when
    // the partition was not reordered).
    std::vector<std::int32_t> local(static_cast<std::size_t>(owned));
    std::iota(local.begin(), local.end(), 0);
    std::sort(local.begin(), local.end(),
              [&](std::int32_t a, std::int32_t b) { return part.orig_id[a] < part.orig_id[b]; });
    std::vector<std::int32_t> ids(static_cast<std::size_t>(owned));
    for (std::int64_t k = 0; k < owned; ++k)
      ids[k] = static_cast<std::int32_t>(part.orig_id[local[k]]);
    std::vector<float> rows(part.features.size());
    source_features_->gather(ids, rows.data());
    for (std::int64_t k = 0; k < owned; ++k) {
      const std::int64_t i = local[k];
      TESSEL_EXPECTS(std::equal(rows.begin() + k * m_.feature_dim,
                                rows.begin() + (k + 1) * m_.feature_dim,
                                part.features.begin() + i * m_.feature_dim),
                     "{}: features of owned node {} (source node {}) differ from the source",
                     name, i, ids[k]);
    }
  }

  // Each halo node is the source node its owner holds at that place, with the owner's degree
  // (for the owners checked).
  void check_halo_owners() {
    for (const auto& h : halos_) {
      const NodeId g = m_.offsets[h.owner] + h.owner_local;
      if (!every_part_ && orig_of_new_[g] < 0) continue;  // its owner was not checked
      const std::string name = (dir_ / part_file_name(h.part)).string();
      TESSEL_EXPECTS(orig_of_new_[g] == h.orig,
                     "{}: halo node {} is source node {}, but its owner {} (local {}) holds "
                     "source node {} there",
                     name, h.index, h.orig, h.owner, h.owner_local, orig_of_new_[g]);
      TESSEL_EXPECTS(h.degree == degree_of_[h.orig],
                     "{}: halo node {} (source node {}) has degree {}, its owner says {}", name,
                     h.index, h.orig, h.degree, degree_of_[h.orig]);
    }
  }

  // Over every part: the edge total, the cut, the split sizes and symmetry.
  // Link splits: every positive's source (every per-pair negative's first endpoint) is owned
  // here, no validation or test positive is an edge of the message-passing graph, and each edge
  // id is held once over the parts (check_totals counts them).
  void check_links(const std::string& name, const Part& part) {
    TESSEL_EXPECTS(part.link.present, "{}: partition.json records link splits, the part has none",
                   name);
    std::unordered_map<NodeId, LocalId> local_of;
    for (std::int64_t l = 0; l < part.num_local(); ++l)
      local_of.emplace(part.orig_id[static_cast<std::size_t>(l)], static_cast<LocalId>(l));
    const auto owned_local = [&](NodeId v) -> LocalId {
      const auto it = local_of.find(v);
      return it == local_of.end() || it->second >= part.num_owned ? -1 : it->second;
    };
    const auto is_edge = [&](LocalId row, NodeId v) {
      const auto it = local_of.find(v);
      if (it == local_of.end()) return false;
      const auto begin = part.graph.indices.begin() + part.graph.indptr[row];
      const auto end = part.graph.indices.begin() + part.graph.indptr[row + 1];
      return std::binary_search(begin, end, it->second);
    };
    if (link_seen_[0].empty())
      for (int s = 0; s < 3; ++s) {
        link_seen_[s].assign(static_cast<std::size_t>(m_.link.pos[s]), 0);
        neg_seen_[s].assign(static_cast<std::size_t>(m_.link.neg[s]), 0);
      }
    for (int s = 0; s < 3; ++s) {
      const std::string what = std::string("/link/") + kLinkSplitNames[s];
      const auto& pos = part.link.pos[s];
      for (std::size_t i = 0; i < part.link.pos_id[s].size(); ++i) {
        const NodeId u = pos[2 * i], v = pos[2 * i + 1];
        const LocalId row = owned_local(u);
        TESSEL_EXPECTS(row >= 0, "{}: {}_pos row {}: edge {},{}: its source {} is not owned by "
                       "this part", name, what, i, u, v, u);
        TESSEL_EXPECTS(s == 0 || !is_edge(row, v),
                       "{}: {}_pos row {}: edge {},{} is an edge of the message-passing graph "
                       "(validation and test edges must be left out of it)",
                       name, what, i, u, v);
        auto& seen = link_seen_[s][static_cast<std::size_t>(part.link.pos_id[s][i])];
        TESSEL_EXPECTS(seen == 0, "{}: {}_pos row {}: edge id {} is held by another part too",
                       name, what, i, part.link.pos_id[s][i]);
        seen = 1;
      }
      for (std::size_t i = 0; i < part.link.neg_id[s].size(); ++i) {
        TESSEL_EXPECTS(owned_local(part.link.neg[s][2 * i]) >= 0,
                       "{}: {}_neg row {}: its first node {} is not owned by this part", name, what,
                       i, part.link.neg[s][2 * i]);
        auto& seen = neg_seen_[s][static_cast<std::size_t>(part.link.neg_id[s][i])];
        TESSEL_EXPECTS(seen == 0, "{}: {}_neg row {}: negative id {} is held by another part too",
                       name, what, i, part.link.neg_id[s][i]);
        seen = 1;
      }
    }
  }

  void check_totals() {
    if (m_.link.present)
      for (int s = 0; s < 3; ++s) {
        const auto missing = std::find(link_seen_[s].begin(), link_seen_[s].end(), 0);
        TESSEL_EXPECTS(missing == link_seen_[s].end(),
                       "{}: {} edge {} of the link splits is held by no part", manifest_name_,
                       kLinkSplitNames[s], missing - link_seen_[s].begin());
        const auto missing_neg = std::find(neg_seen_[s].begin(), neg_seen_[s].end(), 0);
        TESSEL_EXPECTS(missing_neg == neg_seen_[s].end(),
                       "{}: {} negative {} of the link splits is held by no part", manifest_name_,
                       kLinkSplitNames[s], missing_neg - neg_seen_[s].begin());
      }
    TESSEL_EXPECTS(num_edges_ == m_.num_edges,
                   "{}: the parts hold {} edges, partition.json says {}", manifest_name_,
                   num_edges_, m_.num_edges);
    if (source_)
      TESSEL_EXPECTS(num_edges_ == expected_.num_edges(),
                     "{}: the parts hold {} edges, the source's training graph has {}",
                     manifest_name_, num_edges_, expected_.num_edges());
    const std::int64_t recorded_cut = json_int(m_.raw, {"edge_cut", "edges"}, edge_cut_);
    TESSEL_EXPECTS(recorded_cut == edge_cut_,
                   "{}: edge cut recomputed from the parts is {}, partition.json says {}",
                   manifest_name_, edge_cut_, recorded_cut);
    TESSEL_EXPECTS(
        num_train_ == m_.num_train && num_valid_ == m_.num_valid && num_test_ == m_.num_test,
        "{}: the parts hold {}/{}/{} train/valid/test nodes, partition.json says {}/{}/{}",
        manifest_name_, num_train_, num_valid_, num_test_, m_.num_train, m_.num_valid,
        m_.num_test);
    if (!m_.symmetrized) return;
    for (std::int64_t v = 0; v < n_; ++v)
      TESSEL_EXPECTS(out_degree_[v] == degree_of_[v],
                     "{}: the graph is marked symmetrized, but source node {} has {} in-edges "
                     "and {} out-edges",
                     manifest_name_, v, degree_of_[v], out_degree_[v]);
    TESSEL_EXPECTS(forward_sum_ == backward_sum_,
                   "{}: the graph is marked symmetrized, but some edge has no reverse edge",
                   manifest_name_);
  }

  const std::filesystem::path& dir_;
  const CheckOptions& options_;
  const Manifest m_;
  const std::string manifest_name_;
  std::int64_t n_ = 0;
  std::optional<datasets::Dataset> loaded_;
  const datasets::Dataset* source_ = nullptr;
  std::unique_ptr<FeatureSource> source_features_;
  GraphCsr expected_;
  std::vector<std::uint8_t> in_train_, in_valid_, in_test_;
  std::vector<NodeId> orig_of_new_;
  std::string unsorted_part_; // the first part whose owned source ids do not ascend
  std::vector<std::int64_t> degree_of_, out_degree_;
  std::vector<HaloRecord> halos_;
  std::vector<NodeId> row_orig_;
  std::uint64_t forward_sum_ = 0, backward_sum_ = 0;
  std::int64_t num_edges_ = 0, edge_cut_ = 0, num_train_ = 0, num_valid_ = 0, num_test_ = 0;
  std::int64_t nodes_checked_ = 0;
  std::vector<std::uint8_t> link_seen_[3], neg_seen_[3];
  bool have_part_stats_ = false;
  std::string checksum_mismatch_;
  std::vector<int> parts_;
  bool every_part_ = true;
};

} // namespace

CheckReport check_partition(const std::filesystem::path& dir, const CheckOptions& options) {
  return PartitionChecker(dir, options).run();
}

} // namespace tessel::partition
