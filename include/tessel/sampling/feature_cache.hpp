// Cache of remote nodes' feature rows, ranked by in-degree or by presampled access counts.
#pragma once

#include "tessel/core/option_words.hpp"
#include "tessel/core/types.hpp"
#include "tessel/sampling/id_map.hpp"

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace tessel::sampling {

// How remote nodes are ranked for the cache (--cache-policy), or no cache.
enum class CachePolicy : std::uint8_t {
  degree,    // highest in-degree first: hubs are drawn most often by uniform sampling
  presample, // most frequent input nodes over a few presampled epochs (AccessCounter)
  none,      // no cache, whatever the budget
};
inline std::span<const OptionWord<CachePolicy>> option_words(CachePolicy) {
  static constexpr OptionWord<CachePolicy> words[] = {{"degree", CachePolicy::degree},
                                                      {"presample", CachePolicy::presample},
                                                      {"none", CachePolicy::none}};
  return words;
}

// The cache size, from --cache-size-mb or --cache-ratio (set at most one; neither = no cache).
struct CacheBudget {
  double size_mb = -1; // MiB of feature rows; < 0 = unset
  double ratio = -1;   // fraction in [0, 1] of the remote candidates; < 0 = unset

  // GPU store only: the share of the budget's rows kept for remote rows admitted once fetched
  // (--cache-admit-fraction, CLOCK replacement), in [0, 1]; 0 = a static cache.
  double admit_fraction = 0;

  // Rows the cache may hold: floor(size_mb * 2^20 / row_bytes) or floor(ratio * candidates),
  // never more than num_candidates. Throws InputError if both are set or ratio > 1.
  std::int64_t capacity_rows(std::int64_t num_candidates, std::int64_t row_bytes) const;
};

// The device cache's budget when neither --cache-size-mb nor --cache-ratio is given: this
// fraction of the GPU memory that is free once the graph and the features are placed, leaving
// the rest to activations and the allocator's cache.
inline constexpr double kDefaultDeviceCacheFraction = 0.25;
CacheBudget default_device_budget(std::int64_t free_device_bytes);

// The host cache's budget at more than one rank on the CPU when neither --cache-size-mb nor
// --cache-ratio is given and every rank holds its features in memory: this fraction of the
// rank's own feature bytes (owned rows x F x 4), filled with the policy's hottest remote rows.
// On the 200k-node benchmark graph at P = 2 (shuffled ids, degree policy) that is 68% of the
// halo, and the rows fetched per epoch fall to about a third (measured: docs/performance.md).
inline constexpr double kDefaultHostCacheFraction = 0.5;
CacheBudget default_host_budget(std::int64_t owned_feature_bytes);

// How a GPU store spends its budget: hot rows chosen up front by the policy (at most the
// candidates), and slots for remote rows admitted as they are fetched. admit_rows =
// floor(admit_fraction * budget rows), hot_rows = min(candidates, budget rows - admit_rows), where
// budget rows are capacity_rows' before the clamp to the candidates.
struct DeviceCacheSplit {
  std::int64_t hot_rows = 0;
  std::int64_t admit_rows = 0;
};
DeviceCacheSplit split_device_cache(const CacheBudget& budget, std::int64_t num_candidates,
                                    std::int64_t row_bytes);

// Candidates most valuable first: score descending, ties broken by smaller id (so the choice is
// deterministic). score[i] belongs to candidates[i] (a degree or an access count).
std::vector<NodeId> rank_candidates(std::span<const NodeId> candidates,
                                    std::span<const std::int64_t> score);

// Counts how often each candidate appears in presampled batches, for CachePolicy::presample:
// add the input nodes of each presampled batch (blocks.front().src, or the remote part of it);
// ids that are not candidates are ignored.
class AccessCounter {
public:
  explicit AccessCounter(std::span<const NodeId> candidates);
  void add(std::span<const NodeId> ids);
  // counts()[i] belongs to candidates[i].
  const std::vector<std::int64_t>& counts() const { return counts_; }

private:
  IdHashMap index_;
  std::vector<std::int64_t> counts_;
};

struct CacheStats {
  std::int64_t hits = 0;
  std::int64_t misses = 0;
  std::int64_t row_bytes = 0;

  double hit_rate() const {
    return hits + misses == 0 ? 0.0
                              : static_cast<double>(hits) / static_cast<double>(hits + misses);
  }
  std::int64_t bytes_saved() const { return hits * row_bytes; }     // fetches the cache avoided
  std::int64_t bytes_fetched() const { return misses * row_bytes; } // fetches still needed
};

// Feature rows (f32, feature_dim wide, host memory) of a fixed set of remote nodes, addressed by
// slot. Built once (ids chosen by a policy), filled once from the owners, then consulted every
// step: a hit skips the remote fetch.
class FeatureCache {
public:
  FeatureCache() = default;
  // Caches `ids` (distinct global ids; slot s holds ids[s]); rows start zeroed until fill().
  FeatureCache(std::vector<NodeId> ids, std::int64_t feature_dim);
  // The top capacity_rows(candidates) of rank_candidates(candidates, score).
  static FeatureCache build(std::span<const NodeId> candidates, std::span<const std::int64_t> score,
                            const CacheBudget& budget, std::int64_t feature_dim);

  std::int64_t size() const { return static_cast<std::int64_t>(ids_.size()); }
  std::int64_t feature_dim() const { return feature_dim_; }
  std::int64_t row_bytes() const { return feature_dim_ * static_cast<std::int64_t>(sizeof(float)); }
  std::int64_t bytes() const { return size() * row_bytes(); }
  std::span<const NodeId> ids() const { return ids_; } // slot -> global id

  // Slot of `id`, or -1. Does not touch the statistics; safe to call from many threads.
  std::int32_t lookup(NodeId id) const { return index_.find(id); }
  // rows: [size, feature_dim] row-major in slot order (what the owners sent for ids()).
  void fill(std::span<const float> rows);
  void set_row(std::int32_t slot, std::span<const float> values);
  std::span<const float> row(std::int32_t slot) const {
    return {rows_.data() + static_cast<std::int64_t>(slot) * feature_dim_,
            static_cast<std::size_t>(feature_dim_)};
  }

  // For a step's needed rows: copies each cached ids[i] into out row i ([ids.size(),
  // feature_dim] row-major) and writes the positions i that missed to miss_positions
  // (ascending), which the caller fetches from the owners. Counts hits and misses.
  void gather(std::span<const NodeId> ids, std::span<float> out,
              std::vector<std::int64_t>& miss_positions);

  // The same without copying: for each cached ids[i], rows[at[i]] points at its row here (valid
  // while the cache lives and is not refilled); the positions i that missed go to
  // miss_positions (ascending). Counts hits and misses.
  void locate(std::span<const NodeId> ids, std::span<const float*> rows,
              std::span<const std::int64_t> at, std::vector<std::int64_t>& miss_positions);

  const CacheStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {0, 0, row_bytes()}; }

private:
  std::vector<NodeId> ids_;
  std::int64_t feature_dim_ = 0;
  std::vector<float> rows_;
  IdHashMap index_;
  CacheStats stats_;
  std::vector<std::int32_t> slots_; // gather scratch
};

} // namespace tessel::sampling
