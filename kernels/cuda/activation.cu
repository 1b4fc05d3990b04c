// CUDA twins of ReLU and dropout (the same Philox draw per (node id, column) as the CPU twin).
#include "cuda_ops.hpp"
#include "resources.cuh"

#include "../dropout_draw.hpp"

namespace tessel::kernels::cuda {

namespace {

__global__ void relu_forward_kernel(std::int64_t count, const float* __restrict__ x,
                                    float* __restrict__ y) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void relu_backward_kernel(std::int64_t count, const float* __restrict__ grad_y,
                                     const float* __restrict__ y, float* __restrict__ grad_x) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    grad_x[i] = y[i] > 0.0f ? grad_y[i] : 0.0f;
}

// A thread per (row, group of 8 columns): one Philox block serves the 8 columns.
__global__ void dropout_forward_kernel(std::int64_t n, std::int64_t f, std::int64_t quads,
                                       const float* __restrict__ x,
                                       const NodeId* __restrict__ row_ids, rng::Key key, float p,
                                       float* __restrict__ y, std::uint8_t* __restrict__ mask) {
  const float keep_scale = 1.0f / (1.0f - p);
  const std::uint32_t threshold = detail::dropout_threshold(p);
  constexpr std::int64_t kGroup = detail::kDropoutColumnsPerBlock;
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       t < n * quads; t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = t / quads, q = t % quads;
    const auto words = key.block(static_cast<std::uint64_t>(row_ids[row]), static_cast<std::uint32_t>(q));
    for (std::int64_t j = q * kGroup; j < f && j < (q + 1) * kGroup; ++j) {
      const bool keep = detail::dropout_draw16(words.data(), j - q * kGroup) >= threshold;
      mask[row * f + j] = keep ? 1 : 0;
      y[row * f + j] = keep ? x[row * f + j] * keep_scale : 0.0f;
    }
  }
}

__global__ void dropout_backward_kernel(std::int64_t count, const float* __restrict__ grad_y,
                                        const std::uint8_t* __restrict__ mask, float p,
                                        float* __restrict__ grad_x) {
  const float keep_scale = 1.0f / (1.0f - p);
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    grad_x[i] = mask[i] ? grad_y[i] * keep_scale : 0.0f;
}

} // namespace

void relu_forward(Resources& r, std::int64_t count, const float* x, float* y) {
  if (count == 0) return;
  relu_forward_kernel<<<blocks_for(count), kThreads, 0, r.stream>>>(count, x, y);
  TESSEL_CHECK_LAUNCH();
}

void relu_backward(Resources& r, std::int64_t count, const float* grad_y, const float* y,
                   float* grad_x) {
  if (count == 0) return;
  relu_backward_kernel<<<blocks_for(count), kThreads, 0, r.stream>>>(count, grad_y, y, grad_x);
  TESSEL_CHECK_LAUNCH();
}

void dropout_forward(Resources& r, std::int64_t n, std::int64_t f, const float* x,
                     const NodeId* host_row_ids, const rng::Key& key, float p, float* y,
                     std::uint8_t* mask) {
  if (n * f == 0) return;
  // The row ids come from the host (the aggregator's id list); upload them on the stream.
  auto* row_ids =
      static_cast<NodeId*>(r.scratch_at_least(static_cast<std::size_t>(n) * sizeof(NodeId)));
  TESSEL_CHECK_CUDA(cudaMemcpyAsync(row_ids, host_row_ids,
                                    static_cast<std::size_t>(n) * sizeof(NodeId),
                                    cudaMemcpyHostToDevice, r.stream));
  const std::int64_t quads = (f + detail::kDropoutColumnsPerBlock - 1) / detail::kDropoutColumnsPerBlock;
  dropout_forward_kernel<<<blocks_for(n * quads), kThreads, 0, r.stream>>>(n, f, quads, x, row_ids,
                                                                           key, p, y, mask);
  TESSEL_CHECK_LAUNCH();
}

void dropout_forward_device_ids(Resources& r, std::int64_t n, std::int64_t f, const float* x,
                                const NodeId* row_ids, const rng::Key& key, float p, float* y,
                                std::uint8_t* mask) {
  if (n * f == 0) return;
  const std::int64_t quads = (f + detail::kDropoutColumnsPerBlock - 1) / detail::kDropoutColumnsPerBlock;
  dropout_forward_kernel<<<blocks_for(n * quads), kThreads, 0, r.stream>>>(n, f, quads, x, row_ids,
                                                                           key, p, y, mask);
  TESSEL_CHECK_LAUNCH();
}


void dropout_backward(Resources& r, std::int64_t count, const float* grad_y,
                      const std::uint8_t* mask, float p, float* grad_x) {
  if (count == 0) return;
  dropout_backward_kernel<<<blocks_for(count), kThreads, 0, r.stream>>>(count, grad_y, mask, p,
                                                                        grad_x);
  TESSEL_CHECK_LAUNCH();
}

} // namespace tessel::kernels::cuda
