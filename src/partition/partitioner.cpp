// The partition pipeline: read, symmetrize, assign (METIS or random), relabel, build and write
// each part, write partition.json, then move the finished folder into place.
#include "tessel/partition/partitioner.hpp"

#include "steps.hpp"
#include "tessel/core/activity.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/interrupt.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/progress.hpp"
#include "tessel/datasets/atomic_output.hpp"
#include "tessel/partition/part.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <future>
#include <numeric>
#include <optional>
#include <sstream>

namespace tessel::partition {

Method parse_method(const std::string& name) {
  if (name == "metis") return Method::metis;
  if (name == "random") return Method::random;
  TESSEL_FAIL("--method {}: unknown partition method (expected metis or random)", name);
}

std::string to_string(Method method) {
  return method == Method::metis ? "metis" : "random";
}

Balance parse_balance(const std::string& list) {
  Balance balance{false, false, false};
  std::stringstream in(list);
  std::string item;
  int count = 0;
  while (std::getline(in, item, ',')) {
    if (item == "nodes")
      balance.nodes = true;
    else if (item == "train")
      balance.train = true;
    else if (item == "edges")
      balance.edges = true;
    else
      TESSEL_FAIL("--balance {1}: unknown balance constraint \"{0}\" (expected a comma-separated subset "
                  "of nodes,train,edges)",
                  item, list);
    ++count;
  }
  TESSEL_EXPECTS(count > 0, "--balance needs at least one of nodes,train,edges");
  return balance;
}

std::string to_string(const Balance& balance) {
  std::vector<std::string> names;
  if (balance.nodes) names.emplace_back("nodes");
  if (balance.train) names.emplace_back("train");
  if (balance.edges) names.emplace_back("edges");
  return fmt::format("{}", fmt::join(names, ","));
}

namespace {

using namespace detail;
namespace fs = std::filesystem;

// The output folder: checked up front, written as a hidden temporary sibling and renamed into
// place by commit(); the temporary is removed if anything fails before that.
class OutputDir {
public:
  OutputDir(fs::path out, bool force) : out_(std::move(out)) {
    if (!out_.has_filename()) out_ = out_.parent_path(); // "parts/" -> "parts"
    const auto name = out_.filename().string();
    TESSEL_EXPECTS(!name.empty() && name != "." && name != "..",
                   "output directory \"{}\" must name a folder (like parts/)", out_.string());
    std::error_code ec;
    if (fs::exists(out_, ec)) {
      TESSEL_EXPECTS(fs::is_directory(out_, ec), "output {} exists and is not a directory",
                     out_.string());
      TESSEL_EXPECTS(force || fs::is_empty(out_, ec),
                     "output directory {} exists and is not empty (use --force to replace it)",
                     out_.string());
    }
    datasets::make_parent_folders(out_, "--out");
    // A hidden folder with an unpredictable name, created exclusively (mode 700): removed on
    // failure or interrupt, swapped into place by commit().
    output_.emplace(out_, true);
  }
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;

  const fs::path& path() const { return out_; }
  const fs::path& temp() const { return output_->temp_path(); }

  // Refuses to replace a folder that holds the input (it would be deleted with the old parts).
  void check_not_inside(const fs::path& input) const {
    std::error_code ec;
    const auto in = fs::weakly_canonical(input, ec).string();
    const auto out = fs::weakly_canonical(out_, ec).string() + "/";
    TESSEL_EXPECTS(in.rfind(out, 0) != 0, "input {} is inside the output directory {}",
                   input.string(), out_.string());
  }

  void commit() { output_->commit(); }

private:
  fs::path out_;
  std::optional<datasets::AtomicOutput> output_;
};

struct Checksum {
  std::string value;
  std::string of;
  double seconds = 0;
};

void check_options(const PartitionOptions& o) {
  TESSEL_EXPECTS(o.num_parts >= 1, "--parts must be at least 1, got {}", o.num_parts);
  TESSEL_EXPECTS(o.imbalance > 0 && o.imbalance < 10, "imbalance tolerance {} is not in (0, 10)",
                 o.imbalance);
  TESSEL_EXPECTS(o.balance.nodes || o.balance.train || o.balance.edges,
                 "--balance needs at least one of nodes,train,edges");
}

void check_num_parts(const PartitionOptions& o, std::int64_t num_nodes) {
  TESSEL_EXPECTS(o.num_parts <= num_nodes, "--parts {} is more than the {} nodes of the graph",
                 o.num_parts, num_nodes);
}

// What is used from a dataset must be consistent; store contents were validated by read_store.
void check_dataset(const datasets::Dataset& data, bool features_in_memory) {
  const std::int64_t n = data.num_nodes;
  TESSEL_EXPECTS(data.graph.num_rows == n && data.graph.num_cols == n,
                 "dataset {}: graph is {}x{} for {} nodes", data.name, data.graph.num_rows,
                 data.graph.num_cols, n);
  // A store's graph left on disk (ReadOptions::graph) is checked as it is streamed.
  if (!data.graph.indptr.empty()) data.graph.validate("dataset " + data.name + ": graph");
  TESSEL_EXPECTS(data.labels.empty() || static_cast<std::int64_t>(data.labels.size()) == n,
                 "dataset {}: {} labels for {} nodes", data.name, data.labels.size(), n);
  for (const auto* split : {&data.train, &data.valid, &data.test})
    for (const NodeId v : *split)
      TESSEL_EXPECTS(v >= 0 && v < n, "dataset {}: split node {} is outside [0, {})", data.name, v,
                     n);
  if (features_in_memory) {
    TESSEL_EXPECTS(static_cast<std::int64_t>(data.features.size()) == n * data.feature_dim,
                   "dataset {}: {} feature values for {} nodes x {} features", data.name,
                   data.features.size(), n, data.feature_dim);
    datasets::check_feature_values("dataset " + data.name, data.features.data(), 0, n,
                                   data.feature_dim);
  }
}

double max_over_mean(const std::vector<PartStats>& parts, std::int64_t PartStats::*field) {
  std::int64_t total = 0, largest = 0;
  for (const auto& s : parts) {
    total += s.*field;
    largest = std::max(largest, s.*field);
  }
  if (total == 0) return 1.0;
  return static_cast<double>(largest) * static_cast<double>(parts.size()) /
         static_cast<double>(total);
}

// The run's settings and the source's sizes, before any step.
PartitionStats source_stats(const datasets::Dataset& data, std::string source_name,
                            const PartitionOptions& o) {
  PartitionStats stats;
  stats.dataset = data.name;
  stats.source_name = std::move(source_name);
  stats.num_parts = o.num_parts;
  stats.method = o.method;
  stats.order = o.order;
  stats.seed = o.seed;
  stats.balance = o.balance;
  stats.source_directed = data.directed;
  stats.num_nodes = data.num_nodes;
  stats.feature_dim = data.feature_dim;
  stats.num_classes = data.num_classes;
  stats.num_train = static_cast<std::int64_t>(data.train.size());
  stats.num_valid = static_cast<std::int64_t>(data.valid.size());
  stats.num_test = static_cast<std::int64_t>(data.test.size());
  if (data.link.present()) {
    using datasets::LinkSplits;
    const auto& l = data.link;
    stats.link = {{"metric", l.metric},
                  {"source", l.source},
                  {"neg_per_source", l.neg_per_source},
                  {"train_pos", LinkSplits::rows(l.train_pos)},
                  {"valid_pos", LinkSplits::rows(l.valid_pos)},
                  {"test_pos", LinkSplits::rows(l.test_pos)},
                  {"valid_neg", LinkSplits::rows(l.valid_neg)},
                  {"test_neg", LinkSplits::rows(l.test_neg)}};
  }
  return stats;
}

void mark_peak(PartitionStats& stats, const std::string& phase) {
  stats.peak_rss_after.emplace_back(phase, peak_rss_bytes());
}

// Training graph: symmetrized unless the dataset is directed and --no-symmetrize was given. The
// source graph is released; `metis_input` is the symmetrized copy METIS needs of a directed
// training graph (left empty otherwise).
// Where a graph not held in `data` is read from (partition_store leaves it on disk).
struct StoredGraph {
  fs::path store;
  std::int64_t num_edges = 0;
};

GraphCsr training_graph(datasets::Dataset& data, const StoredGraph& stored,
                        const PartitionOptions& o, PartitionStats& stats, PhaseTimes& times,
                        GraphCsr& metis_input) {
  const bool store_symmetric = o.symmetrize || !data.directed;
  if (!o.symmetrize && !data.directed)
    log::info("partition: {} is undirected (each edge stored once); symmetrizing it anyway",
              data.name);
  stats.symmetrized = store_symmetric;
  GraphCsr training;
  {
    ScopedPhase phase(times, "symmetrize");
    const ScopedActivity activity("symmetrizing the graph");
    // A store's graph is read in blocks: the source graph (64-bit ids) is never held beside
    // the training graph.
    training = data.graph.indptr.empty()
                   ? clean_store_graph(stored.store, data.num_nodes, stored.num_edges,
                                       store_symmetric, o.max_index)
                   : clean_graph(data.graph, store_symmetric, o.max_index);
    data.graph = Csr{}; // the source graph is no longer needed
    if (o.method == Method::metis && o.num_parts > 1 && !store_symmetric)
      metis_input = clean_graph(training, true, o.max_index);
  }
  stats.num_edges = training.num_edges();
  mark_peak(stats, "symmetrize");
  log::info("partition: training graph {} nodes, {} edges ({})", stats.num_nodes, stats.num_edges,
            store_symmetric ? "symmetrized" : "directed");
  return training;
}

// METIS k-way over the training graph (balanced by --balance), its statistics into `stats`;
// returns the seconds of its coarsen and refine phases, recorded as their own phases.
double assign_by_metis(const datasets::Dataset& data, const GraphCsr& training,
                       GraphCsr& metis_input, const PartitionOptions& o, PartitionStats& stats,
                       PhaseTimes& times, std::vector<std::int32_t>& assignment) {
  const int k = o.num_parts;
  std::vector<std::uint8_t> is_train(static_cast<std::size_t>(data.num_nodes), 0);
  for (const NodeId v : data.train)
    is_train[v] = 1;
  log::info("partition: METIS k-way into {} parts", k);
  auto result = assign_metis(stats.symmetrized ? training : metis_input, training, is_train,
                             o.balance, k, o.seed, o.imbalance, o.max_index, o.metis_max_edges);
  metis_input = GraphCsr{};
  assignment = std::move(result.part);
  stats.metis_objval = result.objval;
  stats.metis_constraints = std::move(result.constraints);
  stats.metis_max_edges = o.metis_max_edges;
  if (result.levels.empty()) return 0;
  for (const auto& level : result.levels)
    stats.coarse_levels.emplace_back(level.nodes, level.edges);
  stats.refined_cut = result.refined_cut;
  stats.refine_moves = result.moved;
  times.add("coarsen", result.coarsen_seconds);
  times.add("refine", result.refine_seconds);
  return result.coarsen_seconds + result.refine_seconds;
}

// The part of every node (METIS or random), no part left empty.
std::vector<std::int32_t> assign_parts(const datasets::Dataset& data, const GraphCsr& training,
                                       GraphCsr& metis_input, const PartitionOptions& o,
                                       PartitionStats& stats, PhaseTimes& times) {
  const int k = o.num_parts;
  std::vector<std::int32_t> assignment;
  {
    const ScopedActivity activity(fmt::format("assigning nodes to {} parts ({})", k,
                                              to_string(o.method)));
    Stopwatch watch;
    double sub_phases = 0; // coarsen and refine, recorded as their own phases
    if (k == 1) {
      assignment.assign(static_cast<std::size_t>(data.num_nodes), 0);
    } else if (o.method == Method::metis) {
      sub_phases = assign_by_metis(data, training, metis_input, o, stats, times, assignment);
    } else {
      assignment = assign_random(data.num_nodes, k, o.seed);
    }
    const int moved = fill_empty_parts(assignment, k);
    if (moved > 0) log::warn("partition: {} parts were empty; moved one node into each", moved);
    times.add(to_string(o.method), watch.seconds() - sub_phases);
  }
  mark_peak(stats, to_string(o.method));
  return assignment;
}

// Parts are built one at a time; their files stay open until the single pass over the
// source features has written every part's rows.
std::vector<h5::File> build_and_write_parts(const GraphCsr& training, const Relabeling& relabeling,
                                            const datasets::Dataset& data, OutputDir& out,
                                            PartitionStats& stats, PhaseTimes& times,
                                            datasets::FeatureDtype feature_dtype) {
  const int k = stats.num_parts;
  BuildScratch scratch;
  std::vector<h5::File> files;
  files.reserve(static_cast<std::size_t>(k));
  ProgressLine parts_progress("partition: build and write parts", k);
  for (int p = 0; p < k; ++p) {
    Part part;
    {
      ScopedPhase phase(times, "build");
      part = build_part(p, training, relabeling, data, scratch);
      part.feature_dtype = feature_dtype;
    }
    {
      ScopedPhase phase(times, "write");
      files.push_back(h5::File::create(out.temp() / part_file_name(p)));
      write_part_layout(files.back(), part, data.name);
    }
    stats.parts.push_back(part_stats(part));
    log::info("partition: part {}/{}: {} owned, {} halo, {} edges", p + 1, k, part.num_owned,
              part.num_halo, part.graph.num_edges());
    parts_progress.update(p + 1);
  }
  parts_progress.finish();
  return files;
}

// Edge cut, balance and replication of the parts built.
void summarize_parts(PartitionStats& stats) {
  for (const auto& s : stats.parts)
    stats.edge_cut += s.cut_edges;
  stats.edge_cut_fraction = stats.num_edges > 0 ? static_cast<double>(stats.edge_cut) /
                                                      static_cast<double>(stats.num_edges)
                                                : 0.0;
  stats.node_balance = max_over_mean(stats.parts, &PartStats::owned);
  stats.train_balance = max_over_mean(stats.parts, &PartStats::train);
  stats.edge_balance = max_over_mean(stats.parts, &PartStats::edges);
  std::int64_t local_total = 0;
  for (const auto& s : stats.parts)
    local_total += s.owned + s.halo;
  stats.replication_factor = static_cast<double>(local_total) /
                             static_cast<double>(std::max<std::int64_t>(stats.num_nodes, 1));
}

// The run's phase times, total seconds and peak RSS so far, into `stats`.
void record_totals(PartitionStats& stats, const PhaseTimes& times, const Stopwatch& total) {
  stats.times = times;
  stats.times.add("total", total.seconds());
  stats.peak_rss_bytes = peak_rss_bytes();
}

PartitionStats run_pipeline(datasets::Dataset data, const StoredGraph& stored,
                            FeatureSource& features, std::future<Checksum> checksum,
                            std::string source_name, OutputDir& out, const PartitionOptions& o,
                            PhaseTimes& times, Stopwatch& total) {
  PartitionStats stats = source_stats(data, std::move(source_name), o);
  const int k = o.num_parts;
  mark_peak(stats, "read");
  GraphCsr metis_input; // only when the training graph is directed and METIS runs
  GraphCsr training = training_graph(data, stored, o, stats, times, metis_input);
  std::vector<std::int32_t> assignment = assign_parts(data, training, metis_input, o, stats, times);

  Relabeling relabeling;
  {
    ScopedPhase phase(times, "build");
    relabeling = relabel(std::move(assignment), k);
  }
  if (o.order != Order::none) {
    ScopedPhase phase(times, "order");
    const ScopedActivity activity("ordering the nodes of each part (" + to_string(o.order) + ")");
    reorder_parts(relabeling, training, o.order, o.seed, stats.symmetrized);
  }
  {
    ScopedPhase phase(times, "build");
    // Neighbors in relabeled ids: "owned or halo" becomes a range test, no lookup per edge.
    relabel_columns(training, relabeling);
  }
  stats.offsets = relabeling.offsets;

  const ScopedActivity activity("building and writing the part files in " + out.temp().string());
  std::vector<h5::File> files =
      build_and_write_parts(training, relabeling, data, out, stats, times, features.dtype());
  training = GraphCsr{};
  mark_peak(stats, "build");
  {
    ScopedPhase phase(times, "features");
    ProgressLine progress("partition: write features", 0);
    const auto feature_checksums = write_part_features(features, relabeling, files,
                                                        o.feature_window_bytes);
    for (int p = 0; p < k; ++p)
      stats.parts[p].checksums["/node/feat"] = feature_checksums[p];
  }
  mark_peak(stats, "features");
  {
    ScopedPhase phase(times, "write");
    for (auto& file : files)
      file.close();
    files.clear();
  }
  summarize_parts(stats);

  const Checksum sum = checksum.get();
  stats.source_checksum = sum.value;
  stats.source_checksum_of = sum.of;
  times.add("checksum", sum.seconds);

  {
    ScopedPhase phase(times, "write");
    record_totals(stats, times, total);
    datasets::write_text_file(out.temp() / "partition.json", stats.to_json().dump(2) + "\n");
    out.commit();
  }
  // Final figures include the manifest write and the rename.
  record_totals(stats, times, total);
  return stats;
}

} // namespace

nlohmann::json PartitionStats::to_json() const {
  using nlohmann::json;
  json parts_json = json::array();
  json halo_sizes = json::array();
  for (std::size_t p = 0; p < parts.size(); ++p) {
    const auto& s = parts[p];
    parts_json.push_back({{"file", part_file_name(static_cast<int>(p))},
                          {"owned", s.owned},
                          {"halo", s.halo},
                          {"edges", s.edges},
                          {"cut_edges", s.cut_edges},
                          {"train", s.train},
                          {"valid", s.valid},
                          {"test", s.test},
                          {"replication", s.owned > 0 ? static_cast<double>(s.owned + s.halo) /
                                                            static_cast<double>(s.owned)
                                                      : 1.0},
                          {"checksums", s.checksums}});
    halo_sizes.push_back(s.halo);
  }
  json peak_after = json::object();
  for (const auto& [phase, bytes] : peak_rss_after)
    peak_after[phase] = bytes;
  json timings = json::object();
  for (const auto& [phase, seconds] : times.all())
    timings[phase] = seconds;
  json j = {
      {"format", kManifestFormat},
      {"version", kManifestVersion},
      {"dataset", dataset},
      {"source",
       {{"file", source_name}, {"checksum", source_checksum}, {"checksum_of", source_checksum_of}}},
      {"num_parts", num_parts},
      {"method", to_string(method)},
      {"order", to_string(order)},
      {"seed", seed},
      {"balance_constraints", to_string(balance)},
      {"symmetrized", symmetrized},
      {"source_directed", source_directed},
      {"num_nodes", num_nodes},
      {"num_edges", num_edges},
      {"feature_dim", feature_dim},
      {"num_classes", num_classes},
      {"num_train", num_train},
      {"num_valid", num_valid},
      {"num_test", num_test},
      {"offsets", offsets},
      {"parts", parts_json},
      {"edge_cut", {{"edges", edge_cut}, {"fraction", edge_cut_fraction}}},
      {"balance", {{"nodes", node_balance}, {"train", train_balance}, {"edges", edge_balance}}},
      {"replication_factor", replication_factor},
      {"halo_sizes", halo_sizes},
      {"timings_s", timings},
      {"peak_rss_bytes", peak_rss_bytes},
      {"peak_rss_after_bytes", peak_after}};
  if (!link.is_null()) j["link"] = link;
  if (metis_objval >= 0) {
    j["metis"] = {{"objval", metis_objval},
                  {"constraints", metis_constraints},
                  {"max_edges", metis_max_edges}};
    if (!coarse_levels.empty()) {
      json levels = json::array();
      for (const auto& [nodes, edges] : coarse_levels)
        levels.push_back({{"nodes", nodes}, {"edges", edges}});
      j["metis"]["coarse_levels"] = levels;
      j["metis"]["refined_cut"] = refined_cut;
      j["metis"]["refine_moves"] = refine_moves;
    }
  }
  return j;
}

std::string PartitionStats::summary() const {
  std::string s =
      fmt::format("{}: {} nodes, {} edges ({}), {} features -> {} parts ({}, seed {}, order {})\n",
                  dataset, num_nodes, num_edges, symmetrized ? "symmetrized" : "directed",
                  feature_dim, num_parts, to_string(method), seed, to_string(order));
  s += fmt::format("  {:>5} {:>12} {:>12} {:>14} {:>14} {:>10} {:>8}\n", "part", "owned", "halo",
                   "edges", "cut edges", "train", "repl");
  constexpr std::size_t kMaxRows = 32;
  for (std::size_t p = 0; p < parts.size() && p < kMaxRows; ++p) {
    const auto& ps = parts[p];
    s += fmt::format("  {:>5} {:>12} {:>12} {:>14} {:>14} {:>10} {:>8.3f}\n", p, ps.owned, ps.halo,
                     ps.edges, ps.cut_edges, ps.train,
                     static_cast<double>(ps.owned + ps.halo) /
                         static_cast<double>(std::max<std::int64_t>(ps.owned, 1)));
  }
  if (parts.size() > kMaxRows) s += fmt::format("  ... {} more parts\n", parts.size() - kMaxRows);
  s += fmt::format("edge cut: {} of {} edges ({:.2f}%)", edge_cut, num_edges,
                   100.0 * edge_cut_fraction);
  if (metis_objval >= 0 && coarse_levels.empty())
    s += fmt::format(", METIS objective {}", metis_objval);
  if (!coarse_levels.empty()) {
    s += fmt::format("\ncoarsened to {} nodes, {} edges in {} levels for METIS (--metis-max-edges "
                     "{}); cut {} after METIS, {} after refinement ({} moves)",
                     coarse_levels.back().first, coarse_levels.back().second, coarse_levels.size(),
                     metis_max_edges, metis_objval, refined_cut, refine_moves);
  }
  s += fmt::format("\nbalance (max/mean): nodes {:.3f}, train {:.3f}, edges {:.3f}; replication "
                   "factor {:.3f}\n",
                   node_balance, train_balance, edge_balance, replication_factor);
  std::string phases;
  for (const char* phase : {"read", "symmetrize", "coarsen", "metis", "random", "refine", "build",
                            "order", "features", "write"}) {
    if (times.all().count(phase)) phases += fmt::format(" {} {:.2f}s,", phase, times.get(phase));
  }
  s += fmt::format("time:{} total {:.2f}s (source checksum {:.2f}s on a second thread); peak RSS "
                   "{:.1f} MiB\n",
                   phases, times.get("total"), times.get("checksum"),
                   static_cast<double>(peak_rss_bytes) / (1024.0 * 1024.0));
  s += fmt::format("source {} {}\n", source_checksum_of, source_checksum);
  return s;
}

PartitionStats partition_dataset(datasets::Dataset data, const fs::path& out_dir,
                                 const PartitionOptions& options) {
  Stopwatch total;
  check_options(options);
  check_num_parts(options, data.num_nodes);
  OutputDir out(out_dir, options.force);
  PhaseTimes times;
  std::promise<Checksum> checksum;
  {
    ScopedPhase phase(times, "read");
    check_dataset(data, true);
  }
  {
    Stopwatch watch;
    std::string value = content_checksum(data);
    checksum.set_value({std::move(value), "content", watch.seconds()});
  }
  // The rows live outside `data` from here, so the pipeline can free the graph on its own.
  std::vector<float> feature_rows = std::move(data.features);
  data.features = {};
  MemoryFeatures features(feature_rows, data.feature_dim);
  return run_pipeline(std::move(data), {}, features, checksum.get_future(), "", out, options,
                      times, total);
}

PartitionStats partition_store(const fs::path& store, const fs::path& out_dir,
                               const PartitionOptions& options) {
  Stopwatch total;
  check_options(options);
  OutputDir out(out_dir, options.force);
  if (options.force) out.check_not_inside(store);
  PhaseTimes times;
  datasets::Dataset data;
  datasets::FeatureDtype feature_dtype = datasets::FeatureDtype::float32;
  StoredGraph stored{store, 0};
  {
    ScopedPhase phase(times, "read");
    const auto info = datasets::read_store_info(store);
    feature_dtype = info.feature_dtype;
    check_num_parts(options, info.num_nodes);
    log::info("partition: reading {} ({} nodes, {} edges)", store.string(), info.num_nodes,
              info.num_edges);
    datasets::ReadOptions read;
    read.features = false;
    read.graph = false; // streamed by the symmetrize step
    data = datasets::read_store(store, read);
    stored.num_edges = info.num_edges;
    check_dataset(data, false);
  }
  // The file checksum runs beside the partitioning (METIS is single-threaded).
  auto checksum = std::async(std::launch::async, [store] {
    Stopwatch watch;
    std::string value = file_checksum(store);
    return Checksum{std::move(value), "file", watch.seconds()};
  });
  // Parts keep the store's feature dtype (16-bit rows round-trip through float exactly).
  StoreFeatures features(store, data.feature_dim, std::int64_t{32} << 20, feature_dtype);
  return run_pipeline(std::move(data), stored, features, std::move(checksum),
                      store.filename().string(), out, options, times, total);
}

} // namespace tessel::partition
