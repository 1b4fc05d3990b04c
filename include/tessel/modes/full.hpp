// Full-batch mode's own options (TrainOptions::mode_options holds them for --mode full).
#pragma once

#include "tessel/dist/halo_aggregation.hpp"
#include "tessel/kernels/row_codec.hpp"

namespace tessel::train {

// --mode full: how halo rows (forward) and halo gradients (backward) travel between ranks.
struct FullOptions {
  kernels::RowCodec halo_dtype = kernels::RowCodec::f32;
  // BNS-GCN: the fraction of boundary nodes each training epoch keeps (0: off, the whole graph).
  double boundary_sampling = 0;
  // SuperGCN: which rows cross each cut (post: the boundary rows; pre/auto: owner-side sums).
  dist::HaloAggregation halo_aggregation = dist::HaloAggregation::post;
  // PipeGCN: training epochs read the previous epoch's halo rows and gradients, exchanged while
  // they compute; smoothing gamma in [0, 1) keeps a moving average of them (0: the last ones).
  bool stale_halo = false;
  double stale_smoothing = 0;
};

}  // namespace tessel::train
