// Aggregator over one in-memory graph (no communication): tests and single-process reference runs.
#pragma once

#include "tessel/core/csr.hpp"
#include "tessel/kernels/sparse.hpp"
#include "tessel/nn/aggregation_matrices.hpp"
#include "tessel/nn/aggregator.hpp"

#include <vector>

namespace tessel::nn {

// graph: in-neighbor CSR with num_rows = num_dst destinations and num_cols = num_src sources,
// the destinations being the first sources (for a whole graph both are all nodes).
// src_ids: the ids dropout is keyed by (default 0 .. num_src - 1). degree: per-source in-degree
// used by Norm::gcn (default: the row lengths, which needs a square graph). The matrices are
// an AggregationMatrices on `device`.
class LocalAggregator final : public Aggregator {
public:
  explicit LocalAggregator(const LocalCsr& graph, Device device = Device::cpu(),
                           std::vector<NodeId> src_ids = {}, std::vector<std::int64_t> degree = {});

  std::int64_t num_src() const override { return graph_.num_cols; }
  std::int64_t num_dst() const override { return graph_.num_rows; }
  std::span<const NodeId> src_ids() const override { return src_ids_; }
  Tensor aggregate(const Tensor& x, Norm norm) override;
  Tensor aggregate_backward(const Tensor& grad_out, Norm norm) override;

  const kernels::SparseMatrix& attention_graph(Device device) override {
    return edges_.graph(device);
  }
  const Tensor& attention_ids(Device device) override { return edges_.ids(device); }
  Tensor exchange_rows(const Tensor& x) override { return x; }
  Tensor exchange_rows_backward(const Tensor& grad) override { return grad; }

  // The weighted matrix applied by aggregate() (num_dst x num_src).
  const kernels::SparseMatrix& matrix(Norm norm);

private:
  LocalCsr graph_;
  std::vector<NodeId> src_ids_;
  AggregationMatrices matrices_;
  AttentionEdges edges_;
};

} // namespace tessel::nn
