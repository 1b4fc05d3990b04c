// SpMM dispatch (Y = A X), the GCN matrix and mean edge-weight ops, and the CSR transpose.
#include "tessel/kernels/sparse.hpp"

#include "check.hpp"
#include "cpu/cpu_ops.hpp"
#ifdef TESSEL_WITH_CUDA
#include "cuda/cuda_ops.hpp"
#endif

namespace tessel::kernels {

namespace {
// The matrix arrays agree with its shape and live on one device.
void expect_matrix(const char* op, const SparseMatrix& a) {
  detail::expect_tensor(op, "indptr", a.indptr, DType::i64, 1);
  detail::expect_tensor(op, "indices", a.indices, DType::i32, 1);
  TESSEL_EXPECTS(a.indptr.numel() == a.num_rows + 1, "{}: indptr {} for {} rows", op,
                 a.indptr.describe(), a.num_rows);
  detail::expect_device(op, "indices", a.indices, a.device());
  if (a.weighted()) {
    detail::expect_tensor(op, "values", a.values, DType::f32, 1);
    TESSEL_EXPECTS(a.values.numel() == a.nnz(), "{}: {} values for {} entries", op,
                   a.values.numel(), a.nnz());
    detail::expect_device(op, "values", a.values, a.device());
  }
}
} // namespace

void spmm(const SparseMatrix& a, const Tensor& x, Tensor& y, Context* ctx,
          SpmmAlgorithm algorithm) {
  constexpr const char* kOp = "spmm";
  expect_matrix(kOp, a);
  detail::expect_tensor(kOp, "x", x, DType::f32, 2);
  detail::expect_tensor(kOp, "y", y, DType::f32, 2);
  const Device device = a.device();
  detail::expect_device(kOp, "x", x, device);
  detail::expect_device(kOp, "y", y, device);
  const std::int64_t f = x.cols();
  TESSEL_EXPECTS(x.rows() == a.num_cols, "{}: x {} must have {} rows (matrix columns)", kOp,
                 x.describe(), a.num_cols);
  detail::expect_shape(kOp, "y", y, {a.num_rows, f});
  Context& context = resolve_context(ctx, device, kOp);
  if (y.numel() == 0) return;
  const float* values = a.weighted() ? a.values.ptr<float>() : nullptr;
  if (device.is_cpu()) {
    switch (algorithm) {
    case SpmmAlgorithm::cpu_row_simple:
      cpu::spmm_simple(a.num_rows, a.indptr.ptr<EdgeId>(), a.indices.ptr<LocalId>(), values,
                       x.ptr<float>(), f, y.ptr<float>());
      return;
    case SpmmAlgorithm::automatic:
    case SpmmAlgorithm::cpu_row_blocked:
      cpu::spmm_blocked(a.num_rows, a.indptr.ptr<EdgeId>(), a.indices.ptr<LocalId>(), values,
                        x.ptr<float>(), x.rows(), f, y.ptr<float>());
      return;
    default:
      TESSEL_FAIL("{}: algorithm {} is not a CPU algorithm", kOp, static_cast<int>(algorithm));
    }
  }
#ifdef TESSEL_WITH_CUDA
  if (device.is_cuda()) {
    auto& r = context.cuda_resources();
    switch (algorithm) {
    case SpmmAlgorithm::cuda_cusparse:
      TESSEL_EXPECTS(a.weighted(), "{}: cuSPARSE needs a weighted matrix", kOp);
      cuda::spmm_cusparse(r, a.num_rows, a.num_cols, a.nnz(), a.indptr.ptr<EdgeId>(),
                          a.indices.ptr<LocalId>(), values, x.ptr<float>(), f, y.ptr<float>());
      return;
    case SpmmAlgorithm::cuda_narrow_row:
      cuda::spmm_narrow_row(r, a.num_rows, a.indptr.ptr<EdgeId>(), a.indices.ptr<LocalId>(),
                            values, x.ptr<float>(), f, y.ptr<float>());
      return;
    case SpmmAlgorithm::automatic:
      if (f <= cuda::kNarrowRowMaxColumns) {
        cuda::spmm_narrow_row(r, a.num_rows, a.indptr.ptr<EdgeId>(), a.indices.ptr<LocalId>(),
                              values, x.ptr<float>(), f, y.ptr<float>());
        return;
      }
      [[fallthrough]];
    case SpmmAlgorithm::cuda_warp_row:
      cuda::spmm_warp_row(r, a.num_rows, a.indptr.ptr<EdgeId>(), a.indices.ptr<LocalId>(), values,
                          x.ptr<float>(), f, y.ptr<float>());
      return;
    default:
      TESSEL_FAIL("{}: algorithm {} is not a CUDA algorithm", kOp, static_cast<int>(algorithm));
    }
  }
#endif
  (void)context;
  detail::unsupported_device(kOp, device);
}

Tensor spmm(const SparseMatrix& a, const Tensor& x, Context* ctx) {
  Tensor y = Tensor::empty({a.num_rows, x.cols()}, DType::f32, x.device());
  spmm(a, x, y, ctx);
  return y;
}

namespace {
void gcn_matrix_into(const SparseMatrix& adj, const Tensor& degree, SparseMatrix& out,
                     Context& context) {
  constexpr const char* kOp = "gcn_matrix";
  const Device device = adj.device();
  TESSEL_KERNEL_DISPATCH(
      kOp, device, context,
      cpu::gcn_matrix(adj.num_rows, adj.indptr.ptr<EdgeId>(), adj.indices.ptr<LocalId>(),
                      degree.ptr<std::int64_t>(), out.indptr.ptr<EdgeId>(),
                      out.indices.ptr<LocalId>(), out.values.ptr<float>()),
      cuda::gcn_matrix(r, adj.num_rows, adj.indptr.ptr<EdgeId>(), adj.indices.ptr<LocalId>(),
                       degree.ptr<std::int64_t>(), out.indptr.ptr<EdgeId>(),
                       out.indices.ptr<LocalId>(), out.values.ptr<float>()));
}

void transpose_into(const SparseMatrix& a, SparseMatrix& out, Context& context) {
  constexpr const char* kOp = "csr_transpose";
  const Device device = a.device();
  const float* values = a.weighted() ? a.values.ptr<float>() : nullptr;
  float* out_values = a.weighted() ? out.values.ptr<float>() : nullptr;
  TESSEL_KERNEL_DISPATCH(
      kOp, device, context,
      cpu::csr_transpose(a.num_rows, a.num_cols, a.indptr.ptr<EdgeId>(), a.indices.ptr<LocalId>(),
                         values, out.indptr.ptr<EdgeId>(), out.indices.ptr<LocalId>(),
                         out_values),
      cuda::csr_transpose(r, a.num_rows, a.num_cols, a.nnz(), a.indptr.ptr<EdgeId>(),
                          a.indices.ptr<LocalId>(), values, out.indptr.ptr<EdgeId>(),
                          out.indices.ptr<LocalId>(), out_values));
}
} // namespace

SparseMatrix gcn_matrix(const SparseMatrix& adj, const Tensor& degree, Context* ctx) {
  constexpr const char* kOp = "gcn_matrix";
  expect_matrix(kOp, adj);
  const Device device = adj.device();
  TESSEL_EXPECTS(adj.num_rows <= adj.num_cols,
                 "{}: {} rows but {} columns (rows must be the first columns)", kOp, adj.num_rows,
                 adj.num_cols);
  detail::expect_tensor(kOp, "degree", degree, DType::i64, 1);
  detail::expect_shape(kOp, "degree", degree, {adj.num_cols});
  detail::expect_device(kOp, "degree", degree, device);
  Context& context = resolve_context(ctx, device, kOp);
  SparseMatrix out;
  out.num_rows = adj.num_rows;
  out.num_cols = adj.num_cols;
  const std::int64_t nnz = adj.nnz() + adj.num_rows;
  out.indptr = Tensor::empty({adj.num_rows + 1}, DType::i64, device);
  out.indices = Tensor::empty({nnz}, DType::i32, device);
  out.values = Tensor::empty({nnz}, DType::f32, device);
  gcn_matrix_into(adj, degree, out, context);
  return out;
}

SparseMatrix csr_transpose(const SparseMatrix& a, Context* ctx) {
  constexpr const char* kOp = "csr_transpose";
  expect_matrix(kOp, a);
  const Device device = a.device();
  Context& context = resolve_context(ctx, device, kOp);
  SparseMatrix out;
  out.num_rows = a.num_cols;
  out.num_cols = a.num_rows;
  out.indptr = Tensor::empty({a.num_cols + 1}, DType::i64, device);
  out.indices = Tensor::empty({a.nnz()}, DType::i32, device);
  if (a.weighted()) out.values = Tensor::empty({a.nnz()}, DType::f32, device);
  transpose_into(a, out, context);
  return out;
}

void mean_edge_weights(const SparseMatrix& a, Tensor& values, Context* ctx) {
  constexpr const char* kOp = "mean_edge_weights";
  expect_matrix(kOp, a);
  const Device device = a.device();
  detail::expect_tensor(kOp, "values", values, DType::f32, 1);
  detail::expect_shape(kOp, "values", values, {a.nnz()});
  detail::expect_device(kOp, "values", values, device);
  Context& context = resolve_context(ctx, device, kOp);
  if (a.nnz() == 0) return;
  TESSEL_KERNEL_DISPATCH(
      kOp, device, context,
      cpu::mean_edge_weights(a.num_rows, a.indptr.ptr<EdgeId>(), values.ptr<float>()),
      cuda::mean_edge_weights(r, a.num_rows, a.indptr.ptr<EdgeId>(), values.ptr<float>()));
}

} // namespace tessel::kernels
