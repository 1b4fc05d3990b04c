// Kernel contexts: creation per device and the process-wide default contexts.
#include "tessel/kernels/context.hpp"

#include "check.hpp"

#ifdef TESSEL_WITH_CUDA
#include "cuda/cuda_ops.hpp"
#endif

#include <map>
#include <mutex>

namespace tessel::kernels {

namespace {
void no_resources(cuda::Resources*) {}
} // namespace

Context::Context(Device device) : Context(device, nullptr) {}

Context::Context(Device device, void* shared_stream)
    : device_(device), cuda_(nullptr, &no_resources) {
  if (device.is_cpu()) return;
#ifdef TESSEL_WITH_CUDA
  cuda_ = {cuda::create_resources(device.index, shared_stream), &cuda::destroy_resources};
#else
  (void)shared_stream;
  detail::unsupported_device("Context", device);
#endif
}

Context::~Context() = default;
Context::Context(Context&&) noexcept = default;
Context& Context::operator=(Context&&) noexcept = default;

void Context::synchronize() {
#ifdef TESSEL_WITH_CUDA
  if (cuda_) cuda::synchronize(*cuda_);
#endif
}

cuda::Resources& Context::cuda_resources() {
  TESSEL_EXPECTS(cuda_ != nullptr, "Context on {} has no CUDA resources", device_.str());
  return *cuda_;
}

Context& default_context(Device device) {
  static Context cpu_context(Device::cpu());
  if (device.is_cpu()) return cpu_context;
  // CUDA contexts are never destroyed: at static destruction the CUDA runtime may already be
  // gone, and releasing handles then fails or crashes. The OS reclaims them at exit.
  static std::mutex mutex;
  static auto* cuda_contexts = new std::map<std::pair<int, void*>, Context*>();
  // Tensor copies and the caching allocator order their work with the calling thread's current
  // stream of the device (its main stream, or a StreamScope's), so the default context enqueues
  // its kernels there too: one context (handles, scratch) per stream.
  void* stream = device_memory::stream(device);
  const std::lock_guard lock(mutex);
  auto& slot = (*cuda_contexts)[{device.index, stream}];
  if (!slot) slot = new Context(device, stream);
  return *slot;
}

Context& resolve_context(Context* ctx, Device device, const char* op) {
  if (!ctx) return default_context(device);
  TESSEL_EXPECTS(ctx->device() == device, "{}: context is on {} but the operands are on {}", op,
                 ctx->device().str(), device.str());
  return *ctx;
}

} // namespace tessel::kernels
