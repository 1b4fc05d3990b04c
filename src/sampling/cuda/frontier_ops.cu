// CUDA twins of the frontier routing ops: binary searches, gathers and scatters one thread per
// element, a stable radix sort of bucket keys counted in per-block histograms (routing), scans
// and a value-parallel segment copy (answers back in frontier order), per-segment sums;
// everything on the calling thread's current stream of the device (device_memory::stream: the
// main stream, or the trainer's side stream inside its StreamScope).
#include "cuda/frontier_ops_cuda.hpp"

#include "tessel/core/cuda_check.cuh"
#include "tessel/core/error.hpp"

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cstdint>
#include <limits>

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

// Nodes per thread of bucket_kernel: a block counts kThreads * kRouteItems nodes before it adds
// its counts to the global ones, so the global atomics fall by that factor over one per node.
constexpr int kRouteItems = 8;
// Up to this many buckets (2 * 2048 parts) a block counts in shared memory (16 KB); with more,
// the warp-aggregated counts go straight to the global counters.
constexpr std::int64_t kSharedBuckets = 4096;

// Bucket key and position of every node, and counts[bucket] (unsigned long long [buckets]).
// The counts are plain integer totals: they only size the exchange on the host and do not feed
// the sort, which orders by the keys alone, so how they are added up cannot change the route.
// Adding them up: a warp's lanes with the same bucket first combine (__match_any_sync: one
// shared-memory atomic per distinct bucket and warp, where a frontier of few parts hits few
// buckets), each block keeps a histogram in shared memory, and adds each non-zero entry to the
// global counter once. *bad is set for an id without owner.
__global__ void bucket_kernel(const std::int64_t* __restrict__ ids,
                              const std::int64_t* __restrict__ known, std::int64_t n,
                              const std::int64_t* __restrict__ offsets, std::int64_t parts,
                              bool pairs, std::int64_t buckets, bool block_histogram,
                              std::int32_t* __restrict__ keys, std::int64_t* __restrict__ positions,
                              unsigned long long* __restrict__ counts, int* __restrict__ bad) {
  extern __shared__ unsigned int histogram[]; // [buckets] when block_histogram, else unused
  if (block_histogram) {
    for (std::int64_t b = threadIdx.x; b < buckets; b += blockDim.x)
      histogram[b] = 0;
    __syncthreads();
  }
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const std::int64_t tile = static_cast<std::int64_t>(blockIdx.x) * kThreads * kRouteItems;
  // Every thread runs every item (the bound test is inside), so the warp-wide votes below see
  // whole warps.
  for (int item = 0; item < kRouteItems; ++item) {
    const std::int64_t i = tile + static_cast<std::int64_t>(item) * kThreads + threadIdx.x;
    const bool valid = i < n;
    int bucket = 0;
    if (valid) {
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
      bucket = static_cast<int>(pairs ? 2 * owner + (flagged ? 1 : 0) : (flagged ? owner : parts));
      keys[i] = bucket;
      positions[i] = i;
    }
    const unsigned int active = __ballot_sync(0xffffffffu, valid);
    if (valid) {
      // Exactly the lanes of `active` are here, as __match_any_sync requires.
      const unsigned int same = __match_any_sync(active, bucket);
      if (lane == __ffs(static_cast<int>(same)) - 1) {
        const auto count = static_cast<unsigned int>(__popc(same));
        if (block_histogram)
          atomicAdd(histogram + bucket, count);
        else
          atomicAdd(counts + bucket, static_cast<unsigned long long>(count));
      }
    }
  }
  if (block_histogram) {
    __syncthreads();
    for (std::int64_t b = threadIdx.x; b < buckets; b += blockDim.x)
      if (histogram[b] != 0) atomicAdd(counts + b, static_cast<unsigned long long>(histogram[b]));
  }
}

// frontier_lengths[order[k]] = lengths[k].
__global__ void scatter_lengths_kernel(const std::int64_t* __restrict__ order,
                                       const std::int64_t* __restrict__ lengths, std::int64_t n,
                                       std::int64_t* __restrict__ frontier_lengths) {
  const std::int64_t k = thread_index();
  if (k >= n) return;
  frontier_lengths[order[k]] = lengths[k];
}

// The segment that holds value e: the last k in [lo, hi) with starts[k] <= e (starts ascending,
// starts[lo] <= e). Of empty segments, which share their start with the next one, it finds the
// last, so it never lands on an empty segment.
__device__ __forceinline__ std::int64_t segment_of(const std::int64_t* __restrict__ starts,
                                                   std::int64_t lo, std::int64_t hi,
                                                   std::int64_t e) {
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (starts[mid] <= e)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo - 1;
}

// Values per thread of copy_segments_kernel.
constexpr int kCopyItems = 4;
constexpr std::int64_t kCopyTile = static_cast<std::int64_t>(kThreads) * kCopyItems;

// Copies each routed segment values[routed_start[k], + lengths[k]) to out[offsets[order[k]], ...)
// with one thread per value, not per segment. Segment lengths follow the degrees: with a fanout
// they are short (at most the fanout, often less than half a warp, so a warp per segment would
// idle most lanes), and with whole rows (fanout -1) a hub's segment is millions of values long
// (a thread or a warp per segment would leave one thread or warp copying it long after the rest
// are done). Value-parallel work is the same for every thread whatever the degrees: the reads
// of `values` are consecutive across the warp, and so are the writes inside a segment, which
// moves as one piece. Each thread finds its value's segment by a binary search of routed_start;
// the block first finds the segments of its tile's first and last value, so the threads search
// only between them (in L1: the block's threads read the same few starts), and a tile inside one
// long segment needs no search at all. 64-bit value indices: a hop may answer 2^31 draws.
__global__ void copy_segments_kernel(const std::int64_t* __restrict__ order,
                                     const std::int64_t* __restrict__ routed_start, std::int64_t n,
                                     const std::int64_t* __restrict__ values, std::int64_t total,
                                     const std::int64_t* __restrict__ offsets,
                                     std::int64_t* __restrict__ out) {
  __shared__ std::int64_t tile_segments[2]; // the segments of the tile's first and last value
  const std::int64_t tile = static_cast<std::int64_t>(blockIdx.x) * kCopyTile;
  const std::int64_t tile_end = tile + kCopyTile < total ? tile + kCopyTile : total;
  if (threadIdx.x == 0) tile_segments[0] = segment_of(routed_start, 0, n, tile);
  if (threadIdx.x == 32) tile_segments[1] = segment_of(routed_start, 0, n, tile_end - 1);
  __syncthreads();
  const std::int64_t first = tile_segments[0], last = tile_segments[1];
#pragma unroll
  for (int item = 0; item < kCopyItems; ++item) {
    const std::int64_t e = tile + static_cast<std::int64_t>(item) * kThreads + threadIdx.x;
    if (e < tile_end) {
      const std::int64_t k = segment_of(routed_start, first, last + 1, e);
      out[offsets[order[k]] + (e - routed_start[k])] = values[e];
    }
  }
}

// Sums of one column over the ranges [ranges[2s], ranges[2s + 1]) (s < segments, ascending and
// disjoint) into sums[segments]. Each thread keeps a running total while its values stay in one
// range (its values are kThreads apart, so it changes range rarely), adds it to a per-block total
// in shared memory (in global memory directly past kSharedSegments ranges), and each block adds
// its non-zero totals to the global sums once. Integer sums: any order gives the same result.
constexpr int kSumItems = 8;
constexpr std::int64_t kSharedSegments = 4096; // 32 KB of shared totals

__global__ void segment_sums_kernel(const std::int64_t* __restrict__ values, std::int64_t n,
                                    const std::int64_t* __restrict__ ranges, std::int64_t segments,
                                    bool block_totals, unsigned long long* __restrict__ sums) {
  extern __shared__ unsigned long long block_sums[]; // [segments] when block_totals
  if (block_totals) {
    for (std::int64_t s = threadIdx.x; s < segments; s += blockDim.x)
      block_sums[s] = 0;
    __syncthreads();
  }
  unsigned long long* to = block_totals ? block_sums : sums;
  const std::int64_t tile = static_cast<std::int64_t>(blockIdx.x) * kThreads * kSumItems;
  std::int64_t segment = -1; // the range of the running total, -1 for none
  unsigned long long running = 0;
  for (int item = 0; item < kSumItems; ++item) {
    const std::int64_t i = tile + static_cast<std::int64_t>(item) * kThreads + threadIdx.x;
    if (i >= n) break;
    // The last range that starts at or before i, if i is inside it; else -1.
    std::int64_t lo = 0, hi = segments;
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (ranges[2 * mid] <= i)
        lo = mid + 1;
      else
        hi = mid;
    }
    const std::int64_t s = lo > 0 && i < ranges[2 * (lo - 1) + 1] ? lo - 1 : -1;
    if (s != segment) {
      if (segment >= 0) atomicAdd(to + segment, running);
      segment = s;
      running = 0;
    }
    if (s >= 0) running += static_cast<unsigned long long>(values[i]);
  }
  if (segment >= 0) atomicAdd(to + segment, running);
  if (block_totals) {
    __syncthreads();
    for (std::int64_t s = threadIdx.x; s < segments; s += blockDim.x)
      if (block_sums[s] != 0) atomicAdd(sums + s, block_sums[s]);
  }
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

void segment_sums(const std::vector<Tensor>& columns, const Tensor& ranges, Tensor& sums) {
  const std::int64_t segments = ranges.size(0);
  const std::int64_t n = columns.front().numel();
  if (segments == 0) return;
  const cudaStream_t stream = stream_of(ranges);
  TESSEL_CHECK_CUDA(cudaMemsetAsync(sums.raw(), 0, sums.nbytes(), stream));
  if (n == 0) return;
  const bool block_totals = segments <= kSharedSegments;
  const std::size_t shared_bytes =
      block_totals ? static_cast<std::size_t>(segments) * sizeof(unsigned long long) : 0;
  const std::int64_t tile = static_cast<std::int64_t>(kThreads) * kSumItems;
  const auto blocks = static_cast<unsigned int>((n + tile - 1) / tile);
  auto* out = static_cast<unsigned long long*>(sums.raw());
  for (std::size_t c = 0; c < columns.size(); ++c) {
    segment_sums_kernel<<<blocks, kThreads, shared_bytes, stream>>>(
        columns[c].ptr<std::int64_t>(), n, ranges.ptr<std::int64_t>(), segments, block_totals,
        out + static_cast<std::int64_t>(c) * segments);
    TESSEL_CHECK_LAUNCH();
  }
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
  const bool block_histogram = buckets <= kSharedBuckets;
  const std::size_t shared_bytes =
      block_histogram ? static_cast<std::size_t>(buckets) * sizeof(unsigned int) : 0;
  const std::int64_t tile = static_cast<std::int64_t>(kThreads) * kRouteItems;
  bucket_kernel<<<static_cast<unsigned int>((n + tile - 1) / tile), kThreads, shared_bytes,
                  stream>>>(
      ids.ptr<std::int64_t>(), known_pos.ptr<std::int64_t>(), n, owner_offsets.ptr<std::int64_t>(),
      parts, pairs, buckets, block_histogram, keys.ptr<std::int32_t>(),
      positions.ptr<std::int64_t>(), d_counts, reinterpret_cast<int*>(d_counts + buckets));
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
  const std::int64_t total = values.numel();
  if (total == 0) return;
  const std::int64_t blocks = (total + kCopyTile - 1) / kCopyTile;
  TESSEL_EXPECTS(blocks <= std::numeric_limits<int>::max(),
                 "unroute_segments: {} values are more than one launch copies", total);
  copy_segments_kernel<<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(
      order.ptr<std::int64_t>(), routed_start.ptr<std::int64_t>(), n, values.ptr<std::int64_t>(),
      total, d_offsets, out.ptr<std::int64_t>());
  TESSEL_CHECK_LAUNCH();
}

} // namespace tessel::sampling::cuda
