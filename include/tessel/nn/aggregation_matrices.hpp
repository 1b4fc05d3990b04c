// The sparse matrices one aggregation applies (per normalization: the weighted matrix and its
// transpose), built on their device by kernel ops from a pattern and whole-graph degrees.
#pragma once

#include "tessel/core/tensor.hpp"
#include "tessel/kernels/sparse.hpp"
#include "tessel/nn/aggregator.hpp"

#include <optional>

namespace tessel::nn {

// Every Aggregator keeps one of these: the local, full-batch and sampled-block aggregators
// differ in where their pattern comes from (and in halo exchange), never in how the weights of
// a Norm are computed. Matrices are built on first use of a Norm after reset() (the backward
// one on the first backward pass only, so a layer that needs no input gradient never builds
// it) and reused until the next reset().
class AggregationMatrices {
public:
  // pattern: num_dst x num_src in-neighbor pattern (values ignored), the destinations being the
  // first sources. degree: i64 [num_src] whole-graph in-degrees on the pattern's device (needed
  // by Norm::gcn only; may be undefined otherwise). Drops the matrices built so far.
  void reset(kernels::SparseMatrix pattern, Tensor degree);

  // The matrix of `norm` given with its weights (num_dst x num_src, values set): from now on
  // forward(norm) is `weighted` and backward(norm) its transpose; other norms cannot be built.
  void reset_weighted(kernels::SparseMatrix weighted, Norm norm);

  // Drops the pattern and the degrees, keeping the matrices built so far (their arrays stay
  // alive where they share them, as the mean matrix does): for a run that uses one Norm, whose
  // GCN matrices otherwise hold a third copy of the graph. A Norm not built yet can then no
  // longer be built (an error).
  void release_pattern();

  std::int64_t num_dst() const { return pattern_.num_rows; }
  std::int64_t num_src() const { return pattern_.num_cols; }
  const kernels::SparseMatrix& pattern() const { return pattern_; }

  // Norm::gcn: kernels::gcn_matrix (self loop + sampled-mode scaling); Norm::mean: the pattern
  // with kernels::mean_edge_weights. num_dst x num_src.
  const kernels::SparseMatrix& forward(Norm norm);
  // The transpose of forward(norm) (kernels::csr_transpose), num_src x num_dst.
  const kernels::SparseMatrix& backward(Norm norm);

  // y = forward(norm) x. x: f32 [num_src, F]; y: f32 [num_dst, F], reallocated when its shape
  // or device differs.
  void aggregate(const Tensor& x, Norm norm, Tensor& y);
  // grad_x = backward(norm) grad_y. grad_y: [num_dst, F]; grad_x: [num_src, F] (as y above).
  void aggregate_backward(const Tensor& grad_y, Norm norm, Tensor& grad_x);

private:
  struct Slot {
    std::optional<kernels::SparseMatrix> forward, backward;
  };
  Slot& slot(Norm norm) { return norm == Norm::gcn ? gcn_ : mean_; }

  kernels::SparseMatrix pattern_;
  Tensor degree_;
  Slot gcn_, mean_;
};

} // namespace tessel::nn
