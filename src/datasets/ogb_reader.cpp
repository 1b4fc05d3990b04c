// OGB raw folder reader: locates the files, parses them in parallel as they inflate, checks
// every count and id, and hands graph, labels, feature row blocks and splits to a sink. The
// binary (npz) layout's arrays are read in ogb_npz.cpp.
#include "csr_build.hpp"
#include "csv_parse.hpp"
#include "npz.hpp"
#include "ogb_input.hpp"
#include "store_writer.hpp"
#include "text_reader.hpp"

#include "tessel/core/activity.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/timer.hpp"
#include "tessel/datasets/ogb.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

namespace tessel::datasets {

using detail::kParallelMin;

namespace fs = std::filesystem;
using detail::ChunkResult;
using detail::FieldKind;
using detail::LineChunkReader;
using detail::LineError;
using detail::OgbInputs;
using detail::Sink;
using detail::TextChunk;

namespace {

const char* const kSplitNames[3] = {"train", "valid", "test"};

// base.csv.gz, else base.csv, else empty.
fs::path find_table(const fs::path& base) {
  std::error_code ec;
  for (const char* ext : {".csv.gz", ".csv"}) {
    fs::path p = base;
    p += ext;
    if (fs::is_regular_file(p, ec)) return p;
  }
  return {};
}

fs::path require_table(const fs::path& base) {
  fs::path p = find_table(base);
  if (p.empty()) {
    fs::path shown = base;
    shown += ".csv.gz";
    TESSEL_FAIL("{}: no such file (plain .csv is accepted too); an OGB raw folder needs "
                "raw/edge, raw/num-node-list, raw/num-edge-list, raw/node-feat, raw/node-label "
                "and split/<name>/{{train,valid,test}}",
                shown.string());
  }
  return p;
}

std::string folder_name(const fs::path& dir) {
  fs::path d = fs::absolute(dir).lexically_normal();
  if (!d.has_filename()) d = d.parent_path();
  return d.filename().string();
}

OgbInputs locate(const fs::path& dir, const OgbOptions& options) {
  std::error_code ec;
  TESSEL_EXPECTS(!fs::exists(dir, ec) || fs::is_directory(dir, ec),
                 "{}: is a file; expected an OGB dataset folder (the one holding raw/ and split/)",
                 dir.string());
  TESSEL_EXPECTS(fs::is_directory(dir, ec), "{}: no such folder", dir.string());
  const fs::path raw = dir / "raw";
  TESSEL_EXPECTS(fs::is_directory(raw, ec),
                 "{}: no such folder; {} does not look like an OGB raw folder (raw/edge.csv.gz, "
                 "raw/num-node-list.csv.gz, ..., split/<name>/)",
                 raw.string(), dir.string());
  OgbInputs in;
  in.dir = dir;
  in.name = options.name.empty() ? folder_name(dir) : options.name;
  if (find_table(raw / "edge").empty() && fs::is_regular_file(raw / "data.npz", ec)) {
    in.npz = true;
    in.data_npz = raw / "data.npz";
    in.label_npz = raw / "node-label.npz";
    TESSEL_EXPECTS(fs::is_regular_file(in.label_npz, ec),
                   "{}: no such file (the binary OGB layout needs raw/data.npz and "
                   "raw/node-label.npz)",
                   in.label_npz.string());
  } else {
    in.edge = require_table(raw / "edge");
    in.num_nodes = require_table(raw / "num-node-list");
    in.num_edges = require_table(raw / "num-edge-list");
    in.feat = require_table(raw / "node-feat");
    in.label = require_table(raw / "node-label");
  }
  const fs::path split_root = dir / "split";
  TESSEL_EXPECTS(
      fs::is_directory(split_root, ec),
      "{}: no such folder; an OGB raw folder has split/<name>/{{train,valid,test}}.csv.gz",
      split_root.string());
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(split_root, ec))
    if (entry.is_directory()) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  std::string listed;
  for (const auto& n : names)
    listed += (listed.empty() ? "" : ", ") + n;
  if (!options.split.empty()) {
    TESSEL_EXPECTS(std::find(names.begin(), names.end(), options.split) != names.end(),
                   "{}: no split \"{}\" (available: {})", split_root.string(), options.split,
                   listed.empty() ? "none" : listed);
    in.split_name = options.split;
  } else {
    TESSEL_EXPECTS(!names.empty(), "{}: no split folder inside", split_root.string());
    TESSEL_EXPECTS(names.size() == 1, "{}: several splits ({}); choose one with --split NAME",
                   split_root.string(), listed);
    in.split_name = names[0];
  }
  for (int i = 0; i < 3; ++i)
    in.split[i] = require_table(split_root / in.split_name / kSplitNames[i]);
  return in;
}

// A percentage on stderr while a big file is read, only when stderr is a terminal.
class Progress {
public:
  Progress(std::string label, const LineChunkReader& reader)
      : label_(std::move(label)), reader_(reader),
        enabled_(log::stderr_is_tty() && log::level() <= log::Level::info) {}
  ~Progress() {
    if (printed_) std::fprintf(stderr, "\r\033[K");
  }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  void update() {
    if (!enabled_ || watch_.seconds() < 0.5) return;
    watch_.reset();
    const double total = static_cast<double>(std::max<std::int64_t>(reader_.file_bytes(), 1));
    std::fprintf(stderr, "\r%s %3.0f%%", label_.c_str(),
                 100.0 * static_cast<double>(reader_.file_bytes_read()) / total);
    std::fflush(stderr);
    printed_ = true;
  }

private:
  std::string label_;
  const LineChunkReader& reader_;
  bool enabled_;
  bool printed_ = false;
  Stopwatch watch_;
};

class MemorySink final : public Sink {
public:
  explicit MemorySink(Dataset& data) : data_(data) {}
  void graph(Csr&& graph) override { data_.graph = std::move(graph); }
  void labels(std::vector<std::int64_t>&& labels) override { data_.labels = std::move(labels); }
  void begin_features(std::int64_t n, std::int64_t f) override {
    data_.feature_dim = f;
    data_.features.assign(static_cast<std::size_t>(n * f), 0.0f);
  }
  void feature_rows(std::int64_t begin, const float* rows, std::int64_t count) override {
    std::copy(rows, rows + count * data_.feature_dim,
              data_.features.data() + begin * data_.feature_dim);
  }
  void split(int which, std::vector<NodeId>&& ids) override {
    (which == 0 ? data_.train : which == 1 ? data_.valid : data_.test) = std::move(ids);
  }

private:
  Dataset& data_;
};

class StoreSink final : public Sink {
public:
  explicit StoreSink(detail::StoreWriter& writer) : writer_(writer) {}
  void graph(Csr&& graph) override {
    writer_.write_graph(graph);
    graph = Csr(); // the graph is in the file now: free it
  }
  void labels(std::vector<std::int64_t>&& labels) override { writer_.write_labels(labels); }
  void begin_features(std::int64_t n, std::int64_t f) override { writer_.begin_features(n, f); }
  void feature_rows(std::int64_t begin, const float* rows, std::int64_t count) override {
    writer_.write_feature_rows(begin, rows, count);
  }
  void split(int which, std::vector<NodeId>&& ids) override {
    writer_.write_split(kSplitNames[which], ids);
  }

private:
  detail::StoreWriter& writer_;
};

std::string base_name(const fs::path& p) {
  return p.filename().string();
}

ChunkResult failed(LineError error) {
  ChunkResult r;
  r.error = std::move(error);
  return r;
}

// Lines in [begin, end): newlines, plus a last line without one.
std::int64_t count_lines(const char* begin, const char* end) {
  std::int64_t n = std::count(begin, end, '\n');
  if (end > begin && end[-1] != '\n') ++n;
  return n;
}

// A file of one integer per line (counts, split ids), each checked by check(value) -> message
// (empty if fine).
template <class Check>
std::vector<std::int64_t> read_integer_column(const fs::path& file, ConvertReport& report,
                                              Check&& check) {
  LineChunkReader reader(file);
  std::vector<std::int64_t> values;
  std::vector<std::vector<std::int64_t>> slots(detail::parse_slots());
  detail::parse_chunks(
      reader,
      [&](const TextChunk& c, std::size_t slot) -> ChunkResult {
        auto& out = slots[slot];
        out.clear();
        const char* p = c.begin();
        const char* end = c.end();
        std::int64_t line = 0;
        for (; p < end; ++line) {
          const char* start = p;
          std::int64_t v = 0;
          const char* q = detail::parse_integer(p, end, v);
          if (!q || !detail::at_line_end(q, end))
            return failed(detail::bad_line(line, start, end, 1, FieldKind::integer));
          std::string problem = check(v);
          if (!problem.empty()) return failed({line, std::move(problem)});
          out.push_back(v);
          p = q;
        }
        return {line, {}};
      },
      [&](const TextChunk&, std::size_t slot, std::int64_t, std::int64_t) {
        values.insert(values.end(), slots[slot].begin(), slots[slot].end());
      });
  report.text_bytes += reader.text_bytes();
  report.input_bytes += reader.file_bytes();
  return values;
}

// The single integer of num-node-list / num-edge-list.
std::int64_t read_count(const fs::path& file, ConvertReport& report) {
  const auto values = read_integer_column(file, report, [](std::int64_t v) {
    return v < 0 ? fmt::format("count {} is negative", v) : std::string();
  });
  TESSEL_EXPECTS(!values.empty(), "{}: empty file, expected one count", file.string());
  TESSEL_EXPECTS(values.size() == 1,
                 "{}: {} lines, i.e. {} graphs; only single-graph (node property prediction) "
                 "datasets are supported",
                 file.string(), values.size(), values.size());
  return values[0];
}

template <class Id>
Csr read_edges_csv(const OgbInputs& in, std::int64_t n, std::int64_t m, ConvertReport& report) {
  std::vector<Id> src(static_cast<std::size_t>(m)), dst(static_cast<std::size_t>(m));
  LineChunkReader reader(in.edge);
  Progress progress("reading " + base_name(in.edge), reader);
  const std::string edge_count_file = base_name(in.num_edges);
  const std::string node_count_file = base_name(in.num_nodes);
  std::vector<std::vector<Id>> slots(detail::parse_slots()); // (src, dst) pairs
  const std::int64_t lines = detail::parse_chunks(
      reader,
      [&](const TextChunk& c, std::size_t slot) -> ChunkResult {
        auto& out = slots[slot];
        out.resize(static_cast<std::size_t>(2 * count_lines(c.begin(), c.end())));
        Id* o = out.data();
        const char* p = c.begin();
        const char* end = c.end();
        std::int64_t line = 0;
        for (; p < end; ++line) {
          const char* start = p;
          std::int64_t u = 0, v = 0;
          const char* q = detail::parse_integer(p, end, u);
          if (!q || !detail::at_separator(q, end))
            return failed(detail::bad_line(line, start, end, 2, FieldKind::integer));
          q = detail::parse_integer(q, end, v);
          if (!q || !detail::at_line_end(q, end))
            return failed(detail::bad_line(line, start, end, 2, FieldKind::integer));
          if (u < 0 || u >= n || v < 0 || v >= n)
            return failed(
                {line, fmt::format("edge {},{}: endpoint {} is not a node id ({} gives {} "
                                   "nodes, ids 0 to {})",
                                   u, v, (u < 0 || u >= n) ? u : v, node_count_file, n, n - 1)});
          *o++ = static_cast<Id>(u);
          *o++ = static_cast<Id>(v);
          p = q;
        }
        return {line, {}};
      },
      [&](const TextChunk&, std::size_t slot, std::int64_t first, std::int64_t count) {
        if (first + count > m)
          detail::throw_line_error(
              in.edge, m, fmt::format("more edges than the {} that {} gives", m, edge_count_file));
        const Id* pairs = slots[slot].data();
        for (std::int64_t i = 0; i < count; ++i) {
          src[static_cast<std::size_t>(first + i)] = pairs[2 * i];
          dst[static_cast<std::size_t>(first + i)] = pairs[2 * i + 1];
        }
        progress.update();
      });
  TESSEL_EXPECTS(lines == m, "{}: {} edges, but {} says {}", in.edge.string(), lines,
                 in.num_edges.string(), m);
  report.text_bytes += reader.text_bytes();
  report.input_bytes += reader.file_bytes();
  std::vector<std::vector<Id>>().swap(slots);
  return detail::csr_from_edges(n, src.data(), dst.data(), m);
}

// Labels grow with the rows the file really holds (never sized from num-node-list first), so a
// count that the file contradicts is an error before anything of that size is allocated.
std::vector<std::int64_t> read_labels_csv(const OgbInputs& in, std::int64_t n,
                                          ConvertReport& report) {
  std::vector<std::int64_t> labels;
  LineChunkReader reader(in.label);
  const std::string node_count_file = base_name(in.num_nodes);
  std::vector<std::vector<std::int64_t>> slots(detail::parse_slots());
  const std::int64_t lines = detail::parse_chunks(
      reader,
      [&](const TextChunk& c, std::size_t slot) -> ChunkResult {
        auto& out = slots[slot];
        out.clear();
        const char* p = c.begin();
        const char* end = c.end();
        std::int64_t line = 0;
        for (; p < end; ++line) {
          const char* start = p;
          std::int64_t v = 0;
          const char* q = detail::parse_label(p, end, v);
          if (!q || !detail::at_line_end(q, end)) {
            if (detail::count_fields(start, end) > 1)
              return failed({line, fmt::format("{} label columns; only single-label classification "
                                               "is supported (not multi-label data such as "
                                               "ogbn-proteins)",
                                               detail::count_fields(start, end))});
            return failed(detail::bad_line(line, start, end, 1, FieldKind::label));
          }
          if (v < -1)
            return failed(
                {line, fmt::format("label {} is negative (-1 or nan mean unlabeled)", v)});
          // A class id at or above the node count would size every model's output layer (and
          // its logits) by it: refuse it here rather than fail later with out of memory.
          if (v >= n)
            return failed({line, fmt::format("label {} is too large: class ids must be below the "
                                             "number of nodes ({}, from {})",
                                             v, n, node_count_file)});
          out.push_back(v);
          p = q;
        }
        return {line, {}};
      },
      [&](const TextChunk&, std::size_t slot, std::int64_t first, std::int64_t count) {
        if (first + count > n)
          detail::throw_line_error(
              in.label, n,
              fmt::format("more rows than the {} nodes that {} gives", n, node_count_file));
        labels.insert(labels.end(), slots[slot].begin(), slots[slot].end());
      });
  TESSEL_EXPECTS(lines == n, "{}: {} rows, but {} says {} nodes", in.label.string(), lines,
                 in.num_nodes.string(), n);
  report.text_bytes += reader.text_bytes();
  report.input_bytes += reader.file_bytes();
  return labels;
}

std::int64_t read_features_csv(const OgbInputs& in, std::int64_t n, Sink& sink,
                               ConvertReport& report) {
  LineChunkReader reader(in.feat);
  Progress progress("reading " + base_name(in.feat), reader);
  std::int64_t f = 0;
  {
    TextChunk first;
    if (reader.next(first)) {
      f = detail::count_fields(first.begin(), first.end());
      TESSEL_EXPECTS(f > 0, "{} line 1: empty line, expected feature values", in.feat.string());
      reader.unget(std::move(first));
    }
  }
  sink.begin_features(n, f);
  const std::string node_count_file = base_name(in.num_nodes);
  std::vector<std::vector<float>> slots(detail::parse_slots());
  const std::int64_t lines = detail::parse_chunks(
      reader,
      [&](const TextChunk& c, std::size_t slot) -> ChunkResult {
        auto& out = slots[slot];
        out.resize(static_cast<std::size_t>(count_lines(c.begin(), c.end()) * f));
        float* o = out.data();
        const char* p = c.begin();
        const char* end = c.end();
        std::int64_t line = 0;
        for (; p < end; ++line) {
          const char* start = p;
          for (std::int64_t j = 0; j < f; ++j) {
            float x = 0;
            const char* q = detail::parse_real(p, end, x);
            if (!q || !std::isfinite(x))
              return failed(detail::bad_line(line, start, end, f, FieldKind::number));
            p = q;
            if (!(j + 1 < f ? detail::at_separator(p, end) : detail::at_line_end(p, end)))
              return failed(detail::bad_line(line, start, end, f, FieldKind::number));
            *o++ = x;
          }
        }
        return {line, {}};
      },
      [&](const TextChunk&, std::size_t slot, std::int64_t first, std::int64_t count) {
        if (first + count > n)
          detail::throw_line_error(
              in.feat, n,
              fmt::format("more rows than the {} nodes that {} gives", n, node_count_file));
        sink.feature_rows(first, slots[slot].data(), count);
        progress.update();
      });
  TESSEL_EXPECTS(lines == n, "{}: {} rows, but {} says {} nodes", in.feat.string(), lines,
                 in.num_nodes.string(), n);
  report.text_bytes += reader.text_bytes();
  report.input_bytes += reader.file_bytes();
  return f;
}

std::vector<NodeId> read_split_csv(const fs::path& file, std::int64_t n,
                                   const std::string& count_source, ConvertReport& report) {
  return read_integer_column(file, report, [&](std::int64_t v) {
    return v < 0 || v >= n
               ? fmt::format("node id {} is out of range ({} gives {} nodes, ids 0 to {})", v,
                             count_source, n, n - 1)
               : std::string();
  });
}

// Splits must not share nodes (a node both trained on and tested on is a broken split).
void check_splits_disjoint(const OgbInputs& in, std::int64_t n,
                           const std::vector<NodeId>* splits[3]) {
  std::vector<std::int8_t> owner(static_cast<std::size_t>(n), -1);
  for (int s = 0; s < 3; ++s) {
    const auto& ids = *splits[s];
    for (std::size_t i = 0; i < ids.size(); ++i) {
      auto& o = owner[static_cast<std::size_t>(ids[i])];
      if (o >= 0)
        TESSEL_FAIL("{} line {}: node {} is already in the {} split", in.split[s].string(), i + 1,
                    ids[i], kSplitNames[o]);
      o = static_cast<std::int8_t>(s);
    }
  }
}

// ---- plausibility of the counts, before anything is sized by them ----

// Most text bytes a table file can hold: its size, or for gzip what deflate can expand it to
// (at most 1032 output bytes per input byte, plus slack for member headers).
std::int64_t max_text_bytes(const fs::path& file) {
  std::error_code ec;
  const auto size = static_cast<std::int64_t>(fs::file_size(file, ec));
  if (ec) return std::numeric_limits<std::int64_t>::max();
  const std::string name = file.filename().string();
  const bool gzip = name.size() > 3 && name.compare(name.size() - 3, 3, ".gz") == 0;
  return gzip ? size * 1032 + 4096 : size;
}

// The memory this process may use: physical memory plus swap, or the cgroup's limit if lower.
std::int64_t usable_memory_bytes() {
  std::int64_t total = 0;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib) {
    std::getline(meminfo, unit);
    if (key == "MemTotal:" || key == "SwapTotal:") total += kib * 1024;
  }
  if (total <= 0) return std::numeric_limits<std::int64_t>::max();
  std::ifstream cgroup("/sys/fs/cgroup/memory.max");
  std::string limit;
  if (cgroup >> limit && !limit.empty() && limit != "max") {
    std::int64_t bytes = 0;
    std::istringstream(limit) >> bytes;
    if (bytes > 0) total = std::min(total, bytes);
  }
  return total;
}

std::string gigabytes(double bytes) {
  return fmt::format("{:.1f} GB", bytes / 1e9);
}

// Refuses counts that the files cannot hold or this machine cannot store, before any array is
// sized by them: a corrupt num-node-list / num-edge-list must be an error message, not an
// allocation that the kernel kills.
void check_counts_plausible(const OgbInputs& in, std::int64_t n, std::int64_t m) {
  if (!in.npz) {
    // Each edge row holds at least "u,v\n"; a row of node-label at least "\n" (an empty line
    // is an unlabeled node).
    const std::int64_t edge_bytes = max_text_bytes(in.edge);
    TESSEL_EXPECTS(m <= edge_bytes / 4 + 1,
                   "{}: says {} edges, but {} can hold at most {} rows (one per edge)",
                   in.num_edges.string(), m, in.edge.string(), edge_bytes / 4 + 1);
    const std::int64_t label_bytes = max_text_bytes(in.label);
    TESSEL_EXPECTS(n <= label_bytes + 1,
                   "{}: says {} nodes, but {} can hold at most {} rows (one per node)",
                   in.num_nodes.string(), n, in.label.string(), label_bytes + 1);
  }
  // Edge endpoints twice (source and destination lists) plus the CSR built from them, the
  // labels and the row pointers: what the edges phase holds at its peak.
  const double id_bytes =
      n <= static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max()) ? 4.0 : 8.0;
  const double need = static_cast<double>(m) * (2 * id_bytes + 8) + static_cast<double>(n) * 16;
  const auto usable = static_cast<double>(usable_memory_bytes());
  TESSEL_EXPECTS(need <= usable,
                 "{} nodes and {} edges ({} and {}) need at least {} of memory to convert, more "
                 "than this machine has ({}, memory and swap)",
                 n, m, in.npz ? in.data_npz.string() + " num_nodes_list" : in.num_nodes.string(),
                 in.npz ? std::string("edge_index") : in.num_edges.string(), gigabytes(need),
                 gigabytes(usable));
}

// Reads everything into the sink; returns the dataset's summary.
ConvertReport read_into(const OgbInputs& in, const OgbOptions& options, Sink& sink) {
  ConvertReport report;
  report.npz = in.npz;
  report.split = in.split_name;
  Stopwatch phase;
  const auto end_phase = [&](const char* name) {
    report.phases.emplace_back(name, phase.seconds());
    log::debug("convert: {} took {:.2f} s", name, phase.seconds());
    phase.reset();
  };
  DatasetInfo& info = report.info;
  info.name = in.name;
  info.version = kStoreVersion;
  info.directed = options.directed && !options.symmetrize;

  std::unique_ptr<detail::NpzArchive> archive;
  std::int64_t n = 0, m = 0;
  if (in.npz) {
    ScopedActivity activity("reading " + in.data_npz.string());
    archive = std::make_unique<detail::NpzArchive>(in.data_npz);
    report.input_bytes += archive->file_bytes();
    for (const char* key : {"edge_index", "num_nodes_list", "node_feat"})
      if (!archive->has(key)) archive->open(key); // throws, naming the key and what is there
    auto counts = archive->open("num_nodes_list");
    TESSEL_EXPECTS(counts.header().count() == 1,
                   "{}: {} entries; only single-graph datasets are supported", counts.where(),
                   counts.header().count());
    counts.read(&n, 1);
    TESSEL_EXPECTS(n >= 0, "{}: negative node count {}", counts.where(), n);
    check_npz_shapes(in, *archive, n, &m);
  } else {
    n = read_count(in.num_nodes, report);
    m = read_count(in.num_edges, report);
  }
  check_counts_plausible(in, n, m);
  info.num_nodes = n;
  end_phase("counts");

  // Labels first: their row count is checked against num-node-list before the edges phase
  // allocates anything per node. They are written after the graph (the store's layout).
  std::vector<std::int64_t> labels;
  {
    ScopedActivity activity("reading " + (in.npz ? in.label_npz : in.label).string());
    labels = in.npz ? read_labels_npz(in, n, report) : read_labels_csv(in, n, report);
  }
  std::int64_t max_label = -1;
#pragma omp parallel for reduction(max : max_label) schedule(static) if (n > kParallelMin)
  for (std::int64_t v = 0; v < n; ++v)
    max_label = std::max(max_label, labels[static_cast<std::size_t>(v)]);
  info.num_classes = max_label + 1;
  end_phase("labels");

  Csr graph;
  {
    ScopedActivity activity("reading " + (in.npz ? in.data_npz : in.edge).string());
    const bool narrow = n <= static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max());
    if (in.npz)
      graph = narrow ? read_edges_npz<std::uint32_t>(in, *archive, n, report)
                     : read_edges_npz<std::int64_t>(in, *archive, n, report);
    else
      graph = narrow ? read_edges_csv<std::uint32_t>(in, n, m, report)
                     : read_edges_csv<std::int64_t>(in, n, m, report);
  }
  end_phase("edges");
  if (options.symmetrize) {
    ScopedActivity activity("symmetrizing the graph");
    graph = symmetrize(graph);
    end_phase("symmetrize");
  }
  info.num_edges = graph.num_edges();
  {
    ScopedActivity activity("writing the graph");
    sink.graph(std::move(graph));
    sink.labels(std::move(labels));
  }
  end_phase("write graph");

  {
    ScopedActivity activity("reading " + (in.npz ? in.data_npz : in.feat).string());
    info.feature_dim = in.npz ? read_features_npz(*archive, n, sink, report)
                              : read_features_csv(in, n, sink, report);
  }
  end_phase("features");

  ScopedActivity activity("reading the split " + in.split_name);
  std::vector<NodeId> splits[3];
  const std::string count_source = in.npz ? "num_nodes_list" : base_name(in.num_nodes);
  for (int s = 0; s < 3; ++s)
    splits[s] = read_split_csv(in.split[s], n, count_source, report);
  // A store with no training node converted, then failed at `train`; the valid and test
  // splits may be empty.
  TESSEL_EXPECTS(!splits[0].empty(),
                 "{}: the training split is empty; expected the training nodes' ids, one per "
                 "line (a node property prediction split needs at least one)",
                 in.split[0].string());
  const std::vector<NodeId>* views[3] = {&splits[0], &splits[1], &splits[2]};
  check_splits_disjoint(in, n, views);
  info.num_train = static_cast<std::int64_t>(splits[0].size());
  info.num_valid = static_cast<std::int64_t>(splits[1].size());
  info.num_test = static_cast<std::int64_t>(splits[2].size());
  for (int s = 0; s < 3; ++s)
    sink.split(s, std::move(splits[s]));
  end_phase("splits");
  return report;
}

} // namespace

// The CSV readers, for the link-prediction layout (ogb_link.cpp).
namespace detail {

fs::path ogb_find_table(const fs::path& base) {
  return find_table(base);
}

std::int64_t ogb_read_count(const fs::path& file, ConvertReport& report) {
  return read_count(file, report);
}

Csr ogb_read_edges_csv(const OgbInputs& in, std::int64_t n, std::int64_t m,
                       ConvertReport& report) {
  const std::int64_t edge_bytes = max_text_bytes(in.edge);
  TESSEL_EXPECTS(m <= edge_bytes / 4 + 1,
                 "{}: says {} edges, but {} can hold at most {} rows (one per edge)",
                 in.num_edges.string(), m, in.edge.string(), edge_bytes / 4 + 1);
  const bool narrow = n <= static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max());
  return narrow ? read_edges_csv<std::uint32_t>(in, n, m, report)
                : read_edges_csv<std::int64_t>(in, n, m, report);
}

std::int64_t ogb_read_features_csv(const OgbInputs& in, std::int64_t n, Sink& sink,
                                   ConvertReport& report) {
  return read_features_csv(in, n, sink, report);
}

} // namespace detail

Dataset read_ogb_folder(const fs::path& dir, const OgbOptions& options) {
  const OgbInputs in = locate(dir, options);
  Dataset data;
  MemorySink sink(data);
  const ConvertReport report = read_into(in, options, sink);
  data.name = report.info.name;
  data.num_nodes = report.info.num_nodes;
  data.num_classes = report.info.num_classes;
  data.feature_dim = report.info.feature_dim;
  data.directed = report.info.directed;
  return data;
}

ConvertReport convert_ogb_folder(const fs::path& dir, const fs::path& out,
                                 const OgbOptions& options) {
  Stopwatch total;
  const OgbInputs in = locate(dir, options);
  detail::StoreWriter writer(out, options.feature_dtype);
  StoreSink sink(writer);
  ConvertReport report = read_into(in, options, sink);
  Stopwatch commit;
  writer.commit(report.info);
  report.phases.emplace_back("close", commit.seconds());
  std::error_code ec;
  report.info.file_bytes = static_cast<std::int64_t>(fs::file_size(out, ec));
  report.seconds = total.seconds();
  return report;
}

} // namespace tessel::datasets
