// Owner routing for a distributed sampling hop: group requests by owner, merge answers back.
#include "tessel/sampling/hop.hpp"

#include "tessel/core/error.hpp"

#include <algorithm>

namespace tessel::sampling {

void route_by_owner(std::span<const int> owner, int num_parts, OwnerRouting& out) {
  TESSEL_EXPECTS(num_parts >= 1, "route_by_owner: {} parts, expected at least 1", num_parts);
  const auto n = static_cast<std::int64_t>(owner.size());
  out.counts.assign(static_cast<std::size_t>(num_parts), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    TESSEL_EXPECTS(owner[i] >= 0 && owner[i] < num_parts,
                   "route_by_owner: frontier node {} has owner {}, expected a part in [0, {})", i,
                   owner[i], num_parts);
    ++out.counts[static_cast<std::size_t>(owner[i])];
  }
  out.displs.assign(static_cast<std::size_t>(num_parts) + 1, 0);
  for (int p = 0; p < num_parts; ++p)
    out.displs[p + 1] = out.displs[p] + out.counts[p];
  // A counting sort keeps frontier order within each owner.
  std::vector<std::int64_t> cursor(out.displs.begin(), out.displs.end() - 1);
  out.order.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    out.order[cursor[owner[i]]++] = i;
}

void merge_answers(const OwnerRouting& routing, std::span<const std::int64_t> answer_counts,
                   std::span<const NodeId> answer_ids, SampledGlobalNeighbors& out) {
  const auto n = static_cast<std::int64_t>(routing.order.size());
  TESSEL_EXPECTS(static_cast<std::int64_t>(answer_counts.size()) == n,
                 "merge_answers: {} answer counts for {} requests, expected one per request",
                 answer_counts.size(), n);
  // Offsets of each answer in the routed stream, and each frontier row's length.
  std::vector<EdgeId> routed_start(static_cast<std::size_t>(n) + 1, 0);
  out.offsets.assign(static_cast<std::size_t>(n) + 1, 0);
  for (std::int64_t k = 0; k < n; ++k) {
    TESSEL_EXPECTS(answer_counts[k] >= 0, "merge_answers: answer {} has count {}, expected >= 0", k,
                   answer_counts[k]);
    routed_start[k + 1] = routed_start[k] + answer_counts[k];
    out.offsets[static_cast<std::size_t>(routing.order[k]) + 1] = answer_counts[k];
  }
  TESSEL_EXPECTS(routed_start[n] == static_cast<EdgeId>(answer_ids.size()),
                 "merge_answers: counts add up to {} but {} ids arrived", routed_start[n],
                 answer_ids.size());
  for (std::int64_t i = 0; i < n; ++i)
    out.offsets[i + 1] += out.offsets[i];
  out.neighbors.resize(answer_ids.size());
  for (std::int64_t k = 0; k < n; ++k) {
    const auto i = static_cast<std::size_t>(routing.order[k]);
    std::copy(answer_ids.begin() + routed_start[k], answer_ids.begin() + routed_start[k + 1],
              out.neighbors.begin() + out.offsets[i]);
  }
}

} // namespace tessel::sampling
