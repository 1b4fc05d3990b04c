// CPU twin of the neighbor sampler: OpenMP over requests, no allocation per row.
#include "cpu/sample_neighbors_cpu.hpp"

#include "tessel/core/error.hpp"
#include "tessel/sampling/draw.hpp"

#include <algorithm>
#include <limits>
#include <vector>

namespace tessel::sampling::cpu {
namespace {

// Above this many draws per row the filtered Floyd (its scans grow with the draws) loses to a
// bitmap.
constexpr std::int64_t kFilteredFloydMaxDraws = 64;
// Draw bounds are 32-bit (NodeDraws).
constexpr EdgeId kMaxDrawDegree = EdgeId{1} << 32;
// Below this many requests a parallel region costs more than it saves (a distributed hop often
// serves only a handful of remote rows).
constexpr std::int64_t kParallelMinRequests = 2048;
// Requests are looked ahead this far to prefetch their indptr entry (2x) and row start (1x):
// rows are random, so without it every request waits for DRAM twice.
constexpr std::int64_t kPrefetchDistance = 16;
// Drawn positions are turned into neighbors this many requests later, after their prefetches
// landed: frontier rows are long (they are reached through edges, so degree-biased) and each
// draw touches its own cache line of the row.
constexpr std::int64_t kMapLag = 4;
// Requests per scheduling chunk; the lag pipeline runs within a chunk.
constexpr std::int64_t kChunk = 256;

// Per-thread bitmap for long draws, kept between calls so a hot loop never allocates.
// Invariant between rows: every bit is zero.
std::vector<std::uint64_t>& thread_bitmap() {
  thread_local std::vector<std::uint64_t> bitmap;
  return bitmap;
}

// Floyd with a bitmap for membership: the same draws and choices as floyd_positions.
template <class Index>
void floyd_bitmap(const rng::Key& key, NodeId node_key, const Index* row, EdgeId degree,
                  EdgeId count, Index* slot) {
  auto& bitmap = thread_bitmap();
  const auto words = static_cast<std::size_t>((degree + 63) / 64);
  if (bitmap.size() < words) bitmap.resize(words, 0);
  NodeDraws draws(key, static_cast<std::uint64_t>(node_key));
  for (EdgeId i = 0; i < count; ++i) {
    const auto bound = static_cast<std::uint32_t>(degree - count + i + 1);
    EdgeId pick = draws.next(static_cast<std::uint32_t>(i), bound);
    if (bitmap[pick >> 6] & (std::uint64_t{1} << (pick & 63)))
      pick = static_cast<EdgeId>(bound - 1);
    bitmap[pick >> 6] |= std::uint64_t{1} << (pick & 63);
    slot[i] = static_cast<Index>(pick);
  }
  for (EdgeId k = 0; k < count; ++k) {
    const auto pick = static_cast<EdgeId>(slot[k]);
    bitmap[pick >> 6] = 0; // restores the all-zero invariant
    slot[k] = row[pick];
  }
}

} // namespace

template <class Index>
EdgeId sample_offsets(const char* op, const EdgeId* indptr, std::int64_t num_graph_rows,
                      const Index* rows, std::int64_t n, int fanout, EdgeId* offsets) {
  std::int64_t bad = -1; // a request whose row is out of range
  EdgeId too_wide = -1;  // a degree whose positions do not fit Index
  constexpr auto kIndexMax = static_cast<EdgeId>(std::numeric_limits<Index>::max());
#pragma omp parallel for reduction(max : bad, too_wide) if (n >= kParallelMinRequests)
  for (std::int64_t i = 0; i < n; ++i) {
    const Index r = rows[i];
    if (r < 0 || r >= num_graph_rows) {
      bad = std::max(bad, i);
      offsets[i + 1] = 0;
      continue;
    }
    const EdgeId degree = indptr[r + 1] - indptr[r];
    const EdgeId count = sample_count(degree, fanout);
    if (count < degree && (degree - 1 > kIndexMax || degree >= kMaxDrawDegree))
      too_wide = std::max(too_wide, degree);
    offsets[i + 1] = count;
  }
  TESSEL_EXPECTS(bad < 0, "{}: request {} asks for row {}, expected a row in [0, {})", op, bad,
                 bad < 0 ? 0 : static_cast<std::int64_t>(rows[bad]), num_graph_rows);
  TESSEL_EXPECTS(too_wide < 0,
                 "{}: cannot draw from a row of degree {}, expected < 2^32 and {}-byte positions",
                 op, too_wide, sizeof(Index));
  offsets[0] = 0;
  for (std::int64_t i = 0; i < n; ++i)
    offsets[i + 1] += offsets[i];
  return offsets[n];
}

template <class Index>
void sample_fill(const EdgeId* indptr, const Index* indices, const Index* rows,
                 const NodeId* row_keys, std::int64_t n, int fanout, const rng::Key& key,
                 const EdgeId* offsets, Index* out) {
  const std::int64_t num_chunks = (n + kChunk - 1) / kChunk;
  // Dynamic chunks: rows differ widely in cost (copying a hub row vs a few draws).
#pragma omp parallel for schedule(dynamic, 1) if (n >= kParallelMinRequests)
  for (std::int64_t c = 0; c < num_chunks; ++c) {
    const std::int64_t lo = c * kChunk, hi = std::min(n, lo + kChunk);
    // Request i draws; request i - kMapLag, drawn earlier, maps its positions to neighbors.
    for (std::int64_t i = lo; i < hi + kMapLag; ++i) {
      if (i < hi) {
        if (i + 2 * kPrefetchDistance < n)
          __builtin_prefetch(indptr + rows[i + 2 * kPrefetchDistance]);
        if (i + kPrefetchDistance < n)
          __builtin_prefetch(indices + indptr[rows[i + kPrefetchDistance]]);
        const Index r = rows[i];
        const EdgeId begin = indptr[r];
        const EdgeId degree = indptr[r + 1] - begin;
        const EdgeId count = offsets[i + 1] - offsets[i];
        const Index* row = indices + begin;
        Index* slot = out + offsets[i];
        if (count == degree) {
          std::copy(row, row + degree, slot);
        } else if (count <= kFilteredFloydMaxDraws) {
          // Positions go into the output slot now and are replaced by neighbors kMapLag later.
          floyd_positions(key, static_cast<std::uint64_t>(row_keys[i]), degree, count, slot);
          for (EdgeId k = 0; k < count; ++k)
            __builtin_prefetch(row + slot[k]);
        } else {
          floyd_bitmap(key, row_keys[i], row, degree, count, slot);
        }
      }
      const std::int64_t m = i - kMapLag;
      if (m < lo) continue;
      const Index r = rows[m];
      const EdgeId degree = indptr[r + 1] - indptr[r];
      const EdgeId count = offsets[m + 1] - offsets[m];
      if (count == degree || count > kFilteredFloydMaxDraws) continue; // already neighbors
      const Index* row = indices + indptr[r];
      Index* slot = out + offsets[m];
      for (EdgeId k = 0; k < count; ++k)
        slot[k] = row[slot[k]];
    }
  }
}

template EdgeId sample_offsets(const char*, const EdgeId*, std::int64_t, const LocalId*,
                               std::int64_t, int, EdgeId*);
template EdgeId sample_offsets(const char*, const EdgeId*, std::int64_t, const NodeId*,
                               std::int64_t, int, EdgeId*);
template void sample_fill(const EdgeId*, const LocalId*, const LocalId*, const NodeId*,
                          std::int64_t, int, const rng::Key&, const EdgeId*, LocalId*);
template void sample_fill(const EdgeId*, const NodeId*, const NodeId*, const NodeId*, std::int64_t,
                          int, const rng::Key&, const EdgeId*, NodeId*);

} // namespace tessel::sampling::cpu
