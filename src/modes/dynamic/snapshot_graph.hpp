// The dynamic mode's per-snapshot graphs: a snapshot's normalized adjacency rows and, in the
// vertex layout, the halo exchange that brings the rows of other ranks' vertices.
#pragma once

#include "tessel/dist/transposition.hpp"

#include "tessel/comm/communicator.hpp"
#include "tessel/core/csr.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/datasets/temporal.hpp"
#include "tessel/kernels/sparse.hpp"
#include "tessel/dist/halo.hpp"

#include <cmath>
#include <memory>
#include <span>
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

struct SnapshotGraph {
  kernels::SparseMatrix forward, backward;  // A and A^T
  std::unique_ptr<dist::HaloExchange> halo;       // vertex layout only
  Tensor features;                          // [rows, F]
};

// The exchange that appends rows `halo` (global ids, ascending, none in this rank's vertex
// range) to this rank's [n_own, H] rows, in halo order, fetched from their owners over `data`
// (and sends their gradients back to be summed there). Collective over the control
// communicator `comm`: one alltoallv of the requests. `orig_ids`: relabeled -> source id.
std::unique_ptr<dist::HaloExchange> make_snapshot_halo(comm::Communicator& comm,
                                                 comm::Communicator& data,
                                                 const dist::TemporalLayout& layout,
                                                 const std::vector<NodeId>& halo,
                                                 std::span<const NodeId> orig_ids);

// The graphs this rank's graph phase runs on, on `device`: its owned snapshots whole (the
// snapshot layout), or its vertices' rows of every snapshot with their halo plans (the vertex
// layout; collective).
std::vector<SnapshotGraph> load_snapshot_graphs(comm::Communicator& comm,
                                                comm::Communicator& data,
                                                datasets::TemporalStoreReader& reader,
                                                std::span<const NodeId> orig_ids,
                                                const dist::TemporalLayout& layout, bool snapshot_layout,
                                                Device device);

}  // namespace tessel::train
