// Host allocations for tensors, and the CUDA entry points of CPU-only builds.
#include "tessel/core/tensor.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

namespace tessel::device_memory {

namespace {
void* host_allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  // 64-byte alignment: full cache lines and aligned AVX-512 loads.
  const std::size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

#ifndef TESSEL_WITH_CUDA
void* allocate(std::size_t bytes, Device device) {
  TESSEL_EXPECTS(device.is_cpu(), "cannot allocate on {}: Tessel was built without CUDA",
                 device.str());
  return host_allocate(bytes);
}
void release(void* ptr, Device) noexcept { std::free(ptr); }
void copy(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes) {
  TESSEL_EXPECTS(dst_device.is_cpu() && src_device.is_cpu(),
                 "cannot copy to {} from {}: Tessel was built without CUDA", dst_device.str(),
                 src_device.str());
  std::memcpy(dst, src, bytes);
}
void zero(void* ptr, Device device, std::size_t bytes) {
  TESSEL_EXPECTS(device.is_cpu(), "cannot zero memory on {}: built without CUDA", device.str());
  std::memset(ptr, 0, bytes);
}
bool cuda_available() { return false; }
#else
// The CUDA build defines allocate/release/copy/zero in device_memory_cuda.cu and calls this.
void* host_allocate_for_cuda_build(std::size_t bytes) { return host_allocate(bytes); }
#endif

}  // namespace tessel::device_memory
