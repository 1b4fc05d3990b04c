// The CUDA state behind a kernels::Context: stream, cuBLAS/cuSPARSE handles, scratch (nvcc only).
#pragma once

#include "tessel/core/cuda_check.cuh"
#include "tessel/core/tensor.hpp"
#include "tessel/kernels/context.hpp"

#include <cstddef>
#include <cstdint>

namespace tessel::kernels::cuda {

struct Resources {
  int device = 0;
  // Non-blocking: never ordered with the legacy default stream, which nothing here uses.
  cudaStream_t stream = nullptr;
  bool owns_stream = false;  // false for the device's own stream, shared with device_memory
  cublasHandle_t cublas = nullptr;
  cusparseHandle_t cusparse = nullptr;
  // Grow-only scratch for uploads of host spans and library workspaces, from the caching
  // allocator (so its statistics count them). Work on the stream is ordered, so one op's use
  // cannot overlap the next one's, and a block given back when growing can be reused at once.
  void* scratch = nullptr;
  std::size_t scratch_bytes = 0;
  // Separate grow-only workspace for library calls (cuSPARSE buffers), whose size is known
  // only after operands already placed in scratch have been described.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;

  Resources(int device_index, cudaStream_t shared_stream);
  ~Resources();
  Resources(const Resources&) = delete;
  Resources& operator=(const Resources&) = delete;

  // At least `bytes` of scratch, 256-byte aligned.
  void* scratch_at_least(std::size_t bytes);
  void* workspace_at_least(std::size_t bytes);
};

// Launch geometry helpers: a 1-D grid over `count` items, capped so a grid-stride loop covers
// the rest.
constexpr int kThreads = 256;
inline unsigned int blocks_for(std::int64_t count, int threads = kThreads) {
  const std::int64_t blocks = (count + threads - 1) / threads;
  return static_cast<unsigned int>(blocks < 65535 * 16 ? blocks : 65535 * 16);
}

// Device memory from the caching allocator for one op: given back when the op's work is
// enqueued (the stream orders it before any later user of the block). For temporaries as large
// as a graph, which the grow-only scratch would otherwise hold for the rest of the run.
class DeviceBuffer {
public:
  DeviceBuffer(const Resources& r, std::size_t bytes)
      : device_(Device::cuda(r.device)), stream_(r.stream), bytes_(bytes),
        ptr_(static_cast<char*>(device_memory::allocate(bytes, device_))) {}
  ~DeviceBuffer() {
    // A context on another stream than the cache's must finish with the block first.
    if (stream_ != static_cast<cudaStream_t>(device_memory::stream(device_)))
      cudaStreamSynchronize(stream_);
    device_memory::release(ptr_, device_, bytes_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }

private:
  Device device_;
  cudaStream_t stream_;
  std::size_t bytes_;
  char* ptr_;
};

// Carves consecutive 256-byte-aligned pieces out of the scratch buffer (or a DeviceBuffer).
class ScratchCarver {
public:
  explicit ScratchCarver(Resources& r, std::size_t total_bytes)
      : base_(static_cast<char*>(r.scratch_at_least(total_bytes))) {}
  explicit ScratchCarver(const DeviceBuffer& buffer) : base_(static_cast<char*>(buffer.get())) {}
  template <class T> T* take(std::int64_t count) {
    T* p = reinterpret_cast<T*>(base_ + used_);
    used_ += (static_cast<std::size_t>(count) * sizeof(T) + 255) / 256 * 256;
    return p;
  }
  // Bytes `take` would use for `count` elements of T (for sizing the carver).
  template <class T> static std::size_t bytes(std::int64_t count) {
    return (static_cast<std::size_t>(count) * sizeof(T) + 255) / 256 * 256;
  }

private:
  char* base_;
  std::size_t used_ = 0;
};

} // namespace tessel::kernels::cuda
