// OGB raw folder reader: locates the files, parses them in parallel as they inflate, checks
// every count and id, and hands graph, labels, feature row blocks and splits to a sink.
#include "csr_build.hpp"
#include "csv_parse.hpp"
#include "npz.hpp"
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
using detail::TextChunk;

namespace {

const char* const kSplitNames[3] = {"train", "valid", "test"};

// The files of one OGB raw folder, resolved and checked to exist before any parsing starts.
struct OgbInputs {
  fs::path dir;
  std::string name;
  bool npz = false;
  fs::path edge, num_nodes, num_edges, feat, label; // CSV layout
  fs::path data_npz, label_npz;                     // binary layout
  std::string split_name;
  fs::path split[3];
};

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

// Where parsed pieces go: a Dataset in memory, or a store being written.
class Sink {
public:
  virtual ~Sink() = default;
  virtual void graph(Csr&& graph) = 0;
  virtual void labels(std::vector<std::int64_t>&& labels) = 0;
  virtual void begin_features(std::int64_t num_nodes, std::int64_t feature_dim) = 0;
  virtual void feature_rows(std::int64_t begin, const float* rows, std::int64_t count) = 0;
  virtual void split(int which, std::vector<NodeId>&& ids) = 0;
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

// ---- papers100M binary layout ----

template <class Id>
Csr read_edges_npz(const OgbInputs& in, detail::NpzArchive& archive, std::int64_t n,
                   ConvertReport& report) {
  auto array = archive.open("edge_index");
  const auto& h = array.header();
  TESSEL_EXPECTS(h.shape.size() == 2 && h.shape[0] == 2, "{}: is {}, expected [2, num_edges]",
                 array.where(), h.describe());
  const std::int64_t m = h.shape[1];
  if (archive.has("num_edges_list")) {
    auto counts = archive.open("num_edges_list");
    TESSEL_EXPECTS(counts.header().count() == 1,
                   "{}: {} entries; only single-graph datasets are supported", counts.where(),
                   counts.header().count());
    std::int64_t listed = 0;
    counts.read(&listed, 1);
    TESSEL_EXPECTS(listed == m, "{}: says {} edges, but edge_index holds {}", counts.where(),
                   listed, m);
  }
  std::vector<Id> src(static_cast<std::size_t>(m)), dst(static_cast<std::size_t>(m));
  std::vector<std::int64_t> block(1u << 20);
  // C order: all sources, then all destinations. Fortran order: (src, dst) pairs.
  const std::int64_t total = 2 * m;
  for (std::int64_t done = 0; done < total;) {
    const std::int64_t k =
        std::min<std::int64_t>(static_cast<std::int64_t>(block.size()), total - done);
    array.read(block.data(), k);
    std::int64_t bad = -1;
#pragma omp parallel for reduction(max : bad) schedule(static) if (k > kParallelMin)
    for (std::int64_t i = 0; i < k; ++i) {
      const std::int64_t e = done + i;
      const std::int64_t v = block[static_cast<std::size_t>(i)];
      if (v < 0 || v >= n) bad = std::max(bad, e);
      const bool is_src = h.fortran_order ? (e % 2 == 0) : (e < m);
      const std::int64_t col = h.fortran_order ? e / 2 : (e < m ? e : e - m);
      (is_src ? src : dst)[static_cast<std::size_t>(col)] = static_cast<Id>(v);
    }
    if (bad >= 0) {
      const std::int64_t row = h.fortran_order ? bad % 2 : bad / m;
      const std::int64_t col = h.fortran_order ? bad / 2 : bad % m;
      std::int64_t value = 0;
      for (std::int64_t i = 0; i < k; ++i)
        if (done + i == bad) value = block[static_cast<std::size_t>(i)];
      TESSEL_FAIL("{}: edge_index[{}][{}] = {} is not a node id (num_nodes_list gives {} nodes)",
                  array.where(), row, col, value, n);
    }
    done += k;
  }
  report.text_bytes += array.bytes_read();
  return detail::csr_from_edges(n, src.data(), dst.data(), m);
}

std::vector<std::int64_t> read_labels_npz(const OgbInputs& in, std::int64_t n,
                                          ConvertReport& report) {
  detail::NpzArchive archive(in.label_npz);
  report.input_bytes += archive.file_bytes();
  auto array = archive.open("node_label");
  const auto& h = array.header();
  TESSEL_EXPECTS(h.count() == n &&
                     (h.shape.size() == 1 || (h.shape.size() == 2 && h.shape[1] == 1)),
                 "{}: is {}, expected [{}] or [{}, 1] (one label per node)", array.where(),
                 h.describe(), n, n);
  std::vector<double> raw(static_cast<std::size_t>(n));
  array.read(raw.data(), n);
  std::vector<std::int64_t> labels(static_cast<std::size_t>(n));
  for (std::int64_t v = 0; v < n; ++v) {
    const double x = raw[static_cast<std::size_t>(v)];
    if (std::isnan(x)) {
      labels[static_cast<std::size_t>(v)] = -1;
      continue;
    }
    TESSEL_EXPECTS(std::isfinite(x) && x == std::floor(x) && x >= -1 && x < 9e15,
                   "{}: label of node {} is {}, not a class id (an integer, or NaN for unlabeled)",
                   array.where(), v, x);
    TESSEL_EXPECTS(x < static_cast<double>(n),
                   "{}: label of node {} is {:.0f}, too large: class ids must be below the number "
                   "of nodes ({}, from num_nodes_list)",
                   array.where(), v, x, n);
    labels[static_cast<std::size_t>(v)] = static_cast<std::int64_t>(x);
  }
  report.text_bytes += array.bytes_read();
  return labels;
}

std::int64_t read_features_npz(detail::NpzArchive& archive, std::int64_t n, Sink& sink,
                               ConvertReport& report) {
  auto array = archive.open("node_feat");
  const auto& h = array.header();
  TESSEL_EXPECTS(h.shape.size() == 2 && h.shape[0] == n, "{}: is {}, expected [{}, feature_dim]",
                 array.where(), h.describe(), n);
  TESSEL_EXPECTS(!h.fortran_order || h.shape[1] == 1,
                 "{}: Fortran-order feature matrices are not supported (save it in C order)",
                 array.where());
  const std::int64_t f = h.shape[1];
  sink.begin_features(n, f);
  const std::int64_t rows_per_block =
      std::max<std::int64_t>(1, (16 << 20) / std::max<std::int64_t>(1, 4 * f));
  std::vector<float> block;
  for (std::int64_t r = 0; r < n; r += rows_per_block) {
    const std::int64_t k = std::min(rows_per_block, n - r);
    block.resize(static_cast<std::size_t>(k * f));
    array.read(block.data(), k * f);
    std::int64_t bad = -1;
    const auto count = static_cast<std::int64_t>(block.size());
#pragma omp parallel for reduction(max : bad) schedule(static) if (count > kParallelMin)
    for (std::int64_t i = 0; i < count; ++i)
      if (!std::isfinite(block[static_cast<std::size_t>(i)])) bad = std::max(bad, i);
    if (bad >= 0)
      TESSEL_FAIL("{}: node_feat[{}][{}] is not a finite number", array.where(), r + bad / f,
                  bad % f);
    sink.feature_rows(r, block.data(), k);
  }
  report.text_bytes += array.bytes_read();
  return f;
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

// The binary layout's other arrays must agree with num_nodes_list before anything is read.
void check_npz_shapes(const OgbInputs& in, detail::NpzArchive& archive, std::int64_t n,
                      std::int64_t* m) {
  {
    auto edges = archive.open("edge_index");
    const auto& h = edges.header();
    TESSEL_EXPECTS(h.shape.size() == 2 && h.shape[0] == 2, "{}: is {}, expected [2, num_edges]",
                   edges.where(), h.describe());
    *m = h.shape[1];
  }
  {
    auto feat = archive.open("node_feat");
    const auto& h = feat.header();
    TESSEL_EXPECTS(h.shape.size() == 2 && h.shape[0] == n,
                   "{}: is {}, expected [{}, feature_dim] (num_nodes_list gives {} nodes)",
                   feat.where(), h.describe(), n, n);
  }
  detail::NpzArchive labels(in.label_npz);
  auto label = labels.open("node_label");
  const auto& h = label.header();
  TESSEL_EXPECTS(h.count() == n && (h.shape.size() == 1 || (h.shape.size() == 2 && h.shape[1] == 1)),
                 "{}: is {}, expected [{}] or [{}, 1] (num_nodes_list gives {} nodes)",
                 label.where(), h.describe(), n, n, n);
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
  detail::StoreWriter writer(out);
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
