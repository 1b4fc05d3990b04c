// The training graph: symmetrization, self-loop and duplicate removal into 32-bit node ids.
#include "steps.hpp"

#include "tessel/core/error.hpp"
#include "tessel/datasets/h5.hpp"

#include <algorithm>
#include <cstring>

namespace tessel::partition::detail {

namespace {

// The training graph from a graph's rows visited in blocks: for_each_block(fn) calls
// fn(first, count, indptr, indices) for consecutive row blocks covering every row once, in row
// order, twice over (a count pass and a fill pass); indptr holds the block's count + 1 absolute
// offsets and indices its edges from indptr[0] on. Only the result, its row offsets and one
// cursor per node are held, whatever the source (memory or a file read in blocks).
template <class ForEachBlock>
GraphCsr clean_blocks(std::int64_t n, bool symmetrize, ForEachBlock&& for_each_block) {
  // bound[v + 1] = room for row v: its in-neighbors, plus its out-neighbors when symmetrizing.
  // It becomes the result's indptr once rows are compacted.
  std::vector<EdgeId> bound(static_cast<std::size_t>(n) + 1, 0);
  // The transposed passes are sequential on purpose: plain scattered increments and stores
  // overlap their cache misses, atomic read-modify-writes serialize them (measured: more than
  // 10x slower with 1 or 2 threads on a 13M-edge graph).
  for_each_block([&](std::int64_t first, std::int64_t count, const EdgeId* ptr, const auto* idx) {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < count; ++i)
      bound[first + i + 1] = ptr[i + 1] - ptr[i];
    if (symmetrize) {
      const EdgeId m = ptr[count] - ptr[0];
      for (EdgeId e = 0; e < m; ++e)
        ++bound[static_cast<std::size_t>(idx[e]) + 1];
    }
  });
  for (std::int64_t v = 0; v < n; ++v)
    bound[v + 1] += bound[v];

  GraphCsr out;
  out.num_rows = out.num_cols = n;
  out.indices.resize(static_cast<std::size_t>(bound[n]));
  // fill[v]: next free slot of row v; after the rows are deduplicated, row v's new length. The
  // order within a row does not matter: rows are sorted below.
  std::vector<EdgeId> fill(bound.begin(), bound.end() - 1);
  for_each_block([&](std::int64_t first, std::int64_t count, const EdgeId* ptr, const auto* idx) {
#pragma omp parallel for schedule(dynamic, 4096)
    for (std::int64_t i = 0; i < count; ++i) {
      const std::int64_t v = first + i;
      EdgeId pos = fill[v];
      for (EdgeId e = ptr[i] - ptr[0]; e < ptr[i + 1] - ptr[0]; ++e)
        out.indices[pos++] = static_cast<std::int32_t>(idx[e]);
      fill[v] = pos;
    }
    if (symmetrize) {
      // Edge u -> v (u in row v) also becomes v -> u: v joins row u.
      for (std::int64_t i = 0; i < count; ++i)
        for (EdgeId e = ptr[i] - ptr[0]; e < ptr[i + 1] - ptr[0]; ++e)
          out.indices[fill[static_cast<std::size_t>(idx[e])]++] =
              static_cast<std::int32_t>(first + i);
    }
  });

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

void check_node_count(std::int64_t n, std::int64_t max_nodes) {
  TESSEL_EXPECTS(n <= max_nodes,
                 "graph has {} nodes; partitioning needs node ids that fit in 32 bits (at most {})",
                 n, max_nodes);
}

} // namespace

template <class Index>
GraphCsr clean_graph(const CsrT<Index>& graph, bool symmetrize, std::int64_t max_nodes) {
  const std::int64_t n = graph.num_rows;
  TESSEL_EXPECTS(graph.num_cols == n, "graph: {} rows but {} columns; a graph must be square", n,
                 graph.num_cols);
  check_node_count(n, max_nodes);
  return clean_blocks(n, symmetrize, [&](auto&& fn) {
    fn(std::int64_t{0}, n, graph.indptr.data(), graph.indices.data());
  });
}

GraphCsr clean_store_graph(const std::filesystem::path& store, std::int64_t num_nodes,
                           std::int64_t num_edges, bool symmetrize, std::int64_t max_nodes,
                           std::int64_t block_edges) {
  const std::int64_t n = num_nodes, m = num_edges;
  check_node_count(n, max_nodes);
  const auto file = h5::File::open_read(store);
  const std::string what = store.string() + " /graph";
  TESSEL_EXPECTS(file.dims("/graph/indptr") == std::vector<std::int64_t>{n + 1} &&
                     file.dims("/graph/indices") == std::vector<std::int64_t>{m},
                 "{}: indptr and indices do not have the shapes of {} nodes and {} edges", what, n,
                 m);
  const std::int64_t rows_per_read = std::max<std::int64_t>(1, block_edges / 8);
  std::vector<EdgeId> ptr;
  std::vector<NodeId> idx;
  // Blocks of at most block_edges edges (or one longer row); every offset and column checked
  // as it is read, so a bad file stops with the row that is wrong.
  const auto for_each_block = [&](auto&& fn) {
    for (std::int64_t r0 = 0; r0 < n; r0 += rows_per_read) {
      const std::int64_t r1 = std::min(n, r0 + rows_per_read);
      file.read_rows("/graph/indptr", r0, r1 + 1, ptr);
      TESSEL_EXPECTS(r0 > 0 || ptr[0] == 0, "{}: indptr[0] is {}, expected 0", what, ptr[0]);
      for (std::int64_t i = 0; i < r1 - r0; ++i)
        TESSEL_EXPECTS(ptr[i + 1] >= ptr[i] && ptr[i + 1] <= m,
                       "{}: indptr is not monotone within [0, {}] at row {} ({} then {})", what,
                       m, r0 + i, ptr[i], ptr[i + 1]);
      TESSEL_EXPECTS(r1 < n || ptr[r1 - r0] == m,
                     "{}: indptr ends at {}, but there are {} indices", what, ptr[r1 - r0], m);
      for (std::int64_t b = r0; b < r1;) {
        std::int64_t e = b + 1; // rows [b, e): up to block_edges edges, at least one row
        while (e < r1 && ptr[e + 1 - r0] - ptr[b - r0] <= block_edges)
          ++e;
        file.read_rows("/graph/indices", ptr[b - r0], ptr[e - r0], idx);
        std::int64_t bad = -1;
#pragma omp parallel for reduction(max : bad) schedule(static)
        for (std::int64_t k = 0; k < static_cast<std::int64_t>(idx.size()); ++k)
          if (idx[k] < 0 || idx[k] >= n) bad = std::max(bad, k);
        if (bad >= 0) {
          const EdgeId at = ptr[b - r0] + bad;
          const std::int64_t row =
              b + (std::upper_bound(ptr.begin() + (b - r0), ptr.begin() + (e - r0) + 1, at) -
                   (ptr.begin() + (b - r0))) - 1;
          TESSEL_FAIL("{}: row {}: index {} at position {} is outside [0, {})", what, row,
                      idx[bad], at, n);
        }
        fn(b, e - b, ptr.data() + (b - r0), idx.data());
        b = e;
      }
    }
  };
  return clean_blocks(n, symmetrize, for_each_block);
}

template GraphCsr clean_graph<NodeId>(const CsrT<NodeId>&, bool, std::int64_t);
template GraphCsr clean_graph<std::int32_t>(const CsrT<std::int32_t>&, bool, std::int64_t);

} // namespace tessel::partition::detail
