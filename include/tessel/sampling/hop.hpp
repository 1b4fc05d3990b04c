// Routing helpers for one distributed sampling hop: requests grouped by owner and answers merged.
#pragma once

#include "tessel/core/types.hpp"
#include "tessel/sampling/neighbor_sampler.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace tessel::sampling {

// One hop of data-centric sampling, communication left to the caller:
//   1. route_by_owner(owner of each frontier node) -> counts/displacements for an alltoallv and
//      `order`; send gather_by_order(frontier, order) (and the rows' keys if owners lack them).
//   2. each owner turns received ids into local rows and calls sample_neighbors(part.graph,
//      rows, orig ids of rows, fanouts[l], key with key.layer = l) — the draws depend only on the
//      key and the original id — maps the drawn local ids to global ids (map_ids) and answers per
//      request: the count (offsets[i+1] - offsets[i]) and the ids, in the order the requests
//      arrived. Use the layer numbering of BlockSampler (l = 0 is the input layer, sampled last)
//      so P ranks reproduce sample_blocks exactly.
//   3. the requester calls merge_answers to put the answers back in frontier order, then
//      BlockBuilder::build(frontier, merged.offsets, merged.neighbors).
struct OwnerRouting {
  std::vector<std::int64_t> counts; // [num_parts] requests going to each owner
  std::vector<std::int64_t> displs; // [num_parts + 1] start of each owner's group
  std::vector<std::int64_t> order;  // [frontier] order[k] = frontier position of request k
};

// Groups frontier positions by owner (stable: within an owner, frontier order). owner[i] is in
// [0, num_parts). Throws InputError otherwise.
void route_by_owner(std::span<const int> owner, int num_parts, OwnerRouting& out);

// out[k] = values[order[k]].
template <class T>
void gather_by_order(std::span<const T> values, std::span<const std::int64_t> order,
                     std::vector<T>& out) {
  out.resize(order.size());
  for (std::size_t k = 0; k < order.size(); ++k)
    out[k] = values[static_cast<std::size_t>(order[k])];
}

// Answers in routed order — answer_counts[k] ids for request k, concatenated in answer_ids —
// rearranged into frontier order: out.offsets/out.neighbors as sample_neighbors would give.
// Throws InputError if the counts do not add up to answer_ids.size().
void merge_answers(const OwnerRouting& routing, std::span<const std::int64_t> answer_counts,
                   std::span<const NodeId> answer_ids, SampledGlobalNeighbors& out);

} // namespace tessel::sampling
