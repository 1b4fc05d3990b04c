// CUDA twins of the Adam and SGD updates (element-wise, same formulas as the CPU twins).
#include "cuda_ops.hpp"
#include "resources.cuh"

namespace tessel::kernels::cuda {

namespace {

__global__ void adam_kernel(std::int64_t count, float* __restrict__ param,
                            const float* __restrict__ grad, float* __restrict__ m,
                            float* __restrict__ v, float beta1, float beta2, float eps,
                            float weight_decay, float step_size, float bias2_sqrt) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float g = grad[i] + weight_decay * param[i];
    m[i] = beta1 * m[i] + (1.0f - beta1) * g;
    v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
    const float denom = sqrtf(v[i]) / bias2_sqrt + eps;
    param[i] -= step_size * m[i] / denom;
  }
}

__global__ void sgd_kernel(std::int64_t count, float* __restrict__ param,
                           const float* __restrict__ grad, float* __restrict__ momentum_buf,
                           float lr, float momentum, float weight_decay) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float g = grad[i] + weight_decay * param[i];
    if (momentum_buf) {
      momentum_buf[i] = momentum * momentum_buf[i] + g;
      g = momentum_buf[i];
    }
    param[i] -= lr * g;
  }
}

} // namespace

void adam_update(Resources& r, std::int64_t count, float* param, const float* grad, float* m,
                 float* v, float beta1, float beta2, float eps, float weight_decay, float step_size,
                 float bias2_sqrt) {
  if (count == 0) return;
  adam_kernel<<<blocks_for(count), kThreads, 0, r.stream>>>(
      count, param, grad, m, v, beta1, beta2, eps, weight_decay, step_size, bias2_sqrt);
  TESSEL_CHECK_LAUNCH();
}

void sgd_update(Resources& r, std::int64_t count, float* param, const float* grad,
                float* momentum_buf, float lr, float momentum, float weight_decay) {
  if (count == 0) return;
  sgd_kernel<<<blocks_for(count), kThreads, 0, r.stream>>>(count, param, grad, momentum_buf, lr,
                                                           momentum, weight_decay);
  TESSEL_CHECK_LAUNCH();
}

} // namespace tessel::kernels::cuda
