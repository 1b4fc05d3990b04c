// CUDA twins of the frontier routing ops (frontier_ops.hpp), declared for the host dispatcher,
// which checks the arguments (dtypes, shapes, one CUDA device) and allocates the outputs.
#pragma once

#include "tessel/core/tensor.hpp"

#include <cstdint>
#include <vector>

namespace tessel::sampling::cuda {

void find_sorted(const Tensor& sorted_keys, const Tensor& ids, Tensor& pos);
void take(const Tensor& values, const Tensor& index, Tensor& out);
void scatter(const Tensor& values, const Tensor& index, Tensor& out);
void segment_lengths(const Tensor& offsets, Tensor& lengths);
std::int64_t sum(const Tensor& values);
// Fills sums (i64 [columns, segments]).
void segment_sums(const std::vector<Tensor>& columns, const Tensor& ranges, Tensor& sums);
// Fills order (i64 [n]) and counts ([buckets], host); returns false when an id has no owner.
// pairs: 2 * owner + flagged buckets (owner_then_flag) or flagged owner / num_parts
// (flagged_only).
bool route_frontier(const Tensor& ids, const Tensor& owner_offsets, const Tensor& known_pos,
                    bool pairs, Tensor& order, std::vector<std::int64_t>& counts);
void unroute_segments(const Tensor& order, const Tensor& lengths, const Tensor& values,
                      Tensor& offsets, Tensor& out);

} // namespace tessel::sampling::cuda
