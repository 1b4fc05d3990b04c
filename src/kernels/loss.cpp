// Dispatch of softmax cross-entropy, argmax accuracy, squared error and binary cross-entropy.
#include "tessel/kernels/loss.hpp"

#include "check.hpp"
#include "cpu/cpu_ops.hpp"
#ifdef TESSEL_WITH_CUDA
#include "cuda/cuda_ops.hpp"
#endif

namespace tessel::kernels {

namespace {
void expect_selection(const char* op, const Tensor& logits, std::span<const LocalId> rows,
                      std::span<const std::int64_t> labels) {
  detail::expect_tensor(op, "logits", logits, DType::f32, 2);
  TESSEL_EXPECTS(rows.size() == labels.size(), "{}: {} rows but {} labels", op, rows.size(),
                 labels.size());
  const std::int64_t n = logits.rows(), c = logits.cols();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    TESSEL_EXPECTS(rows[i] >= 0 && rows[i] < n, "{}: row {} (entry {}) outside [0, {})", op,
                   rows[i], i, n);
    TESSEL_EXPECTS(labels[i] >= 0 && labels[i] < c, "{}: label {} of row {} outside [0, {})", op,
                   labels[i], rows[i], c);
  }
}
} // namespace

double softmax_cross_entropy(const Tensor& logits, std::span<const LocalId> rows,
                             std::span<const std::int64_t> labels, double scale, Tensor& grad,
                             Context* ctx) {
  constexpr const char* kOp = "softmax_cross_entropy";
  expect_selection(kOp, logits, rows, labels);
  detail::expect_tensor(kOp, "grad", grad, DType::f32, 2);
  detail::expect_same_shape(kOp, "logits", logits, "grad", grad);
  const Device device = logits.device();
  detail::expect_device(kOp, "grad", grad, device);
  Context& context = resolve_context(ctx, device, kOp);
  const auto k = static_cast<std::int64_t>(rows.size());
  TESSEL_KERNEL_DISPATCH(kOp, device, context,
                         cpu::softmax_cross_entropy(logits.rows(), logits.cols(),
                                                    logits.ptr<float>(), k, rows.data(),
                                                    labels.data(), scale, grad.ptr<float>()),
                         cuda::softmax_cross_entropy(r, logits.rows(), logits.cols(),
                                                     logits.ptr<float>(), k, rows.data(),
                                                     labels.data(), scale, grad.ptr<float>()));
}

std::int64_t count_correct(const Tensor& logits, std::span<const LocalId> rows,
                           std::span<const std::int64_t> labels, Context* ctx) {
  constexpr const char* kOp = "count_correct";
  expect_selection(kOp, logits, rows, labels);
  const Device device = logits.device();
  Context& context = resolve_context(ctx, device, kOp);
  const auto k = static_cast<std::int64_t>(rows.size());
  if (k == 0 || logits.cols() == 0) return 0;
  TESSEL_KERNEL_DISPATCH(
      kOp, device, context,
      cpu::count_correct(logits.cols(), logits.ptr<float>(), k, rows.data(), labels.data()),
      cuda::count_correct(r, logits.cols(), logits.ptr<float>(), k, rows.data(), labels.data()));
}

namespace {
// a and b hold the same number of f32 elements on one device; grad, when given, is shaped like a.
void expect_elementwise_loss(const char* op, const char* a_name, const Tensor& a,
                             const char* b_name, const Tensor& b, const Tensor* grad) {
  TESSEL_EXPECTS(a.defined() && b.defined(), "{}: {} or {} is undefined", op, a_name, b_name);
  TESSEL_EXPECTS(a.dtype() == DType::f32 && b.dtype() == DType::f32 && a.numel() == b.numel(),
                 "{}: {} is {} and {} is {}; expected f32 with as many elements", op, a_name,
                 a.describe(), b_name, b.describe());
  detail::expect_device(op, b_name, b, a.device());
  if (grad) {
    TESSEL_EXPECTS(grad->defined() && grad->dtype() == DType::f32,
                   "{}: grad is undefined or not f32", op);
    detail::expect_same_shape(op, a_name, a, "grad", *grad);
    detail::expect_device(op, "grad", *grad, a.device());
  }
}
} // namespace

double squared_error(const Tensor& pred, const Tensor& target, double scale, Tensor* grad,
                     Context* ctx) {
  constexpr const char* kOp = "squared_error";
  expect_elementwise_loss(kOp, "pred", pred, "target", target, grad);
  const Device device = pred.device();
  Context& context = resolve_context(ctx, device, kOp);
  const std::int64_t n = pred.numel();
  float* g = grad ? grad->ptr<float>() : nullptr;
  if (n == 0) return 0.0;
  TESSEL_KERNEL_DISPATCH(
      kOp, device, context, cpu::squared_error(n, pred.ptr<float>(), target.ptr<float>(), scale, g),
      cuda::squared_error(r, n, pred.ptr<float>(), target.ptr<float>(), scale, g));
}

double binary_cross_entropy(const Tensor& scores, const Tensor& labels, double scale, Tensor* grad,
                            Context* ctx) {
  constexpr const char* kOp = "binary_cross_entropy";
  expect_elementwise_loss(kOp, "scores", scores, "labels", labels, grad);
  const Device device = scores.device();
  Context& context = resolve_context(ctx, device, kOp);
  const std::int64_t n = scores.numel();
  float* g = grad ? grad->ptr<float>() : nullptr;
  if (n == 0) return 0.0;
  TESSEL_KERNEL_DISPATCH(
      kOp, device, context,
      cpu::binary_cross_entropy(n, scores.ptr<float>(), labels.ptr<float>(), scale, g),
      cuda::binary_cross_entropy(r, n, scores.ptr<float>(), labels.ptr<float>(), scale, g));
}

} // namespace tessel::kernels
