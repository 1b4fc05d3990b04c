// Tensor memory on CUDA devices: a stream-ordered caching allocator, pinned staging blocks, and
// copies on the device's stream (CUDA builds).
#include "tessel/core/tensor.hpp"

#include "size_class.hpp"
#include "tessel/core/cuda_check.cuh"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

namespace tessel::device_memory {

namespace {

// Blocks released by tensors stay with the allocator and are handed to the next request of
// their size class, so a training loop that allocates the same activations every epoch calls
// cudaMalloc only in its first epochs. All work on a device is ordered with one stream (the
// device's stream below, which the kernels' default context shares), so a block released after
// enqueuing work that reads it can be handed out at once: the next user's work is enqueued
// behind that work. When cudaMalloc runs out of memory the cached blocks are freed (after the
// whole device is idle) and the request retried.
class DeviceBlockCache {
 public:
  void* take(std::size_t bytes, int device) {
    std::lock_guard lock(mutex_);
    ++stats_.requests;
    void* p = nullptr;
    if (const auto it = free_.find(bytes); it != free_.end()) {
      p = it->second;
      free_.erase(it);
      ++stats_.cache_hits;
    } else {
      TESSEL_CHECK_CUDA(cudaSetDevice(device));
      cudaError_t rc = cudaMalloc(&p, bytes);
      if (rc == cudaErrorMemoryAllocation && !free_.empty()) {
        (void)cudaGetLastError();
        release_cached_locked();
        rc = cudaMalloc(&p, bytes);
      }
      if (rc != cudaSuccess)
        TESSEL_LIB_FAIL("cudaMalloc of {} bytes on cuda:{} failed: {} ({} bytes in use)", bytes,
                        device, cudaGetErrorString(rc), stats_.bytes_in_use);
      ++stats_.device_allocations;
      stats_.bytes_reserved += static_cast<std::int64_t>(bytes);
      if (stats_.bytes_reserved > stats_.peak_bytes_reserved)
        stats_.peak_bytes_reserved = stats_.bytes_reserved;
    }
    stats_.bytes_in_use += static_cast<std::int64_t>(bytes);
    if (stats_.bytes_in_use > stats_.peak_bytes_in_use)
      stats_.peak_bytes_in_use = stats_.bytes_in_use;
    return p;
  }

  void give(void* p, std::size_t bytes) noexcept {
    std::lock_guard lock(mutex_);
    stats_.bytes_in_use -= static_cast<std::int64_t>(bytes);
    try {
      free_.emplace(bytes, p);
    } catch (...) {  // no memory for the map node: return the block to the driver
      // Work enqueued on the block may still run: wait for the device before freeing it.
      cudaDeviceSynchronize();
      cudaFree(p);
      stats_.bytes_reserved -= static_cast<std::int64_t>(bytes);
    }
  }

  DeviceMemoryStats stats() {
    std::lock_guard lock(mutex_);
    return stats_;
  }

  void reset_peak() {
    std::lock_guard lock(mutex_);
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
    stats_.peak_bytes_reserved = stats_.bytes_reserved;
  }

  void release_cached(int device) {
    std::lock_guard lock(mutex_);
    TESSEL_CHECK_CUDA(cudaSetDevice(device));
    release_cached_locked();
  }

 private:
  void release_cached_locked() {
    cudaDeviceSynchronize();
    for (auto& [bytes, p] : free_) {
      cudaFree(p);
      stats_.bytes_reserved -= static_cast<std::int64_t>(bytes);
    }
    free_.clear();
  }

  std::mutex mutex_;
  std::multimap<std::size_t, void*> free_;
  DeviceMemoryStats stats_;
};

// Small requests share 512-byte granules; larger ones take size classes 1/8 apart.
std::size_t rounded_size(std::size_t bytes) {
  const std::size_t aligned = (bytes + 511) / 512 * 512;
  return aligned >= detail::kCachedMinBytes ? detail::size_class(aligned) : aligned;
}

constexpr int kMaxDevices = 64;

struct DeviceState {
  DeviceBlockCache cache;
  // Created on the first use of the device and never destroyed (like the states themselves).
  std::atomic<cudaStream_t> stream{nullptr};
  std::mutex stream_mutex;
};

DeviceState& state(int index) {
  TESSEL_EXPECTS(index >= 0 && index < kMaxDevices, "CUDA device index {} out of range", index);
  // Never destroyed: tensors in static storage may be released after main returns.
  static auto* states = new DeviceState[kMaxDevices];
  return states[index];
}

// Pinned host blocks, cached by size class like device blocks (cudaHostAlloc is slow).
class PinnedCache {
 public:
  void* take(std::size_t bytes) {
    std::lock_guard lock(mutex_);
    if (const auto it = free_.find(bytes); it != free_.end()) {
      void* p = it->second;
      free_.erase(it);
      return p;
    }
    void* p = nullptr;
    TESSEL_CHECK_CUDA(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
    held_ += static_cast<std::int64_t>(bytes);
    return p;
  }
  void give(void* p, std::size_t bytes) noexcept {
    std::lock_guard lock(mutex_);
    try {
      free_.emplace(bytes, p);
    } catch (...) {
      cudaFreeHost(p);
      held_ -= static_cast<std::int64_t>(bytes);
    }
  }
  std::int64_t held() {
    std::lock_guard lock(mutex_);
    return held_;
  }

 private:
  std::mutex mutex_;
  std::multimap<std::size_t, void*> free_;
  std::int64_t held_ = 0;
};

PinnedCache& pinned_cache() {
  static auto* cache = new PinnedCache();
  return *cache;
}

// The device's stream, created on first use. Non-blocking: it never waits for (nor holds up)
// the legacy default stream, so nothing in Tessel may use that one (a source check in the
// tests enforces it). The caller's current device is restored.
cudaStream_t stream_of(Device device) {
  DeviceState& s = state(device.index);
  if (cudaStream_t existing = s.stream.load(std::memory_order_acquire)) return existing;
  std::lock_guard lock(s.stream_mutex);
  if (cudaStream_t existing = s.stream.load(std::memory_order_relaxed)) return existing;
  int previous = 0;
  TESSEL_CHECK_CUDA(cudaGetDevice(&previous));
  TESSEL_CHECK_CUDA(cudaSetDevice(device.index));
  cudaStream_t created = nullptr;
  const cudaError_t rc = cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking);
  cudaSetDevice(previous);
  TESSEL_CHECK_CUDA(rc);
  s.stream.store(created, std::memory_order_release);
  return created;
}

}  // namespace

void* allocate(std::size_t bytes, Device device) {
  if (device.is_cpu()) return host_allocate(bytes);
  if (bytes == 0) return nullptr;
  return state(device.index).cache.take(rounded_size(bytes), device.index);
}

void release(void* ptr, Device device, std::size_t bytes) noexcept {
  if (device.is_cpu()) {
    host_release(ptr, bytes);
  } else if (ptr) {
    state(device.index).cache.give(ptr, rounded_size(bytes));
  }
}

void* pinned_allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  return pinned_cache().take(rounded_size(bytes));
}

void pinned_release(void* ptr, std::size_t bytes) noexcept {
  if (ptr) pinned_cache().give(ptr, rounded_size(bytes));
}

DeviceMemoryStats stats(Device device) {
  if (device.is_cpu()) return host_stats();
  DeviceMemoryStats s = state(device.index).cache.stats();
  s.pinned_bytes = pinned_cache().held();
  return s;
}

void reset_peak(Device device) {
  if (device.is_cpu())
    host_reset_peak();
  else
    state(device.index).cache.reset_peak();
}

void release_cached(Device device) {
  if (device.is_cuda()) state(device.index).cache.release_cached(device.index);
}

std::int64_t device_used_bytes(Device device) {
  if (!device.is_cuda()) return 0;
  TESSEL_CHECK_CUDA(cudaSetDevice(device.index));
  std::size_t free_bytes = 0, total_bytes = 0;
  TESSEL_CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  return static_cast<std::int64_t>(total_bytes - free_bytes);
}

std::int64_t device_free_bytes(Device device) {
  if (!device.is_cuda()) return 0;
  TESSEL_CHECK_CUDA(cudaSetDevice(device.index));
  std::size_t free_bytes = 0, total_bytes = 0;
  TESSEL_CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  return static_cast<std::int64_t>(free_bytes);
}

void* stream(Device device) { return device.is_cuda() ? stream_of(device) : nullptr; }

// Copies are enqueued on the device's stream; copies that touch host memory (pageable or
// pinned) or a second device wait for it, so the host may read or reuse its buffer when this
// returns.
void copy(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes) {
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const Device gpu = dst_device.is_cuda() ? dst_device : src_device;
  const cudaStream_t s = stream_of(gpu);
  // Between two devices the copy runs on the destination's stream, which orders neither the
  // source's pending writes nor its later reuse of the source block: wait on both sides.
  const bool across = dst_device.is_cuda() && src_device.is_cuda() &&
                      dst_device.index != src_device.index;
  if (across) TESSEL_CHECK_CUDA(cudaStreamSynchronize(stream_of(src_device)));
  TESSEL_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
  if (across || dst_device.is_cpu() || src_device.is_cpu())
    TESSEL_CHECK_CUDA(cudaStreamSynchronize(s));
}

void zero(void* ptr, Device device, std::size_t bytes) {
  if (device.is_cpu()) {
    std::memset(ptr, 0, bytes);
    return;
  }
  TESSEL_CHECK_CUDA(cudaMemsetAsync(ptr, 0, bytes, stream_of(device)));
}

bool cuda_available() { return device_count() > 0; }

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: not an error for the caller
    return 0;
  }
  return count;
}

}  // namespace tessel::device_memory
