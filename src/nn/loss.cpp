// Softmax cross-entropy over selected rows and accuracy, on the logits' device.
#include "tessel/nn/loss.hpp"

#include "tessel/kernels/loss.hpp"

namespace tessel::nn {

LossResult softmax_cross_entropy(const Tensor& logits, std::span<const LocalId> rows,
                                 std::span<const std::int64_t> labels, double scale) {
  LossResult result;
  result.grad = Tensor::empty(logits.shape(), DType::f32, logits.device());
  result.loss_sum = kernels::softmax_cross_entropy(logits, rows, labels, scale, result.grad);
  result.count = static_cast<std::int64_t>(rows.size());
  return result;
}

std::int64_t count_correct(const Tensor& logits, std::span<const LocalId> rows,
                           std::span<const std::int64_t> labels) {
  return kernels::count_correct(logits, rows, labels);
}

} // namespace tessel::nn
