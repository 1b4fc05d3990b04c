// Size classes shared by the host and device block caches.
#pragma once

#include <cstddef>

namespace tessel::device_memory::detail {

// Requests of at least this many bytes are rounded to a class and cached on release.
inline constexpr std::size_t kCachedMinBytes = std::size_t{1} << 20;

// The size class of `bytes` (>= 16): at most 6.25% larger, 16 classes per power of two, so
// tensors of slightly different sizes (mini-batches, halo buffers) share blocks while an
// [N, F] activation wastes little (1.024 GB takes 1.040 GB; with 8 classes it took 1.074).
inline std::size_t size_class(std::size_t bytes) {
  const int top = 63 - __builtin_clzll(bytes);
  const std::size_t step = std::size_t{1} << (top - 4);
  return (bytes + step - 1) / step * step;
}

}  // namespace tessel::device_memory::detail
