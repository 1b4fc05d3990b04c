// ogbl folders into a link store: the CSV graph and features through the OGB reader, the .pt
// edge splits through the torch reader, every id checked, then the /link group.
#include "ogb_input.hpp"
#include "store_writer.hpp"
#include "torch_pt.hpp"

#include "tessel/core/activity.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/timer.hpp"
#include "tessel/datasets/ogb_link.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace tessel::datasets {

namespace fs = std::filesystem;
using detail::OgbInputs;
using detail::PtFile;

namespace {

const char* const kSplitNames[3] = {"train", "valid", "test"};

constexpr const char* kLinkDescription =
    "Link prediction splits. {train,valid,test}_pos: int64 [n, 2] positive edges (src, dst). "
    "valid/test negatives: {valid,test}_neg int64 [m, 2] pairs, or {valid,test}_neg_dst int64 "
    "[n, K] negative destinations of the source of each positive. Optional {split}_weight float32 "
    "[n] and {split}_year int64 [n], aligned with the _pos rows. /graph is the message-passing "
    "graph (for OGB folders: the training edges).";

// The split folder: --split, else the only folder under split/.
fs::path split_folder(const fs::path& dir, const OgbOptions& options, bool must) {
  std::error_code ec;
  const fs::path root = dir / "split";
  if (!fs::is_directory(root, ec)) {
    TESSEL_EXPECTS(!must,
                   "{}: no such folder; an ogbl folder has split/<name>/{{train,valid,test}}.pt",
                   root.string());
    return {};
  }
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(root, ec))
    if (entry.is_directory()) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  if (!options.split.empty())
    return std::find(names.begin(), names.end(), options.split) != names.end()
               ? root / options.split
               : fs::path();
  if (names.size() != 1) return {};
  return root / names[0];
}

// One split file's edges, checked: positives, negatives, weights and years.
struct EdgeSplit {
  std::vector<std::int64_t> pos;     // [n, 2] row-major
  std::vector<std::int64_t> neg;     // [m, 2] (pair negatives)
  std::vector<std::int64_t> neg_dst; // [n, K] (per-source negatives)
  std::int64_t k = 0;
  std::optional<std::vector<float>> weight;
  std::optional<std::vector<std::int64_t>> year;
  std::int64_t rows() const { return static_cast<std::int64_t>(pos.size() / 2); }
};

std::string keys_of(const PtFile& pt) {
  std::string s;
  for (const auto& k : pt.keys())
    s += (s.empty() ? "" : ", ") + k;
  return s.empty() ? "nothing" : s;
}

// Every value of `ids` is a node id; else an error naming the file, key, row (and column).
void check_ids(const PtFile& pt, const std::string& key, const std::vector<std::int64_t>& ids,
               std::int64_t columns, std::int64_t n, const std::string& count_file) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int64_t v = ids[i];
    if (v >= 0 && v < n) continue;
    const auto row = static_cast<std::int64_t>(i) / columns;
    const std::string where =
        columns == 1 ? fmt::format("row {}", row)
                     : fmt::format("row {} column {}", row, static_cast<std::int64_t>(i) % columns);
    TESSEL_FAIL("{}: {} {}: node {} is not a node id ({} gives {} nodes, ids 0 to {})",
                pt.path().string(), key, where, v, count_file, n, n - 1);
  }
}

// A tensor of exactly `rank` dims whose dims[1] (rank 2) is `columns` (0: any); returns rows.
std::int64_t expect_shape(const PtFile& pt, const std::string& key, std::size_t rank,
                          std::int64_t columns, const char* expected) {
  const auto& t = pt.info(key);
  const bool ok = t.shape.size() == rank && (rank == 1 || columns == 0 || t.shape[1] == columns);
  TESSEL_EXPECTS(ok, "{}: \"{}\" is {}, expected {}", pt.path().string(), key, t.describe(),
                 expected);
  return t.shape[0];
}

// A per-edge value ([n] or [n, 1]) aligned with n positives.
void expect_per_edge(const PtFile& pt, const std::string& key, std::int64_t n) {
  const auto& t = pt.info(key);
  const bool ok =
      (t.shape.size() == 1 || (t.shape.size() == 2 && t.shape[1] == 1)) && t.shape[0] == n;
  TESSEL_EXPECTS(ok, "{}: \"{}\" is {}, expected [{}] (one value per positive edge)",
                 pt.path().string(), key, t.describe(), n);
}

EdgeSplit read_split(const fs::path& file, int which, std::int64_t n, const std::string& count_file,
                     ConvertReport& report) {
  const PtFile pt(file);
  std::error_code ec;
  report.input_bytes += static_cast<std::int64_t>(fs::file_size(file, ec));
  EdgeSplit s;
  if (pt.has("edge")) {
    expect_shape(pt, "edge", 2, 2, "[N, 2] (one edge per row)");
    s.pos = pt.read_int64("edge");
    check_ids(pt, "edge", s.pos, 2, n, count_file);
  } else if (pt.has("source_node") && pt.has("target_node")) {
    const auto rows = expect_shape(pt, "source_node", 1, 0, "[N]");
    const auto rows_t = expect_shape(pt, "target_node", 1, 0, "[N]");
    TESSEL_EXPECTS(rows == rows_t, "{}: {} source_node but {} target_node, expected as many",
                   file.string(), rows, rows_t);
    const auto src = pt.read_int64("source_node");
    const auto dst = pt.read_int64("target_node");
    check_ids(pt, "source_node", src, 1, n, count_file);
    check_ids(pt, "target_node", dst, 1, n, count_file);
    s.pos.resize(static_cast<std::size_t>(2 * rows));
    for (std::int64_t i = 0; i < rows; ++i) {
      s.pos[static_cast<std::size_t>(2 * i)] = src[static_cast<std::size_t>(i)];
      s.pos[static_cast<std::size_t>(2 * i + 1)] = dst[static_cast<std::size_t>(i)];
    }
  } else {
    TESSEL_FAIL("{}: holds {}; expected \"edge\" [N, 2] (collab, ppa, ddi) or \"source_node\" and "
                "\"target_node\" [N] (citation2)",
                file.string(), keys_of(pt));
  }
  const std::int64_t rows = s.rows();
  if (which > 0) {
    if (pt.has("edge_neg")) {
      expect_shape(pt, "edge_neg", 2, 2, "[M, 2] (one negative edge per row)");
      s.neg = pt.read_int64("edge_neg");
      check_ids(pt, "edge_neg", s.neg, 2, n, count_file);
    } else if (pt.has("target_node_neg")) {
      const auto& t = pt.info("target_node_neg");
      TESSEL_EXPECTS(t.shape.size() == 2 && t.shape[0] == rows && t.shape[1] >= 1,
                     "{}: \"target_node_neg\" is {}, expected [{}, K] (K negative targets for the "
                     "source of each positive)",
                     file.string(), t.describe(), rows);
      s.k = t.shape[1];
      s.neg_dst = pt.read_int64("target_node_neg");
      check_ids(pt, "target_node_neg", s.neg_dst, s.k, n, count_file);
    } else {
      TESSEL_FAIL("{}: holds {}; a {} split needs its fixed negatives: \"edge_neg\" [M, 2] "
                  "(collab, ppa, ddi) or \"target_node_neg\" [N, K] (citation2)",
                  file.string(), keys_of(pt), kSplitNames[which]);
    }
  }
  if (pt.has("weight")) {
    expect_per_edge(pt, "weight", rows);
    s.weight = pt.read_float("weight");
  }
  if (pt.has("year")) {
    expect_per_edge(pt, "year", rows);
    s.year = pt.read_int64("year");
  }
  return s;
}

std::string default_metric(const std::string& name, bool per_source) {
  const auto has = [&](const char* what) { return name.find(what) != std::string::npos; };
  if (has("citation2")) return "mrr";
  if (has("collab")) return "hits@50";
  if (has("ddi")) return "hits@20";
  if (has("ppa")) return "hits@100";
  if (has("vessel")) return "auc";
  return per_source ? "mrr" : "auc";
}

void check_metric(const std::string& metric, bool per_source) {
  bool ok = metric == "auc" || metric == "mrr";
  if (metric.rfind("hits@", 0) == 0 && metric.size() > 5 && metric.size() < 12)
    ok = std::all_of(metric.begin() + 5, metric.end(),
                     [](char c) { return c >= '0' && c <= '9'; }) &&
         std::stoll(metric.substr(5)) > 0;
  TESSEL_EXPECTS(ok, "--metric {}: expected auc, mrr or hits@K (e.g. hits@50)", metric);
  TESSEL_EXPECTS(per_source == (metric == "mrr"), "--metric {}: {}", metric,
                 per_source ? "the splits give per-source negatives (target_node_neg), which "
                              "are evaluated by mrr"
                            : "mrr needs per-source negatives (target_node_neg); these splits "
                              "give pair negatives (edge_neg)");
}

// The feature rows of the CSV reader, into the store.
class FeatureSink final : public detail::Sink {
public:
  explicit FeatureSink(detail::StoreWriter& writer) : writer_(writer) {}
  void graph(Csr&&) override {}
  void labels(std::vector<std::int64_t>&&) override {}
  void begin_features(std::int64_t n, std::int64_t f) override { writer_.begin_features(n, f); }
  void feature_rows(std::int64_t begin, const float* rows, std::int64_t count) override {
    writer_.write_feature_rows(begin, rows, count);
  }
  void split(int, std::vector<NodeId>&&) override {}

private:
  detail::StoreWriter& writer_;
};

void write_link_group(h5::File& f, const EdgeSplit splits[3], const std::string& metric) {
  f.create_group("/link");
  f.set_attr("source", std::string("ogb"), "/link");
  f.set_attr("metric", metric, "/link");
  f.set_attr("seed", std::int64_t{-1}, "/link");
  f.set_attr("fractions", std::string(), "/link");
  f.set_attr("description", std::string(kLinkDescription), "/link");
  for (int s = 0; s < 3; ++s) {
    const EdgeSplit& e = splits[s];
    const std::string name = kSplitNames[s];
    const char* what = s == 0 ? "training" : s == 1 ? "validation" : "test";
    f.write("/link/" + name + "_pos", e.pos.data(), {e.rows(), 2},
            fmt::format("Positive {} edges, int64 [n, 2]: row = (src, dst).", what));
    if (s > 0 && e.k == 0)
      f.write("/link/" + name + "_neg", e.neg.data(),
              {static_cast<std::int64_t>(e.neg.size() / 2), 2},
              fmt::format("Fixed negative {} edges, int64 [m, 2]: row = (src, dst).", what));
    if (s > 0 && e.k > 0)
      f.write("/link/" + name + "_neg_dst", e.neg_dst.data(), {e.rows(), e.k},
              fmt::format("Negative destinations, int64 [n, K]: row i holds K nodes scored "
                          "against the source of {}_pos row i.",
                          name));
    if (e.weight)
      f.write("/link/" + name + "_weight", e.weight->data(), {e.rows()},
              fmt::format("Weight of each {}_pos edge, float32 [n].", name));
    if (e.year)
      f.write("/link/" + name + "_year", e.year->data(), {e.rows()},
              fmt::format("Year of each {}_pos edge, int64 [n].", name));
  }
}

std::string folder_name(const fs::path& dir) {
  fs::path d = fs::absolute(dir).lexically_normal();
  if (!d.has_filename()) d = d.parent_path();
  return d.filename().string();
}

} // namespace

bool is_ogb_link_folder(const fs::path& dir, const OgbOptions& options) {
  std::error_code ec;
  const fs::path split = split_folder(dir, options, false);
  return !split.empty() && fs::is_regular_file(split / "train.pt", ec);
}

OgbLinkReport convert_ogb_link_folder(const fs::path& dir, const fs::path& out,
                                      const OgbOptions& options, const OgbLinkOptions& link) {
  Stopwatch total;
  OgbLinkReport result;
  ConvertReport& report = result.convert;
  std::error_code ec;
  TESSEL_EXPECTS(fs::is_directory(dir, ec), "{}: no such folder", dir.string());
  const fs::path raw = dir / "raw";
  OgbInputs in;
  in.dir = dir;
  in.name = options.name.empty() ? folder_name(dir) : options.name;
  const auto require = [&](const char* base) {
    fs::path p = detail::ogb_find_table(raw / base);
    TESSEL_EXPECTS(!p.empty(),
                   "{}.csv.gz: no such file (plain .csv is accepted too); an ogbl folder needs "
                   "raw/edge, raw/num-node-list, raw/num-edge-list and split/<name>/"
                   "{{train,valid,test}}.pt",
                   (raw / base).string());
    return p;
  };
  in.edge = require("edge");
  in.num_nodes = require("num-node-list");
  in.num_edges = require("num-edge-list");
  in.feat = detail::ogb_find_table(raw / "node-feat");
  const fs::path split = split_folder(dir, options, true);
  TESSEL_EXPECTS(!split.empty(), "{}: choose the split folder with --split NAME{}",
                 (dir / "split").string(),
                 options.split.empty() ? "" : fmt::format(" (no folder {})", options.split));
  in.split_name = split.filename().string();
  for (int s = 0; s < 3; ++s) {
    in.split[s] = split / (std::string(kSplitNames[s]) + ".pt");
    TESSEL_EXPECTS(fs::is_regular_file(in.split[s], ec),
                   "{}: no such file; an ogbl split folder holds train.pt, valid.pt and test.pt",
                   in.split[s].string());
  }
  report.split = in.split_name;
  DatasetInfo& info = report.info;
  info.name = in.name;
  info.version = kStoreVersion;
  info.directed = options.directed && !options.symmetrize;

  Stopwatch phase;
  const auto end_phase = [&](const char* name) {
    report.phases.emplace_back(name, phase.seconds());
    log::debug("convert: {} took {:.2f} s", name, phase.seconds());
    phase.reset();
  };
  const std::int64_t n = detail::ogb_read_count(in.num_nodes, report);
  const std::int64_t m = detail::ogb_read_count(in.num_edges, report);
  info.num_nodes = n;
  end_phase("counts");

  // The splits first: a bad split file fails before the big files are read.
  EdgeSplit splits[3];
  {
    ScopedActivity activity("reading the split " + in.split_name);
    const std::string count_file = in.num_nodes.filename().string();
    for (int s = 0; s < 3; ++s)
      splits[s] = read_split(in.split[s], s, n, count_file, report);
    TESSEL_EXPECTS((splits[1].k > 0) == (splits[2].k > 0),
                   "{} and {}: one gives pair negatives (edge_neg), the other per-source "
                   "negatives (target_node_neg); expected the same kind",
                   in.split[1].string(), in.split[2].string());
    TESSEL_EXPECTS(splits[1].k == splits[2].k,
                   "{}: {} negatives per source, but {} has {}; expected as many",
                   in.split[2].string(), splits[2].k, in.split[1].string(), splits[1].k);
  }
  const bool per_source = splits[1].k > 0;
  result.metric = link.metric.empty() ? default_metric(in.name, per_source) : link.metric;
  check_metric(result.metric, per_source);
  end_phase("splits");

  detail::StoreWriter writer(out, options.feature_dtype);
  {
    ScopedActivity activity("reading " + in.edge.string());
    Csr graph = detail::ogb_read_edges_csv(in, n, m, report);
    end_phase("edges");
    if (options.symmetrize) {
      graph = symmetrize(graph);
      end_phase("symmetrize");
    }
    info.num_edges = graph.num_edges();
    writer.write_graph(graph);
  }
  writer.write_labels(std::vector<std::int64_t>(static_cast<std::size_t>(n), -1));
  end_phase("write graph");
  if (!in.feat.empty()) {
    ScopedActivity activity("reading " + in.feat.string());
    FeatureSink sink(writer);
    info.feature_dim = detail::ogb_read_features_csv(in, n, sink, report);
  } else {
    result.features = false;
    writer.begin_features(n, 0);
    info.feature_dim = 0;
  }
  end_phase("features");
  for (const char* which : kSplitNames)
    writer.write_split(which, {});
  write_link_group(writer.file(), splits, result.metric);
  result.train_pos = splits[0].rows();
  result.valid_pos = splits[1].rows();
  result.test_pos = splits[2].rows();
  result.neg_per_source = splits[1].k;
  result.valid_neg =
      per_source ? splits[1].rows() : static_cast<std::int64_t>(splits[1].neg.size() / 2);
  result.test_neg =
      per_source ? splits[2].rows() : static_cast<std::int64_t>(splits[2].neg.size() / 2);
  for (const auto& s : splits) {
    result.weight = result.weight || s.weight.has_value();
    result.year = result.year || s.year.has_value();
  }
  writer.commit(info);
  end_phase("close");
  report.info.file_bytes = static_cast<std::int64_t>(fs::file_size(out, ec));
  report.seconds = total.seconds();
  return result;
}

} // namespace tessel::datasets
