// Neighbor sampler entry points: argument checks, canonical row order, device dispatch.
#include "tessel/sampling/neighbor_sampler.hpp"

#include "cpu/sample_neighbors_cpu.hpp"
#if defined(TESSEL_WITH_CUDA)
#include "cuda/sample_neighbors_cuda.hpp"
#endif

#include "tessel/core/error.hpp"

#include <algorithm>
#include <numeric>

namespace tessel::sampling {

template <class Index> void sort_rows_by_key(CsrT<Index>& graph, std::span<const NodeId> col_key) {
  TESSEL_EXPECTS(static_cast<std::int64_t>(col_key.size()) == graph.num_cols,
                 "sort_rows_by_key: {} column keys for a graph with {} columns", col_key.size(),
                 graph.num_cols);
  const bool has_values = !graph.values.empty();
  // Ties (parallel edges) fall back to the column id so the order is still a pure function.
  auto less = [&](Index a, Index b) {
    return col_key[a] != col_key[b] ? col_key[a] < col_key[b] : a < b;
  };
#pragma omp parallel
  {
    std::vector<std::pair<Index, float>> row; // per thread, only for weighted graphs
#pragma omp for schedule(dynamic, 1024)
    for (std::int64_t v = 0; v < graph.num_rows; ++v) {
      const EdgeId b = graph.indptr[v], e = graph.indptr[v + 1];
      if (!has_values) {
        std::sort(graph.indices.begin() + b, graph.indices.begin() + e, less);
        continue;
      }
      row.clear();
      for (EdgeId i = b; i < e; ++i)
        row.emplace_back(graph.indices[i], graph.values[i]);
      std::sort(row.begin(), row.end(),
                [&](const auto& x, const auto& y) { return less(x.first, y.first); });
      for (EdgeId i = b; i < e; ++i)
        std::tie(graph.indices[i], graph.values[i]) = row[i - b];
    }
  }
}

template <class Index>
bool rows_sorted_by_key(const CsrT<Index>& graph, std::span<const NodeId> col_key) {
  TESSEL_EXPECTS(static_cast<std::int64_t>(col_key.size()) == graph.num_cols,
                 "rows_sorted_by_key: {} column keys for a graph with {} columns", col_key.size(),
                 graph.num_cols);
  std::int64_t unsorted = 0;
#pragma omp parallel for schedule(dynamic, 1024) reduction(+ : unsorted)
  for (std::int64_t v = 0; v < graph.num_rows; ++v)
    for (EdgeId i = graph.indptr[v] + 1; i < graph.indptr[v + 1]; ++i)
      if (col_key[graph.indices[i - 1]] > col_key[graph.indices[i]]) ++unsorted;
  return unsorted == 0;
}

template <class Index>
void sample_neighbors(const CsrT<Index>& graph, std::span<const std::type_identity_t<Index>> rows,
                      std::span<const NodeId> row_keys, int fanout, const rng::Key& key,
                      SampledNeighborsT<Index>& out) {
  TESSEL_EXPECTS(rows.size() == row_keys.size(),
                 "sample_neighbors: {} rows but {} row keys, expected one key per row", rows.size(),
                 row_keys.size());
  TESSEL_EXPECTS(fanout >= kAllNeighbors,
                 "sample_neighbors: fanout {} is invalid, expected >= 0 or -1 (all neighbors)",
                 fanout);
  const auto n = static_cast<std::int64_t>(rows.size());
  out.offsets.resize(static_cast<std::size_t>(n) + 1);
  const EdgeId total = cpu::sample_offsets("sample_neighbors", graph.indptr.data(), graph.num_rows,
                                           rows.data(), n, fanout, out.offsets.data());
  out.neighbors.resize(static_cast<std::size_t>(total));
  cpu::sample_fill(graph.indptr.data(), graph.indices.data(), rows.data(), row_keys.data(), n,
                   fanout, key, out.offsets.data(), out.neighbors.data());
}

namespace {

template <class Index>
SampledTensors sample_tensors_cpu(const Tensor& indptr, const Tensor& indices, const Tensor& rows,
                                  const Tensor& row_keys, int fanout, const rng::Key& key) {
  const std::int64_t n = rows.numel();
  SampledTensors out;
  out.offsets = Tensor::empty({n + 1}, DType::i64);
  const EdgeId total =
      cpu::sample_offsets("sample_neighbors", indptr.data<EdgeId>(), indptr.numel() - 1,
                          rows.data<Index>(), n, fanout, out.offsets.data<EdgeId>());
  out.neighbors = Tensor::empty({total}, indices.dtype());
  cpu::sample_fill(indptr.data<EdgeId>(), indices.data<Index>(), rows.data<Index>(),
                   row_keys.data<NodeId>(), n, fanout, key, out.offsets.data<EdgeId>(),
                   total > 0 ? out.neighbors.data<Index>() : nullptr);
  return out;
}

} // namespace

SampledTensors sample_neighbors(const Tensor& indptr, const Tensor& indices, const Tensor& rows,
                                const Tensor& row_keys, int fanout, const rng::Key& key) {
  TESSEL_EXPECTS(indptr.dim() == 1 && indptr.dtype() == DType::i64 && indptr.numel() >= 1,
                 "sample_neighbors: indptr is {}, expected i64 [rows + 1]", indptr.describe());
  TESSEL_EXPECTS(
      indices.dim() == 1 && (indices.dtype() == DType::i32 || indices.dtype() == DType::i64),
      "sample_neighbors: indices is {}, expected i32 or i64 [edges]", indices.describe());
  TESSEL_EXPECTS(rows.dim() == 1 && rows.dtype() == indices.dtype(),
                 "sample_neighbors: rows is {}, expected a vector of the indices' dtype {}",
                 rows.describe(), dtype_name(indices.dtype()));
  TESSEL_EXPECTS(row_keys.dim() == 1 && row_keys.dtype() == DType::i64 &&
                     row_keys.numel() == rows.numel(),
                 "sample_neighbors: row_keys is {}, expected i64 [{}] (one key per row)",
                 row_keys.describe(), rows.numel());
  TESSEL_EXPECTS(fanout >= kAllNeighbors,
                 "sample_neighbors: fanout {} is invalid, expected >= 0 or -1 (all neighbors)",
                 fanout);
  const Device device = indptr.device();
  TESSEL_EXPECTS(indices.device() == device && rows.device() == device &&
                     row_keys.device() == device,
                 "sample_neighbors: tensors on {}, {}, {}, {}, expected one device", device.str(),
                 indices.device().str(), rows.device().str(), row_keys.device().str());
  if (device.is_cpu()) {
    return indices.dtype() == DType::i32
               ? sample_tensors_cpu<LocalId>(indptr, indices, rows, row_keys, fanout, key)
               : sample_tensors_cpu<NodeId>(indptr, indices, rows, row_keys, fanout, key);
  }
#if defined(TESSEL_WITH_CUDA)
  SampledTensors out;
  cuda::sample_neighbors(indptr, indices, rows, row_keys, fanout, key, out.offsets, out.neighbors);
  return out;
#else
  TESSEL_FAIL("sample_neighbors: device {} is not supported in a build without CUDA", device.str());
#endif
}

namespace {
template <class Index>
void map_ids_impl(std::span<const Index> ids, std::span<const NodeId> table,
                  std::vector<NodeId>& out) {
  const auto n = static_cast<std::int64_t>(ids.size());
  const auto size = static_cast<std::int64_t>(table.size());
  out.resize(ids.size());
  std::int64_t bad = -1;
#pragma omp parallel for schedule(static) reduction(max : bad) if (n >= 4096)
  for (std::int64_t i = 0; i < n; ++i) {
    const auto id = static_cast<std::int64_t>(ids[i]);
    if (id < 0 || id >= size) {
      bad = std::max(bad, i);
      continue;
    }
    out[i] = table[id];
  }
  TESSEL_EXPECTS(bad < 0, "map_ids: id {} at position {} is outside the table [0, {})",
                 bad < 0 ? 0 : static_cast<std::int64_t>(ids[bad]), bad, size);
}
} // namespace

void map_ids(std::span<const LocalId> ids, std::span<const NodeId> table,
             std::vector<NodeId>& out) {
  map_ids_impl(ids, table, out);
}
void map_ids(std::span<const NodeId> ids, std::span<const NodeId> table, std::vector<NodeId>& out) {
  map_ids_impl(ids, table, out);
}

template void sort_rows_by_key(CsrT<LocalId>&, std::span<const NodeId>);
template void sort_rows_by_key(CsrT<NodeId>&, std::span<const NodeId>);
template bool rows_sorted_by_key(const CsrT<LocalId>&, std::span<const NodeId>);
template bool rows_sorted_by_key(const CsrT<NodeId>&, std::span<const NodeId>);
template void sample_neighbors(const CsrT<LocalId>&, std::span<const LocalId>,
                               std::span<const NodeId>, int, const rng::Key&,
                               SampledNeighborsT<LocalId>&);
template void sample_neighbors(const CsrT<NodeId>&, std::span<const NodeId>,
                               std::span<const NodeId>, int, const rng::Key&,
                               SampledNeighborsT<NodeId>&);

} // namespace tessel::sampling
