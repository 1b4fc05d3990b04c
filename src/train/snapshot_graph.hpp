// The dynamic mode's per-snapshot graphs: a snapshot's normalized adjacency rows and, in the
// vertex layout, the plan and the exchanges that bring the rows of other ranks' vertices.
#pragma once

#include "temporal_layout.hpp"

#include "tessel/comm/communicator.hpp"
#include "tessel/core/csr.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/kernels/sparse.hpp"

#include <cmath>
#include <vector>

namespace tessel::train {


// D^-1/2 (A + I) D^-1/2 over weighted in-edges, D = 1 + weighted in-degree (of the whole
// snapshot, so every layout computes the same entries), for rows [row_begin, row_end). Columns:
// global ids when col_of is empty, else col_of(global id). Row v starts with its self loop.
template <class ColOf>
LocalCsr normalized_rows(const Csr& s, const std::vector<double>& degree, NodeId row_begin,
                         NodeId row_end, ColOf&& col_of, std::int64_t num_cols) {
  LocalCsr a;
  a.num_rows = row_end - row_begin;
  a.num_cols = num_cols;
  a.indptr.assign(static_cast<std::size_t>(a.num_rows + 1), 0);
  for (NodeId v = row_begin; v < row_end; ++v) {
    const double dv = degree[v];
    a.indices.push_back(static_cast<LocalId>(col_of(v)));
    a.values.push_back(static_cast<float>(1.0 / dv));
    for (EdgeId e = s.indptr[v]; e < s.indptr[v + 1]; ++e) {
      const NodeId u = s.indices[e];
      a.indices.push_back(static_cast<LocalId>(col_of(u)));
      a.values.push_back(static_cast<float>(s.values[e] / std::sqrt(degree[u] * dv)));
    }
    a.indptr[v - row_begin + 1] = static_cast<EdgeId>(a.indices.size());
  }
  return a;
}

// 1 + the weighted in-degree of every node of snapshot `s`.
std::vector<double> weighted_degree(const Csr& s);

// Rows of other ranks one snapshot's aggregation reads (vertex layout): the halo rows arrive in
// owner order (ascending global id) after the owned rows.
struct HaloPlan {
  std::vector<std::int64_t> send_counts, recv_counts;  // rows per rank
  Tensor send_rows;                                    // i32 local rows to send, by rank
  std::int64_t num_halo = 0;
};

struct SnapshotGraph {
  kernels::SparseMatrix forward, backward;  // A and A^T
  HaloPlan halo;                            // vertex layout only
  Tensor features;                          // [rows, F]
};

// x: [n_own, H] -> [n_own + n_halo, H] with the halo rows fetched from their owners, over the
// data plane on x's device.
Tensor halo_forward(comm::Communicator& data, const HaloPlan& plan, const Tensor& x);

// grad: [n_own + n_halo, H] -> [n_own, H], halo gradients summed at their owners: one segment
// per peer in rank order (a peer asks for a row once), so the sum's order is fixed on every
// backend.
Tensor halo_backward(comm::Communicator& data, const HaloPlan& plan, const Tensor& grad,
                     std::int64_t n_own);

// The plan that fetches rows `halo` (global ids, ascending, none in this rank's vertex range)
// from their owners; its row list lives on `device`. Collective over the control
// communicator: one alltoallv of the requested ids.
HaloPlan make_halo_plan(comm::Communicator& comm, const TemporalLayout& layout,
                        const std::vector<NodeId>& halo, Device device);

}  // namespace tessel::train
