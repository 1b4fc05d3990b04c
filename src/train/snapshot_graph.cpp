// The dynamic mode's per-snapshot graphs: degrees, and the halo exchange of the vertex layout.
#include "snapshot_graph.hpp"

#include "tessel/core/error.hpp"
#include "tessel/kernels/dense.hpp"

namespace tessel::train {


std::vector<double> weighted_degree(const Csr& s) {
  std::vector<double> d(static_cast<std::size_t>(s.num_rows), 1.0);
  for (std::int64_t v = 0; v < s.num_rows; ++v)
    for (EdgeId e = s.indptr[v]; e < s.indptr[v + 1]; ++e) d[v] += s.values[e];
  return d;
}

Tensor halo_forward(comm::Communicator& data, const HaloPlan& plan, const Tensor& x) {
  const std::int64_t n = x.rows(), H = x.cols();
  Tensor full = Tensor::empty({n + plan.num_halo, H}, DType::f32, x.device());
  full.rows_slice(0, n).copy_from(x);
  Tensor send = Tensor::empty({plan.send_rows.numel(), H}, DType::f32, x.device());
  if (plan.send_rows.numel() > 0) kernels::gather_rows(x, plan.send_rows, send);
  Tensor halo_rows = full.rows_slice(n, n + plan.num_halo);
  data.alltoallv(send, plan.send_counts, halo_rows, plan.recv_counts);
  return full;
}

Tensor halo_backward(comm::Communicator& data, const HaloPlan& plan, const Tensor& grad,
                     std::int64_t n_own) {
  const std::int64_t H = grad.cols();
  Tensor out = grad.rows_slice(0, n_own).clone();
  Tensor back = Tensor::empty({plan.send_rows.numel(), H}, DType::f32, grad.device());
  data.alltoallv(grad.rows_slice(n_own, grad.rows()), plan.recv_counts, back, plan.send_counts);
  if (plan.send_rows.numel() > 0)
    kernels::scatter_add_rows_segmented(back, plan.send_rows, plan.send_counts, out);
  return out;
}

HaloPlan make_halo_plan(comm::Communicator& comm, const TemporalLayout& layout,
                        const std::vector<NodeId>& halo, Device device) {
  HaloPlan plan;
  const NodeId v0 = layout.vertex_offsets[comm.rank()], v1 = layout.vertex_offsets[comm.rank() + 1];
  plan.num_halo = static_cast<std::int64_t>(halo.size());
  plan.recv_counts.assign(static_cast<std::size_t>(comm.size()), 0);
  for (NodeId u : halo) {
    const auto owner = std::upper_bound(layout.vertex_offsets.begin(),
                                        layout.vertex_offsets.end(), u) -
                       layout.vertex_offsets.begin() - 1;
    ++plan.recv_counts[owner];
  }
  const auto requested = comm.alltoallv<NodeId>(halo, plan.recv_counts, &plan.send_counts);
  std::vector<std::int32_t> rows(requested.size());
  for (std::size_t i = 0; i < requested.size(); ++i) {
    TESSEL_ASSERT(requested[i] >= v0 && requested[i] < v1, "halo request for row {}", requested[i]);
    rows[i] = static_cast<std::int32_t>(requested[i] - v0);
  }
  plan.send_rows = Tensor::from_vector(rows);
  if (!device.is_cpu()) plan.send_rows = plan.send_rows.to(device);
  return plan;
}

}  // namespace tessel::train
