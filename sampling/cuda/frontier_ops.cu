// CUDA twins of the frontier routing ops: binary searches, gathers and scatters one thread per
// element, a stable radix sort of bucket keys (routing), scans (answers back in frontier order);
// everything on the device's stream.
#include "cuda/frontier_ops_cuda.hpp"

#include "tessel/core/cuda_check.cuh"
#include "tessel/core/error.hpp"

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cstdint>

namespace tessel::sampling::cuda {
namespace {

constexpr int kThreads = 256;

unsigned int blocks_for(std::int64_t n) {
  return static_cast<unsigned int>((n + kThreads - 1) / kThreads);
}

cudaStream_t stream_of(const Tensor& t) {
  TESSEL_CHECK_CUDA(cudaSetDevice(t.device().index));
  return static_cast<cudaStream_t>(device_memory::stream(t.device()));
}

__device__ __forceinline__ std::int64_t thread_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__global__ void find_sorted_kernel(const std::int64_t* __restrict__ keys, std::int64_t num_keys,
                                   const std::int64_t* __restrict__ ids, std::int64_t n,
                                   std::int64_t* __restrict__ pos) {
  const std::int64_t i = thread_index();
  if (i >= n) return;
  const std::int64_t id = ids[i];
  std::int64_t lo = 0, hi = num_keys; // first key >= id
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (keys[mid] < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  pos[i] = lo < num_keys && keys[lo] == id ? lo : -1;
}

__global__ void take_kernel(const std::int64_t* __restrict__ values,
                            const std::int64_t* __restrict__ index, std::int64_t n,
                            std::int64_t* __restrict__ out) {
  const std::int64_t k = thread_index();
  if (k >= n) return;
  const std::int64_t at = index[k];
  out[k] = at >= 0 ? values[at] : -1;
}

__global__ void scatter_kernel(const std::int64_t* __restrict__ values,
                               const std::int64_t* __restrict__ index, std::int64_t n,
                               std::int64_t* __restrict__ out) {
  const std::int64_t k = thread_index();
  if (k >= n) return;
  out[index[k]] = values[k];
}

__global__ void lengths_kernel(const std::int64_t* __restrict__ offsets, std::int64_t n,
                               std::int64_t* __restrict__ lengths) {
  const std::int64_t i = thread_index();
  if (i >= n) return;
  lengths[i] = offsets[i + 1] - offsets[i];
}

// Bucket key and position of every node; counts[bucket] by atomics (a count does not depend on
// their order); *bad set for an id without owner.
__global__ void bucket_kernel(const std::int64_t* __restrict__ ids,
                              const std::int64_t* __restrict__ known, std::int64_t n,
                              const std::int64_t* __restrict__ offsets, std::int64_t parts,
                              bool pairs, std::int32_t* __restrict__ keys,
                              std::int64_t* __restrict__ positions,
                              unsigned long long* __restrict__ counts, int* __restrict__ bad) {
  const std::int64_t i = thread_index();
  if (i >= n) return;
  const std::int64_t id = ids[i];
  std::int64_t lo = 0, hi = parts + 1; // first offset > id
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (offsets[mid] <= id)
      lo = mid + 1;
    else
      hi = mid;
  }
  std::int64_t owner = lo - 1;
  if (owner < 0 || owner >= parts) {
    *bad = 1;
    owner = 0;
  }
  const bool flagged = known[i] < 0;
  const std::int64_t bucket = pairs ? 2 * owner + (flagged ? 1 : 0) : (flagged ? owner : parts);
  keys[i] = static_cast<std::int32_t>(bucket);
  positions[i] = i;
  atomicAdd(counts + bucket, 1ull);
}

// frontier_lengths[order[k]] = lengths[k].
__global__ void scatter_lengths_kernel(const std::int64_t* __restrict__ order,
                                       const std::int64_t* __restrict__ lengths, std::int64_t n,
                                       std::int64_t* __restrict__ frontier_lengths) {
  const std::int64_t k = thread_index();
  if (k >= n) return;
  frontier_lengths[order[k]] = lengths[k];
}

// One thread per routed segment copies its values to its frontier position's offset.
__global__ void copy_segments_kernel(const std::int64_t* __restrict__ order,
                                     const std::int64_t* __restrict__ lengths,
                                     const std::int64_t* __restrict__ routed_start,
                                     const std::int64_t* __restrict__ values,
                                     const std::int64_t* __restrict__ offsets, std::int64_t n,
                                     std::int64_t* __restrict__ out) {
  const std::int64_t k = thread_index();
  if (k >= n) return;
  const std::int64_t* in = values + routed_start[k];
  std::int64_t* to = out + offsets[order[k]];
  for (std::int64_t j = 0; j < lengths[k]; ++j)
    to[j] = in[j];
}

int bits_for(std::int64_t buckets) {
  int bits = 1;
  while ((std::int64_t{1} << bits) < buckets)
    ++bits;
  return bits;
}

} // namespace

void find_sorted(const Tensor& sorted_keys, const Tensor& ids, Tensor& pos) {
  const std::int64_t n = ids.numel();
  if (n == 0) return;
  const cudaStream_t stream = stream_of(ids);
  find_sorted_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      sorted_keys.ptr<std::int64_t>(), sorted_keys.numel(), ids.ptr<std::int64_t>(), n,
      pos.ptr<std::int64_t>());
  TESSEL_CHECK_LAUNCH();
}

void take(const Tensor& values, const Tensor& index, Tensor& out) {
  const std::int64_t n = index.numel();
  if (n == 0) return;
  const cudaStream_t stream = stream_of(index);
  take_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      values.ptr<std::int64_t>(), index.ptr<std::int64_t>(), n, out.ptr<std::int64_t>());
  TESSEL_CHECK_LAUNCH();
}

void scatter(const Tensor& values, const Tensor& index, Tensor& out) {
  const std::int64_t n = index.numel();
  if (n == 0) return;
  const cudaStream_t stream = stream_of(index);
  scatter_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      values.ptr<std::int64_t>(), index.ptr<std::int64_t>(), n, out.ptr<std::int64_t>());
  TESSEL_CHECK_LAUNCH();
}

void segment_lengths(const Tensor& offsets, Tensor& lengths) {
  const std::int64_t n = lengths.numel();
  if (n == 0) return;
  const cudaStream_t stream = stream_of(offsets);
  lengths_kernel<<<blocks_for(n), kThreads, 0, stream>>>(offsets.ptr<std::int64_t>(), n,
                                                         lengths.ptr<std::int64_t>());
  TESSEL_CHECK_LAUNCH();
}

std::int64_t sum(const Tensor& values) {
  const std::int64_t n = values.numel();
  if (n == 0) return 0;
  const cudaStream_t stream = stream_of(values);
  Tensor total = Tensor::empty({1}, DType::i64, values.device());
  std::size_t temp_bytes = 0;
  TESSEL_CHECK_CUDA(cub::DeviceReduce::Sum(nullptr, temp_bytes, values.ptr<std::int64_t>(),
                                           total.ptr<std::int64_t>(), n, stream));
  Tensor temp =
      Tensor::empty({static_cast<std::int64_t>(temp_bytes) + 1}, DType::u8, values.device());
  TESSEL_CHECK_CUDA(cub::DeviceReduce::Sum(temp.raw(), temp_bytes, values.ptr<std::int64_t>(),
                                           total.ptr<std::int64_t>(), n, stream));
  std::int64_t result = 0;
  TESSEL_CHECK_CUDA(
      cudaMemcpyAsync(&result, total.raw(), sizeof(std::int64_t), cudaMemcpyDeviceToHost, stream));
  TESSEL_CHECK_CUDA(cudaStreamSynchronize(stream));
  return result;
}

bool route_frontier(const Tensor& ids, const Tensor& owner_offsets, const Tensor& known_pos,
                    bool pairs, Tensor& order, std::vector<std::int64_t>& counts) {
  const std::int64_t n = ids.numel();
  const auto buckets = static_cast<std::int64_t>(counts.size());
  if (n == 0) return true;
  const Device device = ids.device();
  const cudaStream_t stream = stream_of(ids);
  const std::int64_t parts = owner_offsets.numel() - 1;
  Tensor keys = Tensor::empty({n}, DType::i32, device);
  Tensor sorted_keys = Tensor::empty({n}, DType::i32, device);
  Tensor positions = Tensor::empty({n}, DType::i64, device);
  Tensor device_counts = Tensor::empty({buckets + 1}, DType::i64, device); // then *bad
  TESSEL_CHECK_CUDA(cudaMemsetAsync(device_counts.raw(), 0,
                                    static_cast<std::size_t>(buckets + 1) * sizeof(std::int64_t),
                                    stream));
  auto* d_counts = static_cast<unsigned long long*>(device_counts.raw());
  bucket_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      ids.ptr<std::int64_t>(), known_pos.ptr<std::int64_t>(), n, owner_offsets.ptr<std::int64_t>(),
      parts, pairs, keys.ptr<std::int32_t>(), positions.ptr<std::int64_t>(), d_counts,
      reinterpret_cast<int*>(d_counts + buckets));
  TESSEL_CHECK_LAUNCH();
  // A radix sort is stable: within a bucket positions stay ascending.
  const int end_bit = bits_for(buckets);
  std::size_t temp_bytes = 0;
  TESSEL_CHECK_CUDA(cub::DeviceRadixSort::SortPairs(
      nullptr, temp_bytes, keys.ptr<std::int32_t>(), sorted_keys.ptr<std::int32_t>(),
      positions.ptr<std::int64_t>(), order.ptr<std::int64_t>(), n, 0, end_bit, stream));
  Tensor temp = Tensor::empty({static_cast<std::int64_t>(temp_bytes) + 1}, DType::u8, device);
  TESSEL_CHECK_CUDA(cub::DeviceRadixSort::SortPairs(
      temp.raw(), temp_bytes, keys.ptr<std::int32_t>(), sorted_keys.ptr<std::int32_t>(),
      positions.ptr<std::int64_t>(), order.ptr<std::int64_t>(), n, 0, end_bit, stream));
  std::vector<std::int64_t> host(static_cast<std::size_t>(buckets) + 1, 0);
  TESSEL_CHECK_CUDA(cudaMemcpyAsync(host.data(), device_counts.raw(),
                                    host.size() * sizeof(std::int64_t), cudaMemcpyDeviceToHost,
                                    stream));
  TESSEL_CHECK_CUDA(cudaStreamSynchronize(stream));
  std::copy(host.begin(), host.end() - 1, counts.begin());
  return host.back() == 0;
}

void unroute_segments(const Tensor& order, const Tensor& lengths, const Tensor& values,
                      Tensor& offsets, Tensor& out) {
  const std::int64_t n = order.numel();
  const Device device = order.device();
  const cudaStream_t stream = stream_of(order);
  TESSEL_CHECK_CUDA(cudaMemsetAsync(offsets.raw(), 0, sizeof(std::int64_t), stream));
  if (n == 0) return;
  std::int64_t* d_offsets = offsets.ptr<std::int64_t>();
  scatter_lengths_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      order.ptr<std::int64_t>(), lengths.ptr<std::int64_t>(), n, d_offsets + 1);
  TESSEL_CHECK_LAUNCH();
  Tensor routed_start = Tensor::empty({n}, DType::i64, device);
  std::size_t scan_bytes = 0, start_bytes = 0;
  TESSEL_CHECK_CUDA(
      cub::DeviceScan::InclusiveSum(nullptr, scan_bytes, d_offsets + 1, d_offsets + 1, n, stream));
  TESSEL_CHECK_CUDA(cub::DeviceScan::ExclusiveSum(nullptr, start_bytes, lengths.ptr<std::int64_t>(),
                                                  routed_start.ptr<std::int64_t>(), n, stream));
  Tensor temp = Tensor::empty({static_cast<std::int64_t>(std::max(scan_bytes, start_bytes)) + 1},
                              DType::u8, device);
  TESSEL_CHECK_CUDA(cub::DeviceScan::InclusiveSum(temp.raw(), scan_bytes, d_offsets + 1,
                                                  d_offsets + 1, n, stream));
  TESSEL_CHECK_CUDA(cub::DeviceScan::ExclusiveSum(temp.raw(), start_bytes,
                                                  lengths.ptr<std::int64_t>(),
                                                  routed_start.ptr<std::int64_t>(), n, stream));
  if (values.numel() == 0) return;
  copy_segments_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      order.ptr<std::int64_t>(), lengths.ptr<std::int64_t>(), routed_start.ptr<std::int64_t>(),
      values.ptr<std::int64_t>(), d_offsets, n, out.ptr<std::int64_t>());
  TESSEL_CHECK_LAUNCH();
}

} // namespace tessel::sampling::cuda
