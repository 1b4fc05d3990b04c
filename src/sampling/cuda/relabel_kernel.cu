// CUDA twin of block relabelling: sources in first-seen order through a table of first positions.
//
// The sources of a block are the distinct ids of the sequence S = dst[0..n) ++ neighbors[0..E)
// in the order of their first occurrence (the destinations are distinct, so they come first, as
// on the CPU). Each element j of S records, in an open-addressing table keyed by id, the
// smallest j holding that id (atomicMin, so the result does not depend on thread order). An
// element is a source where it is its id's first occurrence; an exclusive scan of those flags
// numbers the sources, and every edge takes the number of its id's first occurrence.
#include "cuda/relabel_cuda.hpp"

#include "tessel/core/cuda_check.cuh"
#include "tessel/core/error.hpp"
#include "tessel/core/types.hpp"

#include <cub/device/device_scan.cuh>

#include <cstdint>

namespace tessel::sampling::cuda {
namespace {

constexpr int kThreads = 256;
// All bits set (what the tables are cleared to): no id is negative, so no key is this, and no
// position is this large.
constexpr unsigned long long kEmptyKey = ~0ull;

unsigned int blocks_for(std::int64_t n) {
  return static_cast<unsigned int>((n + kThreads - 1) / kThreads);
}

// Error bits the host reads back with num_src.
constexpr int kRepeatedDestination = 1;
constexpr int kNegativeId = 2;

__device__ __forceinline__ std::uint64_t mix(std::uint64_t x) {
  // splitmix64's finalizer: consecutive ids land far apart.
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

__device__ __forceinline__ NodeId element(const NodeId* dst, std::int64_t n,
                                          const NodeId* neighbors, std::int64_t j) {
  return j < n ? dst[j] : neighbors[j - n];
}

// Inserts every element's id and keeps its first position; slot_of[j] = the id's slot.
__global__ void insert_kernel(const NodeId* __restrict__ dst, std::int64_t n,
                              const NodeId* __restrict__ neighbors, std::int64_t total,
                              unsigned long long* __restrict__ keys,
                              unsigned long long* __restrict__ first, std::uint64_t mask,
                              std::int64_t* __restrict__ slot_of, int* __restrict__ error) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= total) return;
  const NodeId id = element(dst, n, neighbors, j);
  if (id < 0) {
    atomicOr(error, kNegativeId);
    slot_of[j] = -1;
    return;
  }
  const auto key = static_cast<unsigned long long>(id);
  // The table is at least twice the elements, so a free slot or the id's own is always found.
  for (std::uint64_t s = mix(key) & mask;; s = (s + 1) & mask) {
    const unsigned long long seen = atomicCAS(keys + s, kEmptyKey, key);
    if (seen == kEmptyKey || seen == key) {
      atomicMin(first + s, static_cast<unsigned long long>(j));
      slot_of[j] = static_cast<std::int64_t>(s);
      return;
    }
  }
}

// is_first[j] = 1 where element j is its id's first occurrence; a destination that is not
// (an equal destination comes before it) is an error.
__global__ void flag_kernel(std::int64_t n, std::int64_t total,
                            const unsigned long long* __restrict__ first,
                            const std::int64_t* __restrict__ slot_of,
                            std::int32_t* __restrict__ is_first, int* __restrict__ error) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= total) return;
  const std::int64_t s = slot_of[j];
  const bool here = s >= 0 && first[s] == static_cast<unsigned long long>(j);
  is_first[j] = here ? 1 : 0;
  if (j < n && !here && s >= 0) atomicOr(error, kRepeatedDestination);
}

// src[number[j]] = id of j for first occurrences; indices[e] = number of e's first occurrence.
__global__ void write_kernel(const NodeId* __restrict__ dst, std::int64_t n,
                             const NodeId* __restrict__ neighbors, std::int64_t total,
                             const unsigned long long* __restrict__ first,
                             const std::int64_t* __restrict__ slot_of,
                             const std::int32_t* __restrict__ is_first,
                             const std::int32_t* __restrict__ number, NodeId* __restrict__ src,
                             LocalId* __restrict__ indices) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= total) return;
  if (is_first[j]) src[number[j]] = element(dst, n, neighbors, j);
  if (j >= n) indices[j - n] = number[first[slot_of[j]]];
}

} // namespace

std::int64_t relabel_block(const Tensor& dst, const Tensor& offsets, const Tensor& neighbors,
                           Tensor& src, Tensor& indices) {
  const Device device = dst.device();
  TESSEL_CHECK_CUDA(cudaSetDevice(device.index));
  const auto stream = static_cast<cudaStream_t>(device_memory::stream(device));
  const std::int64_t n = dst.numel();
  const std::int64_t num_edges = neighbors.numel();
  const std::int64_t total = n + num_edges;
  indices = Tensor::empty({num_edges}, DType::i32, device);
  if (total == 0) {
    src = Tensor::empty({0}, DType::i64, device);
    EdgeId last = 0;
    TESSEL_CHECK_CUDA(cudaMemcpyAsync(&last, offsets.ptr<EdgeId>(), sizeof(EdgeId),
                                      cudaMemcpyDeviceToHost, stream));
    TESSEL_CHECK_CUDA(cudaStreamSynchronize(stream));
    TESSEL_EXPECTS(last == 0, "build_block: offsets run to {}, expected 0 (the neighbor count)",
                   last);
    return 0;
  }
  // A power of two at least twice the elements: probes stay short and always end.
  std::uint64_t capacity = 1024;
  while (capacity < 2 * static_cast<std::uint64_t>(total))
    capacity *= 2;
  const auto cap = static_cast<std::int64_t>(capacity);
  Tensor keys = Tensor::empty({cap}, DType::i64, device);
  Tensor first = Tensor::empty({cap}, DType::i64, device);
  Tensor slot_of = Tensor::empty({total}, DType::i64, device);
  Tensor is_first = Tensor::empty({total}, DType::i32, device);
  Tensor number = Tensor::empty({total}, DType::i32, device);
  Tensor error = Tensor::empty({1}, DType::i32, device);
  auto* d_keys = static_cast<unsigned long long*>(keys.raw());
  auto* d_first = static_cast<unsigned long long*>(first.raw());
  // All bits set: kEmptyKey, and first positions larger than any.
  TESSEL_CHECK_CUDA(cudaMemsetAsync(d_keys, 0xff, capacity * sizeof(unsigned long long), stream));
  TESSEL_CHECK_CUDA(cudaMemsetAsync(d_first, 0xff, capacity * sizeof(unsigned long long), stream));
  TESSEL_CHECK_CUDA(cudaMemsetAsync(error.raw(), 0, sizeof(int), stream));
  const NodeId* d_dst = dst.ptr<NodeId>();
  const NodeId* d_neighbors = num_edges > 0 ? neighbors.ptr<NodeId>() : nullptr;
  insert_kernel<<<blocks_for(total), kThreads, 0, stream>>>(
      d_dst, n, d_neighbors, total, d_keys, d_first, capacity - 1, slot_of.ptr<std::int64_t>(),
      error.ptr<int>());
  TESSEL_CHECK_LAUNCH();
  flag_kernel<<<blocks_for(total), kThreads, 0, stream>>>(
      n, total, d_first, slot_of.ptr<std::int64_t>(), is_first.ptr<std::int32_t>(),
      error.ptr<int>());
  TESSEL_CHECK_LAUNCH();
  std::size_t temp_bytes = 0;
  TESSEL_CHECK_CUDA(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, is_first.ptr<std::int32_t>(),
                                                  number.ptr<std::int32_t>(), total, stream));
  Tensor temp = Tensor::empty({static_cast<std::int64_t>(temp_bytes) + 1}, DType::u8, device);
  TESSEL_CHECK_CUDA(cub::DeviceScan::ExclusiveSum(temp.raw(), temp_bytes,
                                                  is_first.ptr<std::int32_t>(),
                                                  number.ptr<std::int32_t>(), total, stream));
  // num_src = the last element's number plus its flag; the offsets' end and the error bits
  // come back with it in one wait.
  std::int32_t last_number = 0, last_flag = 0;
  int error_bits = 0;
  EdgeId offsets_end = 0;
  TESSEL_CHECK_CUDA(cudaMemcpyAsync(&last_number, number.ptr<std::int32_t>() + (total - 1),
                                    sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream));
  TESSEL_CHECK_CUDA(cudaMemcpyAsync(&last_flag, is_first.ptr<std::int32_t>() + (total - 1),
                                    sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream));
  TESSEL_CHECK_CUDA(
      cudaMemcpyAsync(&error_bits, error.raw(), sizeof(int), cudaMemcpyDeviceToHost, stream));
  TESSEL_CHECK_CUDA(cudaMemcpyAsync(&offsets_end, offsets.ptr<EdgeId>() + n, sizeof(EdgeId),
                                    cudaMemcpyDeviceToHost, stream));
  TESSEL_CHECK_CUDA(cudaStreamSynchronize(stream));
  TESSEL_EXPECTS(offsets_end == num_edges,
                 "build_block: offsets run to {}, expected {} (the neighbor count)", offsets_end,
                 num_edges);
  TESSEL_EXPECTS((error_bits & kNegativeId) == 0,
                 "build_block: a negative id on {}, expected ids >= 0", device.str());
  TESSEL_EXPECTS((error_bits & kRepeatedDestination) == 0,
                 "build_block: a destination appears twice on {}, expected distinct ids",
                 device.str());
  const std::int64_t num_src = static_cast<std::int64_t>(last_number) + last_flag;
  src = Tensor::empty({num_src}, DType::i64, device);
  write_kernel<<<blocks_for(total), kThreads, 0, stream>>>(
      d_dst, n, d_neighbors, total, d_first, slot_of.ptr<std::int64_t>(),
      is_first.ptr<std::int32_t>(), number.ptr<std::int32_t>(), src.ptr<NodeId>(),
      num_edges > 0 ? indices.ptr<LocalId>() : nullptr);
  TESSEL_CHECK_LAUNCH();
  return num_src;
}

} // namespace tessel::sampling::cuda
