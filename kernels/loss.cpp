// Dispatch of softmax cross-entropy and argmax accuracy.
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
  if (device.is_cpu()) {
    return cpu::softmax_cross_entropy(logits.rows(), logits.cols(), logits.ptr<float>(), k,
                                      rows.data(), labels.data(), scale, grad.ptr<float>());
  }
#ifdef TESSEL_WITH_CUDA
  if (device.is_cuda()) {
    return cuda::softmax_cross_entropy(context.cuda_resources(), logits.rows(), logits.cols(),
                                       logits.ptr<float>(), k, rows.data(), labels.data(), scale,
                                       grad.ptr<float>());
  }
#endif
  (void)context;
  detail::unsupported_device(kOp, device);
}

std::int64_t count_correct(const Tensor& logits, std::span<const LocalId> rows,
                           std::span<const std::int64_t> labels, Context* ctx) {
  constexpr const char* kOp = "count_correct";
  expect_selection(kOp, logits, rows, labels);
  const Device device = logits.device();
  Context& context = resolve_context(ctx, device, kOp);
  const auto k = static_cast<std::int64_t>(rows.size());
  if (k == 0 || logits.cols() == 0) return 0;
  if (device.is_cpu()) {
    return cpu::count_correct(logits.cols(), logits.ptr<float>(), k, rows.data(), labels.data());
  }
#ifdef TESSEL_WITH_CUDA
  if (device.is_cuda()) {
    return cuda::count_correct(context.cuda_resources(), logits.cols(), logits.ptr<float>(), k,
                               rows.data(), labels.data());
  }
#endif
  (void)context;
  detail::unsupported_device(kOp, device);
}

} // namespace tessel::kernels
