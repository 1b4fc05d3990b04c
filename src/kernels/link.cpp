// Dispatch of the Hadamard link head (scores of node pairs and their backward).
#include "tessel/kernels/link.hpp"

#include "check.hpp"
#include "cpu/cpu_ops.hpp"
#ifdef TESSEL_WITH_CUDA
#include "cuda/cuda_ops.hpp"
#endif

namespace tessel::kernels {

namespace {
void expect_head(const char* op, const Tensor& z, const Tensor& src, const Tensor& dst,
                 const Tensor& w) {
  detail::expect_tensor(op, "z", z, DType::f32, 2);
  detail::expect_tensor(op, "src", src, DType::i32, 1);
  detail::expect_tensor(op, "dst", dst, DType::i32, 1);
  detail::expect_same_shape(op, "src", src, "dst", dst);
  TESSEL_EXPECTS(w.defined() && w.dtype() == DType::f32 && w.numel() == z.cols(),
                 "{}: w is {}, expected f32 with {} elements (z is {})", op,
                 w.defined() ? w.describe() : std::string("undefined"), z.cols(), z.describe());
  const Device device = z.device();
  detail::expect_device(op, "src", src, device);
  detail::expect_device(op, "dst", dst, device);
  detail::expect_device(op, "w", w, device);
}

void expect_bias(const char* op, const char* name, const Tensor& b, Device device) {
  TESSEL_EXPECTS(b.defined() && b.dtype() == DType::f32 && b.numel() == 1, "{}: {} must be one f32",
                 op, name);
  detail::expect_device(op, name, b, device);
}
} // namespace

void link_scores(const Tensor& z, const Tensor& src, const Tensor& dst, const Tensor& w,
                 const Tensor& b, Tensor& scores, Context* ctx) {
  constexpr const char* kOp = "link_scores";
  expect_head(kOp, z, src, dst, w);
  const Device device = z.device();
  expect_bias(kOp, "b", b, device);
  detail::expect_tensor(kOp, "scores", scores, DType::f32, 1);
  detail::expect_shape(kOp, "scores", scores, {src.numel()});
  detail::expect_device(kOp, "scores", scores, device);
  Context& context = resolve_context(ctx, device, kOp);
  const std::int64_t pairs = src.numel(), H = z.cols();
  if (pairs == 0) return;
  TESSEL_KERNEL_DISPATCH(
      kOp, device, context,
      cpu::link_scores(pairs, H, z.ptr<float>(), src.ptr<LocalId>(), dst.ptr<LocalId>(),
                       w.ptr<float>(), b.ptr<float>(), scores.ptr<float>()),
      cuda::link_scores(r, pairs, H, z.ptr<float>(), src.ptr<LocalId>(), dst.ptr<LocalId>(),
                        w.ptr<float>(), b.ptr<float>(), scores.ptr<float>()));
}

void link_scores_backward(const Tensor& z, const Tensor& src, const Tensor& dst, const Tensor& w,
                          const Tensor& grad_scores, Tensor& grad_z, Tensor& grad_w, Tensor& grad_b,
                          Context* ctx) {
  constexpr const char* kOp = "link_scores_backward";
  expect_head(kOp, z, src, dst, w);
  const Device device = z.device();
  TESSEL_EXPECTS(grad_scores.defined() && grad_scores.dtype() == DType::f32 &&
                     grad_scores.numel() == src.numel(),
                 "{}: grad_scores must be f32 with one entry per pair ({})", kOp, src.numel());
  detail::expect_device(kOp, "grad_scores", grad_scores, device);
  detail::expect_tensor(kOp, "grad_z", grad_z, DType::f32, 2);
  detail::expect_same_shape(kOp, "z", z, "grad_z", grad_z);
  detail::expect_device(kOp, "grad_z", grad_z, device);
  TESSEL_EXPECTS(grad_w.defined() && grad_w.dtype() == DType::f32 && grad_w.numel() == w.numel(),
                 "{}: grad_w must be f32 shaped like w", kOp);
  detail::expect_device(kOp, "grad_w", grad_w, device);
  expect_bias(kOp, "grad_b", grad_b, device);
  Context& context = resolve_context(ctx, device, kOp);
  const std::int64_t pairs = src.numel(), H = z.cols();
  if (pairs == 0) return;
  TESSEL_KERNEL_DISPATCH(
      kOp, device, context,
      cpu::link_scores_backward(pairs, H, z.ptr<float>(), src.ptr<LocalId>(), dst.ptr<LocalId>(),
                                w.ptr<float>(), grad_scores.ptr<float>(), grad_z.ptr<float>(),
                                grad_w.ptr<float>(), grad_b.ptr<float>(), z.rows()),
      cuda::link_scores_backward(r, pairs, H, z.ptr<float>(), src.ptr<LocalId>(),
                                 dst.ptr<LocalId>(), w.ptr<float>(), grad_scores.ptr<float>(),
                                 grad_z.ptr<float>(), grad_w.ptr<float>(), grad_b.ptr<float>()));
}

} // namespace tessel::kernels
