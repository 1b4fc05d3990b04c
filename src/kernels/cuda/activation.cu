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

// A thread per (row, 32-column word): its 32 keep bits come from one word of each level's Philox
// block (detail::dropout_keep_word), and it writes the word's (up to) 4 mask bytes. kRelu: y =
// dropout(relu(x)), and the bits say where y > 0.
template <bool kRelu>
__global__ void dropout_forward_kernel(std::int64_t n, std::int64_t f, std::int64_t words,
                                       const float* x, const NodeId* __restrict__ row_ids,
                                       rng::Key key, float p, float* y,
                                       std::uint8_t* __restrict__ mask) {
  const float keep_scale = 1.0f / (1.0f - p);
  const std::uint32_t threshold = detail::dropout_threshold(p);
  const std::int64_t row_bytes = detail::dropout_mask_row_bytes(f);
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       t < n * words; t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = t / words, w = t % words;
    const std::uint32_t keep =
        threshold == 0 ? ~0u
                       : detail::dropout_keep_word(key, static_cast<std::uint64_t>(row_ids[row]),
                                                   w, threshold);
    const std::int64_t j0 = 32 * w, width = f - j0 < 32 ? f - j0 : 32;
    std::uint32_t out = 0;
    for (std::int64_t c = 0; c < width; ++c) {
      const float v = x[row * f + j0 + c];
      const bool kept = ((keep >> c) & 1u) && (!kRelu || v > 0.0f);
      y[row * f + j0 + c] = kept ? v * keep_scale : 0.0f;
      out |= (kept ? 1u : 0u) << c;
    }
    if (mask)
      for (std::int64_t b = 0; 8 * b < width; ++b)
        mask[row * row_bytes + 4 * w + b] = static_cast<std::uint8_t>(out >> (8 * b));
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

// Rows of a multiple of 32 columns: thread t covers word t % words of row t / words, as the
// generic kernel, with 32-bit indices, 16-byte loads and stores and one 32-bit mask store.
template <bool kRelu>
__global__ void dropout_forward32_kernel(std::uint32_t items, std::uint32_t words,
                                         const float* x, const NodeId* __restrict__ row_ids,
                                         rng::Key key, float p, float* y,
                                         std::uint32_t* __restrict__ mask) {
  const float keep_scale = 1.0f / (1.0f - p);
  const std::uint32_t threshold = detail::dropout_threshold(p);
  for (std::uint32_t t = blockIdx.x * blockDim.x + threadIdx.x; t < items;
       t += gridDim.x * blockDim.x) {
    const std::uint32_t row = t / words, w = t - row * words;
    const std::uint32_t keep =
        threshold == 0 ? ~0u
                       : detail::dropout_keep_word(key, static_cast<std::uint64_t>(row_ids[row]),
                                                   w, threshold);
    std::uint32_t out = 0;
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      float v[8];
      load8(x + static_cast<std::size_t>(t) * 32 + 8 * g, v);
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const bool kept = ((keep >> (8 * g + k)) & 1u) && (!kRelu || v[k] > 0.0f);
        v[k] = kept ? v[k] * keep_scale : 0.0f;
        out |= (kept ? 1u : 0u) << (8 * g + k);
      }
      store8(y + static_cast<std::size_t>(t) * 32 + 8 * g, v);
    }
    if (mask) mask[t] = out;
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

// Whether the 32-column fast path applies: f a multiple of 32, 16-byte aligned rows and mask,
// and fewer than 2^31 words (32-bit indices).
bool fast32(std::int64_t n, std::int64_t f, const void* x, const void* y, const void* mask) {
  const auto bits = reinterpret_cast<std::uintptr_t>(x) | reinterpret_cast<std::uintptr_t>(y) |
                    reinterpret_cast<std::uintptr_t>(mask);
  return f % 32 == 0 && bits % 16 == 0 && n * (f / 32) < (std::int64_t{1} << 31);
}

template <bool kRelu>
void launch_dropout(Resources& r, std::int64_t n, std::int64_t f, const float* x,
                    const NodeId* row_ids, const rng::Key& key, float p, float* y,
                    std::uint8_t* mask) {
  const std::int64_t words = (f + 31) / 32;
  if (fast32(n, f, x, y, mask)) {
    const auto items = static_cast<std::uint32_t>(n * words);
    dropout_forward32_kernel<kRelu><<<blocks_for(items), kThreads, 0, r.stream>>>(
        items, static_cast<std::uint32_t>(words), x, row_ids, key, p, y,
        reinterpret_cast<std::uint32_t*>(mask));
  } else {
    dropout_forward_kernel<kRelu><<<blocks_for(n * words), kThreads, 0, r.stream>>>(
        n, f, words, x, row_ids, key, p, y, mask);
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
  launch_dropout<true>(r, n, f, x, row_ids, key, p, y, bits);
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
  launch_dropout<false>(r, n, f, x, row_ids, key, p, y, mask);
}

void dropout_forward_device_ids(Resources& r, std::int64_t n, std::int64_t f, const float* x,
                                const NodeId* row_ids, const rng::Key& key, float p, float* y,
                                std::uint8_t* mask) {
  if (n * f == 0) return;
  launch_dropout<false>(r, n, f, x, row_ids, key, p, y, mask);
}

// The mask has relu_dropout_forward's layout, and the gradient passes where its bit is set: the
// same kernels.
void dropout_backward(Resources& r, std::int64_t n, std::int64_t f, const float* grad_y,
                      const std::uint8_t* mask, float p, float* grad_x) {
  relu_dropout_backward(r, n, f, grad_y, mask, p, grad_x);
}

} // namespace tessel::kernels::cuda
