// Tensor memory on CUDA devices: a stream-ordered caching allocator, pinned staging blocks, and
// copies on the device's stream (CUDA builds).
#include "tessel/core/tensor.hpp"
#include "tessel/core/stream.hpp"

#include "size_class.hpp"
#include "tessel/core/cuda_check.cuh"

#include <atomic>
#include <list>
#include <stdexcept>
#include <unordered_map>
#include <vector>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <utility>

namespace tessel::device_memory {

namespace {

// Blocks released by tensors stay with the allocator and are handed to the next request of
// their size class, so a training loop that allocates the same activations every epoch calls
// cudaMalloc only in its first epochs. Free blocks are kept per stream: a block released on the
// stream it was allocated on may be handed out at once to a later request on that stream, whose
// work the stream orders behind the last user's. Almost all work runs on the device's main
// stream, for which this is the whole story. A block allocated on one stream and released on
// another (written on a side stream, read on the main one after an event) may still be in use on
// either: events recorded on both at the release say when both are done with it, and until then
// it is pending; done, it is idle and any stream may take it. Nobody waits for a pending block: a
// request that finds none of its stream's blocks nor an idle one calls cudaMalloc. When cudaMalloc
// runs out of memory the cached blocks are freed (after the whole device is idle) and the request
// retried.
//
// TESSEL_DEVICE_CACHE=0 turns the cache off: every block is a cudaMalloc of exactly the bytes
// asked for, freed on release once the whole device is idle. That is slow, and it is for
// compute-sanitizer's memcheck, which knows only cudaMalloc's bounds: an access past a tensor's
// end that stays inside its cached block (rounded up to a size class) would go unreported.
class DeviceBlockCache {
 public:
  // A block of `bytes` (a size class; with the cache off, the bytes asked for) for work on `s`.
  void* take(std::size_t bytes, int device, cudaStream_t s, cudaStream_t main) {
    std::lock_guard lock(mutex_);
    ++stats_.requests;
    void* p = nullptr;
    if (cache_on()) {
      p = pick(s, bytes);
      if (!p) p = pick(idle(), bytes);
      if (!p && !pending_.empty()) {
        reap_pending();
        p = pick(idle(), bytes);
      }
    }
    if (p) {
      ++stats_.cache_hits;
    } else {
      TESSEL_CHECK_CUDA(cudaSetDevice(device));
      cudaError_t rc = cudaMalloc(&p, bytes);
      if (rc == cudaErrorMemoryAllocation && (!free_.empty() || !pending_.empty())) {
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
    // Only blocks of other streams are remembered: the main stream's need no bookkeeping.
    if (s != main && cache_on()) {
      try {
        side_home_[p] = s;
      } catch (...) {
        give_back_locked(p, bytes);
        throw;
      }
    }
    stats_.bytes_in_use += static_cast<std::int64_t>(bytes);
    if (stats_.bytes_in_use > stats_.peak_bytes_in_use)
      stats_.peak_bytes_in_use = stats_.bytes_in_use;
    return p;
  }

  // `p` released by work enqueued on `s` (the releasing thread's current stream).
  void give(void* p, std::size_t bytes, cudaStream_t s, cudaStream_t main) noexcept {
    std::lock_guard lock(mutex_);
    stats_.bytes_in_use -= static_cast<std::int64_t>(bytes);
    if (!cache_on()) {  // any stream may still use it: wait for all of them
      cudaDeviceSynchronize();
      give_back_locked(p, bytes);
      return;
    }
    cudaStream_t home = main;
    if (!side_home_.empty()) {
      if (const auto it = side_home_.find(p); it != side_home_.end()) {
        home = it->second;
        side_home_.erase(it);
      }
    }
    try {
      if (home == s) {
        free_[s].emplace(bytes, p);
        return;
      }
      // Used on two streams: reusable once both are done with what they were given so far.
      Pending pending{p, bytes, {}};
      for (const cudaStream_t used : {home, s}) {
        cudaEvent_t event = spare_event();
        if (cudaEventRecord(event, used) != cudaSuccess) {
          spare_events_.push_back(event);
          throw std::runtime_error("cudaEventRecord failed");
        }
        pending.events.push_back(event);
      }
      pending_.push_back(std::move(pending));
    } catch (...) {  // no memory for the bookkeeping, or no event: wait and return the block
      (void)cudaGetLastError();
      cudaDeviceSynchronize();
      cudaFree(p);
      stats_.bytes_reserved -= static_cast<std::int64_t>(bytes);
    }
  }

  DeviceMemoryStats stats() {
    std::lock_guard lock(mutex_);
    return stats_;
  }

  // False when TESSEL_DEVICE_CACHE is 0 (read once).
  static bool cache_on() {
    static const bool on = [] {
      const char* env = std::getenv("TESSEL_DEVICE_CACHE");
      return !(env && std::strcmp(env, "0") == 0);
    }();
    return on;
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
  // The key of blocks no stream has pending work on.
  static cudaStream_t idle() { return nullptr; }

  struct Pending {
    void* block;
    std::size_t bytes;
    std::vector<cudaEvent_t> events;  // recorded on the streams that used it
  };

  void* pick(cudaStream_t s, std::size_t bytes) {
    const auto pool = free_.find(s);
    if (pool == free_.end()) return nullptr;
    const auto it = pool->second.find(bytes);
    if (it == pool->second.end()) return nullptr;
    void* p = it->second;
    pool->second.erase(it);
    return p;
  }

  // Pending blocks whose streams have passed their events become idle (polled, never waited).
  void reap_pending() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      bool done = true;
      for (const cudaEvent_t event : it->events) {
        const cudaError_t rc = cudaEventQuery(event);
        if (rc == cudaErrorNotReady) {
          done = false;
          break;
        }
        if (rc != cudaSuccess) TESSEL_CHECK_CUDA(rc);
      }
      if (!done) {
        ++it;
        continue;
      }
      free_[idle()].emplace(it->bytes, it->block);
      for (const cudaEvent_t event : it->events) spare_events_.push_back(event);
      it = pending_.erase(it);
    }
  }

  cudaEvent_t spare_event() {
    if (!spare_events_.empty()) {
      const cudaEvent_t event = spare_events_.back();
      spare_events_.pop_back();
      return event;
    }
    cudaEvent_t event;
    if (cudaEventCreateWithFlags(&event, cudaEventDisableTiming) != cudaSuccess)
      throw std::runtime_error("cudaEventCreateWithFlags failed");
    return event;
  }

  // A block taken but not handed out (its bookkeeping failed): back to the driver.
  void give_back_locked(void* p, std::size_t bytes) noexcept {
    cudaFree(p);
    stats_.bytes_reserved -= static_cast<std::int64_t>(bytes);
  }

  void release_cached_locked() {
    cudaDeviceSynchronize();
    for (auto& [stream, pool] : free_)
      for (auto& [bytes, p] : pool) {
        cudaFree(p);
        stats_.bytes_reserved -= static_cast<std::int64_t>(bytes);
      }
    free_.clear();
    // The whole device is idle: every pending block is done.
    for (Pending& pending : pending_) {
      void* p = pending.block;
      cudaFree(p);
      stats_.bytes_reserved -= static_cast<std::int64_t>(pending.bytes);
      for (const cudaEvent_t event : pending.events) spare_events_.push_back(event);
    }
    pending_.clear();
  }

  std::mutex mutex_;
  // Free blocks by the stream that last used them (idle(): none has work pending on them).
  std::map<cudaStream_t, std::multimap<std::size_t, void*>> free_;
  std::list<Pending> pending_;
  // Blocks in use that were allocated on a stream other than the main one, with that stream.
  std::unordered_map<void*, cudaStream_t> side_home_;
  std::vector<cudaEvent_t> spare_events_;
  DeviceMemoryStats stats_;
};

// Small requests share 512-byte granules; larger ones take size classes 1/8 apart.
std::size_t rounded_size(std::size_t bytes) {
  const std::size_t aligned = (bytes + 511) / 512 * 512;
  return aligned >= detail::kCachedMinBytes ? detail::size_class(aligned) : aligned;
}

// The size of a device block: its class, or with the cache off the bytes asked for.
std::size_t device_block_size(std::size_t bytes) {
  return DeviceBlockCache::cache_on() ? rounded_size(bytes) : bytes;
}

constexpr int kMaxDevices = 64;

struct DeviceState {
  DeviceBlockCache cache;
  // Created on the first use of the device and never destroyed (like the states themselves).
  std::atomic<cudaStream_t> stream{nullptr};
  std::atomic<cudaStream_t> side{nullptr};  // side_stream(), likewise
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

// A non-blocking stream of the device in `slot`, created on first use. Non-blocking: it never
// waits for (nor holds up) the legacy default stream, so nothing in Tessel may use that one (a
// source check in the tests enforces it). The caller's current device is restored.
cudaStream_t created_stream(Device device, std::atomic<cudaStream_t>& slot) {
  if (cudaStream_t existing = slot.load(std::memory_order_acquire)) return existing;
  DeviceState& s = state(device.index);
  std::lock_guard lock(s.stream_mutex);
  if (cudaStream_t existing = slot.load(std::memory_order_relaxed)) return existing;
  int previous = 0;
  TESSEL_CHECK_CUDA(cudaGetDevice(&previous));
  TESSEL_CHECK_CUDA(cudaSetDevice(device.index));
  cudaStream_t created = nullptr;
  const cudaError_t rc = cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking);
  cudaSetDevice(previous);
  TESSEL_CHECK_CUDA(rc);
  slot.store(created, std::memory_order_release);
  return created;
}

// The device's main stream.
cudaStream_t main_stream_of(Device device) {
  return created_stream(device, state(device.index).stream);
}

// The calling thread's StreamScope: the device it names (-1: none) and its stream. One device
// at a time is enough: a rank drives one GPU.
thread_local int scoped_device = -1;
thread_local void* scoped_stream = nullptr;

// The stream this thread enqueues the device's work on.
cudaStream_t stream_of(Device device) {
  if (scoped_device == device.index && scoped_stream)
    return static_cast<cudaStream_t>(scoped_stream);
  return main_stream_of(device);
}

}  // namespace

void* allocate(std::size_t bytes, Device device) {
  if (device.is_cpu()) return host_allocate(bytes);
  if (bytes == 0) return nullptr;
  return state(device.index)
      .cache.take(device_block_size(bytes), device.index, stream_of(device),
                  main_stream_of(device));
}

void release(void* ptr, Device device, std::size_t bytes) noexcept {
  if (device.is_cpu()) {
    host_release(ptr, bytes);
  } else if (ptr) {
    // A stream is created on a device's first allocation, so these do not throw here.
    state(device.index)
        .cache.give(ptr, device_block_size(bytes), stream_of(device), main_stream_of(device));
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

void* main_stream(Device device) { return device.is_cuda() ? main_stream_of(device) : nullptr; }

void* side_stream(Device device) {
  return device.is_cuda() ? created_stream(device, state(device.index).side) : nullptr;
}

void* resolve(Device device, DeviceStream stream) {
  if (!device.is_cuda()) return nullptr;
  return stream.handle ? stream.handle : main_stream_of(device);
}

void synchronize_streams(Device device) {
  if (!device.is_cuda()) return;
  DeviceState& s = state(device.index);
  for (const std::atomic<cudaStream_t>* slot : {&s.stream, &s.side})
    if (const cudaStream_t created = slot->load(std::memory_order_acquire))
      TESSEL_CHECK_CUDA(cudaStreamSynchronize(created));
}

StreamScope::StreamScope(Device device, void* stream) {
  if (!device.is_cuda() || stream == nullptr) return;
  active_ = true;
  previous_device_ = scoped_device;
  previous_stream_ = scoped_stream;
  scoped_device = device.index;
  scoped_stream = stream;
}

StreamScope::~StreamScope() {
  if (!active_) return;
  scoped_device = previous_device_;
  scoped_stream = previous_stream_;
}

StreamEvent::~StreamEvent() {
  if (event_) cudaEventDestroy(static_cast<cudaEvent_t>(event_));  // freed once it completes
}

StreamEvent::StreamEvent(StreamEvent&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)), device_(std::exchange(other.device_, -1)) {}

StreamEvent& StreamEvent::operator=(StreamEvent&& other) noexcept {
  if (this != &other) {
    if (event_) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
    event_ = std::exchange(other.event_, nullptr);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

void StreamEvent::record(Device device) {
  if (!device.is_cuda()) return;
  TESSEL_EXPECTS(device_ < 0 || device_ == device.index,
                 "StreamEvent: recorded on cuda:{} before, now on {}", device_, device.str());
  if (!event_) {
    TESSEL_CHECK_CUDA(cudaSetDevice(device.index));
    cudaEvent_t created;
    TESSEL_CHECK_CUDA(cudaEventCreateWithFlags(&created, cudaEventDisableTiming));
    event_ = created;
    device_ = device.index;
  }
  TESSEL_CHECK_CUDA(cudaEventRecord(static_cast<cudaEvent_t>(event_), stream_of(device)));
}

void StreamEvent::wait(Device device) const {
  if (!event_ || !device.is_cuda()) return;
  TESSEL_CHECK_CUDA(cudaStreamWaitEvent(stream_of(device), static_cast<cudaEvent_t>(event_), 0));
}

// Copies are enqueued on the calling thread's current stream of the device (its main stream, or
// a StreamScope's); copies that touch host memory (pageable or pinned) or a second device wait
// for it, so the host may read or reuse its buffer when this returns.
void copy(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes) {
  const Device gpu = dst_device.is_cuda() ? dst_device : src_device;
  copy(dst, dst_device, src, src_device, bytes,
       DeviceStream{gpu.is_cuda() ? stream_of(gpu) : nullptr});
}

// The copy on a given stream of the device (its main stream when null).
void copy(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes,
          DeviceStream on) {
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const Device gpu = dst_device.is_cuda() ? dst_device : src_device;
  const auto s = static_cast<cudaStream_t>(resolve(gpu, on));
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
