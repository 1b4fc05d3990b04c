// Attention (GAT) dispatch: argument checks, then the CPU or CUDA twin.
#include "tessel/kernels/attention.hpp"

#include "attention_math.hpp"
#include "check.hpp"

#include <initializer_list>
#include "cpu/attention_ops.hpp"
#ifdef TESSEL_WITH_CUDA
#include "cuda/attention_ops.hpp"
#endif

namespace tessel::kernels {

namespace {

void expect_pattern(const char* op, const SparseMatrix& g) {
  detail::expect_tensor(op, "indptr", g.indptr, DType::i64, 1);
  detail::expect_tensor(op, "indices", g.indices, DType::i32, 1);
  TESSEL_EXPECTS(g.indptr.numel() == g.num_rows + 1, "{}: indptr {} for {} rows", op,
                 g.indptr.describe(), g.num_rows);
  TESSEL_EXPECTS(g.num_rows <= g.num_cols, "{}: {} rows but {} columns (rows are the first columns)",
                 op, g.num_rows, g.num_cols);
  detail::expect_device(op, "indices", g.indices, g.device());
}

// Columns per head of a packed tensor with `heads` heads.
std::int64_t head_columns(const char* op, const Tensor& packed, int heads) {
  TESSEL_EXPECTS(heads >= 1, "{}: {} heads", op, heads);
  TESSEL_EXPECTS(packed.cols() > heads && (packed.cols() - heads) % heads == 0,
                 "{}: packed {} is not [rows, H F + H] for H = {}", op, packed.describe(), heads);
  return (packed.cols() - heads) / heads;
}

detail::AttentionArgs args(const SparseMatrix& g, int heads, std::int64_t f, bool average) {
  detail::AttentionArgs a;
  a.rows = g.num_rows;
  a.cols = g.num_cols;
  a.indptr = g.indptr.ptr<EdgeId>();
  a.indices = g.indices.ptr<LocalId>();
  a.heads = heads;
  a.f = f;
  a.average = average;
  return a;
}

} // namespace

void attention_project(const Tensor& wh, const Tensor& att_src, const Tensor& att_dst, int heads,
                       Tensor& packed, Tensor& dst_term, Context* ctx) {
  constexpr const char* kOp = "attention_project";
  detail::expect_tensor(kOp, "wh", wh, DType::f32, 2);
  detail::expect_tensor(kOp, "packed", packed, DType::f32, 2);
  detail::expect_tensor(kOp, "dst_term", dst_term, DType::f32, 2);
  const Device device = wh.device();
  const std::int64_t f = head_columns(kOp, packed, heads), hf = heads * f;
  detail::expect_shape(kOp, "wh", wh, {packed.rows(), hf});
  detail::expect_shape(kOp, "att_src", att_src, {hf});
  detail::expect_shape(kOp, "att_dst", att_dst, {hf});
  TESSEL_EXPECTS(dst_term.cols() == heads && dst_term.rows() <= wh.rows(),
                 "{}: dst_term {} for {} heads and {} sources", kOp, dst_term.describe(), heads,
                 wh.rows());
  for (const Tensor* t : std::initializer_list<const Tensor*>{&att_src, &att_dst, &packed, &dst_term})
    detail::expect_device(kOp, "operand", *t, device);
  Context& context = resolve_context(ctx, device, kOp);
  if (wh.rows() == 0) return;
  TESSEL_KERNEL_DISPATCH(
      kOp, device, context,
      cpu::attention_project(wh.rows(), dst_term.rows(), heads, f, wh.ptr<float>(),
                             att_src.ptr<float>(), att_dst.ptr<float>(), packed.ptr<float>(),
                             dst_term.ptr<float>()),
      cuda::attention_project(r, wh.rows(), dst_term.rows(), heads, f, wh.ptr<float>(),
                              att_src.ptr<float>(), att_dst.ptr<float>(), packed.ptr<float>(),
                              dst_term.ptr<float>()));
}

void attention_project_backward(const Tensor& packed, const Tensor& grad_packed,
                                const Tensor& grad_dst_term, const Tensor& att_src,
                                const Tensor& att_dst, int heads, Tensor& grad_wh,
                                Tensor& grad_att_src, Tensor& grad_att_dst, Context* ctx) {
  constexpr const char* kOp = "attention_project_backward";
  detail::expect_tensor(kOp, "packed", packed, DType::f32, 2);
  detail::expect_tensor(kOp, "grad_packed", grad_packed, DType::f32, 2);
  detail::expect_tensor(kOp, "grad_dst_term", grad_dst_term, DType::f32, 2);
  detail::expect_tensor(kOp, "grad_wh", grad_wh, DType::f32, 2);
  const Device device = packed.device();
  const std::int64_t f = head_columns(kOp, packed, heads), hf = heads * f;
  const std::int64_t n_src = grad_wh.rows();
  TESSEL_EXPECTS(packed.rows() >= n_src, "{}: packed {} has fewer rows than grad_wh {}", kOp,
                 packed.describe(), grad_wh.describe());
  detail::expect_shape(kOp, "grad_wh", grad_wh, {n_src, hf});
  detail::expect_shape(kOp, "grad_packed", grad_packed, {n_src, hf + heads});
  TESSEL_EXPECTS(grad_dst_term.cols() == heads && grad_dst_term.rows() <= n_src,
                 "{}: grad_dst_term {} for {} heads and {} sources", kOp, grad_dst_term.describe(),
                 heads, n_src);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&att_src, &att_dst, &grad_att_src, &grad_att_dst})
    detail::expect_shape(kOp, "attention vector", *t, {hf});
  for (const Tensor* t : std::initializer_list<const Tensor*>{&grad_packed, &grad_dst_term, &att_src, &att_dst, &grad_wh,
                          &grad_att_src, &grad_att_dst})
    detail::expect_device(kOp, "operand", *t, device);
  Context& context = resolve_context(ctx, device, kOp);
  if (n_src == 0) return;
  TESSEL_KERNEL_DISPATCH(
      kOp, device, context,
      cpu::attention_project_backward(n_src, grad_dst_term.rows(), heads, f, packed.ptr<float>(),
                                      grad_packed.ptr<float>(), grad_dst_term.ptr<float>(),
                                      att_src.ptr<float>(), att_dst.ptr<float>(),
                                      grad_wh.ptr<float>(), grad_att_src.ptr<float>(),
                                      grad_att_dst.ptr<float>()),
      cuda::attention_project_backward(r, n_src, grad_dst_term.rows(), heads, f,
                                       packed.ptr<float>(), grad_packed.ptr<float>(),
                                       grad_dst_term.ptr<float>(), att_src.ptr<float>(),
                                       att_dst.ptr<float>(), grad_wh.ptr<float>(),
                                       grad_att_src.ptr<float>(), grad_att_dst.ptr<float>()));
}

namespace {
// Shared checks of the forward and backward; returns F.
std::int64_t expect_attention(const char* op, const SparseMatrix& graph, const Tensor& packed,
                              const Tensor& dst_term, int heads, bool average,
                              const Tensor& out, const char* out_name) {
  expect_pattern(op, graph);
  const Device device = graph.device();
  detail::expect_tensor(op, "packed", packed, DType::f32, 2);
  detail::expect_tensor(op, "dst_term", dst_term, DType::f32, 2);
  detail::expect_tensor(op, out_name, out, DType::f32, 2);
  const std::int64_t f = head_columns(op, packed, heads);
  TESSEL_EXPECTS(packed.rows() == graph.num_cols, "{}: packed {} for {} columns", op,
                 packed.describe(), graph.num_cols);
  detail::expect_shape(op, "dst_term", dst_term, {graph.num_rows, heads});
  detail::expect_shape(op, out_name, out, {graph.num_rows, average ? f : heads * f});
  detail::expect_device(op, "packed", packed, device);
  detail::expect_device(op, "dst_term", dst_term, device);
  detail::expect_device(op, out_name, out, device);
  return f;
}
} // namespace

void attention_forward(const SparseMatrix& graph, const Tensor& packed, const Tensor& dst_term,
                       int heads, bool average, const AttentionDropout& dropout, Tensor& out,
                       Tensor& alpha, Context* ctx) {
  constexpr const char* kOp = "attention_forward";
  const std::int64_t f =
      expect_attention(kOp, graph, packed, dst_term, heads, average, out, "out");
  const Device device = graph.device();
  detail::expect_tensor(kOp, "alpha", alpha, DType::f32, 2);
  detail::expect_shape(kOp, "alpha", alpha, {graph.nnz(), heads});
  detail::expect_device(kOp, "alpha", alpha, device);
  TESSEL_EXPECTS(dropout.p >= 0.0f && dropout.p < 1.0f, "{}: dropout {} outside [0, 1)", kOp,
                 dropout.p);
  const std::int64_t* ids = nullptr;
  if (dropout.p > 0.0f) {
    detail::expect_tensor(kOp, "dropout ids", dropout.ids, DType::i64, 1);
    detail::expect_shape(kOp, "dropout ids", dropout.ids, {graph.num_cols});
    detail::expect_device(kOp, "dropout ids", dropout.ids, device);
    ids = dropout.ids.ptr<std::int64_t>();
  }
  Context& context = resolve_context(ctx, device, kOp);
  if (graph.num_rows == 0) return;
  TESSEL_KERNEL_DISPATCH(
      kOp, device, context,
      cpu::attention_forward(args(graph, heads, f, average), packed.ptr<float>(),
                             dst_term.ptr<float>(), dropout.key, dropout.p, ids, out.ptr<float>(),
                             alpha.ptr<float>()),
      cuda::attention_forward(r, args(graph, heads, f, average), packed.ptr<float>(),
                              dst_term.ptr<float>(), dropout.key, dropout.p, ids,
                              out.ptr<float>(), alpha.ptr<float>()));
}

void attention_backward(const SparseMatrix& graph, const Tensor& packed, const Tensor& dst_term,
                        int heads, bool average, float dropout_p, const Tensor& alpha,
                        const Tensor& grad_out, Tensor& grad_packed, Tensor& grad_dst_term,
                        Context* ctx) {
  constexpr const char* kOp = "attention_backward";
  const std::int64_t f =
      expect_attention(kOp, graph, packed, dst_term, heads, average, grad_out, "grad_out");
  const Device device = graph.device();
  detail::expect_tensor(kOp, "alpha", alpha, DType::f32, 2);
  detail::expect_shape(kOp, "alpha", alpha, {graph.nnz(), heads});
  detail::expect_tensor(kOp, "grad_packed", grad_packed, DType::f32, 2);
  detail::expect_same_shape(kOp, "grad_packed", grad_packed, "packed", packed);
  detail::expect_tensor(kOp, "grad_dst_term", grad_dst_term, DType::f32, 2);
  detail::expect_same_shape(kOp, "grad_dst_term", grad_dst_term, "dst_term", dst_term);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&alpha, &grad_packed, &grad_dst_term})
    detail::expect_device(kOp, "operand", *t, device);
  TESSEL_EXPECTS(dropout_p >= 0.0f && dropout_p < 1.0f, "{}: dropout {} outside [0, 1)", kOp,
                 dropout_p);
  Context& context = resolve_context(ctx, device, kOp);
  TESSEL_KERNEL_DISPATCH(
      kOp, device, context,
      cpu::attention_backward(args(graph, heads, f, average), packed.ptr<float>(),
                              dst_term.ptr<float>(), dropout_p, alpha.ptr<float>(),
                              grad_out.ptr<float>(), grad_packed.ptr<float>(),
                              grad_dst_term.ptr<float>()),
      cuda::attention_backward(r, args(graph, heads, f, average), packed.ptr<float>(),
                               dst_term.ptr<float>(), dropout_p, alpha.ptr<float>(),
                               grad_out.ptr<float>(), grad_packed.ptr<float>(),
                               grad_dst_term.ptr<float>()));
}

SparseMatrix add_self_loops(const SparseMatrix& pattern, Context* ctx) {
  constexpr const char* kOp = "add_self_loops";
  expect_pattern(kOp, pattern);
  const Device device = pattern.device();
  Context& context = resolve_context(ctx, device, kOp);
  SparseMatrix out;
  out.num_rows = pattern.num_rows;
  out.num_cols = pattern.num_cols;
  out.indptr = Tensor::empty({pattern.num_rows + 1}, DType::i64, device);
  out.indices = Tensor::empty({pattern.nnz() + pattern.num_rows}, DType::i32, device);
  [&] {
    TESSEL_KERNEL_DISPATCH(
        kOp, device, context,
        cpu::add_self_loops(pattern.num_rows, pattern.indptr.ptr<EdgeId>(),
                            pattern.indices.ptr<LocalId>(), out.indptr.ptr<EdgeId>(),
                            out.indices.ptr<LocalId>()),
        cuda::add_self_loops(r, pattern.num_rows, pattern.indptr.ptr<EdgeId>(),
                             pattern.indices.ptr<LocalId>(), out.indptr.ptr<EdgeId>(),
                             out.indices.ptr<LocalId>()));
  }();
  return out;
}

} // namespace tessel::kernels
