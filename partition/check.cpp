// `tessel partition --check`: re-reads a partition folder and verifies its invariants, optionally
// against the source dataset.
#include "tessel/partition/partitioner.hpp"

#include "steps.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/partition/part.hpp"

#include <algorithm>
#include <memory>
#include <optional>

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

} // namespace

CheckReport check_partition(const std::filesystem::path& dir, const CheckOptions& options) {
  const Manifest m = read_manifest(dir);
  const std::string manifest_name = (dir / "partition.json").string();
  const int k = m.num_parts;
  const std::int64_t n = m.num_nodes;
  TESSEL_EXPECTS(n <= std::numeric_limits<std::int32_t>::max(),
                 "{}: {} nodes do not fit 32-bit ids", manifest_name, n);

  // Optional source: its training graph, labels, splits and feature rows to compare with.
  std::optional<datasets::Dataset> loaded;
  const datasets::Dataset* source = options.source_data;
  std::unique_ptr<FeatureSource> source_features;
  if (!options.source_store.empty()) {
    datasets::ReadOptions read;
    read.features = false;
    loaded = datasets::read_store(options.source_store, read);
    source = &*loaded;
    if (json_string(m.raw, "source", "checksum_of") == "file") {
      const auto sum = file_checksum(options.source_store);
      const auto recorded = json_string(m.raw, "source", "checksum");
      TESSEL_EXPECTS(sum == recorded,
                     "{}: source {} has checksum {}, but the partition was made from {}",
                     manifest_name, options.source_store.string(), sum, recorded);
    }
    source_features = std::make_unique<StoreFeatures>(options.source_store, source->feature_dim);
  } else if (source) {
    source_features = std::make_unique<MemoryFeatures>(source->features, source->feature_dim);
  }
  GraphCsr expected;
  std::vector<std::uint8_t> in_train, in_valid, in_test;
  if (source) {
    TESSEL_EXPECTS(source->num_nodes == n && source->feature_dim == m.feature_dim &&
                       source->num_classes == m.num_classes,
                   "{}: {} nodes, {} features, {} classes; the source has {}, {}, {}",
                   manifest_name, n, m.feature_dim, m.num_classes, source->num_nodes,
                   source->feature_dim, source->num_classes);
    source->graph.validate("source graph");
    expected = clean_graph(source->graph, m.symmetrized);
    in_train = split_mask(source->train, n);
    in_valid = split_mask(source->valid, n);
    in_test = split_mask(source->test, n);
  }

  std::vector<NodeId> orig_of_new(static_cast<std::size_t>(n), -1);
  std::vector<std::int64_t> degree_of(static_cast<std::size_t>(n), -1);
  std::vector<std::int64_t> out_degree(m.symmetrized ? static_cast<std::size_t>(n) : 0, 0);
  std::vector<HaloRecord> halos;
  std::uint64_t forward_sum = 0, backward_sum = 0;
  std::int64_t num_edges = 0, edge_cut = 0, num_train = 0, num_valid = 0, num_test = 0;
  const bool have_part_stats = m.raw.contains("parts") && m.raw["parts"].is_array() &&
                               static_cast<int>(m.raw["parts"].size()) == k;

  // Checksum mismatches are reported after every invariant below, which say more precisely
  // what is wrong; the checksums then catch edits that keep every invariant (a label, say).
  std::string checksum_mismatch;
  std::vector<int> parts = options.only_parts;
  const bool every_part = parts.empty();
  if (every_part)
    for (int p = 0; p < k; ++p) parts.push_back(p);
  std::sort(parts.begin(), parts.end());
  parts.erase(std::unique(parts.begin(), parts.end()), parts.end());
  for (const int p : parts)
    TESSEL_EXPECTS(p >= 0 && p < k, "{}: there is no part {} (the partition has parts 0 to {})",
                   manifest_name, p, k - 1);
  std::int64_t nodes_checked = 0;
  for (const int p : parts) {
    LoadOptions load;
    load.features = true; // their values are checked even without a source to compare with
    load.checksum_mismatch = &checksum_mismatch;
    const std::string name = (dir / part_file_name(p)).string();
    std::error_code exists_ec;
    TESSEL_EXPECTS(!every_part || std::filesystem::exists(name, exists_ec),
                   "{}: no such file (a folder that holds only some of the parts, as each host "
                   "does when it keeps the parts of its own ranks, is checked with --only P,Q,...)",
                   name);
    const Part part = load_part(dir, p, m, load);
    const std::int64_t owned = part.num_owned, halo = part.num_halo;
    nodes_checked += owned;
    datasets::check_feature_values(name, part.features.data(), 0, owned, part.feature_dim);

    for (std::int64_t i = 0; i < owned; ++i) {
      const NodeId v = part.orig_id[i];
      TESSEL_EXPECTS(degree_of[v] < 0, "{}: source node {} (local {}) is owned by another part too",
                     name, v, i);
      orig_of_new[part.offset + i] = v;
      degree_of[v] = part.degree[i];
    }
    for (std::int64_t h = 0; h < halo; ++h) {
      if (h > 0) {
        const auto prev = std::pair(part.halo_owner[h - 1], part.halo_owner_local[h - 1]);
        const auto cur = std::pair(part.halo_owner[h], part.halo_owner_local[h]);
        TESSEL_EXPECTS(prev < cur,
                       "{}: halo nodes {} and {} are not in increasing (owner, owner_local) order",
                       name, h - 1, h);
      }
      halos.push_back({p, part.halo_owner[h], part.halo_owner_local[h], h, part.orig_id[owned + h],
                       part.degree[owned + h]});
    }

    std::vector<std::uint8_t> halo_used(static_cast<std::size_t>(halo), 0);
    std::int64_t part_cut = 0;
    std::vector<NodeId> row_orig;
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
        if (m.symmetrized) {
          forward_sum +=
              edge_hash(static_cast<std::uint64_t>(src), static_cast<std::uint64_t>(dst));
          backward_sum +=
              edge_hash(static_cast<std::uint64_t>(dst), static_cast<std::uint64_t>(src));
          ++out_degree[src];
        }
      }
      if (source) {
        row_orig.clear();
        for (EdgeId x = b; x < e; ++x)
          row_orig.push_back(part.orig_id[part.graph.indices[x]]);
        std::sort(row_orig.begin(), row_orig.end());
        const auto eb = expected.indptr[dst], ee = expected.indptr[dst + 1];
        TESSEL_EXPECTS(
            static_cast<EdgeId>(row_orig.size()) == ee - eb &&
                std::equal(row_orig.begin(), row_orig.end(), expected.indices.begin() + eb),
            "{}: the in-neighbors of owned node {} (source node {}) differ from the "
            "source graph's",
            name, i, dst);
      }
    }
    for (std::int64_t h = 0; h < halo; ++h)
      TESSEL_EXPECTS(halo_used[h],
                     "{}: halo node {} (source node {}) is not an in-neighbor of "
                     "any owned node",
                     name, owned + h, part.orig_id[owned + h]);
    num_edges += part.graph.num_edges();
    edge_cut += part_cut;

    for (const auto* split : {&part.train, &part.valid, &part.test})
      for (std::size_t x = 1; x < split->size(); ++x)
        TESSEL_EXPECTS((*split)[x - 1] < (*split)[x],
                       "{}: a split lists local ids out of order or twice ({} then {})", name,
                       (*split)[x - 1], (*split)[x]);
    num_train += static_cast<std::int64_t>(part.train.size());
    num_valid += static_cast<std::int64_t>(part.valid.size());
    num_test += static_cast<std::int64_t>(part.test.size());

    if (have_part_stats) {
      const auto& js = m.raw["parts"][p];
      TESSEL_EXPECTS(json_int(js, {"halo"}, halo) == halo &&
                         json_int(js, {"edges"}, part.graph.num_edges()) ==
                             part.graph.num_edges() &&
                         json_int(js, {"cut_edges"}, part_cut) == part_cut,
                     "{}: part {} has {} halo nodes, {} edges, {} cut edges; partition.json says "
                     "{}, {}, {}",
                     name, p, halo, part.graph.num_edges(), part_cut, json_int(js, {"halo"}, -1),
                     json_int(js, {"edges"}, -1), json_int(js, {"cut_edges"}, -1));
    }

    if (source) {
      for (std::int64_t i = 0; i < owned; ++i) {
        const NodeId v = part.orig_id[i];
        const std::int64_t label = source->labels.empty() ? -1 : source->labels[v];
        TESSEL_EXPECTS(part.labels[i] == label,
                       "{}: owned node {} (source node {}) has label {}, the source says {}", name,
                       i, v, part.labels[i], label);
      }
      const std::pair<const std::vector<LocalId>*, const std::vector<std::uint8_t>*> splits[] = {
          {&part.train, &in_train}, {&part.valid, &in_valid}, {&part.test, &in_test}};
      for (const auto& [local, mask] : splits) {
        std::int64_t owned_in_source = 0;
        for (std::int64_t i = 0; i < owned; ++i)
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
      if (m.feature_dim > 0) {
        std::vector<std::int32_t> ids(part.orig_id.begin(), part.orig_id.begin() + owned);
        // Owned original ids ascend by construction of the relabeling; gather needs that.
        TESSEL_EXPECTS(std::is_sorted(ids.begin(), ids.end()),
                       "{}: owned nodes are not in increasing source id order", name);
        std::vector<float> rows(part.features.size());
        source_features->gather(ids, rows.data());
        for (std::int64_t i = 0; i < owned; ++i)
          TESSEL_EXPECTS(std::equal(rows.begin() + i * m.feature_dim,
                                    rows.begin() + (i + 1) * m.feature_dim,
                                    part.features.begin() + i * m.feature_dim),
                         "{}: features of owned node {} (source node {}) differ from the source",
                         name, i, ids[i]);
      }
    }
  }

  for (const auto& h : halos) {
    const NodeId g = m.offsets[h.owner] + h.owner_local;
    if (!every_part && orig_of_new[g] < 0) continue;  // its owner was not checked
    const std::string name = (dir / part_file_name(h.part)).string();
    TESSEL_EXPECTS(orig_of_new[g] == h.orig,
                   "{}: halo node {} is source node {}, but its owner {} (local {}) holds source "
                   "node {} there",
                   name, h.index, h.orig, h.owner, h.owner_local, orig_of_new[g]);
    TESSEL_EXPECTS(h.degree == degree_of[h.orig],
                   "{}: halo node {} (source node {}) has degree {}, its owner says {}", name,
                   h.index, h.orig, h.degree, degree_of[h.orig]);
  }
  CheckReport report;
  report.num_parts = k;
  report.checked_parts = parts;
  report.compared_with_source = source != nullptr;
  if (!every_part) {
    TESSEL_EXPECTS(checksum_mismatch.empty(), "{}", checksum_mismatch);
    report.num_nodes = nodes_checked;
    report.num_edges = num_edges;
    report.edge_cut = edge_cut;
    report.total_halo = static_cast<std::int64_t>(halos.size());
    return report;
  }
  TESSEL_EXPECTS(num_edges == m.num_edges, "{}: the parts hold {} edges, partition.json says {}",
                 manifest_name, num_edges, m.num_edges);
  if (source)
    TESSEL_EXPECTS(num_edges == expected.num_edges(),
                   "{}: the parts hold {} edges, the source's training graph has {}", manifest_name,
                   num_edges, expected.num_edges());
  const std::int64_t recorded_cut = json_int(m.raw, {"edge_cut", "edges"}, edge_cut);
  TESSEL_EXPECTS(recorded_cut == edge_cut,
                 "{}: edge cut recomputed from the parts is {}, partition.json says {}",
                 manifest_name, edge_cut, recorded_cut);
  TESSEL_EXPECTS(num_train == m.num_train && num_valid == m.num_valid && num_test == m.num_test,
                 "{}: the parts hold {}/{}/{} train/valid/test nodes, partition.json says {}/{}/{}",
                 manifest_name, num_train, num_valid, num_test, m.num_train, m.num_valid,
                 m.num_test);
  if (m.symmetrized) {
    for (std::int64_t v = 0; v < n; ++v)
      TESSEL_EXPECTS(out_degree[v] == degree_of[v],
                     "{}: the graph is marked symmetrized, but source node {} has {} in-edges "
                     "and {} out-edges",
                     manifest_name, v, degree_of[v], out_degree[v]);
    TESSEL_EXPECTS(forward_sum == backward_sum,
                   "{}: the graph is marked symmetrized, but some edge has no reverse edge",
                   manifest_name);
  }

  TESSEL_EXPECTS(checksum_mismatch.empty(), "{}", checksum_mismatch);

  report.num_nodes = n;
  report.num_edges = num_edges;
  report.edge_cut = edge_cut;
  report.total_halo = static_cast<std::int64_t>(halos.size());
  return report;
}

} // namespace tessel::partition
