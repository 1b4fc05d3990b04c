// CUDA twin of the neighbor sampler: one thread per request, the same draws as the CPU twin.
#include "cuda/sample_neighbors_cuda.hpp"

#include "tessel/core/cuda_check.cuh"
#include "tessel/sampling/draw.hpp"

#include <cub/device/device_scan.cuh>

#include <cstdint>

namespace tessel::sampling::cuda {
namespace {

constexpr int kThreads = 256;

int blocks_for(std::int64_t n) {
  return static_cast<int>((n + kThreads - 1) / kThreads);
}

// counts[i] = number of draws for request i; a row out of range sets *bad_row = 1, a row too long
// to draw from sets 2 (the host reports either).
template <class Index>
__global__ void count_kernel(const EdgeId* indptr, std::int64_t num_graph_rows, const Index* rows,
                             std::int64_t n, int fanout, EdgeId* counts, int* bad_row) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const Index r = rows[i];
  if (r < 0 || r >= num_graph_rows) {
    *bad_row = 1;
    counts[i] = 0;
    return;
  }
  const EdgeId degree = indptr[r + 1] - indptr[r];
  const EdgeId count = sample_count(degree, fanout);
  if (count < degree && degree >= (EdgeId{1} << 32)) *bad_row = 2; // NodeDraws bounds are 32-bit
  counts[i] = count;
}

// One thread per request. Positions are chosen in the output slot itself (Floyd, the same draws
// as the CPU twin), then replaced by the neighbors they point at; a whole row is copied.
template <class Index>
__global__ void sample_kernel(const EdgeId* indptr, const Index* indices, const Index* rows,
                              const NodeId* row_keys, std::int64_t n, rng::Key key,
                              const EdgeId* offsets, Index* out) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const Index r = rows[i];
  const EdgeId begin = indptr[r];
  const EdgeId degree = indptr[r + 1] - begin;
  const EdgeId count = offsets[i + 1] - offsets[i];
  const Index* row = indices + begin;
  Index* slot = out + offsets[i];
  if (count == degree) {
    for (EdgeId k = 0; k < degree; ++k)
      slot[k] = row[k];
    return;
  }
  floyd_positions(key, static_cast<std::uint64_t>(row_keys[i]), degree, count, slot);
  for (EdgeId k = 0; k < count; ++k)
    slot[k] = row[slot[k]];
}

template <class Index>
void run(const Tensor& indptr, const Tensor& indices, const Tensor& rows, const Tensor& row_keys,
         int fanout, const rng::Key& key, Tensor& offsets, Tensor& neighbors) {
  const Device device = indptr.device();
  TESSEL_CHECK_CUDA(cudaSetDevice(device.index));
  const std::int64_t n = rows.numel();
  const std::int64_t num_graph_rows = indptr.numel() - 1;
  // The device's stream, which orders the input tensors' copies and the blocks the caching
  // allocator hands out; the entry point waits for it before returning.
  const auto stream = static_cast<cudaStream_t>(device_memory::stream(device));

  offsets = Tensor::empty({n + 1}, DType::i64, device);
  EdgeId* d_offsets = offsets.ptr<EdgeId>();
  Tensor flag = Tensor::zeros({1}, DType::i32, device);
  TESSEL_CHECK_CUDA(cudaMemsetAsync(d_offsets, 0, sizeof(EdgeId), stream));
  if (n > 0) {
    count_kernel<Index><<<blocks_for(n), kThreads, 0, stream>>>(
        indptr.ptr<EdgeId>(), num_graph_rows, rows.ptr<Index>(), n, fanout, d_offsets + 1,
        flag.ptr<std::int32_t>());
    TESSEL_CHECK_LAUNCH();
    // In-place inclusive scan of the counts turns offsets[1..n] into the row ends.
    std::size_t temp_bytes = 0;
    TESSEL_CHECK_CUDA(cub::DeviceScan::InclusiveSum(nullptr, temp_bytes, d_offsets + 1,
                                                    d_offsets + 1, n, stream));
    Tensor temp = Tensor::empty({static_cast<std::int64_t>(temp_bytes) + 1}, DType::u8, device);
    TESSEL_CHECK_CUDA(cub::DeviceScan::InclusiveSum(temp.raw(), temp_bytes, d_offsets + 1,
                                                    d_offsets + 1, n, stream));
  }
  EdgeId total = 0;
  std::int32_t bad_row = 0;
  TESSEL_CHECK_CUDA(
      cudaMemcpyAsync(&total, d_offsets + n, sizeof(EdgeId), cudaMemcpyDeviceToHost, stream));
  TESSEL_CHECK_CUDA(
      cudaMemcpyAsync(&bad_row, flag.raw(), sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream));
  TESSEL_CHECK_CUDA(cudaStreamSynchronize(stream));
  TESSEL_EXPECTS(bad_row != 1, "sample_neighbors: a requested row is outside [0, {}) on {}",
                 num_graph_rows, device.str());
  TESSEL_EXPECTS(bad_row != 2, "sample_neighbors: a requested row has 2^32 or more neighbors on {}",
                 device.str());

  neighbors = Tensor::empty({total}, indices.dtype(), device);
  if (n > 0 && total > 0) {
    sample_kernel<Index><<<blocks_for(n), kThreads, 0, stream>>>(
        indptr.ptr<EdgeId>(), indices.ptr<Index>(), rows.ptr<Index>(), row_keys.ptr<NodeId>(),
        n, key, d_offsets, neighbors.ptr<Index>());
    TESSEL_CHECK_LAUNCH();
  }
  TESSEL_CHECK_CUDA(cudaStreamSynchronize(stream));
}

} // namespace

void sample_neighbors(const Tensor& indptr, const Tensor& indices, const Tensor& rows,
                      const Tensor& row_keys, int fanout, const rng::Key& key, Tensor& offsets,
                      Tensor& neighbors) {
  if (indices.dtype() == DType::i32)
    run<LocalId>(indptr, indices, rows, row_keys, fanout, key, offsets, neighbors);
  else
    run<NodeId>(indptr, indices, rows, row_keys, fanout, key, offsets, neighbors);
}

} // namespace tessel::sampling::cuda
