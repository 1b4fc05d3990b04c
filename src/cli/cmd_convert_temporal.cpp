// `tessel convert temporal` and `convert synthetic-temporal`: temporal datasets -> temporal store;
// `tessel info` on a temporal store.
#include "temporal_commands.hpp"
#include "train_options.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/timer.hpp"
#include "tessel/datasets/atomic_output.hpp"
#include "tessel/datasets/temporal.hpp"
#include "tessel/partition/temporal.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <memory>

namespace tessel::cli {
namespace {
namespace fs = std::filesystem;

struct TemporalArgs {
  std::string input, out;
  datasets::TemporalConvertOptions options;
  bool full = false;
};

struct SyntheticTemporalArgs {
  std::string out;
  datasets::SyntheticTemporalOptions options;
  bool full = false;
};

// JSON when the name ends in .json, or when the first non-blank byte after an optional UTF-8
// byte-order mark is '{' or '[' (also for a misnamed file); else an edge list.
bool looks_like_json(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  TESSEL_EXPECTS(in.good(), "{}: cannot open the file", path.string());
  if (path.extension() == ".json") return true;
  char bom[3] = {};
  in.read(bom, 3);
  if (!(in.gcount() == 3 && bom[0] == '\xEF' && bom[1] == '\xBB' && bom[2] == '\xBF')) {
    in.clear();
    in.seekg(0);
  }
  char c = 0;
  while (in.get(c))
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return c == '{' || c == '[';
  return false;
}

void print_written(const std::string& out, const datasets::TemporalDataset& d, double seconds) {
  const auto info = datasets::read_temporal_info(out);
  fmt::print("{}: {} nodes, {} snapshots, {} edges over all snapshots ({} in the base, {} added "
             "and {} removed by the differences), {} features, {}; split train [{}, {}) valid "
             "[{}, {}) test [{}, {}); {:.1f} MB written in {:.2f} s\n",
             out, d.num_nodes, d.num_snapshots(), info.total_edges, info.base_edges,
             info.added_edges, info.removed_edges, d.feature_dim,
             d.num_classes > 0 ? fmt::format("{} classes", d.num_classes)
                               : std::string("regression targets"),
             d.train.begin, d.train.end, d.valid.begin, d.valid.end, d.test.begin, d.test.end,
             static_cast<double>(info.file_bytes) / 1e6, seconds);
  if (!d.ignored_keys.empty()) {
    // At most a dozen named: a file with a thousand metadata keys still gets one short line.
    constexpr std::size_t kNamed = 12;
    std::string keys;
    for (std::size_t i = 0; i < d.ignored_keys.size() && i < kNamed; ++i)
      keys += (i ? ", " : "") + d.ignored_keys[i];
    if (d.ignored_keys.size() > kNamed)
      keys += fmt::format(" and {} more", d.ignored_keys.size() - kNamed);
    fmt::print("  ignored keys (present, not read): {}\n", keys);
  }
  if (!d.series.present) return;
  if (d.series.standardized)
    fmt::print("  series standardized per node (--standardize): targets, predictions and MSE are "
               "in each node's standard deviations\n");
  else if (d.series.counts)
    fmt::print("  series not standardized, and they are counts: the usual recipe trains on "
               "standardized series; convert again with --standardize\n");
  else
    fmt::print("  series not standardized (--standardize z-scores each node's series)\n");
}

// `edge_list_flags`: the edge-list flags given, refused on JSON input (they were ignored).
void run_temporal(const TemporalArgs& a, const std::vector<std::string>& edge_list_flags) {
  Stopwatch watch;
  TESSEL_EXPECTS(fs::is_regular_file(a.input), "{}: no such file", a.input);
  if (!edge_list_flags.empty() && looks_like_json(a.input))
    TESSEL_FAIL("{}: {} {} only to edge lists, and this is a JSON file (leave {} out)", a.input,
                fmt::join(edge_list_flags, ", "), edge_list_flags.size() == 1 ? "applies" : "apply",
                edge_list_flags.size() == 1 ? "it" : "them");
  // Named with its flag: "1,,2: no such file" did not say which option it was.
  if (!a.options.node_features.empty())
    TESSEL_EXPECTS(fs::is_regular_file(a.options.node_features),
                   "--node-features {}: no such file{}", a.options.node_features.string(),
                   fs::is_directory(a.options.node_features) ? " (it is a folder)" : "");
  std::vector<fs::path> inputs = {a.input};
  if (!a.options.node_features.empty()) inputs.push_back(a.options.node_features);
  datasets::refuse_overwriting_inputs(a.out, inputs, "output");
  const datasets::TemporalDataset d = looks_like_json(a.input)
                                          ? datasets::read_pyg_temporal_json(a.input, a.options)
                                          : datasets::read_temporal_edge_list(a.input, a.options);
  datasets::write_temporal_store(d, a.out, {a.full});
  print_written(a.out, d, watch.seconds());
}

void run_synthetic_temporal(const SyntheticTemporalArgs& a) {
  Stopwatch watch;
  const auto d = datasets::make_synthetic_temporal(a.options);
  datasets::write_temporal_store(d, a.out, {a.full});
  print_written(a.out, d, watch.seconds());
}

}  // namespace

std::function<void()> add_temporal_convert_commands(CLI::App& convert) {
  auto t = std::make_shared<TemporalArgs>();
  CLI::App* tc = convert.add_subcommand(
      "temporal",
      "Convert a dynamic graph into a temporal store. JSON input: the layouts PyTorch Geometric "
      "Temporal distributes, recognized by their keys: dynamic edges (edge_mapping.edge_index/"
      "edge_weight per step + y series), static edges with a signal (edges, weights, FX or X), "
      "one object per snapshot (\"0\": {edges, weights, X, y}, ...), networkx node-link (nodes "
      "with X and y series, links); other keys are ignored and listed in the summary. Series "
      "layouts become snapshots whose features are the previous --lags values and whose target "
      "is the next value. Other input: timestamped "
      "edges src,dst,time[,weight] (comma or whitespace separated, '#' comments, plain or gzip, "
      "sorted by time), binned by --snapshots or --snapshot-span; features from "
      "--node-features, else log(1 + in/out degree); target log(1 + in-degree) at the next "
      "snapshot.");
  tc->add_option("input", t->input, "JSON file or edge list (.csv, .txt, .gz)")->required();
  tc->add_option("out", t->out, "Output temporal store (.h5); replaced if it exists")->required();
  tc->add_option("--lags", t->options.lags, "Series layouts: values used as features")
      ->capture_default_str();
  tc->add_flag("--standardize", t->options.standardize,
               "Series layouts: subtract each node's mean and divide by its standard deviation "
               "first");
  tc->add_option("--train-frac", t->options.train_frac, "First snapshots used for training")
      ->capture_default_str();
  tc->add_option("--valid-frac", t->options.valid_frac,
                 "Next snapshots used for validation (the rest is test); 0: none. Default: the "
                 "last 15% of the training span (at least one snapshot) when it has 5 or more, "
                 "so that training can choose an epoch");
  tc->add_option("--snapshots", t->options.snapshots, "Edge lists: number of equal time bins");
  tc->add_option("--snapshot-span", t->options.snapshot_span,
                 "Edge lists: time units per snapshot");
  tc->add_option("--node-features", t->options.node_features,
                 "Edge lists: CSV with one row of features per node (row v = node v)");
  tc->add_option("--features", t->options.features,
                 "Node-link files whose nodes hold named series (\"X\": {\"name\": [...]}): the "
                 "series to use as features, in this order (default: all, by name)")
      ->delimiter(',');
  tc->add_option("--name", t->options.name, "Dataset name (default: the input's file name)");
  tc->add_flag("--full-snapshots", t->full,
               "Also store every snapshot whole (larger; no rebuild from differences on read)");

  auto s = std::make_shared<SyntheticTemporalArgs>();
  auto& o = s->options;
  CLI::App* sc = convert.add_subcommand(
      "synthetic-temporal",
      "Generate an evolving planted-partition graph: community memberships drift, a fraction of "
      "the edges is redrawn every step, and each node's target depends on its neighbours' "
      "signal and its own past (so a graph + recurrent model beats either alone). "
      "Deterministic from --seed.");
  sc->add_option("out", s->out, "Output temporal store (.h5)")->required();
  sc->add_option("--nodes", o.num_nodes, "Number of nodes")->capture_default_str();
  sc->add_option("--snapshots", o.num_snapshots, "Number of snapshots")->capture_default_str();
  sc->add_option("--avg-degree", o.avg_degree, "Mean degree (both directions stored)")
      ->capture_default_str();
  sc->add_option("--feat-dim", o.feature_dim, "Feature dimension")->capture_default_str();
  sc->add_option("--seed", o.seed, "Random seed")->check(seed_check())->capture_default_str();
  sc->add_option("--communities", o.num_communities, "Number of communities")
      ->capture_default_str();
  sc->add_option("--rewire", o.rewire, "Fraction of edges redrawn per step")->capture_default_str();
  sc->add_option("--drift", o.drift, "Fraction of nodes changing community per step")
      ->capture_default_str();
  sc->add_option("--name", o.name, "Dataset name")->capture_default_str();
  sc->add_flag("--full-snapshots", s->full, "Also store every snapshot whole");
  return [tc, sc, t, s] {
    if (tc->parsed()) {
      std::vector<std::string> edge_list_flags;
      for (const char* flag : {"--snapshots", "--snapshot-span", "--node-features"})
        if (tc->count(flag) > 0) edge_list_flags.emplace_back(flag);
      run_temporal(*t, edge_list_flags);
    }
    if (sc->parsed()) run_synthetic_temporal(*s);
  };
}

bool temporal_info(const std::string& path, bool json) {
  if (!datasets::is_temporal_store(path)) return false;
  const auto info = datasets::read_temporal_info(path);
  // What the help promises, as `tessel partition` checks it: every snapshot rebuilt from the
  // differences (indptr, indices, weights, deltas), features and targets finite.
  (void)datasets::read_temporal_store(path);
  nlohmann::json j = {{"file", path},
                      {"format", datasets::kTemporalFormat},
                      {"version", info.version},
                      {"name", info.name},
                      {"num_nodes", info.num_nodes},
                      {"num_snapshots", info.num_snapshots},
                      {"feature_dim", info.feature_dim},
                      {"num_classes", info.num_classes},
                      {"full_snapshots", info.full_snapshots},
                      {"base_edges", info.base_edges},
                      {"added_edges", info.added_edges},
                      {"removed_edges", info.removed_edges},
                      {"total_edges", info.total_edges},
                      {"train", {info.train.begin, info.train.end}},
                      {"valid", {info.valid.begin, info.valid.end}},
                      {"test", {info.test.begin, info.test.end}},
                      {"file_bytes", info.file_bytes}};
  if (json) {
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print("{}: temporal store (version {}), \"{}\"\n  {} nodes, {} snapshots, {} features, "
               "{}\n  edges: {} over all snapshots; base {}, differences +{} -{}{}\n  split "
               "(snapshots): train [{}, {}) valid [{}, {}) test [{}, {})\n  file {:.1f} MB\n",
               path, info.version, info.name, info.num_nodes, info.num_snapshots,
               info.feature_dim,
               info.num_classes > 0 ? fmt::format("{} classes", info.num_classes)
                                    : std::string("regression targets"),
               info.total_edges, info.base_edges, info.added_edges, info.removed_edges,
               info.full_snapshots ? "; full snapshots stored too" : "", info.train.begin,
               info.train.end, info.valid.begin, info.valid.end, info.test.begin, info.test.end,
               static_cast<double>(info.file_bytes) / 1e6);
  }
  return true;
}

bool temporal_partition(const std::string& input, const std::string& out, int parts,
                        const std::string& method, std::uint64_t seed, bool force) {
  if (!datasets::is_temporal_store(input)) return false;
  Stopwatch watch;
  const auto m = partition::partition_temporal_store(input, out, parts,
                                                     partition::parse_method(method), seed, force);
  const auto& halo = m.stats["vertex_halo_total"];
  fmt::print("{}: {} nodes, {} snapshots into {} parts ({}); union graph {} edges, cut {}\n",
             input, m.num_nodes, m.num_snapshots, m.num_parts, m.method,
             m.stats["union_edges"].get<std::int64_t>(),
             m.stats["union_metis_cut"].get<std::int64_t>());
  for (int p = 0; p < m.num_parts; ++p)
    fmt::print("  part {}: vertices [{}, {}) with {} halo rows over all snapshots\n", p,
               m.vertex_offsets[p], m.vertex_offsets[p + 1], halo[p].get<std::int64_t>());
  fmt::print("  (the snapshot layout's blocks are chosen by `train --temporal-partition snapshot` "
             "from the training range)\n");
  fmt::print("wrote {} in {:.2f} s\n", out, watch.seconds());
  return true;
}

}  // namespace tessel::cli
