// Host-compiled declarations of the CUDA side of GPU sampling and feature gathering.
#pragma once

#include "tessel/core/tensor.hpp"

#include <cstdint>

namespace tessel::sampling::cuda {

// Free bytes on `device` (cudaMemGetInfo); 0 in builds without CUDA.
std::int64_t free_device_bytes(Device device);

// The address kernels use for mapped pinned host memory (cudaHostAlloc with
// cudaHostAllocMapped): cudaHostGetDevicePointer's, or the host address itself where the
// runtime declines (with unified addressing, as on every 64-bit Linux GPU, they are the same).
void* mapped_device_pointer(void* host);

} // namespace tessel::sampling::cuda
