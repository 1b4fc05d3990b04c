// Host-compiled declarations of the CUDA side of GPU sampling and feature gathering.
#pragma once

#include "tessel/core/tensor.hpp"

#include <cstdint>

namespace tessel::sampling::cuda {

// Free bytes on `device` (cudaMemGetInfo); 0 in builds without CUDA.
std::int64_t free_device_bytes(Device device);

} // namespace tessel::sampling::cuda
