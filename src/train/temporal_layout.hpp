// The two layouts of a temporal partition: which snapshots and vertices a rank owns.
#pragma once

#include "tessel/train/dynamic.hpp"

#include <algorithm>
#include <cstdint>

namespace tessel::train {


// A range of snapshots [begin, end).
struct Block {
  std::int64_t begin = 0, end = 0;  // owned snapshots of a rank below t_end
  std::int64_t size() const { return std::max<std::int64_t>(0, end - begin); }
};

inline Block owned_snapshots(const TemporalLayout& layout, int rank, std::int64_t t_end) {
  return {layout.snapshot_offsets[rank], std::min(layout.snapshot_offsets[rank + 1], t_end)};
}

inline std::int64_t vertex_count(const TemporalLayout& layout, int rank) {
  return layout.vertex_offsets[rank + 1] - layout.vertex_offsets[rank];
}

}  // namespace tessel::train
