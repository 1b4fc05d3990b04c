// `tessel info`: what a dataset store holds (counts, features, classes, split, degrees), as text
// or JSON, after validating the whole file (feature values included, read in row blocks).
#include "command.hpp"
#include "temporal_commands.hpp"

#include "tessel/core/activity.hpp"
#include "tessel/core/error.hpp"
#include "tessel/datasets/dataset.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>

namespace tessel::cli {
namespace {

struct InfoArgs {
  std::string file;
  bool json = false;
  bool degrees = true;
};

nlohmann::json stats_json(const datasets::DegreeStats& s) {
  return {{"min", s.min}, {"mean", s.mean}, {"max", s.max}, {"zero", s.zero}};
}

void run_info(const InfoArgs& args) {
  if (temporal_info(args.file, args.json)) return;
  const ScopedActivity activity("reading " + args.file);
  const auto info = datasets::read_store_info(args.file);
  // Reading the graph, labels and splits validates them (monotone indptr, ids in range,
  // disjoint splits, ...); the features are checked block by block (float, finite), as
  // `partition` will read them.
  datasets::ReadOptions read_options;
  read_options.features = false;
  const auto data = datasets::read_store(args.file, read_options);
  datasets::check_store_features(args.file);
  const auto labeled =
      std::count_if(data.labels.begin(), data.labels.end(), [](auto l) { return l >= 0; });
  datasets::DegreeStats stored, sym;
  std::int64_t sym_edges = -1;
  if (args.degrees) {
    stored = datasets::degree_stats(data.graph);
    const Csr both = datasets::symmetrize(data.graph);
    sym_edges = both.num_edges();
    sym = datasets::degree_stats(both);
  }
  const char* layout = info.directed                     ? "directed"
                       : sym_edges == info.num_edges     ? "undirected, both directions stored"
                       : sym_edges == 2 * info.num_edges ? "undirected, each edge stored once"
                                                         : "undirected";
  if (args.json) {
    nlohmann::json j;
    j["file"] = args.file;
    j["format"] = datasets::kStoreFormat;
    j["version"] = info.version;
    j["name"] = info.name;
    j["num_nodes"] = info.num_nodes;
    j["num_edges"] = info.num_edges;
    j["directed"] = info.directed;
    j["feature_dim"] = info.feature_dim;
    j["feature_dtype"] = datasets::to_string(info.feature_dtype);
    j["num_classes"] = info.num_classes;
    j["num_labeled"] = labeled;
    j["split"] = {{"train", info.num_train}, {"valid", info.num_valid}, {"test", info.num_test}};
    j["file_bytes"] = info.file_bytes;
    if (args.degrees) {
      j["edge_layout"] = layout;
      j["num_edges_symmetrized"] = sym_edges;
      j["degree"] = stats_json(sym);
      j["in_degree_stored"] = stats_json(stored);
    }
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("{}: Tessel dataset store, version {}\n", args.file, info.version);
  fmt::print("  name          {}\n", info.name);
  fmt::print("  nodes         {}\n", info.num_nodes);
  fmt::print("  edges         {} stored{}\n", info.num_edges,
             args.degrees ? fmt::format(" ({})", layout)
                          : std::string(info.directed ? " (directed)" : ""));
  if (args.degrees)
    fmt::print("  symmetrized   {} directed edges (both directions, no self-loops or duplicates)\n",
               sym_edges);
  fmt::print("  features      {} ({})\n", info.feature_dim, datasets::to_string(info.feature_dtype));
  fmt::print("  classes       {} ({} labeled nodes)\n", info.num_classes, labeled);
  fmt::print("  split         train {}, valid {}, test {}\n", info.num_train, info.num_valid,
             info.num_test);
  if (args.degrees) {
    fmt::print("  degree        min {}, mean {:.2f}, max {}, isolated nodes {} (symmetrized)\n",
               sym.min, sym.mean, sym.max, sym.zero);
    fmt::print("  in-degree     min {}, mean {:.2f}, max {} (as stored)\n", stored.min, stored.mean,
               stored.max);
  }
  fmt::print("  file size     {:.1f} MB\n", static_cast<double>(info.file_bytes) / 1e6);
}

const Registrar registrar{Command{
    "info",
    "Describe a dataset store (or a temporal store): nodes, edges (as stored and symmetrized), features, classes, "
    "split sizes, degree statistics; validates the whole file on the way (ids, labels, "
    "disjoint splits, finite float features)",
    false,
    [](CLI::App& sub) -> std::function<void()> {
      auto args = std::make_shared<InfoArgs>();
      sub.add_option("file", args->file, "Dataset store (.h5) made by `tessel convert`")
          ->required();
      sub.add_flag("--json", args->json, "Print one JSON object instead of text");
      sub.add_flag("!--no-degrees", args->degrees,
                   "Skip the degree statistics (and the symmetrization they need)");
      return [args] { run_info(*args); };
    },
    11}};

} // namespace
} // namespace tessel::cli
