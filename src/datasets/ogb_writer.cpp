// Writes a Dataset as an OGB raw folder: gzip CSV made block by block in parallel (one gzip
// member per block), or papers100M's npz layout.
#include "npz.hpp"

#include "tessel/core/error.hpp"
#include "tessel/datasets/atomic_output.hpp"
#include "tessel/datasets/ogb.hpp"

#include <omp.h>
#include <zlib.h>

#ifdef TESSEL_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#endif

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>

namespace tessel::datasets {

namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kTargetBlockBytes = 4 << 20;

#ifdef TESSEL_HAVE_ISAL
// ISA-L's level 1 compresses several times faster than zlib's, at a similar ratio.
bool isal_gzip_member(const std::string& text, std::string& out) {
  thread_local std::vector<std::uint8_t> level_buf(ISAL_DEF_LVL1_DEFAULT);
  isal_zstream zs;
  isal_deflate_stateless_init(&zs);
  zs.level = 1;
  zs.level_buf = level_buf.data();
  zs.level_buf_size = static_cast<std::uint32_t>(level_buf.size());
  zs.gzip_flag = IGZIP_GZIP; // a fixed generic header (mtime 0): reproducible members
  zs.end_of_stream = 1;
  zs.flush = NO_FLUSH;
  out.resize(text.size() + text.size() / 8 + 1024);
  zs.next_in = reinterpret_cast<std::uint8_t*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<std::uint32_t>(text.size());
  zs.next_out = reinterpret_cast<std::uint8_t*>(out.data());
  zs.avail_out = static_cast<std::uint32_t>(out.size());
  if (isal_deflate_stateless(&zs) != COMP_OK) return false;
  out.resize(zs.total_out);
  return true;
}
#endif

bool gzip_member(const std::string& text, std::string& out, int level) {
#ifdef TESSEL_HAVE_ISAL
  if (level == 1 && isal_gzip_member(text, out)) return true;
#endif
  z_stream zs{};
  // 15 + 16: gzip wrapper. zlib writes mtime 0, so members are reproducible.
  if (deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return false;
  out.resize(deflateBound(&zs, static_cast<uLong>(text.size())) + 64);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return rc == Z_STREAM_END;
}

// Writes num_blocks blocks of text, each made by format(block, out) on an OpenMP thread. Block
// boundaries come from the caller, not the thread count, so the bytes are reproducible.
void write_blocks(const fs::path& path, std::int64_t num_blocks,
                  const std::function<void(std::int64_t, std::string&)>& format,
                  const OgbWriteOptions& options) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  TESSEL_EXPECTS(f != nullptr, "cannot create {}: {}", path.string(), std::strerror(errno));
  const auto batch = static_cast<std::int64_t>(2 * std::max(1, omp_get_max_threads()));
  std::vector<std::string> text(static_cast<std::size_t>(batch)),
      packed(static_cast<std::size_t>(batch));
  const std::int64_t blocks = std::max<std::int64_t>(num_blocks, options.gzip ? 1 : 0);
  for (std::int64_t b0 = 0; b0 < blocks; b0 += batch) {
    const std::int64_t k = std::min(batch, blocks - b0);
    std::atomic<bool> failed{false};
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t i = 0; i < k; ++i) {
      auto& t = text[static_cast<std::size_t>(i)];
      t.clear();
      if (b0 + i < num_blocks) format(b0 + i, t);
      if (options.gzip && !gzip_member(t, packed[static_cast<std::size_t>(i)], options.gzip_level))
        failed = true;
    }
    TESSEL_EXPECTS(!failed, "{}: gzip compression failed", path.string());
    for (std::int64_t i = 0; i < k; ++i) {
      const auto& out =
          options.gzip ? packed[static_cast<std::size_t>(i)] : text[static_cast<std::size_t>(i)];
      if (std::fwrite(out.data(), 1, out.size(), f.get()) != out.size())
        TESSEL_FAIL("writing {} failed (disk full?)", output_name(path).string());
    }
  }
  TESSEL_EXPECTS(std::fflush(f.get()) == 0, "writing {} failed (disk full?)",
                 output_name(path).string());
}

void append_int(std::string& out, std::int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

void append_float(std::string& out, float v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v); // shortest form that reads back exactly
  out.append(buf, r.ptr);
}

fs::path table(const fs::path& base, const OgbWriteOptions& options) {
  fs::path p = base;
  p += options.gzip ? ".csv.gz" : ".csv";
  return p;
}

// One integer per line.
void write_column(const fs::path& path, const std::vector<std::int64_t>& values,
                  const OgbWriteOptions& options, bool nan_for_negative = false) {
  constexpr std::int64_t kRows = 1 << 19;
  const auto n = static_cast<std::int64_t>(values.size());
  write_blocks(
      path, (n + kRows - 1) / kRows,
      [&](std::int64_t b, std::string& out) {
        for (std::int64_t i = b * kRows; i < std::min(n, (b + 1) * kRows); ++i) {
          const auto v = values[static_cast<std::size_t>(i)];
          if (nan_for_negative && v < 0)
            out += "nan";
          else
            append_int(out, v);
          out += '\n';
        }
      },
      options);
}

void write_edges(const fs::path& path, const Csr& graph, const OgbWriteOptions& options) {
  constexpr std::int64_t kEdges = 1 << 18;
  const std::int64_t m = graph.num_edges();
  write_blocks(
      path, (m + kEdges - 1) / kEdges,
      [&](std::int64_t b, std::string& out) {
        const std::int64_t e0 = b * kEdges, e1 = std::min(m, (b + 1) * kEdges);
        out.reserve(static_cast<std::size_t>((e1 - e0) * 18));
        // The row holding edge e0: the last row starting at or before it.
        std::int64_t v = std::upper_bound(graph.indptr.begin(), graph.indptr.end(), e0) -
                         graph.indptr.begin() - 1;
        for (std::int64_t e = e0; e < e1; ++e) {
          while (graph.indptr[static_cast<std::size_t>(v) + 1] <= e)
            ++v;
          append_int(out, graph.indices[static_cast<std::size_t>(e)]);
          out += ',';
          append_int(out, v);
          out += '\n';
        }
      },
      options);
}

void write_features(const fs::path& path, const Dataset& data, const OgbWriteOptions& options) {
  const std::int64_t f = data.feature_dim;
  const std::int64_t rows =
      std::max<std::int64_t>(1, kTargetBlockBytes / std::max<std::int64_t>(1, 11 * f));
  const std::int64_t n = data.num_nodes;
  write_blocks(
      path, (n + rows - 1) / rows,
      [&](std::int64_t b, std::string& out) {
        const std::int64_t r1 = std::min(n, (b + 1) * rows);
        out.reserve(static_cast<std::size_t>((r1 - b * rows) * f * 12));
        for (std::int64_t r = b * rows; r < r1; ++r) {
          const float* x = data.features.data() + r * f;
          for (std::int64_t j = 0; j < f; ++j) {
            if (j) out += ',';
            append_float(out, x[j]);
          }
          out += '\n';
        }
      },
      options);
}

} // namespace

void write_ogb_folder(const Dataset& data, const fs::path& dir, const OgbWriteOptions& options) {
  data.validate("dataset " + data.name);
  TESSEL_EXPECTS(static_cast<std::int64_t>(data.features.size()) ==
                     data.num_nodes * data.feature_dim,
                 "write_ogb_folder: dataset {} has no features loaded", data.name);
  TESSEL_EXPECTS(!options.split_name.empty() && options.split_name.find('/') == std::string::npos,
                 "write_ogb_folder: bad split name \"{}\"", options.split_name);
  std::error_code ec;
  if (fs::exists(dir, ec))
    TESSEL_EXPECTS(fs::is_directory(dir, ec) && fs::is_empty(dir, ec),
                   "{} already exists and is not an empty folder; remove it or choose another",
                   dir.string());
  AtomicOutput output(dir, true);
  const fs::path root = output.temp_path();
  const fs::path raw = root / "raw";
  const fs::path split = root / "split" / options.split_name;
  fs::create_directories(raw, ec);
  fs::create_directories(split, ec);
  TESSEL_EXPECTS(!ec, "cannot create folders under {}: {}", root.string(), ec.message());

  if (options.npz) {
    const std::int64_t m = data.num_edges();
    std::vector<std::int64_t> edge_index(static_cast<std::size_t>(2 * m));
    for (std::int64_t v = 0; v < data.num_nodes; ++v)
      for (EdgeId e = data.graph.indptr[static_cast<std::size_t>(v)];
           e < data.graph.indptr[static_cast<std::size_t>(v) + 1]; ++e) {
        edge_index[static_cast<std::size_t>(e)] = data.graph.indices[static_cast<std::size_t>(e)];
        edge_index[static_cast<std::size_t>(m + e)] = v;
      }
    const std::int64_t num_nodes[1] = {data.num_nodes};
    const std::int64_t num_edges[1] = {m};
    detail::write_npz(raw / "data.npz",
                      {{"edge_index", "<i8", {2, m}, edge_index.data(), edge_index.size() * 8},
                       {"num_nodes_list", "<i8", {1}, num_nodes, 8},
                       {"num_edges_list", "<i8", {1}, num_edges, 8},
                       {"node_feat",
                        "<f4",
                        {data.num_nodes, data.feature_dim},
                        data.features.data(),
                        data.features.size() * 4}},
                      options.npz_deflate, options.npz_zip64);
    std::vector<float> labels(data.labels.size());
    for (std::size_t v = 0; v < labels.size(); ++v)
      labels[v] = data.labels[v] < 0 ? std::numeric_limits<float>::quiet_NaN()
                                     : static_cast<float>(data.labels[v]);
    detail::write_npz(
        raw / "node-label.npz",
        {{"node_label", "<f4", {data.num_nodes, 1}, labels.data(), labels.size() * 4}},
        options.npz_deflate, options.npz_zip64);
  } else {
    write_column(table(raw / "num-node-list", options), {data.num_nodes}, options);
    write_column(table(raw / "num-edge-list", options), {data.num_edges()}, options);
    write_edges(table(raw / "edge", options), data.graph, options);
    write_features(table(raw / "node-feat", options), data, options);
    write_column(table(raw / "node-label", options), data.labels, options, true);
  }
  write_column(table(split / "train", options), data.train, options);
  write_column(table(split / "valid", options), data.valid, options);
  write_column(table(split / "test", options), data.test, options);
  output.commit();
}

} // namespace tessel::datasets
