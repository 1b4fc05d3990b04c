// CPU twins of the Adam and SGD updates (torch.optim semantics, coupled L2 weight decay).
#include "cpu_ops.hpp"

#include <cmath>

namespace tessel::kernels::cpu {

void adam_update(std::int64_t count, float* param, const float* grad, float* m, float* v,
                 float beta1, float beta2, float eps, float weight_decay, float step_size,
                 float bias2_sqrt) {
#pragma omp parallel for schedule(static) if (parallel_worth(count))
  for (std::int64_t i = 0; i < count; ++i) {
    const float g = grad[i] + weight_decay * param[i];
    m[i] = beta1 * m[i] + (1.0f - beta1) * g;
    v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
    const float denom = std::sqrt(v[i]) / bias2_sqrt + eps;
    param[i] -= step_size * m[i] / denom;
  }
}

void sgd_update(std::int64_t count, float* param, const float* grad, float* momentum_buf, float lr,
                float momentum, float weight_decay) {
#pragma omp parallel for schedule(static) if (parallel_worth(count))
  for (std::int64_t i = 0; i < count; ++i) {
    float g = grad[i] + weight_decay * param[i];
    if (momentum_buf) {
      momentum_buf[i] = momentum * momentum_buf[i] + g;
      g = momentum_buf[i];
    }
    param[i] -= lr * g;
  }
}

} // namespace tessel::kernels::cpu
