// Parallel CSR construction from edge arrays, and in-place sort/dedupe of CSR rows.
#pragma once

#include "tessel/core/csr.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include <omp.h>

namespace tessel::datasets::detail {

// Loops shorter than this run on one thread: a parallel region costs more than it saves, and
// far more when the machine is oversubscribed.
constexpr std::int64_t kParallelMin = 1 << 14;

// Exclusive prefix sum of counts[0..n) into offsets[0..n] (offsets may alias counts only if
// it is a different array). Sequential: memory-bound and cheap next to the edge passes.
inline void exclusive_scan(const std::vector<EdgeId>& counts, std::vector<EdgeId>& offsets) {
  offsets.resize(counts.size() + 1);
  EdgeId sum = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    offsets[i] = sum;
    sum += counts[i];
  }
  offsets[counts.size()] = sum;
}

// Sorts every row ascending; with dedupe, drops repeated entries (and, with drop_diagonal, the
// entry equal to the row id) and compacts the arrays in place. Deterministic for any thread
// count.
void sort_rows(Csr& csr, bool dedupe, bool drop_diagonal);

// Row range [begin, end) owned by thread t of `threads` when rows [0, n) are split evenly.
inline std::pair<std::int64_t, std::int64_t> owned_rows(std::int64_t n, int t, int threads) {
  return {n * t / threads, n * (t + 1) / threads};
}

// The CSR whose row dst[e] lists src[e], for e in [0, m); rows sorted ascending; duplicates
// kept unless dedupe; self-loops dropped with drop_self_loops. Ids must already be checked to
// lie in [0, n).
//
// Each thread owns a range of rows and scans every edge, keeping those that land in its rows:
// the edge arrays are read once per thread (sequentially, cheap), while the random writes
// into counts and indices never share a cache line between threads, which atomics would.
template <class Id>
Csr csr_from_edges(std::int64_t n, const Id* src, const Id* dst, std::int64_t m,
                   bool dedupe = false, bool drop_self_loops = false) {
  Csr csr;
  csr.num_rows = csr.num_cols = n;
  std::vector<EdgeId> counts(static_cast<std::size_t>(n), 0);
#pragma omp parallel if (m > kParallelMin)
  {
    const auto [lo, hi] = owned_rows(n, omp_get_thread_num(), omp_get_num_threads());
    for (std::int64_t e = 0; e < m; ++e) {
      const auto d = static_cast<std::int64_t>(dst[e]);
      if (d >= lo && d < hi) ++counts[static_cast<std::size_t>(d)];
    }
  }
  exclusive_scan(counts, csr.indptr);
  // Reuse counts as the fill cursor.
  std::copy(csr.indptr.begin(), csr.indptr.end() - 1, counts.begin());
  csr.indices.resize(static_cast<std::size_t>(m));
#pragma omp parallel if (m > kParallelMin)
  {
    const auto [lo, hi] = owned_rows(n, omp_get_thread_num(), omp_get_num_threads());
    for (std::int64_t e = 0; e < m; ++e) {
      const auto d = static_cast<std::int64_t>(dst[e]);
      if (d >= lo && d < hi)
        csr.indices[static_cast<std::size_t>(counts[static_cast<std::size_t>(d)]++)] =
            static_cast<NodeId>(src[e]);
    }
  }
  sort_rows(csr, dedupe, drop_self_loops);
  return csr;
}

} // namespace tessel::datasets::detail
