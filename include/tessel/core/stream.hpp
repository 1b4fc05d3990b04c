// A device stream as an argument: what the exchanges (the communicator's device collectives, the
// halo exchange, the distributed sampler's device hop and feature fetch, the transposition) are
// given to enqueue on, and the device_memory calls that take one.
#pragma once

#include "tessel/core/tensor.hpp"

#include <cstddef>

namespace tessel {

// Opaque, so headers need no CUDA: in a CUDA build `handle` is a cudaStream_t of the device the
// call's tensors live on. A null handle names that device's main stream
// (device_memory::main_stream), never the legacy default stream and never "whatever the calling
// thread has current": a call that should run on another stream (the sampled trainer's side
// stream) is given it. The CPU has no streams: host tensors, and every build without CUDA,
// ignore it.
struct DeviceStream {
  void* handle = nullptr;

  // The device's main stream (the null handle), spelled out at call sites.
  static constexpr DeviceStream main() { return DeviceStream{}; }
  friend constexpr bool operator==(DeviceStream, DeviceStream) = default;
};

namespace device_memory {
// The cudaStream_t `stream` names on `device`: its handle, or the device's main stream when
// null; nullptr for the CPU and in builds without CUDA.
void* resolve(Device device, DeviceStream stream);
// copy() enqueued on `on`, a stream of the CUDA device involved, instead of the calling thread's
// current one; it waits for `on` where copy() waits for its stream. Host to host a memcpy.
void copy(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes,
          DeviceStream on);
}  // namespace device_memory

}  // namespace tessel
