// CUDA twin of the neighbor sampler, declared for the (host-compiled) dispatcher.
#pragma once

#include "tessel/core/rng.hpp"
#include "tessel/core/tensor.hpp"

namespace tessel::sampling::cuda {

// Same contract as the tensor sample_neighbors (arguments already checked by the dispatcher):
// every tensor on one CUDA device; returns offsets and neighbors on it.
void sample_neighbors(const Tensor& indptr, const Tensor& indices, const Tensor& rows,
                      const Tensor& row_keys, int fanout, const rng::Key& key, Tensor& offsets,
                      Tensor& neighbors);

} // namespace tessel::sampling::cuda
