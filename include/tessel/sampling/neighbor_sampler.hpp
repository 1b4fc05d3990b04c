// Uniform neighbor sampling without replacement over an in-neighbor CSR, reproducible on any rank.
#pragma once

#include "tessel/core/csr.hpp"
#include "tessel/core/rng.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/sampling/draw.hpp"

#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

namespace tessel::sampling {

// Reproducibility contract. The neighbors drawn for a node depend only on the key
// (seed, epoch, step, layer), the node's key (its original id) and its neighbor *set*. Two
// things make that hold: (1) every row is stored in canonical order — ascending by the
// columns' original ids (sort_rows_by_key, once at load) — and (2) the sampler draws positions
// in [0, degree) with the counter-based RNG keyed by the row's original id. Which rank holds the
// row, how its local ids are numbered and how many threads run do not matter. Graphs are
// assumed free of parallel edges (a neighbor appearing twice in a row would be drawn as two).

// Sorts every row of `graph` ascending by col_key[column] (values follow). col_key has one
// entry per column (graph.num_cols), typically Part::orig_id. OpenMP over rows.
template <class Index> void sort_rows_by_key(CsrT<Index>& graph, std::span<const NodeId> col_key);
// True when every row is ascending by col_key (what the sampler requires); O(edges).
template <class Index>
bool rows_sorted_by_key(const CsrT<Index>& graph, std::span<const NodeId> col_key);

// The neighbors drawn for a list of rows, CSR-like: the draws for request i are
// neighbors[offsets[i], offsets[i+1]), column ids of the sampled graph, in draw order (a whole
// row, fanout >= degree, comes in canonical order). Both orders are the same on every rank.
template <class Index> struct SampledNeighborsT {
  std::vector<EdgeId> offsets{0}; // [num_requests + 1]
  std::vector<Index> neighbors;   // [offsets.back()]

  std::int64_t num_requests() const { return static_cast<std::int64_t>(offsets.size()) - 1; }
  std::int64_t num_sampled() const { return static_cast<std::int64_t>(neighbors.size()); }
  std::span<const Index> of(std::int64_t i) const {
    return {neighbors.data() + offsets[i], static_cast<std::size_t>(offsets[i + 1] - offsets[i])};
  }
};
using SampledNeighbors = SampledNeighborsT<LocalId>;      // over a partition's LocalCsr
using SampledGlobalNeighbors = SampledNeighborsT<NodeId>; // over a whole-graph Csr

// CPU sampler. For every request i, draws min(fanout, degree) distinct in-neighbors of row
// rows[i] of `graph` (fanout kAllNeighbors = -1 takes the whole row) using `key` (the caller sets
// key.layer, key.stream is normally rng::Stream::sampling) and row_keys[i] as the node's key
// (its original id). Rows may repeat; a repeated row with the same row key gets the same draws.
// `graph` must be in canonical order (sort_rows_by_key). Host memory; OpenMP over requests; the
// result does not depend on the thread count. `out` is overwritten, its capacity reused.
// Throws InputError if a row is outside [0, graph.num_rows) or the spans' lengths differ.
template <class Index>
void sample_neighbors(const CsrT<Index>& graph, std::span<const std::type_identity_t<Index>> rows,
                      std::span<const NodeId> row_keys, int fanout, const rng::Key& key,
                      SampledNeighborsT<Index>& out);
template <class Index>
SampledNeighborsT<Index>
sample_neighbors(const CsrT<Index>& graph, std::span<const std::type_identity_t<Index>> rows,
                 std::span<const NodeId> row_keys, int fanout, const rng::Key& key) {
  SampledNeighborsT<Index> out;
  sample_neighbors(graph, rows, row_keys, fanout, key, out);
  return out;
}

// Device-dispatching twin on tensors: the same draws on the CPU and on a CUDA device.
// indptr i64 [R + 1]; indices i32 or i64 [E] (canonical row order); rows same dtype as indices
// [n]; row_keys i64 [n]; all on one device. Returns offsets i64 [n + 1] and neighbors (dtype of
// indices) [offsets[n]] on that device. The CUDA path runs on the default stream and returns
// after it finished; it exists only in builds with TESSEL_WITH_CUDA.
struct SampledTensors {
  Tensor offsets;
  Tensor neighbors;
};
SampledTensors sample_neighbors(const Tensor& indptr, const Tensor& indices, const Tensor& rows,
                                const Tensor& row_keys, int fanout, const rng::Key& key);

// Maps ids through a table: out[i] = table[ids[i]] (e.g. sampled local ids -> Part::orig_id, or
// -> relabeled global ids before answering a remote request). Throws if an id is out of range.
void map_ids(std::span<const LocalId> ids, std::span<const NodeId> table, std::vector<NodeId>& out);
void map_ids(std::span<const NodeId> ids, std::span<const NodeId> table, std::vector<NodeId>& out);

extern template void sort_rows_by_key(CsrT<LocalId>&, std::span<const NodeId>);
extern template void sort_rows_by_key(CsrT<NodeId>&, std::span<const NodeId>);
extern template bool rows_sorted_by_key(const CsrT<LocalId>&, std::span<const NodeId>);
extern template bool rows_sorted_by_key(const CsrT<NodeId>&, std::span<const NodeId>);
extern template void sample_neighbors(const CsrT<LocalId>&, std::span<const LocalId>,
                                      std::span<const NodeId>, int, const rng::Key&,
                                      SampledNeighborsT<LocalId>&);
extern template void sample_neighbors(const CsrT<NodeId>&, std::span<const NodeId>,
                                      std::span<const NodeId>, int, const rng::Key&,
                                      SampledNeighborsT<NodeId>&);

} // namespace tessel::sampling
