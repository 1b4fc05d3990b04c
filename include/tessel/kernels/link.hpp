// The Hadamard link scoring head: scores of node pairs from their embeddings, and its backward.
#pragma once

#include "tessel/core/tensor.hpp"
#include "tessel/kernels/context.hpp"

namespace tessel::kernels {

// scores[j] = sum_k w[k] z[src[j], k] z[dst[j], k] + b[0]. z: f32 [rows, H]; src, dst: i32
// [pairs], rows of z; w: f32 with H elements; b: f32 [1]; scores: f32 [pairs], allocated by
// the caller. All on one device.
void link_scores(const Tensor& z, const Tensor& src, const Tensor& dst, const Tensor& w,
                 const Tensor& b, Tensor& scores, Context* ctx = nullptr);
// For d loss / d scores = grad_scores (f32 [pairs]): adds into grad_z (f32 [rows, H]), grad_w
// (H elements) and grad_b ([1]). The sums over pairs for grad_w and grad_b are taken in double
// (on the CPU over fixed blocks of pairs). grad_z's rows receive their additions in pair order on
// the CPU (the same floats at any thread count) and in any order on CUDA (atomics), so CUDA
// agrees with the CPU to rounding.
void link_scores_backward(const Tensor& z, const Tensor& src, const Tensor& dst, const Tensor& w,
                          const Tensor& grad_scores, Tensor& grad_z, Tensor& grad_w, Tensor& grad_b,
                          Context* ctx = nullptr);

} // namespace tessel::kernels
