// The full-batch Aggregator: halo exchange plus SpMM over a partition's owned rows. Used by
// full-batch training and by the full-neighbor evaluation of sampled training.
#pragma once

#include "tessel/core/timer.hpp"
#include "tessel/kernels/sparse.hpp"
#include "tessel/nn/aggregation_matrices.hpp"
#include "tessel/nn/aggregator.hpp"
#include "tessel/partition/part.hpp"
#include "tessel/train/halo.hpp"

#include <vector>

namespace tessel::train {

// The aggregation matrices of a part: its in-neighbor pattern over owned + halo columns and the
// whole-graph in-degrees of those columns.
inline nn::AggregationMatrices part_matrices(const partition::Part& part) {
  const std::vector<std::int64_t> degree(
      part.degree.begin(), part.degree.begin() + static_cast<std::ptrdiff_t>(part.graph.num_cols));
  LocalCsr pattern = part.graph;
  pattern.values.clear();
  nn::AggregationMatrices matrices;
  matrices.reset(kernels::SparseMatrix::from_csr(pattern), Tensor::from_vector(degree));
  return matrices;
}

// Aggregation over owned rows with owned + halo columns. The matrices (nn::AggregationMatrices)
// are built once per normalization from the part's graph and whole-graph degrees.
class FullAggregator final : public nn::Aggregator {
 public:
  FullAggregator(const partition::Part& part, comm::Communicator& comm)
      : part_(part), halo_(part, comm), matrices_(part_matrices(part)) {}
  FullAggregator(const FullAggregator&) = delete;
  FullAggregator& operator=(const FullAggregator&) = delete;

  // Where aggregate() and aggregate_backward() add their seconds ("aggregate", "communicate").
  void set_phases(PhaseTimes* phases) { phases_ = phases; }
  const HaloExchange& halo() const { return halo_; }

  std::int64_t num_src() const override { return part_.num_owned; }
  std::int64_t num_dst() const override { return part_.num_owned; }
  std::span<const NodeId> src_ids() const override {
    return {part_.orig_id.data(), static_cast<std::size_t>(part_.num_owned)};
  }

  Tensor aggregate(const Tensor& x, nn::Norm norm) override {
    {
      ScopedPhase t(*phases_, "communicate");
      halo_.forward(x, x_full_);
    }
    ScopedPhase t(*phases_, "aggregate");
    Tensor y;
    matrices_.aggregate(x_full_, norm, y);
    return y;
  }

  Tensor aggregate_backward(const Tensor& grad_out, nn::Norm norm) override {
    {
      ScopedPhase t(*phases_, "aggregate");
      // grad_full_ is consumed by the halo exchange below before the next call: reusable.
      matrices_.aggregate_backward(grad_out, norm, grad_full_);
    }
    ScopedPhase t(*phases_, "communicate");
    Tensor grad_owned;
    halo_.backward(grad_full_, grad_owned);
    return grad_owned;
  }

private:
  const partition::Part& part_;
  HaloExchange halo_;
  PhaseTimes own_phases_;
  PhaseTimes* phases_ = &own_phases_;
  nn::AggregationMatrices matrices_;
  Tensor x_full_;
  Tensor grad_full_;
};

}  // namespace tessel::train
