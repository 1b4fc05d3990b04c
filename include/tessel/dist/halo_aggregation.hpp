// --halo-aggregation (SuperGCN): which rows cross each cut. Post-aggregation sends a boundary
// node's row to every peer that reads it; pre-aggregation has the owner sum, for one node of
// the peer, the rows it reads and send that one partial row; auto picks the fewest rows.
#pragma once

#include "tessel/comm/communicator.hpp"
#include "tessel/core/csr.hpp"
#include "tessel/core/option_words.hpp"
#include "tessel/partition/part.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tessel::dist {

enum class HaloAggregation { post, pre, automatic };
inline std::span<const OptionWord<HaloAggregation>> option_words(HaloAggregation) {
  static constexpr OptionWord<HaloAggregation> words[] = {{"post", HaloAggregation::post},
                                                          {"pre", HaloAggregation::pre},
                                                          {"auto", HaloAggregation::automatic}};
  return words;
}

// A minimum vertex cover of a bipartite graph (König's theorem over a Hopcroft-Karp maximum
// matching): every edge has an end in the cover, and no smaller set has that. The graph:
// left vertex l's neighbours are right[indptr[l] .. indptr[l + 1]).
struct BipartiteCover {
  std::vector<char> left, right;  // 1 where the vertex is in the cover
  std::int64_t size = 0;
};
BipartiteCover min_vertex_cover(std::int64_t num_left, std::int64_t num_right,
                                std::span<const std::int64_t> indptr,
                                std::span<const std::int32_t> right);

// The exchange of one part under pre- or auto-aggregation. For each pair (this rank, peer r)
// the cut edges u -> v (u owned by r, v owned here) form a bipartite graph; a cover of it says
// which rows travel: a boundary node u in the cover sends its row (post), an owned node v in
// it has r send the sum of a_vu x_u over its edges from r that no covered u carries (pre). pre
// covers with every v, auto with a minimum cover (never more rows than post or pre).
struct HaloAggregationPlan {
  // The aggregation here: n_owned x (n_owned + rows received), the received rows in arrival
  // order (per peer in rank order: its post rows, then its partial rows).
  LocalCsr local;
  // What this rank sends: rows sent x n_owned, grouped by peer (unit rows for post, a weighted
  // sum for each partial row).
  LocalCsr combine;
  std::vector<std::int64_t> send_per_peer, recv_per_peer;
  std::int64_t post_rows = 0, pre_rows = 0;  // of the rows this rank receives
};

// weighted: the part's forward aggregation matrix with its weights (n_owned x (n_owned +
// n_halo), halo columns after the owned ones). how: pre or automatic. Collective.
HaloAggregationPlan plan_halo_aggregation(const partition::Part& part, const LocalCsr& weighted,
                                          HaloAggregation how, comm::Communicator& comm);

}  // namespace tessel::dist
