// CPU twin of the neighbor sampler: OpenMP over requests, no allocation per row.
#include "cpu/sample_neighbors_cpu.hpp"

#include "tessel/core/error.hpp"
#include "tessel/sampling/draw.hpp"

#include <algorithm>
#include <limits>
#include <vector>

namespace tessel::sampling::cpu {
namespace {

// Above this many draws per row the sorted-insertion Floyd (quadratic moves) loses to a bitmap.
constexpr std::int64_t kSortedInsertMaxDraws = 128;
// Below this many requests a parallel region costs more than it saves (a distributed hop often
// serves only a handful of remote rows).
constexpr std::int64_t kParallelMinRequests = 2048;

// Per-thread scratch for the bitmap path, kept between calls so a hot loop never allocates.
// Invariant between rows: every bit is zero.
struct Scratch {
  std::vector<std::uint64_t> bitmap;
  std::vector<EdgeId> picks;
};
Scratch& thread_scratch() {
  thread_local Scratch scratch;
  return scratch;
}

// Floyd with a bitmap for membership: the same draws as floyd_sorted_positions, so the same set.
template <class Index>
void floyd_bitmap(const rng::Key& key, NodeId node_key, const Index* row, EdgeId degree,
                  EdgeId count, Index* slot) {
  Scratch& s = thread_scratch();
  const auto words = static_cast<std::size_t>((degree + 63) / 64);
  if (s.bitmap.size() < words) s.bitmap.resize(words, 0);
  s.picks.clear();
  for (EdgeId i = 0; i < count; ++i) {
    const auto bound = static_cast<std::uint64_t>(degree - count + i) + 1;
    auto pick = static_cast<EdgeId>(floyd_draw(key, static_cast<std::uint64_t>(node_key), i, bound));
    if (s.bitmap[pick >> 6] & (std::uint64_t{1} << (pick & 63))) pick = static_cast<EdgeId>(bound - 1);
    s.bitmap[pick >> 6] |= std::uint64_t{1} << (pick & 63);
    s.picks.push_back(pick);
  }
  std::sort(s.picks.begin(), s.picks.end());
  for (EdgeId k = 0; k < count; ++k) {
    const EdgeId pick = s.picks[k];
    slot[k] = row[pick];
    s.bitmap[pick >> 6] = 0;  // restores the all-zero invariant
  }
}

}  // namespace

template <class Index>
EdgeId sample_offsets(const char* op, const EdgeId* indptr, std::int64_t num_graph_rows,
                      const Index* rows, std::int64_t n, int fanout, EdgeId* offsets) {
  std::int64_t bad = -1;             // a request whose row is out of range
  EdgeId too_wide = -1;              // a degree whose positions do not fit Index
  constexpr auto kIndexMax = static_cast<EdgeId>(std::numeric_limits<Index>::max());
#pragma omp parallel for schedule(static) reduction(max : bad, too_wide) \
    if (n >= kParallelMinRequests)
  for (std::int64_t i = 0; i < n; ++i) {
    const Index r = rows[i];
    if (r < 0 || r >= num_graph_rows) {
      bad = std::max(bad, i);
      offsets[i + 1] = 0;
      continue;
    }
    const EdgeId degree = indptr[r + 1] - indptr[r];
    const EdgeId count = sample_count(degree, fanout);
    if (count < degree && degree - 1 > kIndexMax) too_wide = std::max(too_wide, degree);
    offsets[i + 1] = count;
  }
  TESSEL_EXPECTS(bad < 0, "{}: request {} asks for row {}, expected a row in [0, {})", op, bad,
                 bad < 0 ? 0 : static_cast<std::int64_t>(rows[bad]), num_graph_rows);
  TESSEL_EXPECTS(too_wide < 0, "{}: a row of degree {} is too long for {}-byte ids", op, too_wide,
                 sizeof(Index));
  offsets[0] = 0;
  for (std::int64_t i = 0; i < n; ++i) offsets[i + 1] += offsets[i];
  return offsets[n];
}

template <class Index>
void sample_fill(const EdgeId* indptr, const Index* indices, const Index* rows,
                 const NodeId* row_keys, std::int64_t n, int fanout, const rng::Key& key,
                 const EdgeId* offsets, Index* out) {
  // Dynamic chunks: rows differ widely in cost (copying a hub row vs a few draws).
#pragma omp parallel for schedule(dynamic, 256) if (n >= kParallelMinRequests)
  for (std::int64_t i = 0; i < n; ++i) {
    const Index r = rows[i];
    const EdgeId begin = indptr[r];
    const EdgeId degree = indptr[r + 1] - begin;
    const EdgeId count = offsets[i + 1] - offsets[i];
    const Index* row = indices + begin;
    Index* slot = out + offsets[i];
    if (count == degree) {
      std::copy(row, row + degree, slot);
    } else if (count <= kSortedInsertMaxDraws) {
      // Positions go straight into the output slot, then are replaced by the neighbors.
      floyd_sorted_positions(key, static_cast<std::uint64_t>(row_keys[i]), degree, count, slot);
      for (EdgeId k = 0; k < count; ++k) slot[k] = row[slot[k]];
    } else {
      floyd_bitmap(key, row_keys[i], row, degree, count, slot);
    }
  }
}

template EdgeId sample_offsets(const char*, const EdgeId*, std::int64_t, const LocalId*,
                               std::int64_t, int, EdgeId*);
template EdgeId sample_offsets(const char*, const EdgeId*, std::int64_t, const NodeId*,
                               std::int64_t, int, EdgeId*);
template void sample_fill(const EdgeId*, const LocalId*, const LocalId*, const NodeId*,
                          std::int64_t, int, const rng::Key&, const EdgeId*, LocalId*);
template void sample_fill(const EdgeId*, const NodeId*, const NodeId*, const NodeId*,
                          std::int64_t, int, const rng::Key&, const EdgeId*, NodeId*);

}  // namespace tessel::sampling::cpu
