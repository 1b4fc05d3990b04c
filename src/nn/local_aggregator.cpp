// Single-process Aggregator: SpMM with GCN- or mean-weighted matrices of one in-memory graph.
#include "tessel/nn/local_aggregator.hpp"

#include "tessel/core/error.hpp"

#include <numeric>

namespace tessel::nn {

LocalAggregator::LocalAggregator(const LocalCsr& graph, Device device, std::vector<NodeId> src_ids,
                                 std::vector<std::int64_t> degree)
    : graph_(graph), src_ids_(std::move(src_ids)) {
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
  if (!degree.empty())
    TESSEL_EXPECTS(static_cast<std::int64_t>(degree.size()) == graph_.num_cols,
                   "LocalAggregator: {} degrees for {} sources", degree.size(), graph_.num_cols);
  // Without explicit degrees a square graph is the whole graph: its row lengths are the degrees.
  // A rectangular one has none, and only Norm::mean can be used.
  if (degree.empty() && graph_.num_rows == graph_.num_cols) {
    degree.resize(static_cast<std::size_t>(graph_.num_rows));
    for (std::int64_t v = 0; v < graph_.num_rows; ++v)
      degree[v] = graph_.degree(v);
  }
  LocalCsr pattern = graph_;
  pattern.values.clear();
  matrices_.reset(kernels::SparseMatrix::from_csr(pattern, device),
                  degree.empty() ? Tensor() : Tensor::from_vector(degree).to(device));
  edges_.reset(kernels::SparseMatrix::from_csr(pattern), Tensor::from_vector(src_ids_));
}

const kernels::SparseMatrix& LocalAggregator::matrix(Norm norm) {
  return matrices_.forward(norm);
}

Tensor LocalAggregator::aggregate(const Tensor& x, Norm norm) {
  Tensor y;
  matrices_.aggregate(x, norm, y);
  return y;
}

Tensor LocalAggregator::aggregate_backward(const Tensor& grad_out, Norm norm) {
  Tensor grad_x;
  matrices_.aggregate_backward(grad_out, norm, grad_x);
  return grad_x;
}

} // namespace tessel::nn
