// Execution context of the kernels: the device, and on CUDA the stream and library handles.
#pragma once

#include "tessel/core/tensor.hpp"

#include <memory>

namespace tessel::kernels {

namespace cuda {
struct Resources; // stream, cuBLAS and cuSPARSE handles, workspace (defined for nvcc only)
}

// One per device and thread of control. CPU contexts hold nothing; a CUDA context has a
// non-blocking stream, a cuBLAS handle and a cuSPARSE handle bound to that stream, and a
// grow-only scratch buffer. Kernels enqueue on the stream; entry points that return host values
// synchronize. The default context of a device (default_context) shares the calling thread's
// current stream of the device (device_memory::stream: the main stream, or a StreamScope's), on
// which tensor copies and fills and the caching allocator's reuse are ordered, so its work needs
// no further synchronization. A context constructed directly
// owns a stream of its own that nothing else waits for: its user synchronizes it before
// tensors it wrote are read or released elsewhere, and before it reads tensors just written on
// the device's stream.
class Context {
public:
  explicit Context(Device device);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  Context(Context&&) noexcept;
  Context& operator=(Context&&) noexcept;

  Device device() const { return device_; }
  // Waits for the work enqueued on this context (no-op on CPU).
  void synchronize();
  // The CUDA resources; throws on a CPU context or in builds without CUDA.
  cuda::Resources& cuda_resources();

private:
  friend Context& default_context(Device device);
  // shared_stream: the stream to enqueue on (not owned); null: a stream of its own.
  Context(Device device, void* shared_stream);

  Device device_;
  std::unique_ptr<cuda::Resources, void (*)(cuda::Resources*)> cuda_;
};

// The process-wide context of a device and the calling thread's current stream of it (one per
// stream), created on first use. Entry points that take a `Context* ctx` use this one when ctx
// is null.
Context& default_context(Device device);

// Resolves an optional context for tensors on `device`; throws if ctx is on another device.
Context& resolve_context(Context* ctx, Device device, const char* op);

} // namespace tessel::kernels
