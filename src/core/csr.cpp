// CSR construction, validation, sorting and transposition.
#include "tessel/core/csr.hpp"

#include "tessel/core/error.hpp"

#include <algorithm>
#include <numeric>

namespace tessel {

template <class Index>
void CsrT<Index>::validate(const std::string& what) const {
  TESSEL_EXPECTS(num_rows >= 0 && num_cols >= 0, "{}: negative shape {}x{}", what, num_rows,
                 num_cols);
  TESSEL_EXPECTS(static_cast<std::int64_t>(indptr.size()) == num_rows + 1,
                 "{}: indptr has {} entries, expected {} (rows + 1)", what, indptr.size(),
                 num_rows + 1);
  TESSEL_EXPECTS(indptr[0] == 0, "{}: indptr[0] is {}, expected 0", what, indptr[0]);
  for (std::int64_t v = 0; v < num_rows; ++v)
    TESSEL_EXPECTS(indptr[v + 1] >= indptr[v], "{}: indptr is not monotone at row {} ({} > {})",
                   what, v, indptr[v], indptr[v + 1]);
  TESSEL_EXPECTS(indptr[num_rows] == num_edges(), "{}: indptr ends at {}, but there are {} indices",
                 what, indptr[num_rows], num_edges());
  const std::int64_t n = num_edges();
  std::int64_t bad = -1;
#pragma omp parallel for reduction(max : bad) schedule(static)
  for (std::int64_t e = 0; e < n; ++e)
    if (indices[e] < 0 || indices[e] >= num_cols) bad = std::max(bad, e);
  TESSEL_EXPECTS(bad < 0, "{}: index {} at position {} is outside [0, {})", what,
                 bad < 0 ? 0 : static_cast<std::int64_t>(indices[bad]), bad, num_cols);
  TESSEL_EXPECTS(values.empty() || static_cast<std::int64_t>(values.size()) == n,
                 "{}: {} values for {} edges", what, values.size(), n);
}

template <class Index>
CsrT<Index> CsrT<Index>::from_edges(std::int64_t num_rows, std::int64_t num_cols,
                                    const std::vector<Index>& src, const std::vector<Index>& dst) {
  TESSEL_EXPECTS(src.size() == dst.size(), "Csr::from_edges: {} sources but {} destinations",
                 src.size(), dst.size());
  CsrT csr;
  csr.num_rows = num_rows;
  csr.num_cols = num_cols;
  csr.indptr.assign(static_cast<std::size_t>(num_rows) + 1, 0);
  for (std::size_t e = 0; e < dst.size(); ++e) {
    TESSEL_EXPECTS(dst[e] >= 0 && dst[e] < num_rows && src[e] >= 0 && src[e] < num_cols,
                   "Csr::from_edges: edge {} ({} -> {}) outside {}x{}", e, src[e], dst[e],
                   num_rows, num_cols);
    ++csr.indptr[static_cast<std::size_t>(dst[e]) + 1];
  }
  std::partial_sum(csr.indptr.begin(), csr.indptr.end(), csr.indptr.begin());
  csr.indices.resize(src.size());
  std::vector<EdgeId> cursor(csr.indptr.begin(), csr.indptr.end() - 1);
  for (std::size_t e = 0; e < dst.size(); ++e) csr.indices[cursor[dst[e]]++] = src[e];
  return csr;
}

template <class Index>
void CsrT<Index>::sort_rows() {
#pragma omp parallel for schedule(dynamic, 1024)
  for (std::int64_t v = 0; v < num_rows; ++v) {
    const auto b = indptr[v], e = indptr[v + 1];
    if (values.empty()) {
      std::sort(indices.begin() + b, indices.begin() + e);
    } else {
      std::vector<std::pair<Index, float>> row;
      row.reserve(static_cast<std::size_t>(e - b));
      for (auto i = b; i < e; ++i) row.emplace_back(indices[i], values[i]);
      std::sort(row.begin(), row.end());
      for (auto i = b; i < e; ++i) std::tie(indices[i], values[i]) = row[i - b];
    }
  }
}

template <class Index>
CsrT<Index> CsrT<Index>::transpose() const {
  CsrT t;
  t.num_rows = num_cols;
  t.num_cols = num_rows;
  t.indptr.assign(static_cast<std::size_t>(num_cols) + 1, 0);
  for (auto u : indices) ++t.indptr[static_cast<std::size_t>(u) + 1];
  std::partial_sum(t.indptr.begin(), t.indptr.end(), t.indptr.begin());
  t.indices.resize(indices.size());
  if (!values.empty()) t.values.resize(values.size());
  std::vector<EdgeId> cursor(t.indptr.begin(), t.indptr.end() - 1);
  for (std::int64_t v = 0; v < num_rows; ++v) {
    for (auto e = indptr[v]; e < indptr[v + 1]; ++e) {
      const auto pos = cursor[indices[e]]++;
      t.indices[pos] = static_cast<Index>(v);
      if (!values.empty()) t.values[pos] = values[e];
    }
  }
  return t;
}

template struct CsrT<NodeId>;
template struct CsrT<LocalId>;

}  // namespace tessel
