// Converters to temporal datasets: PyTorch Geometric Temporal JSON layouts and timestamped edge
// lists (CSV or whitespace, plain or gzip).
#include "tessel/datasets/temporal.hpp"

#include "text_reader.hpp"

#include "tessel/core/error.hpp"
#include "tessel/datasets/json_file.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>

namespace tessel::datasets {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A value as a message shows it: short scalars as written, containers by their kind and size
// (never a megabyte of dump in one error line).
std::string brief(const json& j) {
  if (j.is_array() || j.is_object())
    return fmt::format("an {} of {} entries", j.type_name(), j.size());
  std::string text = j.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

// A key as the summary lists it: as written when it is short plain text, else JSON-escaped
// and cut (a key may hold a newline or a megabyte; the summary stays one line per list).
std::string key_for_summary(const std::string& key) {
  const bool plain = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return c > ' ' && c < 127 && c != '"' && c != ',';
  });
  std::string text = plain ? key : json(key).dump(-1, ' ', true, json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

// Typed access to a parsed JSON document; every refusal names the file and the JSON path.
// Keys beside the ones a layout reads are not an error (real files carry metadata nobody
// planned for): they are collected in `ignored` for the converter's summary.
struct JsonInput {
  std::string file;
  // Keys present but not read, as patterns: "node_ids", "<snapshot>.extra", "nodes[].extra".
  mutable std::set<std::string> ignored;

  // Records every key of `obj` not in `known`, prefixed by `where` ("" at the top level).
  void ignore_others(const json& obj, std::initializer_list<std::string_view> known,
                     const std::string& where) const {
    if (!obj.is_object()) return;
    for (const auto& [k, v] : obj.items())
      if (std::find(known.begin(), known.end(), k) == known.end())
        ignored.insert(where + key_for_summary(k));
  }

  const json& key(const json& obj, const std::string& name, const std::string& where) const {
    TESSEL_EXPECTS(obj.is_object(), "{}: {} is a {}, expected an object", file, where,
                   obj.type_name());
    const auto it = obj.find(name);
    TESSEL_EXPECTS(it != obj.end(), "{}: missing key \"{}\" in {}", file, name, where);
    return *it;
  }
  const json& array(const json& j, const std::string& where) const {
    TESSEL_EXPECTS(j.is_array(), "{}: {} is a {}, expected an array", file, where, j.type_name());
    return j;
  }
  double number(const json& j, const std::string& where) const {
    TESSEL_EXPECTS(j.is_number(), "{}: {} is {}, expected a number", file, where, brief(j));
    const double v = j.get<double>();
    TESSEL_EXPECTS(std::isfinite(v), "{}: {} is not finite", file, where);
    return v;
  }
  NodeId node(const json& j, std::int64_t n, const std::string& where) const {
    const double v = number(j, where);
    TESSEL_EXPECTS(v == std::floor(v) && v >= 0 && v < static_cast<double>(n),
                   "{}: {} = {} is not a node id in [0, {})", file, where, brief(j), n);
    return static_cast<NodeId>(v);
  }
  // A list of numbers of length `expect` (any length when expect < 0).
  std::vector<double> numbers(const json& j, std::int64_t expect, const std::string& where) const {
    array(j, where);
    TESSEL_EXPECTS(expect < 0 || static_cast<std::int64_t>(j.size()) == expect,
                   "{}: {} has {} values, expected {} (ragged series)", file, where, j.size(),
                   expect);
    std::vector<double> out;
    out.reserve(j.size());
    for (std::size_t i = 0; i < j.size(); ++i)
      out.push_back(number(j[i], fmt::format("{}[{}]", where, i)));
    return out;
  }
};

std::string keys_of(const json& j) {
  if (!j.is_object())
    return fmt::format("({} {}, not an object)", j.is_array() ? "an" : "a", j.type_name());
  std::string out;
  for (const auto& [k, v] : j.items()) {
    if (!out.empty()) out += ", ";
    if (out.size() > 200) return out + "...";
    out += k;
  }
  return out.empty() ? "(none)" : out;
}

// A key of the one-object-per-snapshot layout that names a snapshot: digits only.
bool is_snapshot_key(std::string_view k) {
  return !k.empty() && std::all_of(k.begin(), k.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Edges (src, dst, weight) -> one canonical in-neighbor snapshot.
Csr snapshot_from_edges(std::int64_t n, const std::vector<NodeId>& src,
                        const std::vector<NodeId>& dst, const std::vector<float>& weight) {
  Csr s;
  s.num_rows = s.num_cols = n;
  s.indptr.assign(static_cast<std::size_t>(n + 1), 0);
  for (NodeId v : dst) ++s.indptr[v + 1];
  for (std::int64_t v = 0; v < n; ++v) s.indptr[v + 1] += s.indptr[v];
  s.indices.resize(src.size());
  s.values.resize(src.size());
  std::vector<EdgeId> fill(s.indptr.begin(), s.indptr.end() - 1);
  for (std::size_t e = 0; e < src.size(); ++e) {
    const EdgeId at = fill[dst[e]]++;
    s.indices[at] = src[e];
    s.values[at] = weight[e];
  }
  canonicalize_snapshot(s);
  return s;
}

// Reads a list of [src, dst] pairs (and optional weights) into a snapshot.
Csr read_edge_pairs(const JsonInput& in, const json& edges, const json* weights, std::int64_t n,
                    const std::string& where) {
  in.array(edges, where);
  std::vector<NodeId> src, dst;
  std::vector<float> w;
  std::vector<double> given;
  if (weights) given = in.numbers(*weights, static_cast<std::int64_t>(edges.size()), where + " weights");
  for (std::size_t e = 0; e < edges.size(); ++e) {
    const std::string at = fmt::format("{}[{}]", where, e);
    const json& pair = in.array(edges[e], at);
    TESSEL_EXPECTS(pair.size() == 2, "{}: {} has {} entries, expected [src, dst]", in.file, at,
                   pair.size());
    src.push_back(in.node(pair[0], n, at + "[0]"));
    dst.push_back(in.node(pair[1], n, at + "[1]"));
    const float weight = weights ? static_cast<float>(given[e]) : 1.0f;
    TESSEL_EXPECTS(weight >= 0, "{}: {} has negative weight {}", in.file, at, weight);
    w.push_back(weight);
  }
  return snapshot_from_edges(n, src, dst, w);
}

void set_split(TemporalDataset& d, const TemporalConvertOptions& o, const std::string& file) {
  const std::int64_t T = d.num_snapshots();
  const double valid_frac = o.valid_frac.value_or(0.0);
  TESSEL_EXPECTS(o.train_frac > 0 && valid_frac >= 0 && o.train_frac + valid_frac <= 1,
                 "{}: --train-frac {} and --valid-frac {} must be positive and sum to <= 1", file,
                 o.train_frac, valid_frac);
  auto n_train = static_cast<std::int64_t>(std::floor(o.train_frac * static_cast<double>(T)));
  auto n_valid = static_cast<std::int64_t>(std::floor(valid_frac * static_cast<double>(T)));
  TESSEL_EXPECTS(n_train >= 1, "{}: {} snapshots leave no training snapshot at --train-frac {}",
                 file, T, o.train_frac);
  // No --valid-frac: the end of a long enough training span validates.
  if (!o.valid_frac && n_train >= kMinSpanForValid) {
    n_valid = std::max<std::int64_t>(
        1, std::llround(kDefaultValidShare * static_cast<double>(n_train)));
    n_train -= n_valid;
  }
  d.train = {0, n_train};
  d.valid = {n_train, std::min(T, n_train + n_valid)};
  d.test = {d.valid.end, T};
}

// Every value a non-negative integer (case counts, visits): the series a recipe standardizes.
bool count_series(const std::vector<std::vector<double>>& series) {
  for (const auto& step : series)
    for (const double v : step)
      if (!(v >= 0 && v == std::floor(v))) return false;
  return true;
}

void standardize_series(std::vector<std::vector<double>>& series) {
  if (series.empty()) return;
  const std::size_t T = series.size(), N = series[0].size();
  for (std::size_t v = 0; v < N; ++v) {
    double mean = 0, sq = 0;
    for (std::size_t t = 0; t < T; ++t) mean += series[t][v];
    mean /= static_cast<double>(T);
    for (std::size_t t = 0; t < T; ++t) sq += (series[t][v] - mean) * (series[t][v] - mean);
    // Population deviation, as numpy's std; a constant series becomes zeros.
    const double sd = std::sqrt(sq / static_cast<double>(T)) + 1e-10;
    for (std::size_t t = 0; t < T; ++t) series[t][v] = (series[t][v] - mean) / sd;
  }
}

// Series layouts: snapshot s uses the graph of step s, features = the `lags` values from step s
// on, target = the value at step s + lags (PyTorch Geometric Temporal's convention).
TemporalDataset lagged_dataset(const std::string& file, std::vector<std::vector<double>> series,
                               const std::vector<Csr>& graphs, const TemporalConvertOptions& o) {
  const auto T0 = static_cast<std::int64_t>(series.size());
  TESSEL_EXPECTS(o.lags >= 1, "{}: --lags must be at least 1, got {}", file, o.lags);
  TESSEL_EXPECTS(T0 > o.lags, "{}: a series of {} steps is too short for --lags {}", file, T0,
                 o.lags);
  TemporalDataset d;
  d.series = {true, o.standardize, count_series(series)};
  if (o.standardize) standardize_series(series);
  d.num_nodes = static_cast<std::int64_t>(series[0].size());
  d.feature_dim = o.lags;
  const std::int64_t T = T0 - o.lags, N = d.num_nodes;
  for (std::int64_t s = 0; s < T; ++s) {
    d.snapshots.push_back(graphs[graphs.size() == 1 ? 0 : static_cast<std::size_t>(s)]);
    for (std::int64_t v = 0; v < N; ++v)
      for (int j = 0; j < o.lags; ++j)
        d.features.push_back(static_cast<float>(series[s + j][v]));
    for (std::int64_t v = 0; v < N; ++v)
      d.targets.push_back(static_cast<float>(series[s + o.lags][v]));
  }
  set_split(d, o, file);
  return d;
}

std::vector<std::vector<double>> read_series(const JsonInput& in, const json& j,
                                             const std::string& where) {
  in.array(j, where);
  TESSEL_EXPECTS(!j.empty(), "{}: {} is empty", in.file, where);
  std::vector<std::vector<double>> out;
  std::int64_t n = -1;
  for (std::size_t t = 0; t < j.size(); ++t) {
    out.push_back(in.numbers(j[t], n, fmt::format("{}[{}]", where, t)));
    n = static_cast<std::int64_t>(out.back().size());
  }
  TESSEL_EXPECTS(n > 0, "{}: {}[0] has no nodes", in.file, where);
  return out;
}

TemporalDataset dynamic_edges_layout(const JsonInput& in, const json& root,
                                     const TemporalConvertOptions& o) {
  auto series = read_series(in, in.key(root, "y", "the top level"), "y");
  const auto T0 = static_cast<std::int64_t>(series.size());
  const auto N = static_cast<std::int64_t>(series[0].size());
  if (root.contains("time_periods")) {
    const double tp = in.number(root["time_periods"], "time_periods");
    TESSEL_EXPECTS(tp == static_cast<double>(T0), "{}: time_periods is {}, but y has {} steps",
                   in.file, tp, T0);
  }
  const json& mapping = in.key(root, "edge_mapping", "the top level");
  const json& index = in.key(mapping, "edge_index", "edge_mapping");
  const json* weights = mapping.contains("edge_weight") ? &mapping["edge_weight"] : nullptr;
  in.ignore_others(root, {"y", "time_periods", "edge_mapping"}, "");
  in.ignore_others(mapping, {"edge_index", "edge_weight"}, "edge_mapping.");
  // Steps beyond y's are not read: a per-step map with more entries than y has steps.
  for (const json* per_step : {&index, weights})
    if (per_step && per_step->is_object())
      for (const auto& [k, v] : per_step->items()) {
        std::int64_t step = -1;
        const auto [end, ec] = std::from_chars(k.data(), k.data() + k.size(), step);
        if (ec != std::errc() || end != k.data() + k.size() || step < 0 || step >= T0 ||
            std::to_string(step) != k)
          in.ignored.insert((per_step == &index ? "edge_mapping.edge_index."
                                                : "edge_mapping.edge_weight.") +
                            key_for_summary(k));
      }
  std::vector<Csr> graphs;
  for (std::int64_t t = 0; t < T0; ++t) {
    const std::string name = std::to_string(t);
    const json& edges = in.key(index, name, "edge_mapping.edge_index");
    const json* w = weights ? &in.key(*weights, name, "edge_mapping.edge_weight") : nullptr;
    graphs.push_back(read_edge_pairs(in, edges, w, N, "edge_mapping.edge_index." + name));
  }
  return lagged_dataset(in.file, std::move(series), graphs, o);
}

TemporalDataset static_signal_layout(const JsonInput& in, const json& root,
                                     const TemporalConvertOptions& o) {
  const char* signal = root.contains("FX") ? "FX" : "X";
  auto series = read_series(in, root[signal], signal);
  const auto N = static_cast<std::int64_t>(series[0].size());
  const json* w = root.contains("weights") ? &root["weights"] : nullptr;
  // With both FX and X present, FX is the signal and X is listed as ignored.
  in.ignore_others(root, {"edges", "weights", signal}, "");
  const std::vector<Csr> graphs = {read_edge_pairs(in, root["edges"], w, N, "edges")};
  return lagged_dataset(in.file, std::move(series), graphs, o);
}

TemporalDataset per_snapshot_layout(const JsonInput& in, const json& root,
                                    const TemporalConvertOptions& o) {
  TemporalDataset d;
  // PyTorch Geometric Temporal's files of this layout (Twitter tennis) carry the snapshot count
  // as "time_periods" beside the snapshots, each snapshot its own "index", and other metadata
  // (node_ids, a map from a name to a node id) that is not read. Every key of digits is a
  // snapshot; they must be numbered 0..T-1.
  const bool counted = root.contains("time_periods");
  std::int64_t T = 0;
  for (const auto& [k, v] : root.items()) {
    if (is_snapshot_key(k))
      ++T;
    else if (k != "time_periods")
      in.ignored.insert(key_for_summary(k));
  }
  if (counted) {
    const double tp = in.number(root["time_periods"], "time_periods");
    TESSEL_EXPECTS(tp == static_cast<double>(T), "{}: time_periods is {}, but the file holds {} "
                   "snapshots", in.file, tp, T);
  }
  for (std::int64_t t = 0; t < T; ++t) {
    const std::string name = std::to_string(t);
    const json& snap = in.key(root, name, "the top level (snapshots must be numbered 0..T-1)");
    TESSEL_EXPECTS(snap.is_object(), "{}: snapshot \"{}\" is {}, expected an object with edges, "
                   "X and y", in.file, name, brief(snap));
    in.ignore_others(snap, {"index", "edges", "weights", "X", "y"}, "<snapshot>.");
    if (snap.contains("index")) {
      const double index = in.number(snap["index"], name + ".index");
      TESSEL_EXPECTS(index == static_cast<double>(t), "{}: snapshot \"{}\" has index {}, "
                     "expected {}", in.file, name, index, t);
    }
    const json& x = in.array(in.key(snap, "X", name), name + ".X");
    if (t == 0) {
      d.num_nodes = static_cast<std::int64_t>(x.size());
      TESSEL_EXPECTS(d.num_nodes > 0, "{}: 0.X has no rows", in.file);
      d.feature_dim = static_cast<std::int64_t>(in.array(x[0], "0.X[0]").size());
    }
    TESSEL_EXPECTS(static_cast<std::int64_t>(x.size()) == d.num_nodes,
                   "{}: {}.X has {} rows, expected {} (ragged series)", in.file, name, x.size(),
                   d.num_nodes);
    for (std::size_t v = 0; v < x.size(); ++v)
      for (double f : in.numbers(x[v], d.feature_dim, fmt::format("{}.X[{}]", name, v)))
        d.features.push_back(static_cast<float>(f));
    for (double y : in.numbers(in.key(snap, "y", name), d.num_nodes, name + ".y"))
      d.targets.push_back(static_cast<float>(y));
    const json* w = snap.contains("weights") ? &snap["weights"] : nullptr;
    d.snapshots.push_back(
        read_edge_pairs(in, in.key(snap, "edges", name), w, d.num_nodes, name + ".edges"));
  }
  set_split(d, o, in.file);
  return d;
}

// The node-link graph's links as one snapshot (both directions unless "directed" is true);
// `index` maps each node's id (dumped) to its row.
Csr node_link_graph(const JsonInput& in, const json& root,
                    const std::map<std::string, NodeId>& index) {
  const auto N = static_cast<std::int64_t>(index.size());
  std::vector<NodeId> src, dst;
  std::vector<float> w;
  const json& links = in.array(root["links"], "links");
  for (std::size_t e = 0; e < links.size(); ++e) {
    const std::string at = fmt::format("links[{}]", e);
    in.ignore_others(links[e], {"source", "target", "weight"}, "links[].");
    for (const char* end : {"source", "target"}) {
      const json& value = in.key(links[e], end, at);
      const auto it = index.find(value.dump());
      TESSEL_EXPECTS(it != index.end(), "{}: {}.{} = {} is not the id of a node", in.file, at,
                     end, brief(value));
      (end[0] == 's' ? src : dst).push_back(it->second);
    }
    w.push_back(links[e].contains("weight")
                    ? static_cast<float>(in.number(links[e]["weight"], at + ".weight"))
                    : 1.0f);
    TESSEL_EXPECTS(w.back() >= 0, "{}: {} has negative weight", in.file, at);
  }
  bool directed = false;
  if (root.contains("directed")) {
    TESSEL_EXPECTS(root["directed"].is_boolean(), "{}: directed is {}, expected true or false",
                   in.file, brief(root["directed"]));
    directed = root["directed"].get<bool>();
  }
  in.ignore_others(root, {"nodes", "links", "directed"}, "");
  if (!directed) {
    const std::size_t m = src.size();
    for (std::size_t e = 0; e < m; ++e)
      if (src[e] != dst[e]) {
        src.push_back(dst[e]);
        dst.push_back(src[e]);
        w.push_back(w[e]);
      }
  }
  return snapshot_from_edges(N, src, dst, w);
}

std::map<std::string, NodeId> node_link_ids(const JsonInput& in, const json& nodes) {
  std::map<std::string, NodeId> index;  // node ids may be numbers or strings
  for (std::size_t v = 0; v < nodes.size(); ++v) {
    const std::string at = fmt::format("nodes[{}]", v);
    const std::string id = in.key(nodes[v], "id", at).dump();
    in.ignore_others(nodes[v], {"id", "X", "y"}, "nodes[].");
    TESSEL_EXPECTS(index.emplace(id, static_cast<NodeId>(v)).second, "{}: {} repeats id {}",
                   in.file, at, brief(nodes[v]["id"]));
  }
  return index;
}

// Node-link files whose nodes keep their features as named series, "X": {"name": [T values],
// ...} beside "y": [T values] (PyTorch Geometric Temporal's Montevideo bus data). As that
// loader does, snapshot s's features are the `lags` values from step s on of each chosen series
// (o.features in the order given, else every series in name order), and its target is y at step
// s + lags; --standardize z-scores each node's series and targets first.
TemporalDataset named_series_layout(const JsonInput& in, const json& root, const json& nodes,
                                    const TemporalConvertOptions& o) {
  const auto N = static_cast<std::int64_t>(nodes.size());
  std::vector<std::string> names = o.features;
  const json& first = in.key(nodes[0], "X", "nodes[0]");
  if (names.empty())
    for (const auto& [name, series] : first.items()) names.push_back(name);
  TESSEL_EXPECTS(!names.empty(), "{}: nodes[0].X has no series", in.file);
  const auto index = node_link_ids(in, nodes);
  std::int64_t T = -1;
  // values[k][t][v]: series k at step t for node v; targets[t][v].
  std::vector<std::vector<std::vector<double>>> values(names.size());
  std::vector<std::vector<double>> targets;
  for (std::int64_t v = 0; v < N; ++v) {
    const std::string at = fmt::format("nodes[{}]", v);
    const json& xs = in.key(nodes[v], "X", at);
    TESSEL_EXPECTS(xs.is_object(), "{}: {}.X is {}, expected an object of named series like "
                   "nodes[0].X", in.file, at, brief(xs));
    for (std::size_t k = 0; k < names.size(); ++k) {
      const auto it = xs.find(names[k]);
      TESSEL_EXPECTS(it != xs.end(), "{}: {}.X has no series \"{}\" (--features names the "
                     "series to use; nodes[0].X has: {})", in.file, at, names[k], keys_of(first));
      const auto series = in.numbers(*it, T, at + ".X." + names[k]);
      if (T < 0) {
        T = static_cast<std::int64_t>(series.size());
        for (auto& per_series : values)
          per_series.assign(static_cast<std::size_t>(T), std::vector<double>(N));
        targets.assign(static_cast<std::size_t>(T), std::vector<double>(N));
      }
      for (std::int64_t t = 0; t < T; ++t) values[k][t][v] = series[t];
    }
    const auto y = in.numbers(in.key(nodes[v], "y", at), T, at + ".y");
    for (std::int64_t t = 0; t < T; ++t) targets[t][v] = y[t];
  }
  TESSEL_EXPECTS(o.lags >= 1, "{}: --lags must be at least 1, got {}", in.file, o.lags);
  TESSEL_EXPECTS(T > o.lags, "{}: a series of {} steps is too short for --lags {}", in.file, T,
                 o.lags);
  const bool counts = count_series(targets);
  if (o.standardize) {
    for (auto& per_series : values) standardize_series(per_series);
    standardize_series(targets);
  }
  const Csr graph = node_link_graph(in, root, index);
  TemporalDataset d;
  d.series = {true, o.standardize, counts};
  d.num_nodes = N;
  d.feature_dim = static_cast<std::int64_t>(names.size()) * o.lags;
  for (std::int64_t s = 0; s + o.lags < T; ++s) {
    d.snapshots.push_back(graph);
    for (std::int64_t v = 0; v < N; ++v)
      for (const auto& per_series : values)
        for (int j = 0; j < o.lags; ++j)
          d.features.push_back(static_cast<float>(per_series[s + j][v]));
    for (std::int64_t v = 0; v < N; ++v)
      d.targets.push_back(static_cast<float>(targets[s + o.lags][v]));
  }
  set_split(d, o, in.file);
  return d;
}

TemporalDataset node_link_layout(const JsonInput& in, const json& root,
                                 const TemporalConvertOptions& o) {
  const json& nodes = in.array(root["nodes"], "nodes");
  const auto N = static_cast<std::int64_t>(nodes.size());
  TESSEL_EXPECTS(N > 0, "{}: nodes is empty", in.file);
  if (in.key(nodes[0], "X", "nodes[0]").is_object()) return named_series_layout(in, root, nodes, o);
  TESSEL_EXPECTS(o.features.empty(), "{}: --features picks named series, but nodes[0].X is {}, "
                 "not an object of named series", in.file, brief(nodes[0]["X"]));
  const auto index = node_link_ids(in, nodes);
  std::int64_t T = -1, F = -1;
  std::vector<std::vector<std::vector<double>>> x(static_cast<std::size_t>(N));  // [v][t][f]
  std::vector<std::vector<double>> y(static_cast<std::size_t>(N));
  for (std::int64_t v = 0; v < N; ++v) {
    const std::string at = fmt::format("nodes[{}]", v);
    const json& node = nodes[v];
    const json& xs = in.array(in.key(node, "X", at), at + ".X");
    if (T < 0) T = static_cast<std::int64_t>(xs.size());
    TESSEL_EXPECTS(static_cast<std::int64_t>(xs.size()) == T,
                   "{}: {}.X has {} steps, expected {} (ragged series)", in.file, at, xs.size(), T);
    for (std::int64_t t = 0; t < T; ++t) {
      const std::string xt = fmt::format("{}.X[{}]", at, t);
      std::vector<double> row =
          xs[t].is_array() ? in.numbers(xs[t], F, xt) : std::vector<double>{in.number(xs[t], xt)};
      if (F < 0) F = static_cast<std::int64_t>(row.size());
      TESSEL_EXPECTS(static_cast<std::int64_t>(row.size()) == F,
                     "{}: {} has {} features, expected {}", in.file, xt, row.size(), F);
      x[v].push_back(std::move(row));
    }
    y[v] = in.numbers(in.key(node, "y", at), T, at + ".y");
  }
  TESSEL_EXPECTS(T > 0 && F > 0, "{}: the node series are empty", in.file);
  const Csr graph = node_link_graph(in, root, index);
  TemporalDataset d;
  d.num_nodes = N;
  d.feature_dim = F;
  for (std::int64_t t = 0; t < T; ++t) {
    d.snapshots.push_back(graph);
    for (std::int64_t v = 0; v < N; ++v)
      for (double f : x[v][t]) d.features.push_back(static_cast<float>(f));
    for (std::int64_t v = 0; v < N; ++v) d.targets.push_back(static_cast<float>(y[v][t]));
  }
  set_split(d, o, in.file);
  return d;
}

// One object per snapshot: some key of digits holds an object with edges (the others are
// checked as snapshots when read; keys that are not digits are metadata).
bool has_numbered_snapshots(const json& root) {
  if (!root.is_object()) return false;
  for (const auto& [k, v] : root.items())
    if (is_snapshot_key(k) && v.is_object() && v.contains("edges")) return true;
  return false;
}

std::string default_name(const fs::path& path, const TemporalConvertOptions& o) {
  if (!o.name.empty()) return o.name;
  std::string stem = path.filename().string();
  for (const char* ext : {".gz", ".json", ".csv", ".txt"})
    if (stem.size() > std::string(ext).size() && stem.ends_with(ext))
      stem.resize(stem.size() - std::string(ext).size());
  return stem;
}

}  // namespace

TemporalDataset read_pyg_temporal_json(const fs::path& path, const TemporalConvertOptions& o) {
  const std::string file = path.string();
  const json root = read_json_file(path);
  const JsonInput in{file, {}};
  TemporalDataset d;
  if (root.is_object() && root.contains("edge_mapping") && root.contains("y")) {
    d = dynamic_edges_layout(in, root, o);
  } else if (root.is_object() && root.contains("edges") &&
             (root.contains("FX") || root.contains("X"))) {
    d = static_signal_layout(in, root, o);
  } else if (root.is_object() && root.contains("nodes") && root.contains("links")) {
    d = node_link_layout(in, root, o);
  } else if (has_numbered_snapshots(root)) {
    d = per_snapshot_layout(in, root, o);
  } else {
    TESSEL_FAIL("{}: not a PyTorch Geometric Temporal layout; keys found: {}; expected "
                "edge_mapping + y (dynamic edges), edges + FX or X (static edges with a signal), "
                "\"0\", \"1\", ... objects with edges, X, y (one per snapshot), or nodes + links "
                "(networkx node-link)",
                file, keys_of(root));
  }
  d.name = default_name(path, o);
  d.ignored_keys.assign(in.ignored.begin(), in.ignored.end());
  d.validate(file);
  return d;
}

namespace {

bool is_separator(char c) { return c == ',' || c == ' ' || c == '\t' || c == '\r'; }

// Splits one line into fields (comma or whitespace separated).
std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    if (i >= line.size()) break;
    std::size_t j = i;
    while (j < line.size() && !is_separator(line[j])) ++j;
    out.push_back(line.substr(i, j - i));
    i = j;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    if (i < line.size() && line[i] == ',') ++i;
  }
  return out;
}

bool parse_double(std::string_view s, double& out) {
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size() && std::isfinite(out);
}

// Reads a text file line by line (plain or gzip), calling fn(line, line_number_0based).
template <class Fn>
void for_each_line(const fs::path& path, Fn&& fn) {
  TESSEL_EXPECTS(fs::is_regular_file(path), "{}: no such file", path.string());
  detail::LineChunkReader reader(path);
  detail::TextChunk chunk;
  std::int64_t line = 0;
  while (reader.next(chunk)) {
    const char* p = chunk.begin();
    while (p < chunk.end()) {
      const char* nl = std::find(p, chunk.end(), '\n');
      fn(std::string_view(p, static_cast<std::size_t>(nl - p)), line++);
      p = nl + 1;
    }
    reader.recycle(std::move(chunk));
  }
}

// The edges of a timestamped edge list, in file order (times ascending).
struct TimedEdges {
  std::vector<NodeId> src, dst;
  std::vector<double> time;
  std::vector<float> weight;
};

// One line src,dst,time[,weight] of the edge list (line n, 0-based), checked, into `edges`;
// blank lines and # comments are skipped.
void add_edge_line(const fs::path& path, std::string_view line, std::int64_t n, TimedEdges& edges) {
  if (line.empty() || line[0] == '#' || line.find_first_not_of(" \t\r") == std::string_view::npos)
    return;
  const auto fields = split_fields(line);
  if (fields.size() != 3 && fields.size() != 4)
    detail::throw_line_error(
        path, n, fmt::format("{} fields, expected src,dst,time[,weight]", fields.size()));
  double v[4] = {0, 0, 0, 1};
  for (std::size_t i = 0; i < fields.size(); ++i)
    if (!parse_double(fields[i], v[i]))
      detail::throw_line_error(path, n,
                               fmt::format("'{}' is not a number (field {})", fields[i], i + 1));
  for (int i = 0; i < 2; ++i)
    if (v[i] < 0 || v[i] != std::floor(v[i]) || v[i] > 9.0e15)
      detail::throw_line_error(path, n,
                               fmt::format("node id '{}' is not a non-negative integer",
                                           fields[static_cast<std::size_t>(i)]));
  if (!edges.time.empty() && v[2] < edges.time.back())
    detail::throw_line_error(path, n,
                             fmt::format("time {} is earlier than the previous line's {} "
                                         "(timestamps must be sorted)",
                                         fields[2], edges.time.back()));
  if (v[3] < 0) detail::throw_line_error(path, n, "negative weight");
  if (!(v[3] <= std::numeric_limits<float>::max()))
    detail::throw_line_error(path, n,
                             fmt::format("weight '{}' is not a finite 32-bit float", fields[3]));
  edges.src.push_back(static_cast<NodeId>(v[0]));
  edges.dst.push_back(static_cast<NodeId>(v[1]));
  edges.time.push_back(v[2]);
  edges.weight.push_back(static_cast<float>(v[3]));
}

// One more past the largest node id of the edges, checked against what they could touch.
std::int64_t count_nodes(const TimedEdges& edges, const std::string& file) {
  const std::vector<NodeId>& src = edges.src;
  const std::vector<NodeId>& dst = edges.dst;
  std::int64_t N = 0;
  std::size_t widest = 0;
  for (std::size_t e = 0; e < src.size(); ++e)
    if (std::max(src[e], dst[e]) + 1 > N) {
      N = std::max(src[e], dst[e]) + 1;
      widest = e;
    }
  // Every node gets a row of features and targets per snapshot: an id far beyond what the
  // edges could touch is a file that is not numbered 0..N-1, not a request for that much memory.
  const auto cap = std::max<std::int64_t>(std::int64_t{1} << 20,
                                          64 * static_cast<std::int64_t>(src.size()));
  TESSEL_EXPECTS(N <= cap,
                 "{}: edge {} names node {}, but {} edges can touch at most {} nodes here; "
                 "expected node ids numbered from 0 (renumber them)",
                 file, widest + 1, N - 1, src.size(), cap);
  return N;
}

// One row of --node-features (line n, 0-based), checked, into `features`; F is set by the first
// row. Returns whether the line was a row (not blank, not a # comment).
bool add_feature_line(const fs::path& path, std::string_view line, std::int64_t n, std::int64_t& F,
                      std::vector<float>& features) {
  if (line.empty() || line[0] == '#') return false;
  const auto fields = split_fields(line);
  if (F < 0) F = static_cast<std::int64_t>(fields.size());
  if (static_cast<std::int64_t>(fields.size()) != F || F == 0)
    detail::throw_line_error(path, n, fmt::format("{} values, expected {}", fields.size(), F));
  for (const auto& f : fields) {
    double x = 0;
    if (!parse_double(f, x))
      detail::throw_line_error(path, n, fmt::format("'{}' is not a number", f));
    if (!(std::abs(x) <= std::numeric_limits<float>::max()))
      detail::throw_line_error(path, n,
                               fmt::format("'{}' is not a finite 32-bit float (features are "
                                           "stored as float32, |x| <= 3.4e38)",
                                           f));
    features.push_back(static_cast<float>(x));
  }
  return true;
}

// The number of snapshots (--snapshots, or the bins of --snapshot-span over [t0, t1]) and the
// time span of each.
std::int64_t snapshot_count(const TemporalConvertOptions& o, double t0, double t1,
                            const std::string& file, double& span) {
  std::int64_t K = o.snapshots;
  span = o.snapshot_span;
  constexpr std::int64_t kMaxSnapshots = 100000;
  if (K > 0) {
    span = (t1 - t0) / static_cast<double>(K);
  } else {
    // In double first: a tiny span over a long range does not fit an integer.
    const double bins = std::floor((t1 - t0) / span) + 1;
    TESSEL_EXPECTS(std::isfinite(bins) && bins <= static_cast<double>(kMaxSnapshots),
                   "{}: --snapshot-span {} over times {} to {} gives {:.3g} snapshots, at most {} "
                   "are allowed; raise --snapshot-span",
                   file, span, t0, t1, bins, kMaxSnapshots);
    K = static_cast<std::int64_t>(bins);
  }
  TESSEL_EXPECTS(K <= kMaxSnapshots, "{}: {} snapshots is too many; at most {} are allowed", file,
                 K, kMaxSnapshots);
  return K;
}

// K snapshots of N nodes, each edge in the one its time falls in.
std::vector<Csr> bin_snapshots(const TimedEdges& edges, std::int64_t N, std::int64_t K,
                               double span) {
  const double t0 = edges.time.front();
  std::vector<std::vector<NodeId>> bin_src(static_cast<std::size_t>(K)), bin_dst = bin_src;
  std::vector<std::vector<float>> bin_w(static_cast<std::size_t>(K));
  for (std::size_t e = 0; e < edges.time.size(); ++e) {
    std::int64_t k =
        span > 0 ? static_cast<std::int64_t>(std::floor((edges.time[e] - t0) / span)) : 0;
    k = std::clamp<std::int64_t>(k, 0, K - 1);
    bin_src[k].push_back(edges.src[e]);
    bin_dst[k].push_back(edges.dst[e]);
    bin_w[k].push_back(edges.weight[e]);
  }
  std::vector<Csr> snapshots;
  for (std::int64_t k = 0; k < K; ++k)
    snapshots.push_back(snapshot_from_edges(N, bin_src[k], bin_dst[k], bin_w[k]));
  return snapshots;
}

// Features per snapshot (the static ones when given, else degree features: EvolveGCN's choice
// when a dataset has none, log(1 + in-degree) and log(1 + out-degree) in the snapshot) and the
// target, log(1 + in-degree) in the next snapshot.
void add_degree_series(TemporalDataset& d, const std::vector<float>& static_features) {
  const std::int64_t N = d.num_nodes, F = d.feature_dim, K = d.num_snapshots();
  std::vector<std::vector<float>> in_deg(static_cast<std::size_t>(K),
                                         std::vector<float>(static_cast<std::size_t>(N), 0));
  for (std::int64_t k = 0; k < K; ++k) {
    const Csr& s = d.snapshots[k];
    std::vector<float> out_deg(static_cast<std::size_t>(N), 0);
    for (std::int64_t v = 0; v < N; ++v) {
      in_deg[k][v] = static_cast<float>(std::log1p(static_cast<double>(s.degree(v))));
      for (EdgeId e = s.indptr[v]; e < s.indptr[v + 1]; ++e) out_deg[s.indices[e]] += 1;
    }
    for (std::int64_t v = 0; v < N; ++v) {
      if (!static_features.empty()) {
        d.features.insert(d.features.end(), static_features.begin() + v * F,
                          static_features.begin() + (v + 1) * F);
      } else {
        d.features.push_back(in_deg[k][v]);
        d.features.push_back(static_cast<float>(std::log1p(out_deg[v])));
      }
    }
  }
  for (std::int64_t k = 0; k < K; ++k)
    for (std::int64_t v = 0; v < N; ++v)
      d.targets.push_back(k + 1 < K ? in_deg[k + 1][v] : 0.0f);
}

} // namespace

TemporalDataset read_temporal_edge_list(const fs::path& path, const TemporalConvertOptions& o) {
  const std::string file = path.string();
  TESSEL_EXPECTS((o.snapshots > 0) != (o.snapshot_span > 0),
                 "{}: give exactly one of --snapshots K or --snapshot-span S", file);
  TimedEdges edges;
  for_each_line(
      path, [&](std::string_view line, std::int64_t n) { add_edge_line(path, line, n, edges); });
  TESSEL_EXPECTS(!edges.time.empty(), "{}: no edges", file);
  std::int64_t N = count_nodes(edges, file);
  std::vector<float> static_features;
  std::int64_t F = 2;
  if (!o.node_features.empty()) {
    std::int64_t rows = 0;
    F = -1;
    for_each_line(o.node_features, [&](std::string_view line, std::int64_t n) {
      if (add_feature_line(o.node_features, line, n, F, static_features)) ++rows;
    });
    TESSEL_EXPECTS(rows >= N, "{}: node id {} is out of range: {} has {} rows (one per node)", file,
                   N - 1, o.node_features.string(), rows);
    N = rows;
  }
  double span = 0;
  const std::int64_t K = snapshot_count(o, edges.time.front(), edges.time.back(), file, span);
  TemporalDataset d;
  d.name = default_name(path, o);
  d.num_nodes = N;
  d.feature_dim = F;
  d.snapshots = bin_snapshots(edges, N, K, span);
  add_degree_series(d, static_features);
  set_split(d, o, file);
  d.validate(file);
  return d;
}

}  // namespace tessel::datasets
