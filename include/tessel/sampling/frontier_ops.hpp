// Kernel ops that route a sampling frontier kept on a device to its owners and put the owners'
// answers back in frontier order (the device-resident sampler at any rank count). Each op has a
// CPU twin (CPU tensors, any build) and a CUDA twin (CUDA tensors, on the device's stream); the
// two give identical results (nothing depends on thread order).
#pragma once

#include "tessel/core/tensor.hpp"

#include <cstdint>
#include <vector>

namespace tessel::sampling {

// pos i64 [n]: the position of ids[i] in sorted_keys (i64, ascending, distinct), -1 where it is
// absent. Asynchronous on CUDA.
Tensor find_sorted(const Tensor& sorted_keys, const Tensor& ids);

// out i64 [m]: values[index[k]], or -1 where index[k] < 0 (values, index: i64, one device;
// every index < values.numel(), unchecked on CUDA). Asynchronous on CUDA.
Tensor take(const Tensor& values, const Tensor& index);

// out[index[k]] = values[k] for every k (i64; the indices distinct and inside out, unchecked on
// CUDA). Asynchronous on CUDA.
void scatter(const Tensor& values, const Tensor& index, Tensor& out);

// lengths i64 [n]: offsets[i + 1] - offsets[i] for offsets i64 [n + 1]. Asynchronous on CUDA.
Tensor segment_lengths(const Tensor& offsets);

// The sum of values (i64 [n]); waits for the device on CUDA.
std::int64_t sum(const Tensor& values);

// sums i64 [columns.size(), k]: entry (c, s) is the sum of columns[c][ranges[s][0], ranges[s][1])
// (each column i64 [n]; ranges i64 [k, 2], ascending and disjoint: ranges[s][0] <= ranges[s][1]
// <= ranges[s + 1][0], within [0, n]; all on one device; the ranges are checked on the CPU, not
// on CUDA). Values outside every range are left out. Asynchronous on CUDA, so that several
// per-range totals come back to the host in one read-back.
Tensor segment_sums(const std::vector<Tensor>& columns, const Tensor& ranges);

// How route_frontier buckets a frontier node owned by part `owner` (flagged: its known_pos is
// negative, i.e. the requester knows nothing of it and asks its owner for its original id and
// degree too).
enum class RouteKeys : std::uint8_t {
  owner_then_flag, // bucket 2 * owner + flagged: per owner, the unflagged nodes, then the flagged
  flagged_only,    // bucket owner for flagged nodes, the rest in one last bucket (num_parts)
};

// A frontier in routed order: order[k] is the frontier position at routed position k, stable
// (ascending positions within a bucket); counts[b] nodes fall in bucket b (host memory).
struct FrontierRoute {
  Tensor order;                     // i64 [n] on the frontier's device
  std::vector<std::int64_t> counts; // [2 * num_parts] or [num_parts + 1], as RouteKeys says
};

// Buckets ids (i64 [n]) by owner: the part p with owner_offsets[p] <= id < owner_offsets[p + 1]
// (owner_offsets i64 [num_parts + 1], ascending, on the ids' device), and by flag (known_pos i64
// [n]: negative = flagged). Waits for the device once (the counts). Throws InputError for an id
// outside [owner_offsets[0], owner_offsets[num_parts]).
FrontierRoute route_frontier(const Tensor& ids, const Tensor& owner_offsets,
                             const Tensor& known_pos, RouteKeys keys);

// The inverse of routing for variable-length answers: routed position k answered lengths[k]
// values, stored consecutively in `values` in routed order (i64 [sum of lengths]); frontier
// position order[k] takes them. Fills offsets i64 [n + 1] (frontier i's values are
// out[offsets[i], offsets[i + 1])) and out i64 [values.numel()]. order must be a permutation of
// [0, n) (unchecked on CUDA). Asynchronous on CUDA.
void unroute_segments(const Tensor& order, const Tensor& lengths, const Tensor& values,
                      Tensor& offsets, Tensor& out);

} // namespace tessel::sampling
