// CUDA twin of block relabelling (BlockBuilder's tensor form), declared for the host dispatcher.
#pragma once

#include "tessel/core/tensor.hpp"

#include <cstdint>

namespace tessel::sampling::cuda {

// Arguments checked by the dispatcher: dst i64 [n], offsets i64 [n + 1], neighbors i64 [E] on
// one CUDA device, n + E < 2^31. Fills src i64 [num_src] (dst, then every other neighbor in
// first-seen order) and indices i32 [E] (block-local ids) on that device, on its stream, and
// returns num_src. Throws InputError for a repeated destination, a negative id, or offsets[n]
// other than E.
std::int64_t relabel_block(const Tensor& dst, const Tensor& offsets, const Tensor& neighbors,
                           Tensor& src, Tensor& indices);

} // namespace tessel::sampling::cuda
