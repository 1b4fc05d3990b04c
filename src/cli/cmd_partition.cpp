// `tessel partition`: METIS (or random) k-way partitioning of a dataset store into a partition
// folder, and `--check` to re-verify a folder.
#include "command.hpp"
#include "flag_checks.hpp"
#include "train_options.hpp"
#include "temporal_commands.hpp"

#include "tessel/core/activity.hpp"
#include "tessel/core/error.hpp"
#include "tessel/datasets/temporal.hpp"
#include "tessel/partition/partitioner.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <memory>

namespace tessel::cli {
namespace {

struct PartitionArgs {
  std::string input;
  std::string out;
  std::string check;
  std::string only;  // --only P,Q,...
  int parts = 0;
  std::string method = "metis";
  std::string order = partition::to_string(partition::PartitionOptions{}.order);
  std::string balance = "nodes,train,edges";
  std::uint64_t seed = 0;
  bool symmetrize = true;
  bool force = false;
  std::int64_t metis_max_edges = partition::PartitionOptions{}.metis_max_edges;
};

// "2,3" as part numbers.
std::vector<int> parse_parts(const std::string& text) {
  std::vector<int> parts;
  std::size_t start = 0;
  while (true) {
    const auto comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    int value = -1;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    TESSEL_EXPECTS(ec == std::errc() && ptr == item.data() + item.size() && value >= 0,
                   "--only {}: '{}' is not a part number", text, item);
    parts.push_back(value);
    if (comma == std::string::npos) return parts;
    start = comma + 1;
  }
}

void run_check(const PartitionArgs& args) {
  partition::CheckOptions options;
  options.source_store = args.input;
  if (!args.only.empty()) options.only_parts = parse_parts(args.only);
  const ScopedActivity activity("checking " + args.check);
  const auto report = partition::check_partition(args.check, options);
  const std::string source =
      report.compared_with_source ? fmt::format("; matches {}", args.input) : "";
  if (args.only.empty()) {
    fmt::print("{}: OK: {} parts, {} nodes, {} edges, edge cut {}, {} halo nodes{}\n", args.check,
               report.num_parts, report.num_nodes, report.num_edges, report.edge_cut,
               report.total_halo, source);
    return;
  }
  fmt::print("{}: OK: {} {} of {} ({} nodes, {} edges, {} halo nodes){}; the checks across "
             "parts need every part\n",
             args.check, report.checked_parts.size() == 1 ? "part" : "parts",
             fmt::join(report.checked_parts, ", "), report.num_parts, report.num_nodes,
             report.num_edges, report.total_halo, source);
}

void run_partition(const PartitionArgs& args, bool parts_given) {
  TESSEL_EXPECTS(!args.input.empty(), "partition: missing the input dataset store (IN.h5)");
  TESSEL_EXPECTS(parts_given, "partition: missing --parts K");
  TESSEL_EXPECTS(!args.out.empty(), "partition: missing --out DIR");
  const auto order = partition::parse_order(args.order);
  TESSEL_EXPECTS(order == partition::Order::none || !datasets::is_temporal_store(args.input),
                 "partition: --order {} applies to a static store; {} is a temporal store "
                 "(its parts are vertex ranges of the relabeled store)",
                 args.order, args.input);
  if (temporal_partition(args.input, args.out, args.parts, args.method, args.seed, args.force))
    return;
  partition::PartitionOptions options;
  options.num_parts = args.parts;
  options.method = partition::parse_method(args.method);
  options.balance = partition::parse_balance(args.balance);
  options.order = order;
  options.seed = args.seed;
  options.symmetrize = args.symmetrize;
  options.force = args.force;
  TESSEL_EXPECTS(args.metis_max_edges >= 1,
                 "partition: --metis-max-edges must be at least 1, got {}", args.metis_max_edges);
  options.metis_max_edges = args.metis_max_edges;
  const ScopedActivity activity("partitioning " + args.input);
  const auto stats = partition::partition_store(args.input, args.out, options);
  fmt::print("{}wrote {}\n", stats.summary(), args.out);
}

const Registrar registrar{Command{
    "partition",
    "Split a dataset store into K parts (METIS k-way or random) with 1-hop halos, one HDF5 file "
    "per part plus partition.json (parts keep the store's feature dtype: float32, float16 or "
    "bfloat16); or verify a partition folder with --check. On a temporal "
    "store: vertex ranges (METIS on the union of the snapshots) and the relabeled store for "
    "`train --mode dynamic` (which chooses the snapshot blocks itself)",
    false,
    [](CLI::App& sub) -> std::function<void()> {
      auto args = std::make_shared<PartitionArgs>();
      sub.add_option("input", args->input,
                     "Dataset store (.h5) to partition; with --check, the store to compare the "
                     "partition against (optional)");
      auto* parts =
          sub.add_option("--parts,-k", args->parts, "Number of parts K (1 <= K <= nodes)");
      sub.add_option("--out,-o", args->out,
                     "Partition folder to write (created; must be empty "
                     "unless --force)");
      sub.add_option("--method", args->method,
                     "metis: k-way with balanced weights; random: "
                     "balanced random baseline")
          ->capture_default_str();
      sub.add_option("--order", args->order,
                     "How each part numbers its own nodes: none (increasing source id), rcm "
                     "(reverse Cuthill-McKee), bfs (breadth first from the highest degree) or "
                     "community (label propagation clusters of at most 512 nodes in RCM order). "
                     "Neighbours numbered near each other make aggregation read nearby rows. "
                     "Results stay in source ids")
          ->capture_default_str();
      sub.add_option("--balance", args->balance,
                     "What METIS keeps balanced across parts: comma-separated subset of "
                     "nodes,train,edges")
          ->check(distinct_list())
          ->capture_default_str();
      sub.add_option("--seed", args->seed, "Seed for METIS and for random")
          ->check(seed_check())
          ->capture_default_str();
      sub.add_option("--metis-max-edges", args->metis_max_edges,
                     "Largest graph (directed edges) METIS partitions itself; a larger one is "
                     "first coarsened by Tessel (label propagation), and METIS's partition of the "
                     "coarse graph is projected back and refined. Bounds METIS's memory")
          ->capture_default_str();
      sub.add_flag("--symmetrize,!--no-symmetrize", args->symmetrize,
                   "Store the symmetrized graph (default). --no-symmetrize keeps a directed "
                   "dataset's edge directions (METIS still sees the symmetrized graph)");
      sub.add_flag("--force", args->force, "Replace a non-empty output folder");
      sub.add_option("--check", args->check,
                     "Verify the partition folder DIR (every invariant; against IN.h5 too when "
                     "given) instead of partitioning");
      sub.add_option("--only", args->only,
                     "With --check: verify only these parts (P,Q,...), for a folder that holds "
                     "the parts of one host's ranks; the checks across parts are left out")
          ->check(distinct_list());
      return [args, parts] {
        if (!args->check.empty()) {
          TESSEL_EXPECTS(parts->count() == 0 && args->out.empty(),
                         "partition: --check takes a folder (and optionally the source store), "
                         "not --parts or --out");
          run_check(*args);
        } else {
          TESSEL_EXPECTS(args->only.empty(), "partition: --only applies to --check");
          run_partition(*args, parts->count() > 0);
        }
      };
    },
    20}};

} // namespace
} // namespace tessel::cli
