// Reading partition.json and part files (validating everything before use) and writing parts.
#include "tessel/partition/part.hpp"

#include "steps.hpp"
#include "tessel/core/error.hpp"
#include "tessel/datasets/h5.hpp"
#include "tessel/datasets/json_file.hpp"
#include "tessel/partition/temporal.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>

namespace tessel::partition {

namespace {

template <class T>
T manifest_field(const nlohmann::json& json, const char* key, const std::filesystem::path& file) {
  const auto it = json.find(key);
  TESSEL_EXPECTS(it != json.end(), "{}: missing \"{}\"", file.string(), key);
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    TESSEL_FAIL("{}: \"{}\" has the wrong type ({})", file.string(), key, it->dump());
  }
}

template <class T>
void check_range(const std::vector<T>& values, std::int64_t lo, std::int64_t hi,
                 const std::string& what) {
  for (std::size_t i = 0; i < values.size(); ++i)
    TESSEL_EXPECTS(values[i] >= lo && values[i] < hi, "{}[{}] = {} is outside [{}, {})", what, i,
                   static_cast<std::int64_t>(values[i]), lo, hi);
}

// Compares the CRC-32 of each dataset as read with the one partition.json records for it.
class ChecksumVerifier {
public:
  ChecksumVerifier(const Manifest& manifest, int p, std::string file, std::string* mismatch)
      : file_(std::move(file)), mismatch_(mismatch) {
    const auto parts = manifest.raw.find("parts");
    // read_manifest requires the entry; a Manifest built in memory (tests) may lack it.
    if (parts == manifest.raw.end() || !parts->is_array() ||
        static_cast<int>(parts->size()) <= p ||
        !(*parts)[static_cast<std::size_t>(p)].contains("checksums"))
      return;
    recorded_ = &(*parts)[static_cast<std::size_t>(p)]["checksums"];
    TESSEL_EXPECTS(recorded_->is_object(), "partition.json: parts[{}].checksums is not an object",
                   p);
    where_ = fmt::format("parts[{}].checksums", p);
  }

  template <class T, class A>
  void verify(const std::string& dataset, const std::vector<T, A>& values) {
    if (recorded_ == nullptr) return;
    Crc32 crc;
    crc.update(values);
    verify_crc(dataset, crc.str());
  }

  // `actual`: the CRC-32 of the dataset's values as stored.
  void verify_crc(const std::string& dataset, const std::string& actual) {
    if (recorded_ == nullptr) return;
    const auto it = recorded_->find(dataset);
    TESSEL_EXPECTS(it != recorded_->end() && it->is_string(),
                   "partition.json: {} has no checksum for {} of {}", where_, dataset, file_);
    if (actual == it->template get<std::string>()) return;
    const std::string message =
        fmt::format("{}: {} has checksum {}, partition.json records {} (the part file was "
                    "changed after partitioning, or belongs to another partition)",
                    file_, dataset, actual, it->template get<std::string>());
    if (mismatch_ == nullptr) TESSEL_FAIL("{}", message);
    if (mismatch_->empty()) *mismatch_ = message;
  }

private:
  std::string file_;
  std::string* mismatch_;
  const nlohmann::json* recorded_ = nullptr;
  std::string where_;
};

} // namespace

Crc32::Crc32() : crc_(crc32(0L, Z_NULL, 0)) {}

void Crc32::update(const void* data, std::size_t bytes) {
  const auto* at = static_cast<const Bytef*>(data);
  while (bytes > 0) {
    // zlib takes a 32-bit length.
    const auto step = static_cast<uInt>(std::min<std::size_t>(bytes, std::size_t{1} << 30));
    crc_ = crc32(crc_, at, step);
    at += step;
    bytes -= step;
  }
}

std::string Crc32::str() const {
  return fmt::format("crc32:{:08x}", static_cast<std::uint32_t>(crc_));
}

PartChecksums part_checksums(const Part& part, bool with_features) {
  auto of = [](const auto& values) {
    Crc32 crc;
    crc.update(values);
    return crc.str();
  };
  PartChecksums sums = {{"/nodes/orig_id", of(part.orig_id)},
                        {"/nodes/degree", of(part.degree)},
                        {"/halo/owner", of(part.halo_owner)},
                        {"/halo/owner_local", of(part.halo_owner_local)},
                        {"/graph/indptr", of(part.graph.indptr)},
                        {"/graph/indices", of(part.graph.indices)},
                        {"/node/label", of(part.labels)},
                        {"/split/train", of(part.train)},
                        {"/split/valid", of(part.valid)},
                        {"/split/test", of(part.test)}};
  if (with_features && part.feature_dtype == datasets::FeatureDtype::float32) {
    sums["/node/feat"] = of(part.features);
  } else if (with_features) {
    std::vector<std::uint16_t> narrowed(part.features.size());
    datasets::narrow_features(part.features.data(), narrowed.data(),
                              static_cast<std::int64_t>(narrowed.size()), part.feature_dtype);
    sums["/node/feat"] = of(narrowed);
  }
  if (part.link.present)
    for (int s = 0; s < 3; ++s) {
      const std::string base = std::string("/link/") + kLinkSplitNames[s];
      sums[base + "_pos"] = of(part.link.pos[s]);
      sums[base + "_pos_id"] = of(part.link.pos_id[s]);
      if (s == 0) continue;
      sums[base + "_neg"] = of(part.link.neg[s]);
      sums[base + "_neg_id"] = of(part.link.neg_id[s]);
      sums[base + "_neg_dst"] = of(part.link.neg_dst[s]);
    }
  return sums;
}

std::string recorded_feature_checksum(const Manifest& manifest, int p) {
  const auto parts = manifest.raw.find("parts");
  if (parts == manifest.raw.end() || !parts->is_array() || static_cast<int>(parts->size()) <= p)
    return {};
  const auto& entry = (*parts)[static_cast<std::size_t>(p)];
  if (!entry.contains("checksums") || !entry["checksums"].is_object()) return {};
  const auto it = entry["checksums"].find("/node/feat");
  return it != entry["checksums"].end() && it->is_string() ? it->get<std::string>()
                                                           : std::string();
}

std::string part_file_name(int p) {
  return fmt::format("part-{}.h5", p);
}

int Manifest::owner_of(NodeId g) const {
  TESSEL_EXPECTS(g >= 0 && g < num_nodes, "node {} is outside [0, {})", g, num_nodes);
  const auto it = std::upper_bound(offsets.begin(), offsets.end(), g);
  return static_cast<int>(it - offsets.begin()) - 1;
}

NodeId Part::global_id(LocalId l, const Manifest& manifest) const {
  TESSEL_EXPECTS(l >= 0 && l < num_local(), "local id {} is outside [0, {}) of part {}", l,
                 num_local(), part_id);
  if (l < num_owned) return offset + l;
  const auto h = static_cast<std::size_t>(l - num_owned);
  return manifest.offsets[halo_owner[h]] + halo_owner_local[h];
}

Manifest read_manifest(const std::filesystem::path& dir) {
  const auto file = dir / "partition.json";
  TESSEL_EXPECTS(std::filesystem::is_directory(dir), "{}: not a directory", dir.string());
  std::error_code ec;
  TESSEL_EXPECTS(std::filesystem::is_regular_file(file, ec),
                 "{}: cannot open (not a partition folder?)", file.string());
  Manifest m;
  m.raw = datasets::read_json_file(file);
  TESSEL_EXPECTS(m.raw.is_object(), "{}: expected a JSON object", file.string());
  const auto format = manifest_field<std::string>(m.raw, "format", file);
  TESSEL_EXPECTS(format != kTemporalPartitionFormat,
                 "{}: a partition of a temporal store; train it with --mode dynamic", file.string());
  TESSEL_EXPECTS(format == kManifestFormat, "{}: format is \"{}\", expected \"{}\"", file.string(),
                 format, kManifestFormat);
  const auto version = manifest_field<int>(m.raw, "version", file);
  TESSEL_EXPECTS(version == kManifestVersion, "{}: version {} is not supported (this is {})",
                 file.string(), version, kManifestVersion);
  m.dataset = manifest_field<std::string>(m.raw, "dataset", file);
  m.num_parts = manifest_field<int>(m.raw, "num_parts", file);
  m.method = manifest_field<std::string>(m.raw, "method", file);
  m.seed = manifest_field<std::uint64_t>(m.raw, "seed", file);
  m.num_nodes = manifest_field<std::int64_t>(m.raw, "num_nodes", file);
  m.num_edges = manifest_field<std::int64_t>(m.raw, "num_edges", file);
  m.feature_dim = manifest_field<std::int64_t>(m.raw, "feature_dim", file);
  m.num_classes = manifest_field<std::int64_t>(m.raw, "num_classes", file);
  m.symmetrized = manifest_field<bool>(m.raw, "symmetrized", file);
  m.num_train = manifest_field<std::int64_t>(m.raw, "num_train", file);
  m.num_valid = manifest_field<std::int64_t>(m.raw, "num_valid", file);
  m.num_test = manifest_field<std::int64_t>(m.raw, "num_test", file);
  m.offsets = manifest_field<std::vector<NodeId>>(m.raw, "offsets", file);

  TESSEL_EXPECTS(m.num_parts >= 1, "{}: num_parts is {}", file.string(), m.num_parts);
  TESSEL_EXPECTS(
      m.num_nodes >= m.num_parts && m.num_edges >= 0 && m.feature_dim >= 0 && m.num_classes >= 0,
      "{}: inconsistent sizes ({} nodes, {} edges, {} features, {} classes, {} parts)",
      file.string(), m.num_nodes, m.num_edges, m.feature_dim, m.num_classes, m.num_parts);
  TESSEL_EXPECTS(static_cast<int>(m.offsets.size()) == m.num_parts + 1,
                 "{}: {} offsets for {} parts (expected parts + 1)", file.string(),
                 m.offsets.size(), m.num_parts);
  TESSEL_EXPECTS(m.offsets.front() == 0 && m.offsets.back() == m.num_nodes,
                 "{}: offsets run from {} to {}, expected 0 to {}", file.string(),
                 m.offsets.front(), m.offsets.back(), m.num_nodes);
  for (int p = 0; p < m.num_parts; ++p)
    TESSEL_EXPECTS(m.offsets[p] < m.offsets[p + 1],
                   "{}: part {} is empty or offsets decrease ({} -> {})", file.string(), p,
                   m.offsets[p], m.offsets[p + 1]);
  // Each part's sizes and checksums: without them a changed part file would load unchecked.
  const auto parts = m.raw.find("parts");
  TESSEL_EXPECTS(parts != m.raw.end() && parts->is_array(),
                 "{}: \"parts\" is missing or not an array, expected one entry per part",
                 file.string());
  TESSEL_EXPECTS(static_cast<int>(parts->size()) == m.num_parts,
                 "{}: \"parts\" has {} entries, expected num_parts = {}", file.string(),
                 parts->size(), m.num_parts);
  for (int p = 0; p < m.num_parts; ++p) {
    const auto& entry = (*parts)[static_cast<std::size_t>(p)];
    TESSEL_EXPECTS(entry.is_object() && entry.contains("checksums") &&
                       entry["checksums"].is_object(),
                   "{}: parts[{}] has no \"checksums\" object", file.string(), p);
    // A recorded checksum that is not one is the manifest's fault, not the part file's.
    for (const auto& [dataset, sum] : entry["checksums"].items()) {
      const bool well_formed =
          sum.is_string() && sum.get_ref<const std::string&>().size() == 14 &&
          sum.get_ref<const std::string&>().starts_with("crc32:") &&
          std::all_of(sum.get_ref<const std::string&>().begin() + 6,
                      sum.get_ref<const std::string&>().end(),
                      [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
      TESSEL_EXPECTS(well_formed, "{}: parts[{}].checksums[\"{}\"] is {}, expected \"crc32:\" "
                     "and 8 lowercase hex digits", file.string(), p, dataset.substr(0, 40),
                     sum.dump().substr(0, 40));
    }
    TESSEL_EXPECTS(!entry.contains("file") || entry["file"] == part_file_name(p),
                   "{}: parts[{}].file is {}, expected \"{}\"", file.string(), p,
                   entry["file"].is_string() ? entry["file"].get<std::string>()
                                             : std::string(entry["file"].type_name()),
                   part_file_name(p));
  }
  if (const auto link = m.raw.find("link"); link != m.raw.end()) {
    TESSEL_EXPECTS(link->is_object(), "{}: \"link\" is not an object", file.string());
    m.link.present = true;
    m.link.metric = manifest_field<std::string>(*link, "metric", file);
    m.link.neg_per_source = manifest_field<std::int64_t>(*link, "neg_per_source", file);
    for (int s = 0; s < 3; ++s) {
      m.link.pos[s] = manifest_field<std::int64_t>(*link, (std::string(kLinkSplitNames[s]) + "_pos").c_str(),
                                                   file);
      m.link.neg[s] = s == 0 ? 0
                             : manifest_field<std::int64_t>(
                                   *link, (std::string(kLinkSplitNames[s]) + "_neg").c_str(), file);
      TESSEL_EXPECTS(m.link.pos[s] >= 0 && m.link.neg[s] >= 0 && m.link.neg_per_source >= 0,
                     "{}: link counts are negative", file.string());
    }
  }
  for (const auto& offset : m.raw["offsets"])
    TESSEL_EXPECTS(offset.is_number_integer(), "{}: offsets holds {}, expected whole numbers",
                   file.string(), offset.dump().substr(0, 40));
  return m;
}

namespace {

// Rows strictly increasing (no repeated neighbor), no self-loop, and each owned node's row as
// long as its degree: the part holds every in-neighbor of its owned nodes, and GCN's
// normalization reads the degree.
void check_rows(const Part& part, const std::string& name) {
  const LocalCsr& graph = part.graph;
  const std::int64_t rows = graph.num_rows;
  std::int64_t bad = rows;
#pragma omp parallel for reduction(min : bad) schedule(static)
  for (std::int64_t v = 0; v < rows; ++v) {
    const EdgeId b = graph.indptr[v], e = graph.indptr[v + 1];
    bool ok = e - b == part.degree[v];
    for (EdgeId x = b; ok && x < e; ++x)
      ok = graph.indices[x] != v && (x == b || graph.indices[x - 1] < graph.indices[x]);
    if (!ok) bad = std::min(bad, v);
  }
  if (bad == rows) return;
  const EdgeId b = graph.indptr[bad], e = graph.indptr[bad + 1];
  TESSEL_EXPECTS(e - b == part.degree[bad],
                 "{}: owned node {} has {} in-edges in /graph, but /nodes/degree says {}", name,
                 bad, e - b, part.degree[bad]);
  for (EdgeId x = b; x < e; ++x) {
    TESSEL_EXPECTS(graph.indices[x] != bad, "{}: /graph row {} has a self-loop", name, bad);
    TESSEL_EXPECTS(x == b || graph.indices[x - 1] < graph.indices[x],
                   "{}: /graph row {} is not strictly increasing at position {} ({} then {})",
                   name, bad, x - b, graph.indices[x - 1], graph.indices[x]);
  }
}

} // namespace

namespace {

// /link/* of a part of a link store: shapes, ids in range, rows aligned, checksums.
void read_part_links(const h5::File& file, const std::string& name, const Manifest& manifest,
                     Part& part, ChecksumVerifier& checksums) {
  PartLinks& l = part.link;
  l.present = true;
  l.neg_per_source = manifest.link.neg_per_source;
  const std::int64_t n = manifest.num_nodes;
  const auto ids = [&](const std::string& dataset, std::int64_t width, std::vector<NodeId>& out) {
    const auto dims = file.dims(dataset);
    TESSEL_EXPECTS(dims.size() == 2 && dims[1] == width, "{}: {} has shape [{}], expected [n, {}]",
                   name, dataset, fmt::join(dims, ", "), width);
    out = file.read<NodeId>(dataset);
    for (std::size_t i = 0; i < out.size(); ++i)
      TESSEL_EXPECTS(out[i] >= 0 && out[i] < n, "{}: {} row {}: node {} is not a node id ({} nodes)",
                     name, dataset, static_cast<std::int64_t>(i) / width, out[i], n);
    checksums.verify(dataset, out);
  };
  const auto rows_of = [&](const std::string& dataset, std::int64_t rows, std::int64_t bound,
                           std::vector<std::int64_t>& out) {
    out = file.read<std::int64_t>(dataset, {rows});
    for (std::size_t i = 0; i < out.size(); ++i)
      TESSEL_EXPECTS(out[i] >= 0 && out[i] < bound, "{}: {} row {}: edge id {} is outside [0, {})",
                     name, dataset, i, out[i], bound);
    checksums.verify(dataset, out);
  };
  for (int s = 0; s < 3; ++s) {
    const std::string base = std::string("/link/") + kLinkSplitNames[s];
    ids(base + "_pos", 2, l.pos[s]);
    const auto rows = static_cast<std::int64_t>(l.pos[s].size()) / 2;
    rows_of(base + "_pos_id", rows, manifest.link.pos[s], l.pos_id[s]);
    if (s == 0) continue;
    ids(base + "_neg", 2, l.neg[s]);
    rows_of(base + "_neg_id", static_cast<std::int64_t>(l.neg[s].size()) / 2, manifest.link.neg[s],
            l.neg_id[s]);
    const std::int64_t k = std::max<std::int64_t>(1, l.neg_per_source);
    ids(base + "_neg_dst", k, l.neg_dst[s]);
    TESSEL_EXPECTS(l.neg_per_source == 0 ? l.neg_dst[s].empty()
                                         : static_cast<std::int64_t>(l.neg_dst[s].size()) == rows * k,
                   "{}: {}_neg_dst has {} values, expected {} rows of {}", name, base,
                   l.neg_dst[s].size(), rows, k);
  }
}

// /node/feat into part.features: its shape, finite values and checksum checked.
void read_features(const h5::File& file, const std::string& name, const Manifest& manifest,
                   Part& part, ChecksumVerifier& checksums) {
  const std::int64_t owned = part.num_owned;
  if (manifest.link.present) read_part_links(file, name, manifest, part, checksums);

  const auto feat_dims = file.dims("/node/feat");
  TESSEL_EXPECTS(feat_dims == std::vector<std::int64_t>({owned, manifest.feature_dim}),
                 "{}: /node/feat has shape {}, expected [{}, {}]", name,
                 fmt::format("[{}]", fmt::join(feat_dims, ", ")), owned, manifest.feature_dim);
  part.feature_dtype =
      manifest.feature_dim > 0 ? file.feature_dtype("/node/feat") : datasets::FeatureDtype::float32;
  if (part.feature_dtype != datasets::FeatureDtype::float32) {
    // 16-bit rows: widened into the float32 matrix block by block, the CRC over the stored
    // values (what partition.json records).
    const std::int64_t d = manifest.feature_dim;
    part.features.resize(static_cast<std::size_t>(owned * d));
    const std::int64_t block = std::max<std::int64_t>(1, (std::int64_t{4} << 20) / (2 * d));
    std::vector<std::uint16_t> stored;
    Crc32 crc;
    for (std::int64_t r = 0; r < owned; r += block) {
      const std::int64_t end = std::min(owned, r + block);
      file.read_rows_stored("/node/feat", r, end, stored);
      crc.update(stored);
      datasets::widen_features(stored.data(), part.features.data() + r * d, (end - r) * d,
                               part.feature_dtype);
    }
    datasets::check_feature_values(name, part.features.data(), 0, owned, part.feature_dim);
    checksums.verify_crc("/node/feat", crc.str());
    return;
  }
  if (manifest.feature_dim > 0)
    part.features = file.read<float>("/node/feat", {owned, manifest.feature_dim});
  // NaN or Inf in an input feature turns every loss into nan: refuse the row at load.
  datasets::check_feature_values(name, part.features.data(), 0, owned, part.feature_dim);
  checksums.verify("/node/feat", part.features);
}

} // namespace

Part load_part(const std::filesystem::path& dir, int p, const Manifest& manifest,
               const LoadOptions& options) {
  TESSEL_EXPECTS(p >= 0 && p < manifest.num_parts, "part {} is outside [0, {})", p,
                 manifest.num_parts);
  const auto path = dir / part_file_name(p);
  const std::string name = path.string();
  const auto file = h5::File::open_read(path);

  const auto format = file.attr_string("format");
  TESSEL_EXPECTS(format == kPartFormat, "{}: format is \"{}\", expected \"{}\"", name, format,
                 kPartFormat);
  const auto version = file.attr_int("version");
  TESSEL_EXPECTS(version == kPartVersion, "{}: version {} is not supported (this is {})", name,
                 version, kPartVersion);

  Part part;
  part.part_id = static_cast<int>(file.attr_int("part_id"));
  part.num_parts = static_cast<int>(file.attr_int("num_parts"));
  part.num_owned = file.attr_int("num_owned");
  part.num_halo = file.attr_int("num_halo");
  part.offset = file.attr_int("offset");
  part.feature_dim = file.attr_int("feature_dim");
  part.num_classes = file.attr_int("num_classes");
  TESSEL_EXPECTS(part.part_id == p && part.num_parts == manifest.num_parts,
                 "{}: says it is part {} of {}, expected part {} of {} (a file of another "
                 "partition?)",
                 name, part.part_id, part.num_parts, p, manifest.num_parts);
  const NodeId lo = manifest.offsets[p], hi = manifest.offsets[p + 1];
  TESSEL_EXPECTS(part.offset == lo && part.num_owned == hi - lo,
                 "{}: owns {} nodes from {}, but partition.json gives [{}, {}) (a part of "
                 "another partition?)",
                 name, part.num_owned, part.offset, lo, hi);
  TESSEL_EXPECTS(part.num_halo >= 0 && part.num_halo <= manifest.num_nodes - part.num_owned,
                 "{}: {} halo nodes for {} nodes outside the part", name, part.num_halo,
                 manifest.num_nodes - part.num_owned);
  TESSEL_EXPECTS(part.num_local() <= std::numeric_limits<LocalId>::max(),
                 "{}: {} local nodes do not fit 32-bit local ids", name, part.num_local());
  TESSEL_EXPECTS(part.feature_dim == manifest.feature_dim &&
                     part.num_classes == manifest.num_classes,
                 "{}: {} features and {} classes, partition.json says {} and {}", name,
                 part.feature_dim, part.num_classes, manifest.feature_dim, manifest.num_classes);

  ChecksumVerifier checksums(manifest, p, name, options.checksum_mismatch);
  const std::int64_t owned = part.num_owned, halo = part.num_halo, local = part.num_local();
  part.orig_id = file.read<NodeId>("/nodes/orig_id", {local});
  check_range(part.orig_id, 0, manifest.num_nodes, name + ": /nodes/orig_id");
  checksums.verify("/nodes/orig_id", part.orig_id);
  part.degree = file.read<std::int64_t>("/nodes/degree", {local});
  check_range(part.degree, 0, manifest.num_nodes, name + ": /nodes/degree");
  checksums.verify("/nodes/degree", part.degree);
  part.halo_owner = file.read<std::int32_t>("/halo/owner", {halo});
  part.halo_owner_local = file.read<std::int32_t>("/halo/owner_local", {halo});
  checksums.verify("/halo/owner", part.halo_owner);
  checksums.verify("/halo/owner_local", part.halo_owner_local);
  for (std::int64_t h = 0; h < halo; ++h) {
    const auto owner = part.halo_owner[h];
    TESSEL_EXPECTS(owner >= 0 && owner < manifest.num_parts && owner != p,
                   "{}: halo node {} has owner {} (expected another part in [0, {}))", name, h,
                   owner, manifest.num_parts);
    const auto owner_size = manifest.offsets[owner + 1] - manifest.offsets[owner];
    TESSEL_EXPECTS(part.halo_owner_local[h] >= 0 && part.halo_owner_local[h] < owner_size,
                   "{}: halo node {} has owner-local id {}, part {} owns {} nodes", name, h,
                   part.halo_owner_local[h], owner, owner_size);
    // Halo nodes are sorted by relabeled id: a repeated or misplaced owner_local shows here.
    TESSEL_EXPECTS(h == 0 || std::pair(part.halo_owner[h - 1], part.halo_owner_local[h - 1]) <
                                 std::pair(owner, part.halo_owner_local[h]),
                   "{}: halo nodes {} and {} are not in increasing (owner, owner_local) order "
                   "({}:{} then {}:{})",
                   name, h - 1, h, part.halo_owner[h - 1], part.halo_owner_local[h - 1], owner,
                   part.halo_owner_local[h]);
    // A halo node is an in-neighbor of an owned node; in a symmetrized graph that edge's
    // reverse makes its in-degree at least 1.
    TESSEL_EXPECTS(!manifest.symmetrized || part.degree[owned + h] >= 1,
                   "{}: halo node {} (local {}) has degree {}, expected >= 1 in a symmetrized "
                   "graph",
                   name, h, owned + h, part.degree[owned + h]);
  }

  LocalCsr& graph = part.graph;
  graph.num_rows = owned;
  graph.num_cols = local;
  graph.indptr = file.read<EdgeId>("/graph/indptr", {owned + 1});
  const auto nnz = file.dims("/graph/indices");
  TESSEL_EXPECTS(nnz.size() == 1, "{}: /graph/indices has rank {}, expected 1", name, nnz.size());
  // Read in place: an out-of-core run makes indices in a scratch-file mapping (spill::Scope).
  graph.indices.resize(static_cast<std::size_t>(nnz[0]));
  file.read_into<LocalId>("/graph/indices", graph.indices.data(), nnz[0]);
  graph.validate(name + ": /graph");
  checksums.verify("/graph/indptr", graph.indptr);
  checksums.verify("/graph/indices", graph.indices);
  check_rows(part, name);

  part.labels = file.read<std::int64_t>("/node/label", {owned});
  check_range(part.labels, -1, std::max<std::int64_t>(manifest.num_classes, 0),
              name + ": /node/label");
  checksums.verify("/node/label", part.labels);
  part.train = file.read<LocalId>("/split/train");
  part.valid = file.read<LocalId>("/split/valid");
  part.test = file.read<LocalId>("/split/test");
  check_range(part.train, 0, owned, name + ": /split/train");
  check_range(part.valid, 0, owned, name + ": /split/valid");
  check_range(part.test, 0, owned, name + ": /split/test");
  checksums.verify("/split/train", part.train);
  checksums.verify("/split/valid", part.valid);
  checksums.verify("/split/test", part.test);

  const auto feat_dims = file.dims("/node/feat");
  TESSEL_EXPECTS(feat_dims == std::vector<std::int64_t>({owned, manifest.feature_dim}),
                 "{}: /node/feat has shape {}, expected [{}, {}]", name,
                 fmt::format("[{}]", fmt::join(feat_dims, ", ")), owned, manifest.feature_dim);
  if (manifest.feature_dim > 0) part.feature_dtype = file.feature_dtype("/node/feat");
  if (options.features) read_features(file, name, manifest, part, checksums);
  return part;
}

void load_part_features(const std::filesystem::path& dir, int p, const Manifest& manifest,
                        Part& part) {
  const auto path = dir / part_file_name(p);
  const auto file = h5::File::open_read(path);
  ChecksumVerifier checksums(manifest, p, path.string(), nullptr);
  read_features(file, path.string(), manifest, part, checksums);
}

namespace detail {

void write_part_layout(h5::File& file, const Part& part, const std::string& dataset) {
  TESSEL_ASSERT(part.graph.num_rows == part.num_owned && part.graph.num_cols == part.num_local(),
                "write_part: graph is {}x{} for {} owned and {} local nodes", part.graph.num_rows,
                part.graph.num_cols, part.num_owned, part.num_local());
  file.set_attr("format", std::string(kPartFormat));
  file.set_attr("version", std::int64_t{kPartVersion});
  file.set_attr("dataset", dataset);
  file.set_attr("part_id", std::int64_t{part.part_id});
  file.set_attr("num_parts", std::int64_t{part.num_parts});
  file.set_attr("num_owned", part.num_owned);
  file.set_attr("num_halo", part.num_halo);
  file.set_attr("offset", part.offset);
  file.set_attr("num_edges", part.graph.num_edges());
  file.set_attr("feature_dim", part.feature_dim);
  file.set_attr("num_classes", part.num_classes);
  file.set_attr("description",
                std::string("One part of a Tessel partition: owned nodes are local ids [0, "
                            "num_owned) = relabeled ids [offset, offset + num_owned); halo nodes "
                            "follow. See partition.json beside this file."));
  for (const char* group : {"/nodes", "/halo", "/graph", "/node", "/split"})
    file.create_group(group);

  const std::int64_t owned = part.num_owned, local = part.num_local();
  file.write("/nodes/orig_id", part.orig_id.data(), {local},
             "[owned + halo] i64: id of each local node in the source dataset");
  file.write("/nodes/degree", part.degree.data(), {local},
             "[owned + halo] i64: in-degree in the whole training graph");
  file.write("/halo/owner", part.halo_owner.data(), {part.num_halo},
             "[halo] i32: part owning halo node num_owned + h");
  file.write("/halo/owner_local", part.halo_owner_local.data(), {part.num_halo},
             "[halo] i32: local id of halo node num_owned + h in its owner");
  file.write("/graph/indptr", part.graph.indptr.data(), {owned + 1},
             "[owned + 1] i64: row offsets of the local in-neighbor CSR (rows = owned nodes)");
  file.write("/graph/indices", part.graph.indices.data(), {part.graph.num_edges()},
             "[edges] i32: local ids (owned or halo) of in-neighbors, rows sorted ascending");
  file.write("/node/label", part.labels.data(), {owned},
             "[owned] i64: labels of owned nodes, -1 = unlabeled");
  file.write("/split/train", part.train.data(), {static_cast<std::int64_t>(part.train.size())},
             "i32: local ids of owned training nodes, ascending");
  file.write("/split/valid", part.valid.data(), {static_cast<std::int64_t>(part.valid.size())},
             "i32: local ids of owned validation nodes, ascending");
  file.write("/split/test", part.test.data(), {static_cast<std::int64_t>(part.test.size())},
             "i32: local ids of owned test nodes, ascending");
  if (part.link.present) {
    file.create_group("/link");
    for (int s = 0; s < 3; ++s) {
      const std::string base = std::string("/link/") + kLinkSplitNames[s];
      const auto& l = part.link;
      file.write(base + "_pos", l.pos[s].data(),
                 {static_cast<std::int64_t>(l.pos[s].size()) / 2, 2},
                 "[n, 2] i64: positive edges (src, dst) in source ids whose src this part owns");
      file.write(base + "_pos_id", l.pos_id[s].data(), {static_cast<std::int64_t>(l.pos_id[s].size())},
                 "[n] i64: row of each positive edge in the store's list (its edge id)");
      if (s == 0) continue;
      file.write(base + "_neg", l.neg[s].data(), {static_cast<std::int64_t>(l.neg[s].size()) / 2, 2},
                 "[m, 2] i64: per-pair negatives (source ids) whose first endpoint this part owns");
      file.write(base + "_neg_id", l.neg_id[s].data(), {static_cast<std::int64_t>(l.neg_id[s].size())},
                 "[m] i64: row of each negative in the store's list");
      const std::int64_t k = std::max<std::int64_t>(1, l.neg_per_source);
      file.write(base + "_neg_dst", l.neg_dst[s].data(),
                 {static_cast<std::int64_t>(l.neg_dst[s].size()) / k, k},
                 "[n, K] i64: per-source negative destinations, row i for positive i");
    }
  }
  // Row chunks of about 1 MiB, like the dataset store, so a reader can fetch a row range.
  const std::int64_t chunk_rows = std::max<std::int64_t>(
      1, (std::int64_t{1} << 20) / (datasets::stored_bytes(part.feature_dtype) *
                                    std::max<std::int64_t>(part.feature_dim, 1)));
  if (part.feature_dtype == datasets::FeatureDtype::float32)
    file.create_dataset<float>("/node/feat", {owned, part.feature_dim},
                               "[owned, feature_dim] f32: features of owned nodes", chunk_rows);
  else
    file.create_feature_dataset(
        "/node/feat", {owned, part.feature_dim}, part.feature_dtype,
        fmt::format("[owned, feature_dim] {}: features of owned nodes (readers widen them to "
                    "float32)",
                    datasets::to_string(part.feature_dtype)),
        chunk_rows);
}

} // namespace detail

void write_part(const Part& part, const std::string& dataset, const std::filesystem::path& path) {
  TESSEL_ASSERT(static_cast<std::int64_t>(part.features.size()) ==
                    part.num_owned * part.feature_dim,
                "write_part: {} feature values for {} x {}", part.features.size(), part.num_owned,
                part.feature_dim);
  auto file = h5::File::create(path);
  detail::write_part_layout(file, part, dataset);
  if (part.feature_dim > 0 && part.feature_dtype == datasets::FeatureDtype::float32) {
    file.write_rows("/node/feat", 0, part.features.data(), part.num_owned);
  } else if (part.feature_dim > 0) {
    std::vector<std::uint16_t> narrowed(part.features.size());
    const std::int64_t bad = datasets::narrow_features(
        part.features.data(), narrowed.data(), static_cast<std::int64_t>(narrowed.size()),
        part.feature_dtype);
    if (bad >= 0)
      datasets::fail_not_representable(path.filename().string() + ": /node/feat",
                                       bad / part.feature_dim, bad % part.feature_dim,
                                       part.features[static_cast<std::size_t>(bad)],
                                       part.feature_dtype);
    file.write_rows_stored("/node/feat", 0, narrowed.data(), part.num_owned);
  }
  file.close();
}

} // namespace tessel::partition
