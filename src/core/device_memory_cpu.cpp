// Host allocations for tensors, and the CUDA entry points of CPU-only builds.
#include "tessel/core/tensor.hpp"
#include "tessel/core/stream.hpp"

#include "size_class.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iterator>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>

namespace tessel::device_memory {

namespace {

// Large host blocks are kept for reuse instead of being returned to the kernel. glibc serves
// blocks above 32 MiB with mmap and unmaps them on free, so a training loop that allocates the
// same [N, F] activations every epoch would page-fault every one of them in again (measured:
// 15-20% of a full-batch epoch in the kernel). Sizes are rounded up to classes 1/8 apart so
// mini-batches of slightly different sizes share blocks, and the idle blocks are capped
// (TESSEL_HOST_CACHE_MB, default 1024; 0 disables): past the cap the largest idle ones are freed.
// A loop whose iterations hold more than the cap raises it to what it holds (host_cache_keep).
class HostBlockCache {
 public:
  static constexpr std::size_t kMinBytes = detail::kCachedMinBytes;
  static std::size_t size_class(std::size_t bytes) { return detail::size_class(bytes); }

  void* take(std::size_t bytes) {
    std::lock_guard lock(mutex_);
    const auto it = free_.find(bytes);
    if (it == free_.end()) return nullptr;
    void* p = it->second;
    free_.erase(it);
    cached_ -= bytes;
    return p;
  }
  // Keeps the block for reuse; frees the largest idle blocks while over the cap.
  void give(void* p, std::size_t bytes) {
    std::lock_guard lock(mutex_);
    free_.emplace(bytes, p);
    cached_ += bytes;
    trim();
  }
  std::size_t cached() {
    std::lock_guard lock(mutex_);
    return cached_;
  }
  std::size_t limit() {
    std::lock_guard lock(mutex_);
    return limit_;
  }
  void set_limit(std::size_t bytes) {
    std::lock_guard lock(mutex_);
    limit_ = bytes;
    trim();
  }
  std::size_t release_idle() {
    std::lock_guard lock(mutex_);
    const std::size_t freed = cached_;
    for (const auto& [bytes, p] : free_) std::free(p);
    free_.clear();
    cached_ = 0;
    return freed;
  }
  void keep(std::size_t bytes) {
    std::lock_guard lock(mutex_);
    if (limit_ > 0) limit_ = std::max(limit_, bytes);
  }

 private:
  void trim() {
    while (cached_ > limit_ && !free_.empty()) {
      auto largest = std::prev(free_.end());
      std::free(largest->second);
      cached_ -= largest->first;
      free_.erase(largest);
    }
  }
  static std::size_t default_limit() {
    if (const char* env = std::getenv("TESSEL_HOST_CACHE_MB")) return std::stoull(env) << 20;
    return std::size_t{1024} << 20;
  }
  std::mutex mutex_;
  std::multimap<std::size_t, void*> free_;
  std::size_t cached_ = 0;
  std::size_t limit_ = default_limit();
};

HostBlockCache& host_cache() {
  // Never destroyed: tensors in static storage may be released after main returns.
  static auto* cache = new HostBlockCache();
  return *cache;
}

std::size_t rounded_size(std::size_t bytes) {
  const std::size_t aligned = (bytes + 63) / 64 * 64;
  return aligned >= HostBlockCache::kMinBytes ? HostBlockCache::size_class(aligned) : aligned;
}

// Live host bytes and their peak, for stats(Device::cpu()) (what a step holds at once), and how
// often the block cache served a request or a block came from the system instead.
struct HostCounters {
  std::atomic<std::int64_t> requests{0};
  std::atomic<std::int64_t> cache_hits{0};
  std::atomic<std::int64_t> system_blocks{0};
  std::atomic<std::int64_t> in_use{0};
  std::atomic<std::int64_t> peak{0};
  std::atomic<std::int64_t> peak_reserved{0};
};

HostCounters& host_counters() {
  static auto* counters = new HostCounters();
  return *counters;
}

void count_host(std::int64_t delta) {
  HostCounters& c = host_counters();
  const std::int64_t now = c.in_use.fetch_add(delta, std::memory_order_relaxed) + delta;
  std::int64_t peak = c.peak.load(std::memory_order_relaxed);
  while (now > peak && !c.peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

}  // namespace

// Bytes of host blocks held: live ones and the cache's idle ones.
std::int64_t host_reserved() {
  return host_counters().in_use.load() + static_cast<std::int64_t>(host_cache().cached());
}

DeviceMemoryStats host_stats() {
  HostCounters& c = host_counters();
  DeviceMemoryStats s;
  s.requests = c.requests.load();
  s.cache_hits = c.cache_hits.load();
  s.device_allocations = c.system_blocks.load();
  s.bytes_in_use = c.in_use.load();
  s.peak_bytes_in_use = c.peak.load();
  s.bytes_reserved = host_reserved();
  s.peak_bytes_reserved = std::max(c.peak_reserved.load(), s.bytes_reserved);
  return s;
}

std::size_t host_cache_limit() { return host_cache().limit(); }
void host_cache_set_limit(std::size_t bytes) { host_cache().set_limit(bytes); }
void host_cache_keep(std::size_t bytes) { host_cache().keep(bytes); }
std::size_t host_cache_release_idle() { return host_cache().release_idle(); }

void host_reset_peak() {
  HostCounters& c = host_counters();
  c.peak.store(c.in_use.load());
  c.peak_reserved.store(host_reserved());
}

HostBlockKeeper::HostBlockKeeper() {
  host_reset_peak();
  setup_bytes_ = host_counters().in_use.load();
}

void HostBlockKeeper::keep() const {
  const std::int64_t held = host_stats().peak_bytes_reserved - setup_bytes_;
  if (held > 0) host_cache_keep(static_cast<std::size_t>(held));
}

void* host_allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  // 64-byte alignment: full cache lines and aligned AVX-512 loads.
  const std::size_t rounded = rounded_size(bytes);
  host_counters().requests.fetch_add(1, std::memory_order_relaxed);
  const bool cached = rounded >= HostBlockCache::kMinBytes;
  void* p = cached ? host_cache().take(rounded) : nullptr;
  if (p) host_counters().cache_hits.fetch_add(1, std::memory_order_relaxed);
  const bool from_system = !p;
  if (!p) p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  count_host(static_cast<std::int64_t>(rounded));
  if (from_system && cached) {
    // Only a block from the system adds to the bytes held (a cached one was held already).
    HostCounters& c = host_counters();
    c.system_blocks.fetch_add(1, std::memory_order_relaxed);
    const std::int64_t reserved = host_reserved();
    std::int64_t peak = c.peak_reserved.load(std::memory_order_relaxed);
    while (reserved > peak &&
           !c.peak_reserved.compare_exchange_weak(peak, reserved, std::memory_order_relaxed)) {
    }
  }
  return p;
}

void host_release(void* ptr, std::size_t bytes) noexcept {
  if (!ptr) return;
  const std::size_t rounded = rounded_size(bytes);
  count_host(-static_cast<std::int64_t>(rounded));
  if (rounded >= HostBlockCache::kMinBytes) {
    try {
      host_cache().give(ptr, rounded);
      return;
    } catch (...) {  // out of memory for the map node: free the block instead
    }
  }
  std::free(ptr);
}

#ifndef TESSEL_WITH_CUDA
void* allocate(std::size_t bytes, Device device) {
  TESSEL_EXPECTS(device.is_cpu(), "cannot allocate on {}: Tessel was built without CUDA",
                 device.str());
  return host_allocate(bytes);
}
void release(void* ptr, Device, std::size_t bytes) noexcept { host_release(ptr, bytes); }
void copy(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes) {
  TESSEL_EXPECTS(dst_device.is_cpu() && src_device.is_cpu(),
                 "cannot copy to {} from {}: Tessel was built without CUDA", dst_device.str(),
                 src_device.str());
  std::memcpy(dst, src, bytes);
}
void copy(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes,
          DeviceStream) {
  copy(dst, dst_device, src, src_device, bytes);
}
void zero(void* ptr, Device device, std::size_t bytes) {
  TESSEL_EXPECTS(device.is_cpu(), "cannot zero memory on {}: built without CUDA", device.str());
  std::memset(ptr, 0, bytes);
}
bool cuda_available() { return false; }
int device_count() { return 0; }
void* pinned_allocate(std::size_t bytes) { return host_allocate(bytes); }
void pinned_release(void* ptr, std::size_t bytes) noexcept { host_release(ptr, bytes); }
DeviceMemoryStats stats(Device device) {
  TESSEL_EXPECTS(device.is_cpu(), "no memory statistics for {}: built without CUDA", device.str());
  return host_stats();
}
void reset_peak(Device device) {
  TESSEL_EXPECTS(device.is_cpu(), "no memory statistics for {}: built without CUDA", device.str());
  host_reset_peak();
}
void release_cached(Device) {}
std::int64_t device_used_bytes(Device) { return 0; }
std::int64_t device_free_bytes(Device) { return 0; }
void* stream(Device) { return nullptr; }
void* main_stream(Device) { return nullptr; }
void* side_stream(Device) { return nullptr; }
void synchronize_streams(Device) {}
void* resolve(Device, DeviceStream) { return nullptr; }
// Without CUDA there are no streams to switch or order.
StreamScope::StreamScope(Device, void*) { (void)previous_device_, (void)previous_stream_; }
StreamScope::~StreamScope() { (void)active_; }
StreamEvent::~StreamEvent() { (void)event_, (void)device_; }
StreamEvent::StreamEvent(StreamEvent&&) noexcept {}
StreamEvent& StreamEvent::operator=(StreamEvent&&) noexcept { return *this; }
void StreamEvent::record(Device) {}
void StreamEvent::wait(Device) const {}
#endif

}  // namespace tessel::device_memory
