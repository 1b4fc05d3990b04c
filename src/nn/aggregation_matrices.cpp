// AggregationMatrices: GCN and mean matrices and their transposes, made by kernel ops on first use.
#include "tessel/nn/aggregation_matrices.hpp"

#include "tessel/core/error.hpp"

namespace tessel::nn {

void AggregationMatrices::reset(kernels::SparseMatrix pattern, Tensor degree) {
  pattern_ = std::move(pattern);
  pattern_.values = Tensor();
  degree_ = std::move(degree);
  gcn_ = {};
  mean_ = {};
}

void AggregationMatrices::reset_weighted(kernels::SparseMatrix weighted, Norm norm) {
  TESSEL_EXPECTS(weighted.weighted(), "aggregation matrices: a {}x{} matrix without weights",
                 weighted.num_rows, weighted.num_cols);
  pattern_ = kernels::SparseMatrix{weighted.num_rows, weighted.num_cols, {}, {}, {}};
  degree_ = Tensor();
  gcn_ = {};
  mean_ = {};
  slot(norm).forward = std::move(weighted);
}

void AggregationMatrices::release_pattern() {
  pattern_.indptr = Tensor();
  pattern_.indices = Tensor();
  degree_ = Tensor();
}

const kernels::SparseMatrix& AggregationMatrices::forward(Norm norm) {
  Slot& s = slot(norm);
  if (s.forward) return *s.forward;
  TESSEL_EXPECTS(pattern_.indptr.defined(),
                 "aggregation matrices of a {}x{} graph: the {} matrix was not built before the "
                 "pattern was released",
                 pattern_.num_rows, pattern_.num_cols, norm == Norm::gcn ? "GCN" : "mean");
  if (norm == Norm::gcn) {
    TESSEL_EXPECTS(degree_.defined(), "GCN aggregation of a {}x{} graph needs its degrees",
                   pattern_.num_rows, pattern_.num_cols);
    s.forward = kernels::gcn_matrix(pattern_, degree_);
  } else {
    Tensor values = Tensor::empty({pattern_.nnz()}, DType::f32, pattern_.device());
    kernels::mean_edge_weights(pattern_, values);
    s.forward = pattern_.with_values(std::move(values));
  }
  return *s.forward;
}

const kernels::SparseMatrix& AggregationMatrices::backward(Norm norm) {
  Slot& s = slot(norm);
  if (!s.backward) {
    TESSEL_EXPECTS(pattern_.indptr.defined() || s.forward,
                   "aggregation matrices: the transpose was not built before the pattern was "
                   "released");
    s.backward = kernels::csr_transpose(forward(norm));
  }
  return *s.backward;
}

namespace {
void ensure_shape(Tensor& t, std::int64_t rows, std::int64_t cols, Device device) {
  if (!t.defined() || t.rows() != rows || t.cols() != cols || t.device() != device ||
      t.dtype() != DType::f32 || t.dim() != 2)
    t = Tensor::empty({rows, cols}, DType::f32, device);
}
} // namespace

void AggregationMatrices::aggregate(const Tensor& x, Norm norm, Tensor& y) {
  TESSEL_EXPECTS(x.rows() == num_src(), "aggregate: {} rows for {} sources", x.rows(), num_src());
  ensure_shape(y, num_dst(), x.cols(), x.device());
  kernels::spmm(forward(norm), x, y);
}

void AggregationMatrices::aggregate_backward(const Tensor& grad_y, Norm norm, Tensor& grad_x) {
  TESSEL_EXPECTS(grad_y.rows() == num_dst(), "aggregate backward: {} rows for {} destinations",
                 grad_y.rows(), num_dst());
  ensure_shape(grad_x, num_src(), grad_y.cols(), grad_y.device());
  kernels::spmm(backward(norm), grad_y, grad_x);
}

} // namespace tessel::nn
