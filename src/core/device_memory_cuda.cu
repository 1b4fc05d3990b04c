// Tensor memory on CUDA devices (cudaMalloc, cudaMemcpy) for CUDA builds.
#include "tessel/core/tensor.hpp"

#include "tessel/core/cuda_check.cuh"

#include <cstdlib>
#include <cstring>

namespace tessel::device_memory {


void* allocate(std::size_t bytes, Device device) {
  if (device.is_cpu()) return host_allocate(bytes);
  if (bytes == 0) return nullptr;
  TESSEL_CHECK_CUDA(cudaSetDevice(device.index));
  void* p = nullptr;
  TESSEL_CHECK_CUDA(cudaMalloc(&p, bytes));
  return p;
}

void release(void* ptr, Device device, std::size_t bytes) noexcept {
  if (device.is_cpu()) {
    host_release(ptr, bytes);
  } else if (ptr) {
    cudaFree(ptr);  // errors at teardown are not actionable
  }
}

void copy(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes) {
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const cudaMemcpyKind kind = dst_device.is_cpu()   ? cudaMemcpyDeviceToHost
                              : src_device.is_cpu() ? cudaMemcpyHostToDevice
                                                    : cudaMemcpyDeviceToDevice;
  TESSEL_CHECK_CUDA(cudaMemcpy(dst, src, bytes, kind));
}

void zero(void* ptr, Device device, std::size_t bytes) {
  if (device.is_cpu()) {
    std::memset(ptr, 0, bytes);
    return;
  }
  TESSEL_CHECK_CUDA(cudaMemset(ptr, 0, bytes));
}

bool cuda_available() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

}  // namespace tessel::device_memory
