// Compressed sparse row graph: row v lists the in-neighbors of v (sources of edges u -> v).
#pragma once

#include "tessel/core/spill.hpp"
#include "tessel/core/types.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace tessel {

// indptr has num_rows + 1 monotone entries starting at 0; indices[indptr[v]..indptr[v+1])
// are the in-neighbors of v, each < num_cols. values is empty or one weight per edge. indices
// takes a scratch-file mapping when made under a spill::Scope (out-of-core runs), else the heap.
template <class Index>
struct CsrT {
  std::int64_t num_rows = 0;
  std::int64_t num_cols = 0;
  std::vector<EdgeId> indptr{0};
  std::vector<Index, spill::Allocator<Index>> indices;
  std::vector<float> values;

  std::int64_t num_edges() const { return static_cast<std::int64_t>(indices.size()); }
  EdgeId degree(std::int64_t row) const { return indptr[row + 1] - indptr[row]; }

  // Throws InputError naming `what` if indptr is not monotone from 0 to num_edges, or an
  // index is out of [0, num_cols), or values has the wrong length.
  void validate(const std::string& what) const;
  // Builds from an edge list (src[i] -> dst[i]): rows are destinations. Keeps duplicates.
  static CsrT from_edges(std::int64_t num_rows, std::int64_t num_cols,
                         const std::vector<Index>& src, const std::vector<Index>& dst);
  // Sorts each row's indices ascending (values follow).
  void sort_rows();
  // The transpose: row u lists the out-neighbors of u.
  CsrT transpose() const;
};

using Csr = CsrT<NodeId>;
using LocalCsr = CsrT<LocalId>;

extern template struct CsrT<NodeId>;
extern template struct CsrT<LocalId>;

}  // namespace tessel
