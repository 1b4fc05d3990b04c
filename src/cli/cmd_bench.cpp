// `tessel bench DIR --modes full,sampled ...`: trains each mode on the same partitions and
// writes a side-by-side report (JSON, Markdown, and a plot of accuracy against time).
#include "command.hpp"
#include "flag_checks.hpp"
#include "train_options.hpp"

#include "tessel/comm/mpi_communicator.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/interrupt.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/activity.hpp"
#include "tessel/core/mpi.hpp"
#include "tessel/core/peer_watch.hpp"
#include "tessel/core/timer.hpp"
#include "tessel/datasets/atomic_output.hpp"
#include "tessel/partition/part.hpp"
#include "tessel/partition/temporal.hpp"
#include "tessel/train/train.hpp"
#include "tessel/modes/modes.hpp"
#include "tessel/modes/full.hpp"
#include "tessel/modes/pipeline.hpp"
#include "tessel/modes/sampled.hpp"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <unistd.h>

namespace tessel::cli {
namespace {
namespace fs = std::filesystem;

struct BenchOptions {
  train::TrainOptions train;
  train::ModeFlagValues mode_flags;  // every mode's own flags
  std::string modes = fmt::format("{}", fmt::join(train::default_bench_modes(), ","));
  std::vector<std::string> mode_list;  // parsed from `modes`
  // Each mode's options: the shared flags, its own flags, and its own model when the mode
  // trains one kind only (the pipeline's SIGN MLP); --model names the GNN modes' model.
  std::vector<train::TrainOptions> mode_options;
  bool data_parallel_given = false;
  fs::path out_dir;
  bool force = false;
};

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

nlohmann::json summarize(const train::TrainResult& r, const std::vector<std::int64_t>& rss_per_rank) {
  std::vector<double> seconds, bytes;
  std::map<std::string, double> phase_sum;
  for (const auto& e : r.epochs) {
    seconds.push_back(e.epoch_s);
    bytes.push_back(static_cast<double>(e.comm_bytes));
    for (const auto& [name, s] : e.phases) phase_sum[name] += s;
  }
  nlohmann::json phases = nlohmann::json::object();
  for (const auto& [name, s] : phase_sum)
    phases[name] = s / static_cast<double>(std::max<std::size_t>(1, r.epochs.size()));
  nlohmann::json j = {
      {"mode", r.mode},
      {"epochs", static_cast<int>(r.epochs.size())},
      {"seconds_per_epoch_median", quantile(seconds, 0.5)},
      {"seconds_per_epoch_p10", quantile(seconds, 0.1)},
      {"seconds_per_epoch_p90", quantile(seconds, 0.9)},
      {"seconds_per_epoch_min", seconds.empty() ? 0 : *std::min_element(seconds.begin(), seconds.end())},
      {"seconds_per_epoch_max", seconds.empty() ? 0 : *std::max_element(seconds.begin(), seconds.end())},
      {"train_seconds", r.epochs.empty() ? 0.0 : r.epochs.back().wall_s},
      {"setup_seconds", r.setup_s},
      {"time_to_target_s", r.time_to_target_s >= 0 ? nlohmann::json(r.time_to_target_s) : nlohmann::json(nullptr)},
      // The mode's own validation metric (accuracy, or dynamic mode's AUC or MSE), and the
      // accuracy keys only when the metric is an accuracy.
      {"metric", r.metric},
      {"higher_is_better", r.higher_is_better},
      // Without a validation split: null (n/a in the table), never a 0 that reads as a result.
      {"has_valid", r.has_valid},
      {"best_valid", r.has_valid ? nlohmann::json(r.best_valid_acc) : nlohmann::json(nullptr)},
      {"test_at_best_valid", r.test_acc_at_best},
      {"best_valid_acc", r.metric == "acc" && r.has_valid ? nlohmann::json(r.best_valid_acc) : nlohmann::json(nullptr)},
      {"test_acc_at_best_valid", r.metric == "acc" ? nlohmann::json(r.test_acc_at_best) : nlohmann::json(nullptr)},
      {"best_epoch", r.best_epoch},
      {"peak_rss_bytes_per_rank", rss_per_rank},
      {"comm_bytes_per_epoch_median", quantile(bytes, 0.5)},
      {"phase_seconds_per_epoch", phases},
  };
  if (!r.summary.is_null()) j["mode_summary"] = r.summary;
  // Link prediction: the decoder, the negatives, and training edges (positives) per second of
  // the median epoch.
  if (r.link) {
    const train::LinkFigures& l = *r.link;
    const double median = quantile(seconds, 0.5);
    j["link"] = {{"decoder", option_word(l.decoder)},
                 {"negative_sampling", option_word(l.negative_sampling)},
                 {"negatives", l.negatives},
                 {"train_edges", l.train_edges},
                 {"train_edges_per_second",
                  median > 0 ? nlohmann::json(static_cast<double>(l.train_edges) / median)
                             : nlohmann::json(nullptr)},
                 {"test_ap_at_best_valid",
                  l.test_ap_at_best ? nlohmann::json(*l.test_ap_at_best) : nlohmann::json(nullptr)}};
  }
  // Full-batch halo settings and traffic: how halos travel, and their bytes per epoch.
  if (!r.epochs.empty() && r.epochs.back().halo) {
    std::vector<double> halo;
    std::vector<double> exposed;
    for (const auto& e : r.epochs) {
      const train::HaloEpoch h = e.halo.value_or(train::HaloEpoch{});
      halo.push_back(static_cast<double>(h.bytes) + static_cast<double>(h.grad_bytes));
      exposed.push_back(h.exposed_s);
    }
    const train::HaloEpoch& last = *r.epochs.back().halo;
    j["halo_dtype"] = kernels::row_codec_name(last.dtype);
    if (last.boundary_sampling > 0) j["boundary_sampling"] = last.boundary_sampling;
    j["halo_aggregation"] = option_word(last.aggregation);
    if (last.stale) {
      j["stale_halo"] = true;
      j["stale_smoothing"] = last.stale_smoothing;
    }
    j["halo_bytes_per_epoch_median"] = quantile(halo, 0.5);
    j["halo_exposed_seconds_per_epoch_median"] = quantile(exposed, 0.5);
  }
  return j;
}

std::string markdown(const nlohmann::json& report) {
  std::string md = fmt::format("# Tessel bench: {}\n\n", report["dataset"].get<std::string>());
  md += fmt::format("{}, model {} ({} layers, hidden {}), seed {}, {}.\n\n",
                    log::counted(report["ranks"].get<int>(), "rank"),
                    report["model"].get<std::string>(),
                    report["layers"].get<int>(), report["hidden"].get<int>(),
                    report["seed"].get<std::uint64_t>(), report["budget"].get<std::string>());
  md += "| | " ;
  for (const auto& m : report["modes"]) md += m["mode"].get<std::string>() + " | ";
  md += "\n|---|";
  for (std::size_t i = 0; i < report["modes"].size(); ++i) md += "---|";
  md += "\n";
  auto row = [&](const std::string& label, auto fn) {
    md += "| " + label + " | ";
    for (const auto& m : report["modes"]) md += fn(m) + " | ";
    md += "\n";
  };
  row("model (layers x hidden)", [](const auto& m) {
    return m.contains("model") ? m["model"].template get<std::string>() : std::string("–");
  });
  row("epochs", [](const auto& m) { return std::to_string(m["epochs"].template get<int>()); });
  row("s / epoch (median)", [](const auto& m) {
    return fmt::format("{:.4f}", m["seconds_per_epoch_median"].template get<double>());
  });
  row("s / epoch (p10 – p90)", [](const auto& m) {
    return fmt::format("{:.4f} – {:.4f}", m["seconds_per_epoch_p10"].template get<double>(),
                       m["seconds_per_epoch_p90"].template get<double>());
  });
  row("time to target (s)", [](const auto& m) {
    return m["time_to_target_s"].is_null() ? std::string("not reached")
                                           : fmt::format("{:.2f}", m["time_to_target_s"].template get<double>());
  });
  // One metric for every mode (full and sampled: accuracy) names the rows; otherwise each
  // value carries its metric's name.
  std::string metric = report["modes"].empty() ? "acc" : report["modes"][0]["metric"].get<std::string>();
  bool higher = report["modes"].empty() || report["modes"][0]["higher_is_better"].get<bool>();
  for (const auto& m : report["modes"])
    if (m["metric"].get<std::string>() != metric) metric.clear();
  auto metric_value = [&metric](const auto& m, const char* key) {
    const std::string value = m[key].is_null() ? std::string("n/a")
                                               : fmt::format("{:.4f}", m[key].template get<double>());
    return metric.empty() ? value + " " + m["metric"].template get<std::string>() : value;
  };
  const std::string name = metric.empty() ? std::string() : metric + " ";
  row("best valid " + name + (metric.empty() ? "" : higher ? "(higher is better)" : "(lower is better)"),
      [&](const auto& m) { return metric_value(m, "best_valid"); });
  row("test " + name + "at best valid", [&](const auto& m) { return metric_value(m, "test_at_best_valid"); });
  const bool any_link = std::any_of(report["modes"].begin(), report["modes"].end(),
                                    [](const auto& m) { return m.contains("link"); });
  if (any_link) {
    row("link: decoder, negatives per edge", [](const auto& m) {
      if (!m.contains("link")) return std::string("–");
      const auto& l = m["link"];
      return fmt::format("{}, {} {}", l["decoder"].template get<std::string>(),
                         l["negatives"].template get<int>(),
                         l["negative_sampling"].template get<std::string>());
    });
    row("link: training edges / s (positives)", [](const auto& m) {
      if (!m.contains("link") || m["link"]["train_edges_per_second"].is_null()) return std::string("–");
      return fmt::format("{:.0f}", m["link"]["train_edges_per_second"].template get<double>());
    });
    row("link: test AP at best valid", [](const auto& m) {
      if (!m.contains("link") || m["link"]["test_ap_at_best_valid"].is_null()) return std::string("–");
      return fmt::format("{:.4f}", m["link"]["test_ap_at_best_valid"].template get<double>());
    });
  }
  row("peak RSS per rank (MB)", [](const auto& m) {
    std::string s;
    for (const auto& b : m["peak_rss_bytes_per_rank"])
      s += (s.empty() ? "" : ", ") + fmt::format("{:.0f}", b.template get<double>() / 1e6);
    return s;
  });
  row("bytes sent / epoch (MB)", [](const auto& m) {
    return fmt::format("{:.2f}", m["comm_bytes_per_epoch_median"].template get<double>() / 1e6);
  });
  row("  of them halo rows and gradients (MB, settings)", [](const auto& m) {
    if (!m.contains("halo_dtype")) return std::string("–");
    std::string settings = m["halo_dtype"].template get<std::string>();
    if (m.contains("boundary_sampling"))
      settings += fmt::format(", boundary {}", m["boundary_sampling"].template get<double>());
    if (m.value("halo_aggregation", std::string("post")) != "post")
      settings += ", " + m["halo_aggregation"].template get<std::string>() + "-aggregation";
    if (m.contains("stale_halo"))
      settings += m.value("stale_smoothing", 0.0) > 0
                      ? fmt::format(", stale (smoothing {})", m["stale_smoothing"].template get<double>())
                      : std::string(", stale");
    return fmt::format("{:.2f} ({})", m["halo_bytes_per_epoch_median"].template get<double>() / 1e6,
                       settings);
  });
  row("  halo exchange exposed s / epoch", [](const auto& m) {
    if (!m.contains("halo_exposed_seconds_per_epoch_median")) return std::string("–");
    return fmt::format("{:.4f}", m["halo_exposed_seconds_per_epoch_median"].template get<double>());
  });
  std::vector<std::string> phase_names;
  for (const auto& m : report["modes"])
    for (const auto& [k, v] : m["phase_seconds_per_epoch"].items())
      if (std::find(phase_names.begin(), phase_names.end(), k) == phase_names.end())
        phase_names.push_back(k);
  std::sort(phase_names.begin(), phase_names.end());
  for (const auto& name : phase_names)
    row("  " + name + " s / epoch", [&name](const auto& m) {
      const auto& p = m["phase_seconds_per_epoch"];
      return p.contains(name) ? fmt::format("{:.4f}", p[name].template get<double>()) : std::string("–");
    });
  if (report.contains("interrupted"))
    md += fmt::format("\n**Interrupted by {} during --mode {}**: the modes above finished.\n",
                      report["interrupted"]["signal"].get<std::string>(),
                      report["interrupted"]["mode"].get<std::string>());
  if (report.contains("failed")) {
    const auto& f = report["failed"];
    md += fmt::format("\n**{}--mode {} failed{}**: {}\n", report.contains("partial") ? "Partial: " : "",
                      f["mode"].get<std::string>(),
                      f.contains("rank") ? fmt::format(" on rank {} (host {})", f["rank"].get<int>(),
                                                       f["host"].get<std::string>())
                                         : std::string(),
                      f["error"].get<std::string>());
  }
  md += "\nPeak RSS is the process's high-water mark when the mode finished (modes run one after "
        "another in one process, so a later mode's figure includes the earlier ones').\n";
  return md;
}

// Draws out_dir/accuracy_vs_time.png; the line the script prints names shown_dir (the folder the
// report becomes), not the hidden temporary it is written in.
void run_plot(const fs::path& out_dir, const fs::path& shown_dir) {
  fs::path script;
  std::error_code ec;
  const fs::path installed =
      fs::read_symlink("/proc/self/exe", ec).parent_path() / TESSEL_INSTALLED_SCRIPTS / "plot_bench.py";
  if (const char* env = std::getenv("TESSEL_PLOT_SCRIPT")) script = env;
  else if (!ec && fs::exists(installed, ec)) script = installed.lexically_normal();
  else script = fs::path(TESSEL_SCRIPTS_DIR) / "plot_bench.py";
  if (!fs::exists(script)) {
    log::warn("plot script {} not found; skipping accuracy_vs_time.png", script.string());
    return;
  }
  // TESSEL_PYTHON names one program (no arguments): it and every path are handed over as an
  // argument vector, never through a shell, so no quote or $( ) in them is interpreted.
  const char* python = std::getenv("TESSEL_PYTHON");
  const std::string interpreter = python != nullptr && *python != '\0' ? python
                                  : fs::exists("/usr/bin/python3")     ? "/usr/bin/python3"
                                                                        : "python3";
  if (interrupt::run_program({interpreter, script.string(), out_dir.string(), "--shown-as",
                              shown_dir.string()}) != 0)
    log::warn("the plot script failed; report.json and report.md are complete");
}

// The bench's own flags, then every mode's (add_model_flags).
void add_bench_flags(CLI::App& app, BenchOptions& o) {
  o.train.epochs = 20;
  app.add_option("DIR", o.train.part_dir, "partition folder made by `tessel partition`")
      ->required()
      ->check(partition_folder());
  app.add_option("--modes", o.modes,
                 "comma-separated training modes to compare (full, sampled, pipeline; or dynamic "
                 "alone, on a temporal partition). --model names the GNN modes' model; pipeline "
                 "trains its sign-mlp with the pipeline flags (--stages, default data-parallel: "
                 "ranks / stages)")
      ->capture_default_str();
  app.add_option("--epochs", o.train.epochs, "epochs per mode")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--time-budget", o.train.time_budget_s,
                 "seconds of training per mode, > 0 (stops at the first epoch past it)")
      ->check(finite_range(0.0, std::numeric_limits<double>::infinity(), true));
  app.add_option("--target-acc", o.train.target_acc,
                 "report the seconds each mode needs to reach this validation accuracy (dynamic "
                 "link prediction: AUC; not used for MSE)")
      ->check(finite_range(0.0, 1.0, true));
  app.add_option("--out", o.out_dir,
                 "report folder (report.json, report.md, plot); it appears only when complete")
      ->required();
  app.add_flag("--force", o.force, "overwrite an existing report folder");
  app.add_flag("--quiet", o.train.quiet, "no per-epoch lines");
  add_model_flags(app, o.train, o.mode_flags);
}

// Checked while parsing, before MPI starts, so a bad option is one line from rank 0: every
// mode's flags, before any mode trains. Fills the mode list and each mode's options.
void check_bench_flags(const CLI::App& app, BenchOptions& o) {
  o.mode_list.clear();
  const auto known = train::mode_names();
  for (const auto& mode : split_list("--modes", o.modes)) {
    TESSEL_EXPECTS(std::find(known.begin(), known.end(), mode) != known.end(),
                   "--modes: unknown mode '{}' (known: {})", mode, fmt::join(known, ", "));
    o.mode_list.push_back(mode);
  }
  check_mode_flags(app, o.mode_list);
  o.data_parallel_given = app.get_option("--data-parallel")->count() > 0;
  o.mode_options.clear();
  for (const auto& mode : o.mode_list) {
    train::TrainOptions options = o.train;
    options.mode = mode;
    if (const auto only_model = train::mode_traits(mode).only_model) options.model.kind = *only_model;
    apply_mode_defaults(app, options);
    finish_train_options(app, options, o.mode_flags);
    o.mode_options.push_back(std::move(options));
  }
  o.train = o.mode_options.front();
  // A mode that fails on one rank ends the job; that rank hands its error to rank 0, which
  // names it in the partial report (the connection a job over several hosts has anyway).
  mpi::peer_watch::carry_failures_on_one_host();
}

// Rank 0's report folder, checked: out_dir may be written (--force) and does not hold the
// partition. The report is written into a hidden sibling folder that becomes out_dir only when
// every mode has finished: a failed run leaves no partial report under the final name.
fs::path report_target(const BenchOptions& o) {
  TESSEL_EXPECTS(o.force || !fs::exists(o.out_dir) || fs::is_empty(o.out_dir),
                 "{} exists and is not empty (use --force to overwrite)", o.out_dir.string());
  TESSEL_EXPECTS(!fs::exists(o.out_dir) || fs::is_directory(o.out_dir),
                 "{} exists and is not a folder", o.out_dir.string());
  // --force replaces the folder: never the partition it benchmarks, nor one holding it.
  datasets::refuse_overwriting_inputs(o.out_dir, {o.train.part_dir}, "--out");
  std::error_code ec;
  const std::string part = fs::weakly_canonical(o.train.part_dir, ec).string() + "/";
  TESSEL_EXPECTS(part.rfind(fs::weakly_canonical(o.out_dir, ec).string() + "/", 0) != 0,
                 "--out {} holds the partition {} being benchmarked; give another folder",
                 o.out_dir.string(), o.train.part_dir.string());
  fs::path target = o.out_dir.lexically_normal();
  if (!target.has_filename()) target = target.parent_path(); // "report/" names "report"
  datasets::make_parent_folders(target, "--out");
  return target;
}

// The dataset the partition was made from. Dynamic mode trains on a temporal partition (of a
// temporal store), the others on a static one: one bench compares modes over the same folder,
// so they cannot be mixed.
std::string bench_dataset(const BenchOptions& o) {
  const bool temporal = partition::is_temporal_partition(o.train.part_dir);
  const auto& modes = o.mode_list;
  const bool any_temporal = std::any_of(modes.begin(), modes.end(), [](const std::string& m) {
    return train::mode_traits(m).temporal;
  });
  TESSEL_EXPECTS(temporal == any_temporal && (!temporal || modes.size() == 1),
                 "--modes {}: {} is a {} partition; dynamic mode needs a temporal partition and "
                 "runs alone, full and sampled need a static one",
                 o.modes, o.train.part_dir.string(), temporal ? "temporal" : "static");
  return temporal ? partition::read_temporal_manifest(o.train.part_dir).dataset
                  : partition::read_manifest(o.train.part_dir).dataset;
}

// The report's settings, with an empty list of modes.
nlohmann::json report_header(const BenchOptions& o, const std::string& dataset, int ranks) {
  return {{"format", "tessel-bench"},
          {"version", 2},
          {"dataset", dataset},
          {"partition", o.train.part_dir.string()},
          {"ranks", ranks},
          {"model", option_word(o.train.model.kind)},
          {"layers", o.train.model.layers},
          {"hidden", o.train.model.hidden},
          {"dropout", o.train.model.dropout},
          {"lr", o.train.optimizer.lr},
          {"seed", o.train.seed},
          {"fanouts", o.mode_flags.find<train::SampledOptions>().fanouts},
          {"batch_size", o.mode_flags.find<train::SampledOptions>().batch_size},
          {"target_acc",
           o.train.target_acc > 0 ? nlohmann::json(o.train.target_acc) : nlohmann::json(nullptr)},
          {"budget", o.train.time_budget_s > 0
                         ? fmt::format("{:.0f} s of training per mode (at most {} epochs)",
                                       o.train.time_budget_s, o.train.epochs)
                         : fmt::format("{} epochs per mode", o.train.epochs)},
          {"modes", nlohmann::json::array()}};
}

// Rank 0's report as the modes finish, for the interrupt hook: a SIGINT or SIGTERM during a
// later mode writes the report of those that finished.
struct PartialReport {
  std::mutex mutex;
  nlohmann::json report; // the modes that finished
  std::string running;   // the mode training now
  bool written = false;  // the report is in place (by the run, or by the hook)
};

// Rank 0, `partial` locked: the report of the modes that finished, with `why` (an "interrupted"
// or a "failed" entry) and "partial": true, becomes out_dir. False (nothing written) when no
// mode finished or the report is already in place.
bool write_partial(PartialReport& partial, datasets::AtomicOutput& out, const std::string& key,
                   const nlohmann::json& why) {
  if (partial.written || partial.report["modes"].empty()) return false;
  nlohmann::json r = partial.report;
  r["partial"] = true;
  r[key] = why;
  // The report holds the modes that finished: not the unfinished mode's metrics file.
  std::error_code ignored;
  fs::remove(out.temp_path() / (why["mode"].get<std::string>() + ".jsonl"), ignored);
  datasets::write_text_file(out.temp_path() / "report.json", r.dump(2) + "\n");
  datasets::write_text_file(out.temp_path() / "report.md", markdown(r));
  out.commit();
  partial.written = true;
  return true;
}

std::string finished_modes(const PartialReport& partial) {
  return log::counted(static_cast<long long>(partial.report["modes"].size()), "mode");
}

// Rank 0, where a mode failed with an error of its own (the other ranks do not meet it): the
// partial report, then the one line that ends the job. Returns when no mode finished, for the
// error to go up as it is.
void fail_on_rank_zero(const BenchOptions& o, PartialReport& partial, datasets::AtomicOutput& out,
                       const std::string& mode, const std::string& error, int exit_code) {
  std::unique_lock lock(partial.mutex);
  if (!write_partial(partial, out, "failed",
                     {{"mode", mode}, {"rank", 0}, {"host", mpi::hostname()}, {"error", error}}))
    return;
  const std::string finished = finished_modes(partial);
  lock.unlock();
  mpi::abort_job(fmt::format("--mode {} failed: {}; wrote the partial report {} ({} finished)",
                             mode, error, o.out_dir.string(), finished),
                 exit_code);
}

// Trains each mode in turn, its summary into report["modes"]. A mode that fails with an error
// every rank meets ends the bench: the failure goes into report["failed"] and is returned, for
// the report of the modes that ran to be written first.
std::optional<AgreedInputError> run_modes(comm::Communicator& comm, const BenchOptions& o,
                                          const fs::path& work_dir, nlohmann::json& report,
                                          PartialReport* partial,
                                          datasets::AtomicOutput* output) {
  std::optional<AgreedInputError> failure;
  for (auto options : o.mode_options) {
    const std::string mode = options.mode;
    if (partial != nullptr) {
      std::lock_guard lock(partial->mutex);
      partial->running = mode;
    }
    options.metrics_path = work_dir / (mode + ".jsonl");
    log::info("== bench: mode {}", mode);
    try {
      const train::TrainResult result = train::train(comm, options);
      const auto rss = comm.allgather_value<std::int64_t>(peak_rss_bytes());
      report["modes"].push_back(summarize(result, rss));
      const bool sign = train::mode_traits(mode).only_model.has_value();
      report["modes"].back()["model"] = fmt::format(
          "{} {}x{}", options.model.kind, sign ? options.mode_options.get<train::PipelineOptions>().mlp_layers
               : options.model.layers,
          options.model.hidden);
      if (partial != nullptr) {
        std::lock_guard lock(partial->mutex);
        partial->report = report;
      }
    } catch (const InputError& e) {
      // Agreed, or met by every rank within a moment (a file every rank reads): otherwise
      // the job is taken down as for any rank's own error.
      if (!dynamic_cast<const AgreedInputError*>(&e) && !mpi::all_arrive(2.0)) {
        if (output != nullptr) fail_on_rank_zero(o, *partial, *output, mode, e.what(), 2);
        throw;
      }
      report["failed"] = {{"mode", mode}, {"error", e.what()}};
      failure.emplace(e.what(), e.where());
      break;
    } catch (const std::bad_alloc&) {
      // As main says it: out of memory, and where.
      const std::string where = failed_activity();
      if (output != nullptr)
        fail_on_rank_zero(o, *partial, *output, mode,
                          where.empty() ? std::string("out of memory")
                                        : fmt::format("out of memory while {}", where),
                          1);
      throw;
    } catch (const std::exception& e) {
      // This rank's own error (a library, an internal check, an injected fault): the job ends.
      if (output != nullptr) fail_on_rank_zero(o, *partial, *output, mode, e.what(), 1);
      throw;
    }
  }
  return failure;
}

// Rank 0: report.json, report.md and the plot into the hidden folder, which then becomes
// out_dir; the report is printed.
void write_report(const BenchOptions& o, datasets::AtomicOutput& output,
                  const nlohmann::json& report, bool failed) {
  const fs::path work_dir = output.temp_path();
  datasets::write_text_file(work_dir / "report.json", report.dump(2) + "\n");
  const std::string md = markdown(report);
  datasets::write_text_file(work_dir / "report.md", md);
  run_plot(work_dir, o.out_dir);
  // --force over a non-empty folder: the commit swaps the new report with the old one.
  output.commit();
  std::printf("%s", md.c_str());
  if (failed)
    log::info("wrote {} (the report of the {} that ran before --mode {} failed)",
              o.out_dir.string(),
              log::counted(static_cast<long long>(report["modes"].size()), "mode"),
              report["failed"]["mode"].get<std::string>());
}

// The bench under MPI: every mode in turn, then rank 0 writes the report.
void run_bench(BenchOptions& o) {
  auto comm = comm::make_mpi_communicator();
  nlohmann::json report = report_header(o, bench_dataset(o), comm->size());
  // What can be refused without data is refused for every mode before the first trains: a
  // pipeline without --data-parallel runs ranks / --stages groups.
  for (auto& options : o.mode_options) {
    if (options.mode_options.holds<train::PipelineOptions>()) {
      auto& pipeline = options.mode_options.edit<train::PipelineOptions>();
      if (!o.data_parallel_given && pipeline.stages > 0 && comm->size() % pipeline.stages == 0)
        pipeline.data_parallel = comm->size() / pipeline.stages;
    }
    train::check_mode_options(options, comm->size());
  }
  // The report folder is made only once what can be refused up front was: a bench refused
  // before any mode runs leaves no folder behind.
  std::optional<datasets::AtomicOutput> output;
  if (comm->rank() == 0) output.emplace(report_target(o), true);
  // Only rank 0 writes (metrics files, report); the other ranks never open this path.
  const fs::path work_dir = output ? output->temp_path() : o.out_dir;
  // Rank 0: an interrupt after a mode finished writes the report of those that did.
  auto partial = std::make_shared<PartialReport>();
  partial->report = report;
  struct ClearHook {
    ~ClearHook() { interrupt::set_interrupt_hook({}); }
  } clear_hook;
  if (output) {
    datasets::AtomicOutput* out = &*output;
    interrupt::set_interrupt_hook([&o, out, partial](int signal) -> std::string {
      std::lock_guard lock(partial->mutex);
      if (partial->written || partial->report["modes"].empty()) return "";
      // mpirun stops rank 0 with SIGTERM when another rank's error aborts the job: that rank
      // handed its error over first (peer_watch::goodbye), so the report names it.
      const auto failure = mpi::peer_watch::first_failure(signal == SIGTERM ? 0.3 : 0.0);
      if (failure.rank >= 0) {
        if (!write_partial(*partial, *out, "failed",
                           {{"mode", partial->running},
                            {"rank", failure.rank},
                            {"host", failure.host},
                            {"error", failure.message}}))
          return "";
        return fmt::format("--mode {} failed on rank {}: {}; wrote the partial report {} ({} "
                           "finished)",
                           partial->running, failure.rank, failure.message, o.out_dir.string(),
                           finished_modes(*partial));
      }
      if (!write_partial(*partial, *out, "interrupted",
                         {{"signal", interrupt::signal_name(signal)}, {"mode", partial->running}}))
        return "";
      return fmt::format("wrote the partial report {} ({} finished)", o.out_dir.string(),
                         finished_modes(*partial));
    });
  }
  comm->barrier();
  const std::optional<AgreedInputError> failure =
      run_modes(*comm, o, work_dir, report, output ? partial.get() : nullptr,
                output ? &*output : nullptr);
  // A report holds what finished; when the first mode fails (a partition of another rank
  // count), the error line is all there is to say and no folder is left.
  const bool anything_ran = !report["modes"].empty();
  if (comm->rank() == 0 && (anything_ran || !failure)) {
    std::lock_guard lock(partial->mutex);
    write_report(o, *output, report, failure.has_value());
    partial->written = true;
  }
  if (failure) throw *failure;
  comm->barrier();
}

std::function<void()> setup_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  add_bench_flags(app, *o);
  app.final_callback([&app, o] { check_bench_flags(app, *o); });
  return [o] { run_bench(*o); };
}

const Registrar registrar({"bench",
                           "Train several modes on the same partitions and report them side by side "
                           "(run under mpirun): time per epoch, bytes, memory and the best "
                           "validation value of each mode's metric (accuracy; dynamic mode: MSE, "
                           "lower is better, or AUC for link prediction). --task link with "
                           "--modes full (or sampled) benchmarks link prediction on a link "
                           "store's partition (the store's metric, the decoder, training edges "
                           "per second).",
                           true, setup_bench, 40});

}  // namespace
}  // namespace tessel::cli
