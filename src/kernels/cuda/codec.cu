// CUDA twins of the row codecs: a thread per row, the CPU twin's per-row conversions.
#include "cuda_ops.hpp"
#include "resources.cuh"

#include "../row_codec_format.hpp"

namespace tessel::kernels::cuda {

namespace {

__global__ void encode_rows_kernel(std::int64_t n, std::int64_t f, RowCodec codec,
                                   const float* __restrict__ x, std::uint8_t* __restrict__ wire) {
  const std::int64_t row_bytes = detail::codec_row_bytes(codec, f);
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    detail::encode_row(codec, x + i * f, f, wire + i * row_bytes);
}

__global__ void decode_rows_kernel(std::int64_t n, std::int64_t f, RowCodec codec,
                                   const std::uint8_t* __restrict__ wire, float* __restrict__ x) {
  const std::int64_t row_bytes = detail::codec_row_bytes(codec, f);
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    detail::decode_row(codec, wire + i * row_bytes, f, x + i * f);
}

} // namespace

void encode_rows(Resources& r, std::int64_t n, std::int64_t f, RowCodec codec, const float* x,
                 std::uint8_t* wire) {
  if (n * f == 0) return;
  encode_rows_kernel<<<blocks_for(n), kThreads, 0, r.stream>>>(n, f, codec, x, wire);
  TESSEL_CHECK_LAUNCH();
}

void decode_rows(Resources& r, std::int64_t n, std::int64_t f, RowCodec codec,
                 const std::uint8_t* wire, float* x) {
  if (n * f == 0) return;
  decode_rows_kernel<<<blocks_for(n), kThreads, 0, r.stream>>>(n, f, codec, wire, x);
  TESSEL_CHECK_LAUNCH();
}

} // namespace tessel::kernels::cuda
