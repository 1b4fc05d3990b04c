// The dynamic mode's per-snapshot graphs: degrees, adjacency rows, and the vertex layout's halo.
#include "snapshot_graph.hpp"

#include "tessel/core/error.hpp"
#include "tessel/kernels/dense.hpp"

#include <algorithm>

namespace tessel::train {


std::vector<double> weighted_degree(const Csr& s) {
  std::vector<double> d(static_cast<std::size_t>(s.num_rows), 1.0);
  for (std::int64_t v = 0; v < s.num_rows; ++v)
    for (EdgeId e = s.indptr[v]; e < s.indptr[v + 1]; ++e) d[v] += s.values[e];
  return d;
}

std::unique_ptr<dist::HaloExchange> make_snapshot_halo(comm::Communicator& comm,
                                                 comm::Communicator& data,
                                                 const dist::TemporalLayout& layout,
                                                 const std::vector<NodeId>& halo,
                                                 std::span<const NodeId> orig_ids) {
  const int r = comm.rank();
  const NodeId v0 = layout.vertex_offsets[r], v1 = layout.vertex_offsets[r + 1];
  std::vector<std::int32_t> owner, owner_local;
  std::vector<NodeId> orig(orig_ids.begin() + v0, orig_ids.begin() + v1);
  for (const NodeId u : halo) {
    const auto q = std::upper_bound(layout.vertex_offsets.begin(), layout.vertex_offsets.end(), u) -
                   layout.vertex_offsets.begin() - 1;
    owner.push_back(static_cast<std::int32_t>(q));
    owner_local.push_back(static_cast<std::int32_t>(u - layout.vertex_offsets[q]));
    orig.push_back(orig_ids[u]);
  }
  return std::make_unique<dist::HaloExchange>(dist::HaloRows{.rank = r,
                                                 .num_ranks = comm.size(),
                                                 .num_owned = v1 - v0,
                                                 .owner = owner,
                                                 .owner_local = owner_local,
                                                 .orig_id = orig},
                                        comm, &data);
}

std::vector<SnapshotGraph> load_snapshot_graphs(comm::Communicator& comm,
                                                comm::Communicator& data,
                                                datasets::TemporalStoreReader& reader,
                                                std::span<const NodeId> orig_ids,
                                                const dist::TemporalLayout& layout, bool snapshot_layout,
                                                Device device) {
  const datasets::TemporalStoreInfo info = reader.info();
  const std::int64_t N = info.num_nodes, T = info.num_snapshots, F = info.feature_dim;
  const int r = comm.rank();
  std::vector<SnapshotGraph> graphs;
  if (snapshot_layout) {
    const dist::Block mine = dist::owned_snapshots(layout, r, T);
    const auto snaps = reader.snapshots(mine.begin, mine.end);
    for (std::int64_t i = 0; i < mine.size(); ++i) {
      const Csr& s = snaps[i];
      SnapshotGraph g;
      const LocalCsr a = normalized_rows(s, weighted_degree(s), 0, N, [](NodeId u) { return u; }, N);
      g.forward = kernels::SparseMatrix::from_csr(a, device);
      g.backward = g.forward.transpose();
      g.features = Tensor::from_vector(reader.features(mine.begin + i, 0, N), {N, F}).to(device);
      graphs.push_back(std::move(g));
    }
    return graphs;
  }
  // Vertex layout: each rank reads every snapshot (degrees of halo sources need whole rows)
  // and keeps its rows, with the halo plan of each snapshot.
  const auto snaps = reader.snapshots(0, T);
  const NodeId v0 = layout.vertex_offsets[r], v1 = layout.vertex_offsets[r + 1];
  const std::int64_t n_own = v1 - v0;
  std::vector<std::int64_t> halo_index(static_cast<std::size_t>(N), -1);
  for (std::int64_t t = 0; t < T; ++t) {
    const Csr& s = snaps[t];
    std::vector<NodeId> halo;
    for (NodeId v = v0; v < v1; ++v)
      for (EdgeId e = s.indptr[v]; e < s.indptr[v + 1]; ++e)
        if (s.indices[e] < v0 || s.indices[e] >= v1) halo.push_back(s.indices[e]);
    std::sort(halo.begin(), halo.end());
    halo.erase(std::unique(halo.begin(), halo.end()), halo.end());
    for (std::size_t i = 0; i < halo.size(); ++i) halo_index[halo[i]] = n_own + static_cast<std::int64_t>(i);
    const auto n_halo = static_cast<std::int64_t>(halo.size());
    SnapshotGraph g;
    const LocalCsr a = normalized_rows(
        s, weighted_degree(s), v0, v1,
        [&](NodeId u) { return (u >= v0 && u < v1) ? u - v0 : halo_index[u]; }, n_own + n_halo);
    for (NodeId u : halo) halo_index[u] = -1;
    g.forward = kernels::SparseMatrix::from_csr(a, device);
    g.backward = g.forward.transpose();
    g.features = Tensor::from_vector(reader.features(t, v0, v1), {n_own, F}).to(device);
    // Ask each owner for its rows among the halo.
    g.halo = make_snapshot_halo(comm, data, layout, halo, orig_ids);
    graphs.push_back(std::move(g));
  }
  return graphs;
}

}  // namespace tessel::train
