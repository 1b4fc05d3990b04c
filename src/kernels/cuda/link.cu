// CUDA twin of the Hadamard link head: a warp per pair for the scores; for the backward, a
// thread per (pair, column) scattering into grad_z with atomics and a block per column summing
// grad_w (and one for grad_b) in double in a fixed order.
#include "cuda_ops.hpp"
#include "resources.cuh"

namespace tessel::kernels::cuda {

namespace {

constexpr int kReduceThreads = 256;

__global__ void link_scores_kernel(std::int64_t pairs, std::int64_t h, const float* __restrict__ z,
                                   const LocalId* __restrict__ src, const LocalId* __restrict__ dst,
                                   const float* __restrict__ w, const float* __restrict__ b,
                                   float* __restrict__ scores) {
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  // The loop bound is the same for every lane of a warp, so the shuffles see the whole warp.
  for (std::int64_t j = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       j < pairs; j += warps) {
    const float* a = z + static_cast<std::int64_t>(src[j]) * h;
    const float* c = z + static_cast<std::int64_t>(dst[j]) * h;
    float s = 0.0f;
    for (std::int64_t k = lane; k < h; k += 32)
      s += w[k] * a[k] * c[k];
    for (int offset = 16; offset > 0; offset /= 2)
      s += __shfl_xor_sync(0xffffffffu, s, offset);
    if (lane == 0) scores[j] = s + b[0];
  }
}

__global__ void link_grad_z_kernel(std::int64_t pairs, std::int64_t h, const float* __restrict__ z,
                                   const LocalId* __restrict__ src, const LocalId* __restrict__ dst,
                                   const float* __restrict__ w,
                                   const float* __restrict__ grad_scores, float* grad_z) {
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       t < pairs * h; t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t j = t / h, k = t % h;
    const float gj = grad_scores[j];
    if (gj == 0.0f) continue;
    const std::int64_t u = src[j], v = dst[j];
    const float ak = z[u * h + k], ck = z[v * h + k];
    atomicAdd(grad_z + u * h + k, gj * w[k] * ck);
    atomicAdd(grad_z + v * h + k, gj * w[k] * ak);
  }
}

// Block k < h: grad_w[k] += sum_j g_j z[src_j, k] z[dst_j, k]; block h: grad_b[0] += sum_j g_j.
// Each thread sums a strided subset in double, then a shared-memory tree in a fixed order.
__global__ void link_grad_w_kernel(std::int64_t pairs, std::int64_t h, const float* __restrict__ z,
                                   const LocalId* __restrict__ src, const LocalId* __restrict__ dst,
                                   const float* __restrict__ grad_scores,
                                   float* __restrict__ grad_w, float* __restrict__ grad_b) {
  __shared__ double partial[kReduceThreads];
  const std::int64_t k = blockIdx.x;
  double sum = 0.0;
  for (std::int64_t j = threadIdx.x; j < pairs; j += kReduceThreads) {
    const float gj = grad_scores[j];
    if (k < h)
      sum += static_cast<double>(gj) * z[static_cast<std::int64_t>(src[j]) * h + k] *
             z[static_cast<std::int64_t>(dst[j]) * h + k];
    else
      sum += gj;
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = kReduceThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride)
      partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    if (k < h)
      grad_w[k] += static_cast<float>(partial[0]);
    else
      grad_b[0] += static_cast<float>(partial[0]);
  }
}

} // namespace

void link_scores(Resources& r, std::int64_t pairs, std::int64_t h, const float* z,
                 const LocalId* src, const LocalId* dst, const float* w, const float* b,
                 float* scores) {
  if (pairs == 0) return;
  link_scores_kernel<<<blocks_for(pairs * 32), kThreads, 0, r.stream>>>(pairs, h, z, src, dst, w, b,
                                                                        scores);
  TESSEL_CHECK_LAUNCH();
}

void link_scores_backward(Resources& r, std::int64_t pairs, std::int64_t h, const float* z,
                          const LocalId* src, const LocalId* dst, const float* w,
                          const float* grad_scores, float* grad_z, float* grad_w, float* grad_b) {
  if (pairs == 0) return;
  if (h > 0) {
    link_grad_z_kernel<<<blocks_for(pairs * h), kThreads, 0, r.stream>>>(pairs, h, z, src, dst, w,
                                                                         grad_scores, grad_z);
    TESSEL_CHECK_LAUNCH();
  }
  link_grad_w_kernel<<<static_cast<unsigned int>(h + 1), kReduceThreads, 0, r.stream>>>(
      pairs, h, z, src, dst, grad_scores, grad_w, grad_b);
  TESSEL_CHECK_LAUNCH();
}

} // namespace tessel::kernels::cuda
