// Single-process Aggregator: SpMM with GCN- or mean-weighted matrices of one in-memory graph.
#include "tessel/nn/local_aggregator.hpp"

#include "tessel/core/error.hpp"

#include <numeric>

namespace tessel::nn {

LocalAggregator::LocalAggregator(const LocalCsr& graph, Device device, std::vector<NodeId> src_ids,
                                 std::vector<std::int64_t> degree)
    : graph_(graph), device_(device), src_ids_(std::move(src_ids)), degree_(std::move(degree)) {
  graph_.validate("LocalAggregator graph");
  TESSEL_EXPECTS(graph_.num_rows <= graph_.num_cols,
                 "LocalAggregator: {} destinations but only {} sources (destinations come first)",
                 graph_.num_rows, graph_.num_cols);
  if (src_ids_.empty()) {
    src_ids_.resize(static_cast<std::size_t>(graph_.num_cols));
    std::iota(src_ids_.begin(), src_ids_.end(), NodeId{0});
  }
  TESSEL_EXPECTS(static_cast<std::int64_t>(src_ids_.size()) == graph_.num_cols,
                 "LocalAggregator: {} source ids for {} sources", src_ids_.size(), graph_.num_cols);
  if (!degree_.empty())
    TESSEL_EXPECTS(static_cast<std::int64_t>(degree_.size()) == graph_.num_cols,
                   "LocalAggregator: {} degrees for {} sources", degree_.size(), graph_.num_cols);
}

LocalAggregator::Matrices& LocalAggregator::matrices(Norm norm) {
  auto& slot = norm == Norm::gcn ? gcn_ : mean_;
  if (slot) return *slot;
  LocalCsr pattern = graph_;
  pattern.values.clear();
  if (norm == Norm::gcn) {
    if (degree_.empty()) {
      TESSEL_EXPECTS(graph_.num_rows == graph_.num_cols,
                     "LocalAggregator: GCN weights of a {}x{} graph need explicit degrees",
                     graph_.num_rows, graph_.num_cols);
      degree_.resize(static_cast<std::size_t>(graph_.num_rows));
      for (std::int64_t v = 0; v < graph_.num_rows; ++v)
        degree_[v] = graph_.degree(v);
    }
    pattern = kernels::add_self_loops(pattern);
  }
  kernels::SparseMatrix a = kernels::SparseMatrix::from_csr(pattern, device_);
  Tensor values = Tensor::empty({a.nnz()}, DType::f32, device_);
  if (norm == Norm::gcn) {
    const Tensor col_degree = Tensor::from_vector(degree_).to(device_);
    const Tensor row_degree = col_degree.rows_slice(0, graph_.num_rows);
    kernels::gcn_edge_weights(a, row_degree, col_degree, values);
  } else {
    kernels::mean_edge_weights(a, values);
  }
  a = a.with_values(values);
  kernels::SparseMatrix at = a.transpose();
  slot = Matrices{std::move(a), std::move(at)};
  return *slot;
}

const kernels::SparseMatrix& LocalAggregator::matrix(Norm norm) {
  return matrices(norm).forward;
}

Tensor LocalAggregator::aggregate(const Tensor& x, Norm norm) {
  TESSEL_EXPECTS(x.rows() == num_src(), "LocalAggregator::aggregate: {} rows for {} sources",
                 x.rows(), num_src());
  return kernels::spmm(matrices(norm).forward, x);
}

Tensor LocalAggregator::aggregate_backward(const Tensor& grad_out, Norm norm) {
  TESSEL_EXPECTS(grad_out.rows() == num_dst(),
                 "LocalAggregator::aggregate_backward: {} rows for {} destinations",
                 grad_out.rows(), num_dst());
  return kernels::spmm(matrices(norm).backward, grad_out);
}

} // namespace tessel::nn
