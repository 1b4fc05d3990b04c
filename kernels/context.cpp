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

Context::Context(Device device) : Context(device, false) {}

Context::Context(Device device, bool shares_device_stream)
    : device_(device), cuda_(nullptr, &no_resources) {
  if (device.is_cpu()) return;
#ifdef TESSEL_WITH_CUDA
  void* shared = shares_device_stream ? device_memory::stream(device) : nullptr;
  cuda_ = {cuda::create_resources(device.index, shared), &cuda::destroy_resources};
#else
  (void)shares_device_stream;
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
  static auto* cuda_contexts = new std::map<int, Context*>();
  const std::lock_guard lock(mutex);
  auto& slot = (*cuda_contexts)[device.index];
  // Tensor copies and the caching allocator order their work with the device's stream, so the
  // default context enqueues its kernels there too.
  if (!slot) slot = new Context(device, true);
  return *slot;
}

Context& resolve_context(Context* ctx, Device device, const char* op) {
  if (!ctx) return default_context(device);
  TESSEL_EXPECTS(ctx->device() == device, "{}: context is on {} but the operands are on {}", op,
                 ctx->device().str(), device.str());
  return *ctx;
}

} // namespace tessel::kernels
