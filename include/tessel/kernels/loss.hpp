// Softmax cross-entropy with its gradient, and argmax accuracy, over selected rows.
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

} // namespace tessel::kernels
