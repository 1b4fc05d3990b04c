// Dense row-major tensor (rank 1 or 2) with shared storage on the CPU or a CUDA device.
#pragma once

#include "tessel/core/error.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace tessel {

enum class DType : std::uint8_t { f32, f64, i32, i64, u8 };

std::size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::f32;
  else if constexpr (std::is_same_v<T, double>) return DType::f64;
  else if constexpr (std::is_same_v<T, std::int32_t>) return DType::i32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return DType::i64;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return DType::u8;
  else static_assert(sizeof(T) == 0, "unsupported tensor element type");
}

struct Device {
  enum class Kind : std::uint8_t { cpu, cuda };
  Kind kind = Kind::cpu;
  int index = 0;

  static Device cpu() { return {Kind::cpu, 0}; }
  static Device cuda(int index = 0) { return {Kind::cuda, index}; }
  bool is_cpu() const { return kind == Kind::cpu; }
  bool is_cuda() const { return kind == Kind::cuda; }
  bool operator==(const Device&) const = default;
  std::string str() const;
};

// Raw memory owned by one device; freed when the last Tensor viewing it goes away.
class Storage {
 public:
  Storage(std::size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  Device device_;
};

// A view of Storage: shape (rank 1 or 2), dtype, byte offset. Copying a Tensor shares the
// storage; clone() copies the data. Row slices of a row-major tensor are views.
class Tensor {
 public:
  Tensor() = default;

  static Tensor empty(std::vector<std::int64_t> shape, DType dtype, Device device = Device::cpu());
  static Tensor zeros(std::vector<std::int64_t> shape, DType dtype, Device device = Device::cpu());
  template <class T, class A = std::allocator<T>>
  static Tensor from_vector(const std::vector<T, A>& values, std::vector<std::int64_t> shape = {});

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int dim() const { return static_cast<int>(shape_.size()); }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::int64_t size(int d) const { return shape_.at(static_cast<std::size_t>(d)); }
  std::int64_t rows() const { return shape_.empty() ? 0 : shape_[0]; }
  std::int64_t cols() const { return shape_.size() < 2 ? 1 : shape_[1]; }
  std::int64_t numel() const;
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }

  // Address of the first element on the tensor's device (a device pointer for CUDA tensors):
  // for kernel launches and copies, never for dereferencing in host code.
  void* raw() const { return static_cast<char*>(storage_->data()) + offset_; }
  template <class T>
  T* ptr() const {
    check_dtype(dtype_of<T>());
    return static_cast<T*>(raw());
  }
  // Host access to the elements. Throws (instead of crashing on a device address) when the
  // tensor lives on a CUDA device: copy it with to(Device::cpu()) first.
  template <class T>
  T* data() const {
    check_dtype(dtype_of<T>());
    if (!device_.is_cpu()) [[unlikely]]
      host_access_error();
    return static_cast<T*>(raw());
  }

  // Rows [begin, end) as a view sharing storage.
  Tensor rows_slice(std::int64_t begin, std::int64_t end) const;
  // Same storage, new shape with the same number of elements.
  Tensor reshape(std::vector<std::int64_t> shape) const;
  Tensor clone() const;
  Tensor to(Device device) const;
  // Copies src's elements into this tensor (same shape and dtype, any devices).
  void copy_from(const Tensor& src);
  void fill_zero();
  std::string describe() const;

 private:
  void check_dtype(DType want) const;
  [[noreturn]] void host_access_error() const;

  std::shared_ptr<Storage> storage_;
  std::size_t offset_ = 0;
  std::vector<std::int64_t> shape_;
  DType dtype_ = DType::f32;
  Device device_;
};

template <class T, class A>
Tensor Tensor::from_vector(const std::vector<T, A>& values, std::vector<std::int64_t> shape) {
  if (shape.empty()) shape = {static_cast<std::int64_t>(values.size())};
  Tensor t = empty(std::move(shape), dtype_of<T>());
  TESSEL_EXPECTS(static_cast<std::size_t>(t.numel()) == values.size(),
                 "Tensor::from_vector: {} values do not fill shape {}", values.size(),
                 t.describe());
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}

// Device memory primitives; the CUDA versions exist only in builds with TESSEL_WITH_CUDA.
namespace device_memory {
// Counters of a device's caching allocator. For the CPU, those of host_allocate (tensors and
// staging blocks on the host): device_allocations counts the blocks of at least 1 MiB it took
// from the system because the host block cache had none of their size (fresh pages to fault
// in), bytes_reserved the live and idle cached bytes; pinned_bytes is zero.
struct DeviceMemoryStats {
  std::int64_t requests = 0;        // allocations asked for by tensors
  std::int64_t cache_hits = 0;      // requests served by a cached block
  std::int64_t device_allocations = 0;  // cudaMalloc calls (requests that missed the cache)
  std::int64_t bytes_reserved = 0;  // bytes held from the driver (in use + cached)
  std::int64_t bytes_in_use = 0;    // bytes held by live tensors and kernel scratch (rounded to
                                    // size classes)
  std::int64_t peak_bytes_in_use = 0;    // since the start or the last reset_peak
  std::int64_t peak_bytes_reserved = 0;  // likewise
  std::int64_t pinned_bytes = 0;    // pinned host staging bytes held
};
void* allocate(std::size_t bytes, Device device);
void release(void* ptr, Device device, std::size_t bytes) noexcept;
// Host blocks (64-byte aligned); large ones are cached for reuse (TESSEL_HOST_CACHE_MB).
void* host_allocate(std::size_t bytes);
void host_release(void* ptr, std::size_t bytes) noexcept;
// The cap on the idle host blocks the cache keeps (TESSEL_HOST_CACHE_MB, default 1024 MiB; 0
// keeps none); past it the largest idle blocks go back to the system. host_cache_keep raises the
// cap to at least `bytes` (never lowers it; nothing while caching is off): a loop that holds the
// same blocks every iteration keeps them all idle in between, instead of the cache freeing the
// largest and the next iteration faulting them in again. host_cache_set_limit sets it (tests,
// and an out-of-core run, which lowers it to 64 MiB).
std::size_t host_cache_limit();
void host_cache_keep(std::size_t bytes);
void host_cache_set_limit(std::size_t bytes);
// Frees every idle block now (the cap stays) and returns their bytes: what a setup left idle
// that the loop after it may never ask for again (a run whose memory is budgeted).
std::size_t host_cache_release_idle();
// Counters of host_allocate (what stats(Device::cpu()) returns) and their reset_peak.
DeviceMemoryStats host_stats();
void host_reset_peak();
// Keeps the host blocks a repeating loop (a training epoch, an evaluation) holds: made once the
// setup is done, it restarts the peak; keep() after each iteration raises the cache's cap to the
// host bytes held since, above the setup's, so the next iteration reuses them instead of the cache
// freeing the largest and the kernel faulting them in again (host_cache_keep).
class HostBlockKeeper {
 public:
  HostBlockKeeper();
  void keep() const;

 private:
  std::int64_t setup_bytes_;
};
void copy(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes);
void zero(void* ptr, Device device, std::size_t bytes);
bool cuda_available();  // built with CUDA and at least one device is visible
int device_count();     // visible CUDA devices (0 without CUDA)
// Page-locked host blocks for staging device data (cached like device blocks; plain host
// memory in builds without CUDA).
void* pinned_allocate(std::size_t bytes);
void pinned_release(void* ptr, std::size_t bytes) noexcept;
DeviceMemoryStats stats(Device device);
// Starts new peaks: peak_bytes_in_use and peak_bytes_reserved become the current values.
void reset_peak(Device device);
// Gives the blocks a CUDA device's cache holds unused back to the driver (waits for the
// device first); nothing on the CPU. For after setup, whose temporaries training never reuses.
void release_cached(Device device);
// Memory in use on the whole device as the driver reports it (cudaMemGetInfo: total - free, so
// the CUDA context, library handles and other processes included); 0 for the CPU.
std::int64_t device_used_bytes(Device device);
// Memory free on a CUDA device as the driver reports it (cudaMemGetInfo); 0 for the CPU.
std::int64_t device_free_bytes(Device device);
// The stream the calling thread enqueues a device's work on (nullptr for the CPU): the device's
// main stream (main_stream), or the stream a StreamScope on this thread names for that device.
// Tensor allocations, copies and fills, the kernels' default context, the NCCL data plane and
// the GPU sampler and feature store all enqueue on it, so code runs unchanged on another stream
// inside a scope.
//
// The caching allocator remembers the stream a block was allocated on. A block released on that
// same stream (the usual case) is handed to later requests of that stream at once: the stream
// orders the next user's work behind the last one's. A block allocated on one stream and
// released on another (a tensor one stream wrote and another read, after waiting for an event)
// is reused only once both streams have finished the work they had been given by then (events
// polled, nobody waits). So a tensor may be used on any stream as long as (a) each stream that
// reads it waits for the writer's event first, and (b) its last reference is dropped on a stream
// that has used it, after every other stream's use is ordered before that point: never drop
// the last reference of another stream's tensor inside a scope that has not waited for it.
void* stream(Device device);
// The stream that orders a device's work outside any StreamScope: a non-blocking cudaStream_t
// created on the first call for a CUDA device (nullptr for the CPU).
void* main_stream(Device device);
// A second non-blocking stream of a CUDA device for work that runs beside the main stream (the
// sampled trainer's prefetch), created on the first call and never destroyed (nullptr for the
// CPU).
void* side_stream(Device device);
// Waits for the device's main stream and, if it was ever created, its side stream (teardown of
// objects whose memory both may still read; nothing on the CPU).
void synchronize_streams(Device device);

// Makes `stream` the calling thread's current stream of `device` (what stream(device) returns)
// until the scope ends; scopes nest. A null stream or a CPU device leaves everything as it is.
class StreamScope {
 public:
  StreamScope(Device device, void* stream);
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  bool active_ = false;
  int previous_device_ = -1;
  void* previous_stream_ = nullptr;
};

// A CUDA event (timing disabled) that orders one stream's work before another's without the host
// waiting. Default: never recorded, and waiting for it does nothing; everything is a no-op on the
// CPU and in builds without CUDA. Move-only.
class StreamEvent {
 public:
  StreamEvent() = default;
  ~StreamEvent();
  StreamEvent(StreamEvent&& other) noexcept;
  StreamEvent& operator=(StreamEvent&& other) noexcept;
  StreamEvent(const StreamEvent&) = delete;
  StreamEvent& operator=(const StreamEvent&) = delete;

  // Records the work enqueued so far on stream(device).
  void record(Device device);
  // Makes stream(device) wait for the recorded work (cudaStreamWaitEvent; the host goes on).
  void wait(Device device) const;

 private:
  void* event_ = nullptr;
  int device_ = -1;
};
}  // namespace device_memory

}  // namespace tessel
