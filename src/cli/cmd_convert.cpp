// `tessel convert`: OGB raw folder or synthetic generator -> HDF5 dataset store.
#include "command.hpp"
#include "temporal_commands.hpp"
#include "train_options.hpp"

#include "tessel/core/activity.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/timer.hpp"
#include "tessel/datasets/atomic_output.hpp"
#include "tessel/datasets/ogb.hpp"
#include "tessel/datasets/ogb_link.hpp"
#include "tessel/datasets/synthetic.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <memory>

namespace tessel::cli {
namespace {

// --edge-split TRAIN,VALID,TEST (percentages) and its --seed; empty: no link splits.
struct EdgeSplitArgs {
  std::vector<int> percent;
  std::uint64_t seed = 1;
};

void add_edge_split_flags(CLI::App& cmd, EdgeSplitArgs& args, bool with_seed) {
  cmd.add_option("--edge-split", args.percent,
                 "Link prediction: split the undirected edges at random into train/valid/test "
                 "percentages (e.g. 85,5,10), draw as many validation and test negatives as "
                 "positives (stored), and keep only the training edges in the message-passing "
                 "graph (the store's /link group; docs/formats.md)")
      ->delimiter(',')
      ->expected(3);
  if (with_seed)
    cmd.add_option("--seed", args.seed, "Seed of --edge-split")->check(seed_check())
        ->capture_default_str();
}

void apply_edge_split(datasets::Dataset& data, const EdgeSplitArgs& args) {
  if (args.percent.empty()) return;
  datasets::random_link_split(data, args.percent[0], args.percent[1], args.percent[2], args.seed);
}

std::string link_summary(const datasets::Dataset& data) {
  if (!data.link.present()) return "";
  const auto& l = data.link;
  return fmt::format("; edge split {}: {}/{}/{} positive edges, {}/{} negatives (seed {})",
                     l.fractions, datasets::LinkSplits::rows(l.train_pos),
                     datasets::LinkSplits::rows(l.valid_pos),
                     datasets::LinkSplits::rows(l.test_pos),
                     datasets::LinkSplits::rows(l.valid_neg),
                     datasets::LinkSplits::rows(l.test_neg), l.seed);
}

// --feature-dtype float32|float16|bfloat16: how the store keeps /node/feat.
constexpr const char* kFeatureDtypeHelp =
    "How the store keeps /node/feat: float32, or float16 / bfloat16 (2 bytes a value: half the "
    "disk and the out-of-core reads; values rounded to nearest even, training still computes in "
    "float32). float16 keeps 11 significant bits up to 65504 (a larger value is refused); "
    "bfloat16 keeps float32's range with 8 significant bits (docs/data.md)";

void add_feature_dtype_flag(CLI::App& cmd, std::string& dtype) {
  cmd.add_option("--feature-dtype", dtype, kFeatureDtypeHelp)
      ->check(CLI::IsMember({"float32", "float16", "bfloat16"}))
      ->capture_default_str();
}

struct OgbArgs {
  std::string dir;
  std::string out;
  datasets::OgbOptions options;
  datasets::OgbLinkOptions link;
  bool json = false;
  EdgeSplitArgs edge_split;
  std::string feature_dtype = "float32";
};

struct SyntheticArgs {
  std::string out;
  datasets::SyntheticOptions options;
  bool ogb = false;
  bool npz = false;    // with ogb: papers100M's raw/data.npz layout
  double scale = 1.0;  // with a preset: its node count times this
  std::string preset;  // a named shape (datasets::synthetic_preset); explicit flags override it
  EdgeSplitArgs edge_split;
  std::string feature_dtype = "float32";
};

// Fills the options a preset sets, except those given on the command line.
void apply_preset(SyntheticArgs& args, const CLI::App& cmd) {
  TESSEL_EXPECTS(!args.preset.empty() || cmd.get_option("--scale")->count() == 0,
                 "convert synthetic: --scale needs --preset (it scales a named shape)");
  TESSEL_EXPECTS(args.ogb || !args.npz, "convert synthetic: --npz needs --ogb");
  TESSEL_EXPECTS(!args.ogb || args.feature_dtype == "float32",
                 "convert synthetic: --feature-dtype is for stores; --ogb writes an OGB folder "
                 "(convert it with `convert ogb --feature-dtype {}`)",
                 args.feature_dtype);
  args.options.feature_dtype = datasets::parse_feature_dtype(args.feature_dtype);
  if (args.preset.empty()) return;
  const datasets::SyntheticOptions preset = datasets::synthetic_preset(args.preset, args.scale);
  auto& o = args.options;
  const auto unset = [&](const char* flag) { return cmd.get_option(flag)->count() == 0; };
  if (unset("--nodes")) o.num_nodes = preset.num_nodes;
  if (unset("--avg-degree")) o.avg_degree = preset.avg_degree;
  if (unset("--classes")) o.num_classes = preset.num_classes;
  if (unset("--feat-dim")) o.feature_dim = preset.feature_dim;
  if (unset("--train-frac")) o.train_frac = preset.train_frac;
  if (unset("--valid-frac")) o.valid_frac = preset.valid_frac;
  if (unset("--test-frac")) o.test_frac = preset.test_frac;
  if (unset("--name")) o.name = preset.name;
}

std::string megabytes(std::int64_t bytes) {
  return fmt::format("{:.1f} MB", static_cast<double>(bytes) / 1e6);
}

std::string split_sizes(const datasets::DatasetInfo& info) {
  return fmt::format("{}/{}/{}", info.num_train, info.num_valid, info.num_test);
}

// --edge-split: the whole folder is read into memory, split, and written.
void run_ogb_edge_split(const OgbArgs& args) {
  TESSEL_EXPECTS(!args.json, "convert ogb: --json is not supported with --edge-split");
  Stopwatch watch;
  datasets::Dataset data = [&] {
    const ScopedActivity activity("reading " + args.dir);
    return datasets::read_ogb_folder(args.dir, args.options);
  }();
  {
    const ScopedActivity activity("splitting the edges of " + args.dir);
    apply_edge_split(data, args.edge_split);
  }
  {
    const ScopedActivity activity("writing " + args.out);
    datasets::write_store(data, args.out, args.options.feature_dtype);
  }
  fmt::print("{}: {} nodes, {} message-passing edges, {} features, {} classes{}; in {:.2f} s\n",
             args.out, data.num_nodes, data.num_edges(), data.feature_dim, data.num_classes,
             link_summary(data), watch.seconds());
}

// An ogbl folder (split/<name>/train.pt): the training graph and the /link edge splits.
void run_ogb_link(const OgbArgs& args) {
  const auto result =
      datasets::convert_ogb_link_folder(args.dir, args.out, args.options, args.link);
  const auto& report = result.convert;
  const auto& info = report.info;
  const std::string negatives =
      result.neg_per_source > 0
          ? fmt::format("{} negative targets per source", result.neg_per_source)
          : fmt::format("{}/{} negative edges", result.valid_neg, result.test_neg);
  if (args.json) {
    nlohmann::json j;
    j["input"] = args.dir;
    j["output"] = args.out;
    j["name"] = info.name;
    j["task"] = "link";
    j["num_nodes"] = info.num_nodes;
    j["num_edges"] = info.num_edges;
    j["directed"] = info.directed;
    j["symmetrized"] = args.options.symmetrize;
    j["feature_dim"] = info.feature_dim;
    j["link"] = {{"split", report.split},
                 {"train_pos", result.train_pos},
                 {"valid_pos", result.valid_pos},
                 {"test_pos", result.test_pos},
                 {"valid_neg", result.valid_neg},
                 {"test_neg", result.test_neg},
                 {"neg_per_source", result.neg_per_source},
                 {"metric", result.metric},
                 {"weight", result.weight},
                 {"year", result.year}};
    j["seconds"] = report.seconds;
    j["input_bytes"] = report.input_bytes;
    j["output_bytes"] = info.file_bytes;
    j["peak_rss_bytes"] = peak_rss_bytes();
    fmt::print("{}\n", j.dump());
    return;
  }
  fmt::print("{}: {} nodes, {} training-graph edges ({}), {}; link split {}: {}/{}/{} positive "
             "edges, {}, metric {}\n",
             args.out, info.num_nodes, info.num_edges,
             args.options.symmetrize ? "symmetrized"
             : info.directed         ? "directed"
                                     : "undirected, each stored once",
             result.features ? fmt::format("{} features", info.feature_dim)
                             : std::string("no node features (no raw/node-feat: the store has "
                                           "feature_dim 0)"),
             report.split, result.train_pos, result.valid_pos, result.test_pos, negatives,
             result.metric);
  fmt::print("  read in {:.2f} s, wrote {}, peak memory {}\n", report.seconds,
             megabytes(info.file_bytes), megabytes(peak_rss_bytes()));
}

void run_ogb(const OgbArgs& args) {
  datasets::refuse_overwriting_inputs(args.out, {args.dir}, "output");
  const bool link_folder = datasets::is_ogb_link_folder(args.dir, args.options);
  TESSEL_EXPECTS(args.edge_split.percent.empty() || !link_folder,
                 "--edge-split splits a node property prediction folder's edges; {} is a link "
                 "prediction folder that carries its own split",
                 args.dir);
  if (!args.edge_split.percent.empty()) return run_ogb_edge_split(args);
  const ScopedActivity activity("converting " + args.dir);
  if (link_folder) {
    run_ogb_link(args);
    return;
  }
  TESSEL_EXPECTS(args.link.metric.empty(),
                 "--metric is for link-prediction folders (split/<name>/train.pt); {} is a node "
                 "property prediction folder",
                 args.dir);
  const auto report = datasets::convert_ogb_folder(args.dir, args.out, args.options);
  const auto& info = report.info;
  const double mb_per_s =
      static_cast<double>(report.text_bytes) / 1e6 / std::max(report.seconds, 1e-9);
  const std::int64_t peak = peak_rss_bytes();
  if (args.json) {
    nlohmann::json j;
    j["input"] = args.dir;
    j["output"] = args.out;
    j["name"] = info.name;
    j["num_nodes"] = info.num_nodes;
    j["num_edges"] = info.num_edges;
    j["directed"] = info.directed;
    j["symmetrized"] = args.options.symmetrize;
    j["feature_dim"] = info.feature_dim;
    j["num_classes"] = info.num_classes;
    j["split"] = {{"name", report.split},
                  {"train", info.num_train},
                  {"valid", info.num_valid},
                  {"test", info.num_test}};
    j["layout"] = report.npz ? "npz" : "csv";
    j["seconds"] = report.seconds;
    j["text_bytes"] = report.text_bytes;
    j["input_bytes"] = report.input_bytes;
    j["text_mb_per_s"] = mb_per_s;
    j["output_bytes"] = info.file_bytes;
    j["peak_rss_bytes"] = peak;
    nlohmann::json phases = nlohmann::json::object();
    for (const auto& [name, s] : report.phases)
      phases[name] = s;
    j["phases"] = phases;
    fmt::print("{}\n", j.dump());
    return;
  }
  fmt::print("{}: {} nodes, {} edges ({}), {} features, {} classes, split {} {}\n", args.out,
             info.num_nodes, info.num_edges,
             args.options.symmetrize ? "symmetrized"
             : info.directed         ? "directed"
                                     : "undirected, each stored once",
             info.feature_dim, info.num_classes, report.split, split_sizes(info));
  std::string phases;
  for (const auto& [name, s] : report.phases)
    phases += fmt::format("{}{} {:.2f} s", phases.empty() ? "" : ", ", name, s);
  fmt::print("  read {} of {} in {:.2f} s ({:.0f} MB/s), wrote {}, peak memory {}\n  phases: {}\n",
             megabytes(report.text_bytes), report.npz ? "npz arrays" : "CSV text", report.seconds,
             mb_per_s, megabytes(info.file_bytes), megabytes(peak), phases);
}

void run_synthetic(const SyntheticArgs& args) {
  TESSEL_EXPECTS(!args.out.empty(), "convert synthetic: missing the output path (OUT.h5)");
  Stopwatch watch;
  if (!args.ogb && args.edge_split.percent.empty()) {
    // Graph, labels and splits in memory; features generated and written in row blocks.
    const ScopedActivity activity(
        fmt::format("generating a synthetic graph of {} nodes", args.options.num_nodes));
    const auto s = datasets::write_synthetic_store(args.options, args.out);
    fmt::print("{}: {} nodes, {} edges ({}), {} features, {} classes, split {}/{}/{}; generated "
               "and written in {:.2f} s (features in blocks of {} rows), peak memory {}\n",
               args.out, s.num_nodes, s.num_edges,
               args.options.uniform_in_degree > 0 ? "directed" : "undirected, each stored once",
               s.feature_dim, s.num_classes, s.num_train, s.num_valid, s.num_test,
               watch.seconds(), s.feature_block_rows, megabytes(peak_rss_bytes()));
    return;
  }
  auto data = [&] {
    const ScopedActivity activity(
        fmt::format("generating a synthetic graph of {} nodes", args.options.num_nodes));
    return datasets::make_synthetic(args.options);
  }();
  TESSEL_EXPECTS(args.edge_split.percent.empty() || !args.ogb,
                 "convert synthetic: --edge-split writes a store, not an OGB folder (--ogb)");
  EdgeSplitArgs split = args.edge_split;
  split.seed = args.options.seed;
  apply_edge_split(data, split);
  const double generate_s = watch.seconds();
  watch.reset();
  const ScopedActivity activity("writing " + args.out);
  if (args.ogb) {
    datasets::OgbWriteOptions options;
    options.split_name = "random";
    options.npz = args.npz;
    datasets::write_ogb_folder(data, args.out, options);
  } else {
    datasets::write_store(data, args.out, args.options.feature_dtype);
  }
  fmt::print("{}: {} nodes, {} edges ({}), {} features, {} classes, split {}/{}/{}{}; generated "
             "in {:.2f} s, written in {:.2f} s, peak memory {}\n",
             args.out, data.num_nodes, data.num_edges(),
             data.directed ? "directed" : "undirected, each stored once", data.feature_dim,
             data.num_classes, data.train.size(), data.valid.size(), data.test.size(),
             link_summary(data), generate_s, watch.seconds(), megabytes(peak_rss_bytes()));
}

const Registrar registrar{Command{
    "convert",
    "Make an HDF5 dataset store: from an OGB raw folder (`convert ogb`) or a synthetic "
    "planted-partition graph (`convert synthetic`); a temporal store from dynamic-graph data "
    "(`convert temporal`, `convert synthetic-temporal`)",
    false,
    [](CLI::App& sub) -> std::function<void()> {
      sub.require_subcommand(1);
      auto ogb = std::make_shared<OgbArgs>();
      CLI::App* ogb_cmd = sub.add_subcommand(
          "ogb",
          "Convert an OGB raw folder (raw/edge.csv.gz, raw/num-node-list.csv.gz, "
          "raw/num-edge-list.csv.gz, raw/node-feat.csv.gz, raw/node-label.csv.gz, "
          "split/<name>/{train,valid,test}.csv.gz; plain .csv accepted; or papers100M's "
          "raw/data.npz + raw/node-label.npz) into a store. A link property prediction folder "
          "(ogbl-*: split/<name>/{train,valid,test}.pt, raw/node-feat optional) becomes a link "
          "store: the training graph, node features if any, and the edge splits with their "
          "fixed negatives (docs/formats.md). Features stream to the file in row blocks; the "
          "output appears only when complete.");
      ogb_cmd->add_option("dir", ogb->dir, "OGB dataset folder (the one holding raw/ and split/)")
          ->required();
      ogb_cmd->add_option("out", ogb->out, "Output store (.h5); replaced if it exists")->required();
      ogb_cmd->add_option("--split", ogb->options.split,
                          "Split folder under split/ (default: the only one there)");
      ogb_cmd->add_flag("--symmetrize", ogb->options.symmetrize,
                        "Store both directions of every edge (self-loops and duplicates "
                        "removed); the result is marked undirected");
      ogb_cmd->add_flag("--directed", ogb->options.directed,
                        "The edges are directed (e.g. ogbn-arxiv); default: undirected, each "
                        "edge stored once as in products/proteins");
      ogb_cmd->add_option("--name", ogb->options.name, "Dataset name (default: the folder's name)");
      ogb_cmd->add_option("--metric", ogb->link.metric,
                          "Link folders: default evaluation stored with the splits, auc, mrr or "
                          "hits@K (default: from the name: collab hits@50, ddi hits@20, ppa "
                          "hits@100, citation2 mrr; else mrr for per-source negatives, auc for "
                          "pairs)");
      ogb_cmd->add_flag("--json", ogb->json,
                        "Print one JSON object (counts, seconds, MB/s, peak memory, phases)");
      add_edge_split_flags(*ogb_cmd, ogb->edge_split, true);
      add_feature_dtype_flag(*ogb_cmd, ogb->feature_dtype);

      auto syn = std::make_shared<SyntheticArgs>();
      auto& o = syn->options;
      CLI::App* syn_cmd = sub.add_subcommand(
          "synthetic",
          "Generate a planted-partition graph: power-law-ish degrees, homophilous edges, "
          "Gaussian class-correlated features, a random 10%/10%/80% train/valid/test split "
          "(see --train-frac, --valid-frac, --test-frac). Deterministic from --seed, for any "
          "thread count. A store is written holding only the graph, labels and splits in "
          "memory: features are generated and written in row blocks (64 MB); --ogb holds "
          "everything.");
      syn_cmd->add_option("out", syn->out, "Output store (.h5), or folder with --ogb")->required();
      syn_cmd->add_option("--nodes", o.num_nodes, "Number of nodes")->capture_default_str();
      syn_cmd
          ->add_option("--avg-degree", o.avg_degree,
                       "Mean degree once symmetrized (about nodes * degree / 2 edges)")
          ->capture_default_str();
      syn_cmd->add_option("--classes", o.num_classes, "Number of classes")->capture_default_str();
      syn_cmd->add_option("--uniform-degree", o.uniform_in_degree,
                          "Directed graph with exactly this many uniformly drawn in-neighbors "
                          "per node (homophily still applies) instead of power-law degrees; "
                          "--avg-degree is then ignored");
      syn_cmd->add_option("--feat-dim", o.feature_dim, "Feature dimension")->capture_default_str();
      syn_cmd->add_option("--seed", o.seed, "Random seed")->check(seed_check())->capture_default_str();
      syn_cmd->add_option("--train-frac", o.train_frac, "Fraction of nodes in the training set")
          ->capture_default_str();
      syn_cmd
          ->add_option("--valid-frac", o.valid_frac,
                       "Fraction in the validation set (the rest is test)")
          ->capture_default_str();
      syn_cmd->add_option("--test-frac", o.test_frac,
                          "Fraction in the test set; the nodes in none of the three sets stay "
                          "unsplit (default: the rest is test)");
      syn_cmd
          ->add_option("--homophily", o.homophily,
                       "Fraction of edges that join nodes of the same class")
          ->capture_default_str();
      syn_cmd
          ->add_option("--feature-signal", o.feature_signal,
                       "Class centroid spread in noise units, 0 to 1e6 (0: features carry no class "
                       "information)")
          ->capture_default_str();
      syn_cmd
          ->add_option("--degree-exponent", o.degree_exponent,
                       "Power-law exponent of the expected degrees (> 2)")
          ->capture_default_str();
      syn_cmd->add_option("--name", o.name, "Dataset name")->capture_default_str();
      syn_cmd->add_option("--preset", syn->preset,
                          fmt::format("Start from a named shape ({}); flags given as well "
                                      "override it. products: ogbn-products' size, 2,449,029 "
                                      "nodes, about 62M undirected edges, 100 features, 47 "
                                      "classes, 8%/1.6% train/valid (not its graph). "
                                      "papers100m: ogbn-papers100M's, 111,059,956 nodes, about "
                                      "1.6 B undirected edges, 128 features (57 GB), 172 "
                                      "classes, 1,207,179/125,265/214,338 train/valid/test and "
                                      "the rest unsplit (not its graph)",
                                      fmt::join(datasets::synthetic_preset_names(), ", ")));
      syn_cmd
          ->add_option("--scale", syn->scale,
                       "With --preset: a smaller (or larger) graph of the same shape, the "
                       "preset's node count times this (mean degree, features, classes and "
                       "split fractions kept), e.g. --preset papers100m --scale 0.01")
          ->capture_default_str();
      syn_cmd->add_flag("--shuffle-ids", syn->options.shuffle_ids,
                        "Relabel the nodes by a random permutation (from --seed) once built, so "
                        "that ids carry no locality (benchmarks that must not flatter)");
      syn_cmd->add_flag("--ogb", syn->ogb,
                        "Write an OGB raw folder (gzip CSV) at OUT instead of a store, e.g. to "
                        "benchmark `convert ogb`");
      add_edge_split_flags(*syn_cmd, syn->edge_split, false);  // seeded by --seed
      add_feature_dtype_flag(*syn_cmd, syn->feature_dtype);
      syn_cmd->add_flag("--npz", syn->npz,
                        "With --ogb: papers100M's layout (raw/data.npz, raw/node-label.npz) "
                        "instead of gzip CSV");
      auto run_temporal = add_temporal_convert_commands(sub);
      return [ogb_cmd, syn_cmd, ogb, syn, run_temporal] {
        run_temporal();
        if (ogb_cmd->parsed()) {
          ogb->options.feature_dtype = datasets::parse_feature_dtype(ogb->feature_dtype);
          run_ogb(*ogb);
        }
        if (syn_cmd->parsed()) {
          apply_preset(*syn, *syn_cmd);
          run_synthetic(*syn);
        }
      };
    },
    10}};

} // namespace
} // namespace tessel::cli
