// Sampled (mini-batch) mode's own options (TrainOptions::mode_options holds them for --mode
// sampled).
#pragma once

#include "tessel/core/option_words.hpp"
#include "tessel/sampling/device_graph.hpp"
#include "tessel/sampling/feature_cache.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace tessel::train {

// --sample-routing: where the sampled mode's frontiers, answers and blocks live (automatic:
// the device on a GPU, the host on the CPU).
enum class SampleRouting { automatic, device, host };

struct SampledOptions {
  std::vector<int> fanouts = {15, 10, 5};  // one per layer, input layer first; -1 = all
  std::int64_t batch_size = 1024;           // seeds per rank per step
  sampling::CachePolicy cache_policy = sampling::CachePolicy::degree;
  double cache_size_mb = 0;                 // budget in MiB (0 = use cache_ratio)
  double cache_ratio = 0;                   // fraction of remote candidate rows to cache
  double cache_admit_fraction = 0;          // GPU: budget share for admitted remote rows (CLOCK)
  // GPU sampling: where the graph lives (automatic: device memory when it fits).
  sampling::GraphPlacement graph_placement = sampling::GraphPlacement::automatic;
  SampleRouting sample_routing = SampleRouting::automatic;
  int prefetch = -1;                        // steps sampled and gathered ahead; -1: 1 on a GPU, 0 on the CPU
  std::int64_t max_steps = 0;               // > 0: at most this many steps per epoch (benchmarks)
};

inline std::span<const OptionWord<SampleRouting>> option_words(SampleRouting) {
  static constexpr OptionWord<SampleRouting> words[] = {{"auto", SampleRouting::automatic},
                                                        {"device", SampleRouting::device},
                                                        {"host", SampleRouting::host}};
  return words;
}

// --cache-admit-fraction > 0 needs the GPU feature store (`device_store`: a GPU, or its CPU twins
// with --sample-routing device); an InputError otherwise.
void check_cache_admission(const SampledOptions& options, bool device_store);

}  // namespace tessel::train
