// Parallel CSR construction from edge arrays, and in-place sort/dedupe of CSR rows.
#pragma once

#include "tessel/core/csr.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

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

// The CSR whose row dst[e] lists src[e], for e in [0, m); rows sorted ascending; duplicates
// kept unless dedupe; self-loops dropped with drop_self_loops. Ids must already be checked to
// lie in [0, n).
template <class Id>
Csr csr_from_edges(std::int64_t n, const Id* src, const Id* dst, std::int64_t m,
                   bool dedupe = false, bool drop_self_loops = false) {
  Csr csr;
  csr.num_rows = csr.num_cols = n;
  std::vector<EdgeId> counts(static_cast<std::size_t>(n), 0);
#pragma omp parallel for schedule(static) if (m > kParallelMin)
  for (std::int64_t e = 0; e < m; ++e)
    std::atomic_ref<EdgeId>(counts[static_cast<std::size_t>(dst[e])])
        .fetch_add(1, std::memory_order_relaxed);
  exclusive_scan(counts, csr.indptr);
  // Reuse counts as the fill cursor.
  std::copy(csr.indptr.begin(), csr.indptr.end() - 1, counts.begin());
  csr.indices.resize(static_cast<std::size_t>(m));
#pragma omp parallel for schedule(static) if (m > kParallelMin)
  for (std::int64_t e = 0; e < m; ++e) {
    const EdgeId pos = std::atomic_ref<EdgeId>(counts[static_cast<std::size_t>(dst[e])])
                           .fetch_add(1, std::memory_order_relaxed);
    csr.indices[static_cast<std::size_t>(pos)] = static_cast<NodeId>(src[e]);
  }
  // The parallel fill leaves each row in arbitrary order; sorting makes the result canonical.
  sort_rows(csr, dedupe, drop_self_loops);
  return csr;
}

} // namespace tessel::datasets::detail
