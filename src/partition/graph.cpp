// The training graph: symmetrization, self-loop and duplicate removal into 32-bit node ids.
#include "steps.hpp"

#include "tessel/core/error.hpp"

#include <algorithm>
#include <cstring>

namespace tessel::partition::detail {

template <class Index>
GraphCsr clean_graph(const CsrT<Index>& graph, bool symmetrize, std::int64_t max_nodes) {
  const std::int64_t n = graph.num_rows;
  TESSEL_EXPECTS(graph.num_cols == n, "graph: {} rows but {} columns; a graph must be square", n,
                 graph.num_cols);
  TESSEL_EXPECTS(n <= max_nodes,
                 "graph has {} nodes; partitioning needs node ids that fit in 32 bits (at most {})",
                 n, max_nodes);

  // bound[v + 1] = room for row v: its in-neighbors, plus its out-neighbors when symmetrizing.
  // It becomes the result's indptr once rows are compacted.
  std::vector<EdgeId> bound(static_cast<std::size_t>(n) + 1, 0);
#pragma omp parallel for schedule(static)
  for (std::int64_t v = 0; v < n; ++v)
    bound[v + 1] = graph.degree(v);
  // The transposed passes are sequential on purpose: plain scattered increments and stores
  // overlap their cache misses, atomic read-modify-writes serialize them (measured: more than
  // 10x slower with 1 or 2 threads on a 13M-edge graph).
  const std::int64_t m = graph.num_edges();
  if (symmetrize)
    for (std::int64_t e = 0; e < m; ++e)
      ++bound[static_cast<std::size_t>(graph.indices[e]) + 1];
  for (std::int64_t v = 0; v < n; ++v)
    bound[v + 1] += bound[v];

  GraphCsr out;
  out.num_rows = out.num_cols = n;
  out.indices.resize(static_cast<std::size_t>(bound[n]));
  // fill[v]: next free slot of row v; after the rows are deduplicated, row v's new length.
  std::vector<EdgeId> fill(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(dynamic, 4096)
  for (std::int64_t v = 0; v < n; ++v) {
    EdgeId pos = bound[v];
    for (EdgeId e = graph.indptr[v]; e < graph.indptr[v + 1]; ++e)
      out.indices[pos++] = static_cast<std::int32_t>(graph.indices[e]);
    fill[v] = pos;
  }
  if (symmetrize) {
    // Edge u -> v (u in row v) also becomes v -> u: v joins row u.
    for (std::int64_t v = 0; v < n; ++v)
      for (EdgeId e = graph.indptr[v]; e < graph.indptr[v + 1]; ++e)
        out.indices[fill[static_cast<std::size_t>(graph.indices[e])]++] =
            static_cast<std::int32_t>(v);
  }

#pragma omp parallel for schedule(dynamic, 4096)
  for (std::int64_t v = 0; v < n; ++v) {
    auto* begin = out.indices.data() + bound[v];
    auto* end = out.indices.data() + bound[v + 1];
    std::sort(begin, end);
    end = std::unique(begin, end);
    end = std::remove(begin, end, static_cast<std::int32_t>(v));
    fill[v] = end - begin;
  }

  // Rows only move left, so compacting in increasing row order never overwrites a pending row.
  EdgeId next = 0;
  for (std::int64_t v = 0; v < n; ++v) {
    const EdgeId old_begin = bound[v];
    bound[v] = next;
    if (fill[v] > 0 && old_begin != next)
      std::memmove(out.indices.data() + next, out.indices.data() + old_begin,
                   static_cast<std::size_t>(fill[v]) * sizeof(std::int32_t));
    next += fill[v];
  }
  bound[n] = next;
  fill = {};
  const auto capacity = static_cast<EdgeId>(out.indices.size());
  out.indices.resize(static_cast<std::size_t>(next));
  // Give back the room of dropped edges when it is worth a copy.
  if (capacity - next > capacity / 8) out.indices.shrink_to_fit();
  out.indptr = std::move(bound);
  return out;
}

template GraphCsr clean_graph<NodeId>(const CsrT<NodeId>&, bool, std::int64_t);
template GraphCsr clean_graph<std::int32_t>(const CsrT<std::int32_t>&, bool, std::int64_t);

} // namespace tessel::partition::detail
