// Parameter updates of Adam and SGD (momentum) with coupled L2 weight decay, as torch.optim.
#pragma once

#include "tessel/core/tensor.hpp"
#include "tessel/kernels/context.hpp"

#include <cstdint>

namespace tessel::kernels {

struct AdamStep {
  float lr = 0.01f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
  std::int64_t step = 1; // 1 for the first update (bias correction 1 - beta^step)
};

// g = grad + wd * param; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// param -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
// param, grad, m, v: f32, same shape and device.
void adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamStep& step,
                 Context* ctx = nullptr);

// g = grad + wd * param; with momentum mu > 0: buf = mu buf + g (buf starts at 0, so the first
// step gives buf = g as torch does), g = buf; param -= lr g. momentum_buf may be undefined
// when mu == 0.
void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buf, float lr, float momentum,
                float weight_decay, Context* ctx = nullptr);

} // namespace tessel::kernels
