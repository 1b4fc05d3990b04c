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

// A thread per (row, group of 8 columns): one Philox block serves the 8 columns, whose 8 keep
// bits form one byte of the row's mask (thread t writes mask byte t).
__global__ void dropout_forward_kernel(std::int64_t n, std::int64_t f, std::int64_t groups,
                                       const float* __restrict__ x,
                                       const NodeId* __restrict__ row_ids, rng::Key key, float p,
                                       float* y, std::uint8_t* __restrict__ mask) {
  const float keep_scale = 1.0f / (1.0f - p);
  const std::uint32_t threshold = detail::dropout_threshold(p);
  constexpr std::int64_t kGroup = detail::kDropoutColumnsPerBlock;
  static_assert(kGroup == 8, "one mask byte per Philox block");
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       t < n * groups; t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = t / groups, g = t % groups;
    const auto words = key.block(static_cast<std::uint64_t>(row_ids[row]), static_cast<std::uint32_t>(g));
    unsigned int byte = 0;
    for (std::int64_t j = g * kGroup; j < f && j < (g + 1) * kGroup; ++j) {
      const bool keep = detail::dropout_draw16(words.data(), j - g * kGroup) >= threshold;
      y[row * f + j] = keep ? x[row * f + j] * keep_scale : 0.0f;
      byte |= (keep ? 1u : 0u) << (j - g * kGroup);
    }
    if (mask) mask[t] = static_cast<std::uint8_t>(byte);
  }
}

// A thread per (row, group of 8 columns): one Philox block serves the 8 columns, whose 8 bits
// form one byte of the row's bit array.
__global__ void relu_dropout_forward_kernel(std::int64_t n, std::int64_t f, std::int64_t groups,
                                            const float* __restrict__ x,
                                            const NodeId* __restrict__ row_ids, rng::Key key,
                                            float p, float* y, std::uint8_t* __restrict__ bits) {
  const float keep_scale = 1.0f / (1.0f - p);
  const std::uint32_t threshold = detail::dropout_threshold(p);
  constexpr std::int64_t kGroup = detail::kDropoutColumnsPerBlock;
  static_assert(kGroup == 8, "one bit byte per Philox block");
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       t < n * groups; t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = t / groups, g = t % groups;
    std::array<std::uint32_t, 4> words{};
    if (p > 0.0f)
      words = key.block(static_cast<std::uint64_t>(row_ids[row]), static_cast<std::uint32_t>(g));
    unsigned int byte = 0;
    for (std::int64_t j = g * kGroup; j < f && j < (g + 1) * kGroup; ++j) {
      const bool kept = p == 0.0f || detail::dropout_draw16(words.data(), j - g * kGroup) >= threshold;
      const float v = x[row * f + j];
      const float out = v > 0.0f && kept ? v * keep_scale : 0.0f;
      y[row * f + j] = out;
      byte |= (out > 0.0f ? 1u : 0u) << (j - g * kGroup);
    }
    bits[t] = static_cast<std::uint8_t>(byte);
  }
}

__global__ void relu_dropout_backward_kernel(std::int64_t n, std::int64_t f, std::int64_t row_bytes,
                                             const float* grad_y,
                                             const std::uint8_t* __restrict__ bits, float p,
                                             float* grad_x) {
  const float keep_scale = 1.0f / (1.0f - p);
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n * f; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / f, j = i % f;
    const bool keep = (bits[row * row_bytes + (j >> 3)] >> (j & 7)) & 1u;
    grad_x[i] = keep ? grad_y[i] * keep_scale : 0.0f;
  }
}

// Fast paths for rows of a multiple of 8 columns (every row starts on a 32-byte boundary): a
// thread per 8 consecutive elements, two 16-byte loads and stores, 32-bit index arithmetic. The
// generic kernels above spend most of their time in 64-bit divisions and strided byte stores.
// Thread t covers elements [8t, 8t + 8) of row t / groups, group t % groups: the same Philox
// block and the same bit byte as the generic kernels.
__device__ inline void load8(const float* p, float (&v)[8]) {
  const float4 a = reinterpret_cast<const float4*>(p)[0];
  const float4 b = reinterpret_cast<const float4*>(p)[1];
  v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
  v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}

__device__ inline void store8(float* p, const float (&v)[8]) {
  reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

__global__ void dropout_forward8_kernel(std::uint32_t items, std::uint32_t groups,
                                        const float* x, const NodeId* __restrict__ row_ids,
                                        rng::Key key, float p, float* y,
                                        std::uint8_t* __restrict__ mask) {
  const float keep_scale = 1.0f / (1.0f - p);
  const std::uint32_t threshold = detail::dropout_threshold(p);
  for (std::uint32_t t = blockIdx.x * blockDim.x + threadIdx.x; t < items;
       t += gridDim.x * blockDim.x) {
    const std::uint32_t row = t / groups, g = t - row * groups;
    const auto words = key.block(static_cast<std::uint64_t>(row_ids[row]), g);
    float v[8];
    load8(x + static_cast<std::size_t>(t) * 8, v);
    unsigned int byte = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const bool keep = detail::dropout_draw16(words.data(), k) >= threshold;
      v[k] = keep ? v[k] * keep_scale : 0.0f;
      byte |= (keep ? 1u : 0u) << k;
    }
    store8(y + static_cast<std::size_t>(t) * 8, v);
    if (mask) mask[t] = static_cast<std::uint8_t>(byte);
  }
}

__global__ void relu_dropout_forward8_kernel(std::uint32_t items, std::uint32_t groups,
                                             const float* x, const NodeId* __restrict__ row_ids,
                                             rng::Key key, float p, float* y,
                                             std::uint8_t* __restrict__ bits) {
  const float keep_scale = 1.0f / (1.0f - p);
  const std::uint32_t threshold = detail::dropout_threshold(p);
  for (std::uint32_t t = blockIdx.x * blockDim.x + threadIdx.x; t < items;
       t += gridDim.x * blockDim.x) {
    std::array<std::uint32_t, 4> words{};
    if (p > 0.0f) {
      const std::uint32_t row = t / groups, g = t - row * groups;
      words = key.block(static_cast<std::uint64_t>(row_ids[row]), g);
    }
    float v[8];
    load8(x + static_cast<std::size_t>(t) * 8, v);
    unsigned int byte = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const bool kept = p == 0.0f || detail::dropout_draw16(words.data(), k) >= threshold;
      v[k] = v[k] > 0.0f && kept ? v[k] * keep_scale : 0.0f;
      byte |= (v[k] > 0.0f ? 1u : 0u) << k;
    }
    store8(y + static_cast<std::size_t>(t) * 8, v);
    bits[t] = static_cast<std::uint8_t>(byte);
  }
}

__global__ void relu_dropout_backward8_kernel(std::uint32_t items, const float* grad_y,
                                              const std::uint8_t* __restrict__ bits, float p,
                                              float* grad_x) {
  const float keep_scale = 1.0f / (1.0f - p);
  for (std::uint32_t t = blockIdx.x * blockDim.x + threadIdx.x; t < items;
       t += gridDim.x * blockDim.x) {
    const unsigned int byte = bits[t];
    float v[8];
    load8(grad_y + static_cast<std::size_t>(t) * 8, v);
#pragma unroll
    for (int k = 0; k < 8; ++k)
      v[k] = (byte >> k) & 1u ? v[k] * keep_scale : 0.0f;
    store8(grad_x + static_cast<std::size_t>(t) * 8, v);
  }
}

// Whether the 8-column fast paths apply: f a multiple of 8, 16-byte aligned rows, and fewer
// than 2^31 groups of 8 (32-bit indices).
bool fast8(std::int64_t n, std::int64_t f, const void* a, const void* b) {
  const auto bits = reinterpret_cast<std::uintptr_t>(a) | reinterpret_cast<std::uintptr_t>(b);
  return f % 8 == 0 && bits % 16 == 0 && n * (f / 8) < (std::int64_t{1} << 31);
}

void launch_dropout(Resources& r, std::int64_t n, std::int64_t f, const float* x,
                    const NodeId* row_ids, const rng::Key& key, float p, float* y,
                    std::uint8_t* mask) {
  // ceil(f / 8) groups per row: the mask's bytes, one per thread.
  const std::int64_t groups = detail::dropout_mask_row_bytes(f);
  if (fast8(n, f, x, y)) {
    const auto items = static_cast<std::uint32_t>(n * groups);
    dropout_forward8_kernel<<<blocks_for(items), kThreads, 0, r.stream>>>(
        items, static_cast<std::uint32_t>(groups), x, row_ids, key, p, y, mask);
  } else {
    dropout_forward_kernel<<<blocks_for(n * groups), kThreads, 0, r.stream>>>(n, f, groups, x,
                                                                              row_ids, key, p, y,
                                                                              mask);
  }
  TESSEL_CHECK_LAUNCH();
}

} // namespace

const NodeId* upload_row_ids(Resources& r, std::int64_t n, const NodeId* host_row_ids) {
  auto* row_ids =
      static_cast<NodeId*>(r.scratch_at_least(static_cast<std::size_t>(n) * sizeof(NodeId)));
  TESSEL_CHECK_CUDA(cudaMemcpyAsync(row_ids, host_row_ids,
                                    static_cast<std::size_t>(n) * sizeof(NodeId),
                                    cudaMemcpyHostToDevice, r.stream));
  return row_ids;
}

void relu_dropout_forward(Resources& r, std::int64_t n, std::int64_t f, const float* x,
                          const NodeId* row_ids, const rng::Key& key, float p, float* y,
                          std::uint8_t* bits) {
  if (n * f == 0) return;
  // ceil(f / 8) groups per row: the bit array's bytes, one per thread.
  const std::int64_t groups = (f + 7) / 8;
  if (fast8(n, f, x, y)) {
    const auto items = static_cast<std::uint32_t>(n * groups);
    relu_dropout_forward8_kernel<<<blocks_for(items), kThreads, 0, r.stream>>>(
        items, static_cast<std::uint32_t>(groups), x, row_ids, key, p, y, bits);
  } else {
    relu_dropout_forward_kernel<<<blocks_for(n * groups), kThreads, 0, r.stream>>>(
        n, f, groups, x, row_ids, key, p, y, bits);
  }
  TESSEL_CHECK_LAUNCH();
}

void relu_dropout_backward(Resources& r, std::int64_t n, std::int64_t f, const float* grad_y,
                           const std::uint8_t* bits, float p, float* grad_x) {
  if (n * f == 0) return;
  if (fast8(n, f, grad_y, grad_x)) {
    const auto items = static_cast<std::uint32_t>(n * (f / 8));
    relu_dropout_backward8_kernel<<<blocks_for(items), kThreads, 0, r.stream>>>(items, grad_y, bits,
                                                                                p, grad_x);
  } else {
    relu_dropout_backward_kernel<<<blocks_for(n * f), kThreads, 0, r.stream>>>(
        n, f, (f + 7) / 8, grad_y, bits, p, grad_x);
  }
  TESSEL_CHECK_LAUNCH();
}

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
  launch_dropout(r, n, f, x, row_ids, key, p, y, mask);
}

void dropout_forward_device_ids(Resources& r, std::int64_t n, std::int64_t f, const float* x,
                                const NodeId* row_ids, const rng::Key& key, float p, float* y,
                                std::uint8_t* mask) {
  if (n * f == 0) return;
  launch_dropout(r, n, f, x, row_ids, key, p, y, mask);
}

// The mask has relu_dropout_forward's layout, and the gradient passes where its bit is set: the
// same kernels.
void dropout_backward(Resources& r, std::int64_t n, std::int64_t f, const float* grad_y,
                      const std::uint8_t* mask, float p, float* grad_x) {
  relu_dropout_backward(r, n, f, grad_y, mask, p, grad_x);
}

} // namespace tessel::kernels::cuda
