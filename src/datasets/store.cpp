// The HDF5 dataset store: writing it atomically, reading and validating it, row-range reads.
#include "store_writer.hpp"

#include "csr_build.hpp"

#include "tessel/core/error.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessel::datasets {

using detail::kParallelMin;

namespace {

constexpr const char* kRootDescription =
    "Tessel dataset store: one graph with node features, class labels and a train/valid/test "
    "split. /graph/indptr and /graph/indices form the in-neighbor CSR (row v lists every u with "
    "an edge u -> v); /node/feat is float32 [num_nodes, feature_dim]; /node/label is int64 "
    "(-1 = unlabeled); /split/{train,valid,test} are int64 node ids. When directed is 0 each "
    "undirected edge may be stored once; symmetrize before training.";
constexpr const char* kIndptrDescription =
    "In-neighbor CSR row pointers, int64 [num_nodes + 1]: the in-neighbors of node v are "
    "/graph/indices[indptr[v]:indptr[v+1]].";
constexpr const char* kIndicesDescription =
    "In-neighbor CSR column ids, int64 [num_edges]: the source u of every stored edge u -> v, "
    "grouped by destination v, ascending within each row.";
constexpr const char* kFeatDescription =
    "Node features, float32 [num_nodes, feature_dim]; row v belongs to node v. Chunked by rows "
    "so a row range can be read alone.";
constexpr const char* kLabelDescription =
    "Class of each node, int64 [num_nodes], in [0, num_classes); -1 = unlabeled.";

std::string split_description(const std::string& which) {
  const char* what = which == "train" ? "training" : which == "valid" ? "validation" : "test";
  return std::string("Node ids of the ") + what + " set, int64.";
}

// Index of the first element outside [lo, hi), or -1. Parallel; the answer is the smallest
// such index whatever the thread count.
template <class T>
std::int64_t first_outside(const T* values, std::int64_t n, std::int64_t lo, std::int64_t hi) {
  std::int64_t first = std::numeric_limits<std::int64_t>::max();
#pragma omp parallel for reduction(min : first) schedule(static) if (n > kParallelMin)
  for (std::int64_t i = 0; i < n; ++i) {
    const auto v = static_cast<std::int64_t>(values[i]);
    if (v < lo || v >= hi) first = std::min(first, i);
  }
  return first == std::numeric_limits<std::int64_t>::max() ? -1 : first;
}

// Every model's output layer and logits are sized by num_classes: more classes than nodes is a
// corrupt count (a stray label of 10^9), refused before anything is allocated for it.
void check_num_classes(const std::string& file, std::int64_t num_classes, std::int64_t num_nodes) {
  TESSEL_EXPECTS(num_classes <= std::max<std::int64_t>(num_nodes, 1),
                 "{}: num_classes = {} is more than the {} nodes (class ids must be below the "
                 "number of nodes)",
                 file, num_classes, num_nodes);
}

// Reads and checks the root attributes.
DatasetInfo read_header(const h5::File& f) {
  const std::string file = f.path().string();
  TESSEL_EXPECTS(f.has_attr("format"),
                 "{}: not a Tessel dataset store (no \"format\" attribute on the root group)",
                 file);
  const std::string format = f.attr_string("format");
  TESSEL_EXPECTS(format == kStoreFormat, "{}: format is \"{}\", expected \"{}\"", file, format,
                 kStoreFormat);
  DatasetInfo info;
  info.version = static_cast<int>(f.attr_int("version"));
  TESSEL_EXPECTS(info.version >= 1 && info.version <= kStoreVersion,
                 "{}: store version {} is not supported (this Tessel reads version {})", file,
                 info.version, kStoreVersion);
  info.name = f.has_attr("name") ? f.attr_string("name") : std::string();
  info.num_nodes = f.attr_int("num_nodes");
  info.num_edges = f.attr_int("num_edges");
  info.num_classes = f.attr_int("num_classes");
  info.feature_dim = f.attr_int("feature_dim");
  const std::int64_t directed = f.attr_int("directed");
  TESSEL_EXPECTS(directed == 0 || directed == 1, "{}: directed = {}, expected 0 or 1", file,
                 directed);
  info.directed = directed == 1;
  constexpr std::int64_t kHuge = std::int64_t{1} << 50;
  TESSEL_EXPECTS(info.num_nodes >= 0 && info.num_nodes < kHuge, "{}: num_nodes = {} is invalid",
                 file, info.num_nodes);
  TESSEL_EXPECTS(info.num_edges >= 0 && info.num_edges < kHuge, "{}: num_edges = {} is invalid",
                 file, info.num_edges);
  TESSEL_EXPECTS(info.num_classes >= 0 && info.num_classes < kHuge,
                 "{}: num_classes = {} is invalid", file, info.num_classes);
  TESSEL_EXPECTS(info.feature_dim >= 0 && info.feature_dim < (std::int64_t{1} << 24),
                 "{}: feature_dim = {} is invalid", file, info.feature_dim);
  check_num_classes(file, info.num_classes, info.num_nodes);
  if (f.exists("/node/feat")) info.feature_dtype = f.feature_dtype("/node/feat");
  std::error_code ec;
  info.file_bytes = static_cast<std::int64_t>(std::filesystem::file_size(f.path(), ec));
  return info;
}

// /node/feat must be [num_nodes, feature_dim].
void check_feature_shape(const h5::File& f, const DatasetInfo& info) {
  TESSEL_EXPECTS(
      f.dims("/node/feat") == std::vector<std::int64_t>({info.num_nodes, info.feature_dim}),
      "{}: /node/feat has the wrong shape (expected [{}, {}])", f.path().string(), info.num_nodes,
      info.feature_dim);
}

void check_split(const std::string& file, const std::string& which, const std::vector<NodeId>& ids,
                 std::int64_t num_nodes) {
  const auto bad = first_outside(ids.data(), static_cast<std::int64_t>(ids.size()), 0, num_nodes);
  TESSEL_EXPECTS(bad < 0, "{}: {}[{}] = {} is not a node id (the graph has {} nodes)", file, which,
                 bad, bad < 0 ? 0 : ids[static_cast<std::size_t>(bad)], num_nodes);
}

// A node in two splits (or twice in one) is a broken split: it would be trained on and
// evaluated on. Names the split, its position and the node.
void check_splits_disjoint(const std::string& file, const std::vector<NodeId>* splits[3],
                           const char* const names[3], std::int64_t num_nodes) {
  std::vector<std::int8_t> owner(static_cast<std::size_t>(num_nodes), -1);
  for (int s = 0; s < 3; ++s) {
    const auto& ids = *splits[s];
    for (std::size_t i = 0; i < ids.size(); ++i) {
      auto& o = owner[static_cast<std::size_t>(ids[i])];
      TESSEL_EXPECTS(o < 0, "{}: {}[{}] = {}: node {} is already in {}", file, names[s], i, ids[i],
                     ids[i], names[o < 0 ? 0 : o]);
      o = static_cast<std::int8_t>(s);
    }
  }
}

void check_labels(const std::string& file, const std::string& which,
                  const std::vector<std::int64_t>& labels, std::int64_t num_classes) {
  const auto bad =
      first_outside(labels.data(), static_cast<std::int64_t>(labels.size()), -1, num_classes);
  TESSEL_EXPECTS(bad < 0, "{}: {}[{}] = {} is outside [-1, {}) (num_classes = {})", file, which,
                 bad, bad < 0 ? 0 : labels[static_cast<std::size_t>(bad)], num_classes,
                 num_classes);
}

} // namespace

std::int64_t feature_chunk_rows(std::int64_t feature_dim, std::int64_t value_bytes) {
  const std::int64_t row_bytes = std::max<std::int64_t>(feature_dim, 1) * value_bytes;
  return std::max<std::int64_t>(1, (std::int64_t{1} << 20) / row_bytes);
}

namespace detail {

StoreWriter::StoreWriter(const std::filesystem::path& target, FeatureDtype feature_dtype)
    : output_(target), file_(h5::File::create(output_.temp_path())),
      feature_dtype_(feature_dtype) {}

void StoreWriter::write_graph(const Csr& graph) {
  file_.create_group("/graph");
  file_.write("/graph/indptr", graph.indptr.data(),
              {static_cast<std::int64_t>(graph.indptr.size())}, kIndptrDescription);
  file_.write("/graph/indices", graph.indices.data(), {graph.num_edges()}, kIndicesDescription);
}

void StoreWriter::begin_features(std::int64_t num_nodes, std::int64_t feature_dim) {
  feature_dim_ = feature_dim;
  file_.create_group("/node");
  if (feature_dtype_ == FeatureDtype::float32) {
    file_.create_dataset<float>("/node/feat", {num_nodes, feature_dim}, kFeatDescription,
                                feature_chunk_rows(feature_dim));
  } else {
    file_.create_feature_dataset(
        "/node/feat", {num_nodes, feature_dim}, feature_dtype_,
        fmt::format("Node features, {} [num_nodes, feature_dim] (rounded to nearest even from "
                    "float32; readers widen them to float32); row v belongs to node v. Chunked "
                    "by rows so a row range can be read alone.",
                    to_string(feature_dtype_)),
        feature_chunk_rows(feature_dim, stored_bytes(feature_dtype_)));
  }
}

void StoreWriter::write_feature_rows(std::int64_t begin, const float* rows, std::int64_t count) {
  if (feature_dim_ == 0 || count == 0) return;
  if (feature_dtype_ == FeatureDtype::float32) {
    file_.write_rows("/node/feat", begin, rows, count);
    return;
  }
  const std::int64_t values = count * feature_dim_;
  narrowed_.resize(static_cast<std::size_t>(values));
  const std::int64_t bad = narrow_features(rows, narrowed_.data(), values, feature_dtype_);
  if (bad >= 0)
    fail_not_representable(output_name(output_.temp_path()).string() + ": /node/feat",
                           begin + bad / feature_dim_, bad % feature_dim_,
                           rows[static_cast<std::size_t>(bad)], feature_dtype_);
  file_.write_rows_stored("/node/feat", begin, narrowed_.data(), count);
}

void StoreWriter::write_labels(const std::vector<std::int64_t>& labels) {
  file_.create_group("/node");
  file_.write("/node/label", labels, kLabelDescription);
}

void StoreWriter::write_split(const std::string& which, const std::vector<NodeId>& ids) {
  file_.create_group("/split");
  file_.write("/split/" + which, ids, split_description(which));
}

void StoreWriter::commit(const DatasetInfo& info) {
  file_.set_attr("format", std::string(kStoreFormat));
  file_.set_attr("version", std::int64_t{kStoreVersion});
  file_.set_attr("name", info.name);
  file_.set_attr("num_nodes", info.num_nodes);
  file_.set_attr("num_edges", info.num_edges);
  file_.set_attr("num_classes", info.num_classes);
  file_.set_attr("feature_dim", info.feature_dim);
  file_.set_attr("directed", std::int64_t{info.directed ? 1 : 0});
  file_.set_attr("description", std::string(kRootDescription));
  file_.close();
  output_.commit();
}

} // namespace detail

void Dataset::validate(const std::string& what) const {
  TESSEL_EXPECTS(num_nodes >= 0 && num_classes >= 0 && feature_dim >= 0,
                 "{}: negative size (nodes {}, classes {}, features {})", what, num_nodes,
                 num_classes, feature_dim);
  TESSEL_EXPECTS(graph.num_rows == num_nodes && graph.num_cols == num_nodes,
                 "{}: graph is {}x{}, expected {}x{} (num_nodes)", what, graph.num_rows,
                 graph.num_cols, num_nodes, num_nodes);
  graph.validate(what + " graph");
  TESSEL_EXPECTS(
      features.empty() || static_cast<std::int64_t>(features.size()) == num_nodes * feature_dim,
      "{}: {} feature values, expected {} x {}", what, features.size(), num_nodes, feature_dim);
  TESSEL_EXPECTS(static_cast<std::int64_t>(labels.size()) == num_nodes,
                 "{}: {} labels for {} nodes", what, labels.size(), num_nodes);
  check_labels(what, "labels", labels, num_classes);
  check_split(what, "train", train, num_nodes);
  check_split(what, "valid", valid, num_nodes);
  check_split(what, "test", test, num_nodes);
  check_num_classes(what, num_classes, num_nodes);
  if (!features.empty()) check_feature_values(what, features.data(), 0, num_nodes, feature_dim);
  const std::vector<NodeId>* splits[3] = {&train, &valid, &test};
  const char* const names[3] = {"train", "valid", "test"};
  check_splits_disjoint(what, splits, names, num_nodes);
  if (link.present()) check_link_splits(what, link, graph, directed, num_nodes);
}

void write_store(const Dataset& data, const std::filesystem::path& path,
                 FeatureDtype feature_dtype) {
  data.validate("dataset " + data.name);
  TESSEL_EXPECTS(!data.features.empty() || data.feature_dim == 0 || data.num_nodes == 0,
                 "write_store: dataset {} has no features loaded", data.name);
  detail::StoreWriter writer(path, feature_dtype);
  writer.write_graph(data.graph);
  writer.write_labels(data.labels);
  writer.begin_features(data.num_nodes, data.feature_dim);
  // Row blocks keep HDF5's conversion buffers small for big feature matrices.
  const std::int64_t block =
      std::max<std::int64_t>(1, (64 << 20) / std::max<std::int64_t>(1, data.feature_dim * 4));
  for (std::int64_t r = 0; r < data.num_nodes; r += block)
    writer.write_feature_rows(r, data.features.data() + r * data.feature_dim,
                              std::min(block, data.num_nodes - r));
  writer.write_split("train", data.train);
  writer.write_split("valid", data.valid);
  writer.write_split("test", data.test);
  writer.write_link(data.link);
  DatasetInfo info;
  info.name = data.name;
  info.num_nodes = data.num_nodes;
  info.num_edges = data.num_edges();
  info.num_classes = data.num_classes;
  info.feature_dim = data.feature_dim;
  info.directed = data.directed;
  writer.commit(info);
}

Dataset read_store(const std::filesystem::path& path, const ReadOptions& options) {
  const auto f = h5::File::open_read(path);
  const std::string file = path.string();
  const DatasetInfo info = read_header(f);
  Dataset data;
  data.name = info.name;
  data.num_nodes = info.num_nodes;
  data.num_classes = info.num_classes;
  data.feature_dim = info.feature_dim;
  data.directed = info.directed;
  data.graph.num_rows = data.graph.num_cols = info.num_nodes;
  if (options.graph || f.exists("/link")) {
    data.graph.indptr = f.read<EdgeId>("/graph/indptr", {info.num_nodes + 1});
    f.read_to("/graph/indices", data.graph.indices, {info.num_edges});
    data.graph.validate(file + " /graph");
  } else {
    data.graph.indptr.clear(); // left on disk: no offsets at all
  }
  data.labels = f.read<std::int64_t>("/node/label", {info.num_nodes});
  check_labels(file, "/node/label", data.labels, info.num_classes);
  check_feature_shape(f, info);
  if (options.features) {
    data.features.resize(static_cast<std::size_t>(info.num_nodes * info.feature_dim));
    f.read_into("/node/feat", data.features.data(), info.num_nodes * info.feature_dim);
    check_feature_values(file, data.features.data(), 0, info.num_nodes, info.feature_dim);
  }
  for (const char* which : {"train", "valid", "test"}) {
    const std::string name = std::string("/split/") + which;
    TESSEL_EXPECTS(f.dims(name).size() == 1, "{}: {} is not 1-D", file, name);
    auto ids = f.read<NodeId>(name);
    check_split(file, name, ids, info.num_nodes);
    (which[0] == 't' ? (which[1] == 'r' ? data.train : data.test) : data.valid) = std::move(ids);
  }
  const std::vector<NodeId>* splits[3] = {&data.train, &data.valid, &data.test};
  const char* const names[3] = {"/split/train", "/split/valid", "/split/test"};
  check_splits_disjoint(file, splits, names, info.num_nodes);
  data.link = detail::read_link(f, info.num_nodes);
  if (data.link.present())
    check_link_splits(file, data.link, data.graph, data.directed, info.num_nodes);
  return data;
}

DatasetInfo read_store_info(const std::filesystem::path& path) {
  const auto f = h5::File::open_read(path);
  DatasetInfo info = read_header(f);
  const std::string file = path.string();
  const auto expect = [&](const std::string& name, std::vector<std::int64_t> dims) {
    const auto got = f.dims(name);
    TESSEL_EXPECTS(got == dims, "{}: {} has the wrong shape for {} nodes and {} edges", file, name,
                   info.num_nodes, info.num_edges);
  };
  expect("/graph/indptr", {info.num_nodes + 1});
  expect("/graph/indices", {info.num_edges});
  expect("/node/feat", {info.num_nodes, info.feature_dim});
  expect("/node/label", {info.num_nodes});
  std::int64_t* sizes[] = {&info.num_train, &info.num_valid, &info.num_test};
  int i = 0;
  for (const char* which : {"/split/train", "/split/valid", "/split/test"}) {
    const auto d = f.dims(which);
    TESSEL_EXPECTS(d.size() == 1, "{}: {} is not 1-D", file, which);
    *sizes[i++] = d[0];
  }
  return info;
}

std::vector<float> read_feature_rows(const std::filesystem::path& path, std::int64_t begin,
                                     std::int64_t end) {
  const auto f = h5::File::open_read(path);
  const DatasetInfo info = read_header(f);
  check_feature_shape(f, info);
  std::vector<float> rows;
  f.read_rows("/node/feat", begin, end, rows);
  check_feature_values(path.string(), rows.data(), begin, end - begin, info.feature_dim);
  return rows;
}

void check_store_features(const std::filesystem::path& path) {
  const auto f = h5::File::open_read(path);
  const DatasetInfo info = read_header(f);
  check_feature_shape(f, info);
  const std::int64_t block = std::max<std::int64_t>(
      1, (std::int64_t{32} << 20) / std::max<std::int64_t>(1, 4 * info.feature_dim));
  std::vector<float> rows;
  // An empty read still checks the element type (integer features are refused).
  f.read_rows("/node/feat", 0, 0, rows);
  for (std::int64_t r = 0; r < info.num_nodes; r += block) {
    const std::int64_t end = std::min(info.num_nodes, r + block);
    f.read_rows("/node/feat", r, end, rows);
    check_feature_values(path.string(), rows.data(), r, end - r, info.feature_dim);
  }
}

std::int64_t first_non_finite(const float* values, std::int64_t count) {
  std::int64_t first = std::numeric_limits<std::int64_t>::max();
#pragma omp parallel for reduction(min : first) schedule(static) if (count > kParallelMin)
  for (std::int64_t i = 0; i < count; ++i)
    if (!std::isfinite(values[i])) first = std::min(first, i);
  return first == std::numeric_limits<std::int64_t>::max() ? -1 : first;
}

void check_feature_values(const std::string& what, const float* rows, std::int64_t first_row,
                          std::int64_t num_rows, std::int64_t feature_dim) {
  if (feature_dim <= 0 || num_rows <= 0) return;
  const std::int64_t bad = first_non_finite(rows, num_rows * feature_dim);
  TESSEL_EXPECTS(bad < 0, "{}: /node/feat row {} column {} is {}, expected a finite number", what,
                 first_row + bad / feature_dim, bad % feature_dim,
                 bad < 0 ? 0.0f : rows[static_cast<std::size_t>(bad)]);
}

DegreeStats degree_stats(const Csr& graph) {
  DegreeStats s;
  if (graph.num_rows == 0) return s;
  std::int64_t lo = std::numeric_limits<std::int64_t>::max(), hi = 0, zero = 0;
  const std::int64_t n = graph.num_rows;
#pragma omp parallel for reduction(min : lo) reduction(max : hi) reduction(+ : zero) schedule(static) if (n > kParallelMin)
  for (std::int64_t v = 0; v < n; ++v) {
    const std::int64_t d = graph.indptr[v + 1] - graph.indptr[v];
    lo = std::min(lo, d);
    hi = std::max(hi, d);
    zero += d == 0;
  }
  s.min = lo;
  s.max = hi;
  s.zero = zero;
  s.mean = static_cast<double>(graph.num_edges()) / static_cast<double>(n);
  return s;
}

} // namespace tessel::datasets
