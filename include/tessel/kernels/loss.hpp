// Softmax cross-entropy with its gradient, and argmax accuracy, over selected rows; squared error
// and binary cross-entropy with logits over every element.
#pragma once

#include "tessel/core/tensor.hpp"
#include "tessel/core/types.hpp"
#include "tessel/kernels/context.hpp"

#include <cstdint>
#include <span>

namespace tessel::kernels {

// For each i: l_i = logsumexp(logits[rows[i]]) - logits[rows[i], labels[i]]; returns sum l_i
// (accumulated in double, in order of i). grad (f32 [n, C], allocated by the caller) is
// zeroed and then grad[rows[i]] = scale * (softmax(logits[rows[i]]) - onehot(labels[i])).
// logits: f32 [n, C]; rows and labels: host spans of equal length; rows distinct, in [0, n);
// labels in [0, C). Synchronizes the context (the loss is a host value).
double softmax_cross_entropy(const Tensor& logits, std::span<const LocalId> rows,
                             std::span<const std::int64_t> labels, double scale, Tensor& grad,
                             Context* ctx = nullptr);

// Number of i with argmax(logits[rows[i]]) == labels[i] (ties: the first maximum).
std::int64_t count_correct(const Tensor& logits, std::span<const LocalId> rows,
                           std::span<const std::int64_t> labels, Context* ctx = nullptr);

// Sum of squared errors sum_i (pred_i - target_i)^2, each term in double, summed in order of i
// (so CPU and CUDA add the same terms alike). pred and target: f32 with the same number of
// elements (pred may be [n, 1], target [n]), on one device. With grad (f32 shaped like pred;
// null to skip): grad_i = 2 scale (pred_i - target_i). Synchronizes the context.
double squared_error(const Tensor& pred, const Tensor& target, double scale, Tensor* grad,
                     Context* ctx = nullptr);

// Binary cross-entropy with logits, summed: sum_j softplus(s_j) - y_j s_j, computed without
// overflow for any finite score, each term in double and summed in order of j. scores, labels:
// f32 [pairs] on one device (labels 0 or 1). With grad (f32 [pairs]; null to skip):
// grad_j = scale (sigmoid(s_j) - y_j). Synchronizes the context.
double binary_cross_entropy(const Tensor& scores, const Tensor& labels, double scale, Tensor* grad,
                            Context* ctx = nullptr);

} // namespace tessel::kernels
