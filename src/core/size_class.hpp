// Size classes shared by the host and device block caches.
#pragma once

#include <cstddef>

namespace tessel::device_memory::detail {

// Requests of at least this many bytes are rounded to a class and cached on release.
inline constexpr std::size_t kCachedMinBytes = std::size_t{1} << 20;

// The size class of `bytes` (>= 8): at most 12.5% larger, 8 classes per power of two, so
// tensors of slightly different sizes (mini-batches, halo buffers) share blocks.
inline std::size_t size_class(std::size_t bytes) {
  const int top = 63 - __builtin_clzll(bytes);
  const std::size_t step = std::size_t{1} << (top - 3);
  return (bytes + step - 1) / step * step;
}

}  // namespace tessel::device_memory::detail
