// CUDA twins of bias addition and column sums (deterministic two-pass reduction).
#include "cuda_ops.hpp"
#include "resources.cuh"

namespace tessel::kernels::cuda {

namespace {

constexpr int kSumColumns = 32;   // threads along columns per block
constexpr int kSumRowThreads = 8; // threads along rows per block
constexpr std::int64_t kMinRowsPerChunk = 1024;
constexpr std::int64_t kMaxChunks = 65535; // gridDim.y limit

__global__ void add_bias_kernel(std::int64_t n, std::int64_t f, const float* __restrict__ bias,
                                float* __restrict__ y) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n * f;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    y[i] += bias[i % f];
}

// Rows of a multiple of 4 columns, 16-byte aligned: a float4 per thread and a 32-bit column
// index (the generic kernel's 64-bit modulo costs more than its memory traffic).
__global__ void add_bias4_kernel(std::uint32_t items, std::uint32_t quads,
                                 const float4* __restrict__ bias, float4* __restrict__ y) {
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < items;
       i += gridDim.x * blockDim.x) {
    const float4 b = bias[i % quads];
    float4 v = y[i];
    v.x += b.x;
    v.y += b.y;
    v.z += b.z;
    v.w += b.w;
    y[i] = v;
  }
}

// Pass 1: block (column tile, row chunk) writes the chunk's column sums to partial[chunk, f].
// Threads of a block split the chunk's rows and combine in a fixed order through shared memory.
__global__ void column_partial_kernel(std::int64_t n, std::int64_t f, std::int64_t rows_per_chunk,
                                      const float* __restrict__ x, double* __restrict__ partial) {
  __shared__ double sums[kSumRowThreads][kSumColumns];
  const std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * kSumColumns + threadIdx.x;
  const std::int64_t chunk = blockIdx.y;
  const std::int64_t row_begin = chunk * rows_per_chunk;
  const std::int64_t row_end = row_begin + rows_per_chunk < n ? row_begin + rows_per_chunk : n;
  double sum = 0.0;
  if (col < f)
    for (std::int64_t i = row_begin + threadIdx.y; i < row_end; i += kSumRowThreads)
      sum += x[i * f + col];
  sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < f) {
    double total = 0.0;
    for (int t = 0; t < kSumRowThreads; ++t)
      total += sums[t][threadIdx.x];
    partial[chunk * f + col] = total;
  }
}

// Pass 2: out[j] = (accumulate ? out[j] : 0) + sum over chunks in order.
__global__ void column_final_kernel(std::int64_t chunks, std::int64_t f,
                                    const double* __restrict__ partial, float* __restrict__ out,
                                    bool accumulate) {
  for (std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < f;
       j += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    double total = accumulate ? out[j] : 0.0;
    for (std::int64_t c = 0; c < chunks; ++c)
      total += partial[c * f + j];
    out[j] = static_cast<float>(total);
  }
}

} // namespace

void add_bias(Resources& r, std::int64_t n, std::int64_t f, const float* bias, float* y) {
  if (n * f == 0) return;
  const auto address_bits = reinterpret_cast<std::uintptr_t>(bias) | reinterpret_cast<std::uintptr_t>(y);
  if (f % 4 == 0 && address_bits % 16 == 0 && n * f / 4 < (std::int64_t{1} << 31)) {
    const auto items = static_cast<std::uint32_t>(n * f / 4);
    add_bias4_kernel<<<blocks_for(items), kThreads, 0, r.stream>>>(
        items, static_cast<std::uint32_t>(f / 4), reinterpret_cast<const float4*>(bias),
        reinterpret_cast<float4*>(y));
  } else {
    add_bias_kernel<<<blocks_for(n * f), kThreads, 0, r.stream>>>(n, f, bias, y);
  }
  TESSEL_CHECK_LAUNCH();
}

void column_sums(Resources& r, std::int64_t n, std::int64_t f, const float* x, float* out,
                 bool accumulate) {
  if (f == 0) return;
  std::int64_t rows_per_chunk = (n + kMaxChunks - 1) / kMaxChunks;
  if (rows_per_chunk < kMinRowsPerChunk) rows_per_chunk = kMinRowsPerChunk;
  const std::int64_t chunks = (n + rows_per_chunk - 1) / rows_per_chunk;
  double* partial = nullptr;
  if (chunks > 0) {
    partial = static_cast<double*>(
        r.scratch_at_least(static_cast<std::size_t>(chunks * f) * sizeof(double)));
    const dim3 grid(static_cast<unsigned int>((f + kSumColumns - 1) / kSumColumns),
                    static_cast<unsigned int>(chunks));
    const dim3 block(kSumColumns, kSumRowThreads);
    column_partial_kernel<<<grid, block, 0, r.stream>>>(n, f, rows_per_chunk, x, partial);
    TESSEL_CHECK_LAUNCH();
  }
  column_final_kernel<<<blocks_for(f), kThreads, 0, r.stream>>>(chunks, f, partial, out,
                                                                accumulate);
  TESSEL_CHECK_LAUNCH();
}

} // namespace tessel::kernels::cuda
