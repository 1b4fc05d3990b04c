// OGB raw folder reader, the binary layout of papers100M (data.npz and node-label.npz): shapes
// checked against num_nodes_list, edges, labels and feature rows read by streaming.
#include "ogb_input.hpp"

#include "csr_build.hpp"

#include "tessel/core/error.hpp"

#include <algorithm>
#include <cmath>

namespace tessel::datasets::detail {

template <class Id>
Csr read_edges_npz(const OgbInputs& in, NpzArchive& archive, std::int64_t n,
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
  return csr_from_edges(n, src.data(), dst.data(), m);
}

std::vector<std::int64_t> read_labels_npz(const OgbInputs& in, std::int64_t n,
                                          ConvertReport& report) {
  NpzArchive archive(in.label_npz);
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

std::int64_t read_features_npz(NpzArchive& archive, std::int64_t n, Sink& sink,
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
template Csr read_edges_npz<std::uint32_t>(const OgbInputs&, NpzArchive&, std::int64_t,
                                           ConvertReport&);
template Csr read_edges_npz<std::int64_t>(const OgbInputs&, NpzArchive&, std::int64_t,
                                          ConvertReport&);

void check_npz_shapes(const OgbInputs& in, NpzArchive& archive, std::int64_t n, std::int64_t* m) {
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
  NpzArchive labels(in.label_npz);
  auto label = labels.open("node_label");
  const auto& h = label.header();
  TESSEL_EXPECTS(h.count() == n &&
                     (h.shape.size() == 1 || (h.shape.size() == 2 && h.shape[1] == 1)),
                 "{}: is {}, expected [{}] or [{}, 1] (num_nodes_list gives {} nodes)",
                 label.where(), h.describe(), n, n, n);
}

} // namespace tessel::datasets::detail
