// The edge weights of the GCN aggregation matrix and of the mean aggregation, shared by the CPU
// and CUDA twins so that both compute them in the same double-precision steps and round to the
// same float.
#pragma once

#include "tessel/core/types.hpp"

#include <cmath>
#include <cstdint>

namespace tessel::kernels::detail {

// Row v of the GCN matrix: a self loop weighted 1 / (deg(v) + 1), and each of its `sampled`
// edges (v, u) weighted scale / sqrt((deg(u) + 1) (deg(v) + 1)), where scale = deg(v) / sampled
// rescales a sampled row to the whole neighbourhood it was drawn from (1 when nothing was
// dropped; 0 for an empty row). deg: whole-graph in-degrees.
TESSEL_HD inline double gcn_degree_term(std::int64_t degree) {
  return static_cast<double>(degree) + 1.0;
}

TESSEL_HD inline double gcn_row_scale(std::int64_t degree, std::int64_t sampled) {
  const auto count = static_cast<double>(sampled);
  return count > 0 ? static_cast<double>(degree) / count : 0.0;
}

TESSEL_HD inline float gcn_self_weight(double dv) {
  return static_cast<float>(1.0 / dv);
}

TESSEL_HD inline float gcn_edge_weight(double scale, double du, double dv) {
  return static_cast<float>(scale / sqrt(du * dv));
}

// Each of a row's `count` edges weighted 1 / count (no edges: 0).
TESSEL_HD inline float mean_edge_weight(std::int64_t count) {
  return count > 0 ? static_cast<float>(1.0 / static_cast<double>(count)) : 0.0f;
}

} // namespace tessel::kernels::detail
