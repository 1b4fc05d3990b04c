// Symmetrization of a graph (both directions, no self-loops, no duplicates) and row sorting.
#include "csr_build.hpp"

#include "tessel/core/error.hpp"
#include "tessel/datasets/dataset.hpp"

#include <omp.h>

#include <cstring>

namespace tessel::datasets {

using detail::kParallelMin;

namespace detail {

void sort_rows(Csr& csr, bool dedupe, bool drop_diagonal) {
  const std::int64_t n = csr.num_rows;
  NodeId* idx = csr.indices.data();
  const EdgeId* ptr = csr.indptr.data();
  if (!dedupe && !drop_diagonal) {
#pragma omp parallel for schedule(dynamic, 512) if (n > kParallelMin)
    for (std::int64_t v = 0; v < n; ++v)
      std::sort(idx + ptr[v], idx + ptr[v + 1]);
    return;
  }
  // Each row is sorted and deduplicated at its own start; then the rows are packed together.
  std::vector<EdgeId> kept(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(dynamic, 512) if (n > kParallelMin)
  for (std::int64_t v = 0; v < n; ++v) {
    NodeId* b = idx + ptr[v];
    NodeId* e = idx + ptr[v + 1];
    std::sort(b, e);
    if (dedupe) e = std::unique(b, e);
    if (drop_diagonal) e = std::remove(b, e, static_cast<NodeId>(v));
    kept[static_cast<std::size_t>(v)] = e - b;
  }
  // Packing in parallel: each block of rows first packs inside its own old range (which
  // nothing else touches), then whole blocks move left in order.
  const int threads = omp_get_max_threads();
  const std::int64_t num_blocks =
      std::max<std::int64_t>(1, std::min<std::int64_t>(n, 16 * threads));
  std::vector<EdgeId> block_size(static_cast<std::size_t>(num_blocks), 0);
  const auto block_begin = [&](std::int64_t b) { return n * b / num_blocks; };
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t b = 0; b < num_blocks; ++b) {
    EdgeId write = ptr[block_begin(b)];
    for (std::int64_t v = block_begin(b); v < block_begin(b + 1); ++v) {
      const EdgeId k = kept[static_cast<std::size_t>(v)];
      if (write != ptr[v])
        std::memmove(idx + write, idx + ptr[v], static_cast<std::size_t>(k) * sizeof(NodeId));
      write += k;
    }
    block_size[static_cast<std::size_t>(b)] = write - ptr[block_begin(b)];
  }
  EdgeId write = 0;
  for (std::int64_t b = 0; b < num_blocks; ++b) {
    const EdgeId from = ptr[block_begin(b)];
    const EdgeId k = block_size[static_cast<std::size_t>(b)];
    if (write != from)
      std::memmove(idx + write, idx + from, static_cast<std::size_t>(k) * sizeof(NodeId));
    write += k;
  }
  exclusive_scan(kept, csr.indptr);
  csr.indices.resize(static_cast<std::size_t>(write));
  // Give memory back only when a lot was dropped: shrinking copies the whole array.
  if (csr.indices.capacity() > csr.indices.size() + csr.indices.size() / 4)
    csr.indices.shrink_to_fit();
}

} // namespace detail

Csr symmetrize(const Csr& graph) {
  TESSEL_EXPECTS(graph.num_rows == graph.num_cols, "symmetrize: the graph is {}x{}, not square",
                 graph.num_rows, graph.num_cols);
  const std::int64_t n = graph.num_rows;
  const std::int64_t m = graph.num_edges();
  const EdgeId* ptr = graph.indptr.data();
  const NodeId* idx = graph.indices.data();
  // Row v receives its own entries and one entry w per appearance of v in another row w. Each
  // thread owns a range of rows: it counts and fills only those, scanning every edge to find
  // the reversed ones (see csr_from_edges for why this beats atomics).
  std::vector<EdgeId> counts(static_cast<std::size_t>(n), 0);
#pragma omp parallel if (m > kParallelMin)
  {
    const auto [lo, hi] = detail::owned_rows(n, omp_get_thread_num(), omp_get_num_threads());
    for (std::int64_t v = lo; v < hi; ++v)
      for (EdgeId e = ptr[v]; e < ptr[v + 1]; ++e)
        counts[static_cast<std::size_t>(v)] += idx[e] != v;
    for (std::int64_t w = 0; w < n; ++w)
      for (EdgeId e = ptr[w]; e < ptr[w + 1]; ++e) {
        const NodeId u = idx[e];
        if (u >= lo && u < hi && u != w) ++counts[static_cast<std::size_t>(u)];
      }
  }
  Csr out;
  out.num_rows = out.num_cols = n;
  detail::exclusive_scan(counts, out.indptr);
  out.indices.resize(static_cast<std::size_t>(out.indptr.back()));
  std::copy(out.indptr.begin(), out.indptr.end() - 1, counts.begin());
  NodeId* dst = out.indices.data();
#pragma omp parallel if (m > kParallelMin)
  {
    const auto [lo, hi] = detail::owned_rows(n, omp_get_thread_num(), omp_get_num_threads());
    for (std::int64_t v = lo; v < hi; ++v)
      for (EdgeId e = ptr[v]; e < ptr[v + 1]; ++e)
        if (idx[e] != v) dst[counts[static_cast<std::size_t>(v)]++] = idx[e];
    for (std::int64_t w = 0; w < n; ++w)
      for (EdgeId e = ptr[w]; e < ptr[w + 1]; ++e) {
        const NodeId u = idx[e];
        if (u >= lo && u < hi && u != w) dst[counts[static_cast<std::size_t>(u)]++] = w;
      }
  }
  std::vector<EdgeId>().swap(counts);
  detail::sort_rows(out, true, false);
  return out;
}

} // namespace tessel::datasets
