// CPU twin of the neighbor sampler on raw host arrays (shared by the vector and tensor entries).
#pragma once

#include "tessel/core/rng.hpp"
#include "tessel/core/types.hpp"

#include <cstdint>

namespace tessel::sampling::cpu {

// Writes offsets[0..n] with offsets[0] = 0 and offsets[i+1] - offsets[i] = the number of draws for
// request i; returns offsets[n]. Throws InputError naming `op` if a row is out of
// [0, num_graph_rows).
template <class Index>
EdgeId sample_offsets(const char* op, const EdgeId* indptr, std::int64_t num_graph_rows,
                      const Index* rows, std::int64_t n, int fanout, EdgeId* offsets);

// Fills out[offsets[i], offsets[i+1]) with the draws for request i (see sample_offsets).
template <class Index>
void sample_fill(const EdgeId* indptr, const Index* indices, const Index* rows,
                 const NodeId* row_keys, std::int64_t n, int fanout, const rng::Key& key,
                 const EdgeId* offsets, Index* out);

} // namespace tessel::sampling::cpu
