// CUDA twins of the GRU and LSTM gate arithmetic: a thread per (row, hidden unit), the same
// float formulas as the CPU twin.
#include "cuda_ops.hpp"
#include "resources.cuh"

namespace tessel::kernels::cuda {

namespace {

__device__ __forceinline__ float sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

__global__ void gru_forward_kernel(std::int64_t n, std::int64_t h, const float* __restrict__ gi,
                                   const float* __restrict__ gh, const float* __restrict__ h_prev,
                                   float* __restrict__ rg, float* __restrict__ z,
                                   float* __restrict__ n_gate, float* __restrict__ hn,
                                   float* __restrict__ h_next) {
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n * h;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t v = k / h, j = k % h;
    const float* a = gi + v * 3 * h;
    const float* b = gh + v * 3 * h;
    const float r_k = sigmoid(a[j] + b[j]);
    const float z_k = sigmoid(a[h + j] + b[h + j]);
    const float hn_k = b[2 * h + j];
    const float n_k = tanhf(a[2 * h + j] + r_k * hn_k);
    rg[k] = r_k;
    z[k] = z_k;
    hn[k] = hn_k;
    n_gate[k] = n_k;
    h_next[k] = (1.0f - z_k) * n_k + z_k * h_prev[k];
  }
}

__global__ void gru_backward_kernel(std::int64_t n, std::int64_t h,
                                    const float* __restrict__ grad_h_next,
                                    const float* __restrict__ h_prev, const float* __restrict__ rg,
                                    const float* __restrict__ z, const float* __restrict__ n_gate,
                                    const float* __restrict__ hn, float* __restrict__ grad_gi,
                                    float* __restrict__ grad_gh, float* __restrict__ grad_h) {
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n * h;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t v = k / h, j = k % h;
    const float g = grad_h_next[k];
    const float r_k = rg[k], z_k = z[k], n_k = n_gate[k];
    const float dn = g * (1.0f - z_k);
    const float dz = g * (h_prev[k] - n_k);
    grad_h[k] = g * z_k;
    const float dn_pre = dn * (1.0f - n_k * n_k);
    const float dr_pre = dn_pre * hn[k] * r_k * (1.0f - r_k);
    const float dz_pre = dz * z_k * (1.0f - z_k);
    float* a = grad_gi + v * 3 * h;
    float* b = grad_gh + v * 3 * h;
    a[j] = dr_pre;
    b[j] = dr_pre;
    a[h + j] = dz_pre;
    b[h + j] = dz_pre;
    a[2 * h + j] = dn_pre;
    b[2 * h + j] = dn_pre * r_k;
  }
}

__global__ void lstm_forward_kernel(std::int64_t n, std::int64_t h, float* __restrict__ gates,
                                    const float* __restrict__ c, float* __restrict__ c_next,
                                    float* __restrict__ h_next) {
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n * h;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t v = k / h, j = k % h;
    float* row = gates + v * 4 * h;
    const float i = sigmoid(row[j]), f = sigmoid(row[h + j]), g = tanhf(row[2 * h + j]),
                o = sigmoid(row[3 * h + j]);
    row[j] = i;
    row[h + j] = f;
    row[2 * h + j] = g;
    row[3 * h + j] = o;
    const float c2 = f * c[k] + i * g;
    c_next[k] = c2;
    h_next[k] = o * tanhf(c2);
  }
}

__global__ void lstm_backward_kernel(std::int64_t n, std::int64_t h,
                                     const float* __restrict__ grad_h,
                                     const float* __restrict__ grad_c,
                                     const float* __restrict__ gates, const float* __restrict__ c,
                                     const float* __restrict__ c_next, float* __restrict__ grad_pre,
                                     float* __restrict__ grad_c_prev) {
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n * h;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t v = k / h, j = k % h;
    const float* row = gates + v * 4 * h;
    float* d = grad_pre + v * 4 * h;
    const float i = row[j], f = row[h + j], g = row[2 * h + j], o = row[3 * h + j];
    const float tc = tanhf(c_next[k]);
    const float dh = grad_h[k];
    const float dc = (grad_c ? grad_c[k] : 0.0f) + dh * o * (1.0f - tc * tc);
    d[j] = dc * g * i * (1.0f - i);
    d[h + j] = dc * c[k] * f * (1.0f - f);
    d[2 * h + j] = dc * i * (1.0f - g * g);
    d[3 * h + j] = dh * tc * o * (1.0f - o);
    grad_c_prev[k] = dc * f;
  }
}

} // namespace

void gru_cell_forward(Resources& r, std::int64_t n, std::int64_t h, const float* gi,
                      const float* gh, const float* h_prev, float* rg, float* z, float* n_gate,
                      float* hn, float* h_next) {
  if (n * h == 0) return;
  gru_forward_kernel<<<blocks_for(n * h), kThreads, 0, r.stream>>>(n, h, gi, gh, h_prev, rg, z,
                                                                   n_gate, hn, h_next);
  TESSEL_CHECK_LAUNCH();
}

void gru_cell_backward(Resources& r, std::int64_t n, std::int64_t h, const float* grad_h_next,
                       const float* h_prev, const float* rg, const float* z, const float* n_gate,
                       const float* hn, float* grad_gi, float* grad_gh, float* grad_h) {
  if (n * h == 0) return;
  gru_backward_kernel<<<blocks_for(n * h), kThreads, 0, r.stream>>>(
      n, h, grad_h_next, h_prev, rg, z, n_gate, hn, grad_gi, grad_gh, grad_h);
  TESSEL_CHECK_LAUNCH();
}

void lstm_cell_forward(Resources& r, std::int64_t n, std::int64_t h, float* gates, const float* c,
                       float* c_next, float* h_next) {
  if (n * h == 0) return;
  lstm_forward_kernel<<<blocks_for(n * h), kThreads, 0, r.stream>>>(n, h, gates, c, c_next, h_next);
  TESSEL_CHECK_LAUNCH();
}

void lstm_cell_backward(Resources& r, std::int64_t n, std::int64_t h, const float* grad_h,
                        const float* grad_c, const float* gates, const float* c,
                        const float* c_next, float* grad_pre, float* grad_c_prev) {
  if (n * h == 0) return;
  lstm_backward_kernel<<<blocks_for(n * h), kThreads, 0, r.stream>>>(n, h, grad_h, grad_c, gates, c,
                                                                     c_next, grad_pre, grad_c_prev);
  TESSEL_CHECK_LAUNCH();
}

} // namespace tessel::kernels::cuda
