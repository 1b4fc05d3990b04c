// Softmax cross-entropy over selected rows, and accuracy.
#pragma once

#include "tessel/core/tensor.hpp"
#include "tessel/core/types.hpp"

#include <cstdint>
#include <span>

namespace tessel::nn {

struct LossResult {
  double loss_sum = 0;  // sum over the selected rows of -log softmax(logits)[label]
  std::int64_t count = 0;
  Tensor grad;          // d (scale * loss_sum) / d logits, same shape as logits (zero elsewhere)
};

// logits: [n, C] f32; rows: which rows count; labels[i] is the label of rows[i] (in [0, C)).
// scale multiplies the gradient: 1 / (training nodes of the whole graph) gives the gradient of
// the global mean loss.
LossResult softmax_cross_entropy(const Tensor& logits, std::span<const LocalId> rows,
                                 std::span<const std::int64_t> labels, double scale);

// Number of rows whose argmax equals the label.
std::int64_t count_correct(const Tensor& logits, std::span<const LocalId> rows,
                           std::span<const std::int64_t> labels);

}  // namespace tessel::nn
