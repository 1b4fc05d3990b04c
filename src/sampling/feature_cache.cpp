// Feature cache: policy ranking, budget, presample counting, lookups and batched gathers.
#include "tessel/sampling/feature_cache.hpp"

#include "tessel/core/error.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tessel::sampling {

namespace {
// The budget's rows before the clamp to the candidates.
std::int64_t budget_rows(const CacheBudget& b, std::int64_t num_candidates,
                         std::int64_t row_bytes) {
  TESSEL_EXPECTS(!(b.size_mb >= 0 && b.ratio >= 0),
                 "feature cache: both --cache-size-mb ({}) and --cache-ratio ({}) set, expected "
                 "at most one",
                 b.size_mb, b.ratio);
  TESSEL_EXPECTS(b.ratio <= 1.0, "feature cache: --cache-ratio {} is outside [0, 1]", b.ratio);
  TESSEL_EXPECTS(row_bytes > 0, "feature cache: row size {} bytes, expected > 0", row_bytes);
  double rows = 0;
  if (b.size_mb >= 0)
    rows = std::floor(b.size_mb * 1048576.0 / static_cast<double>(row_bytes));
  else if (b.ratio >= 0)
    rows = std::floor(b.ratio * static_cast<double>(num_candidates));
  // Far beyond any graph's rows: keeps the conversion defined for absurd budgets.
  return static_cast<std::int64_t>(std::clamp(rows, 0.0, 4e18));
}
} // namespace

std::int64_t CacheBudget::capacity_rows(std::int64_t num_candidates, std::int64_t row_bytes) const {
  return std::clamp<std::int64_t>(budget_rows(*this, num_candidates, row_bytes), 0,
                                  num_candidates);
}

CacheBudget default_device_budget(std::int64_t free_device_bytes) {
  CacheBudget b;
  b.size_mb = kDefaultDeviceCacheFraction * static_cast<double>(std::max<std::int64_t>(
                                                free_device_bytes, 0)) /
              1048576.0;
  return b;
}

CacheBudget default_host_budget(std::int64_t owned_feature_bytes) {
  CacheBudget b;
  b.size_mb = kDefaultHostCacheFraction *
              static_cast<double>(std::max<std::int64_t>(owned_feature_bytes, 0)) / 1048576.0;
  return b;
}

DeviceCacheSplit split_device_cache(const CacheBudget& budget, std::int64_t num_candidates,
                                    std::int64_t row_bytes) {
  TESSEL_EXPECTS(std::isfinite(budget.admit_fraction) && budget.admit_fraction >= 0 &&
                     budget.admit_fraction <= 1,
                 "feature cache: --cache-admit-fraction {} is outside [0, 1]",
                 budget.admit_fraction);
  const std::int64_t rows = budget_rows(budget, num_candidates, row_bytes);
  DeviceCacheSplit split;
  split.admit_rows = static_cast<std::int64_t>(
      std::floor(budget.admit_fraction * static_cast<double>(rows)));
  // Device slots are addressed with 32-bit indices by the store's hash map.
  split.admit_rows = std::min<std::int64_t>(split.admit_rows, std::int64_t{1} << 30);
  split.hot_rows = std::clamp<std::int64_t>(rows - split.admit_rows, 0, num_candidates);
  return split;
}

std::vector<NodeId> rank_candidates(std::span<const NodeId> candidates,
                                    std::span<const std::int64_t> score) {
  TESSEL_EXPECTS(candidates.size() == score.size(),
                 "rank_candidates: {} candidates but {} scores, expected one score each",
                 candidates.size(), score.size());
  std::vector<std::int64_t> order(candidates.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return score[a] != score[b] ? score[a] > score[b] : candidates[a] < candidates[b];
  });
  std::vector<NodeId> ranked(candidates.size());
  for (std::size_t k = 0; k < order.size(); ++k)
    ranked[k] = candidates[order[k]];
  return ranked;
}

AccessCounter::AccessCounter(std::span<const NodeId> candidates) : counts_(candidates.size(), 0) {
  index_.reset(static_cast<std::int64_t>(candidates.size()));
  bool inserted = false;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    index_.insert(candidates[i], static_cast<std::int32_t>(i), inserted);
    TESSEL_EXPECTS(inserted, "AccessCounter: candidate {} appears twice, expected distinct ids",
                   candidates[i]);
  }
}

void AccessCounter::add(std::span<const NodeId> ids) {
  for (NodeId id : ids) {
    const std::int32_t i = index_.find(id);
    if (i != IdHashMap::kAbsent) ++counts_[static_cast<std::size_t>(i)];
  }
}

FeatureCache::FeatureCache(std::vector<NodeId> ids, std::int64_t feature_dim)
    : ids_(std::move(ids)), feature_dim_(feature_dim) {
  TESSEL_EXPECTS(feature_dim > 0, "FeatureCache: feature_dim {}, expected > 0", feature_dim);
  rows_.assign(static_cast<std::size_t>(size() * feature_dim_), 0.0f);
  index_.reset(size());
  bool inserted = false;
  for (std::int64_t s = 0; s < size(); ++s) {
    index_.insert(ids_[s], static_cast<std::int32_t>(s), inserted);
    TESSEL_EXPECTS(inserted, "FeatureCache: node {} listed twice, expected distinct ids", ids_[s]);
  }
  reset_stats();
}

FeatureCache FeatureCache::build(std::span<const NodeId> candidates,
                                 std::span<const std::int64_t> score, const CacheBudget& budget,
                                 std::int64_t feature_dim) {
  TESSEL_EXPECTS(feature_dim > 0, "FeatureCache::build: feature_dim {}, expected > 0", feature_dim);
  const std::int64_t capacity =
      budget.capacity_rows(static_cast<std::int64_t>(candidates.size()),
                           feature_dim * static_cast<std::int64_t>(sizeof(float)));
  std::vector<NodeId> ranked = rank_candidates(candidates, score);
  ranked.resize(static_cast<std::size_t>(capacity));
  return FeatureCache(std::move(ranked), feature_dim);
}

void FeatureCache::fill(std::span<const float> rows) {
  TESSEL_EXPECTS(static_cast<std::int64_t>(rows.size()) == size() * feature_dim_,
                 "FeatureCache::fill: {} values, expected {} rows x {} features", rows.size(),
                 size(), feature_dim_);
  std::copy(rows.begin(), rows.end(), rows_.begin());
}

void FeatureCache::set_row(std::int32_t slot, std::span<const float> values) {
  TESSEL_EXPECTS(slot >= 0 && slot < size(), "FeatureCache::set_row: slot {} outside [0, {})", slot,
                 size());
  TESSEL_EXPECTS(static_cast<std::int64_t>(values.size()) == feature_dim_,
                 "FeatureCache::set_row: {} values, expected {}", values.size(), feature_dim_);
  std::copy(values.begin(), values.end(),
            rows_.begin() + static_cast<std::int64_t>(slot) * feature_dim_);
}

void FeatureCache::gather(std::span<const NodeId> ids, std::span<float> out,
                          std::vector<std::int64_t>& miss_positions) {
  const auto n = static_cast<std::int64_t>(ids.size());
  TESSEL_EXPECTS(static_cast<std::int64_t>(out.size()) == n * feature_dim_,
                 "FeatureCache::gather: output holds {} values, expected {} rows x {} features",
                 out.size(), n, feature_dim_);
  slots_.resize(static_cast<std::size_t>(n));
  const auto dim = static_cast<std::size_t>(feature_dim_);
#pragma omp parallel for schedule(static) if (n * feature_dim_ >= 65536)
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t slot = index_.find(ids[i]);
    slots_[i] = slot;
    if (slot != IdHashMap::kAbsent)
      std::copy_n(rows_.data() + static_cast<std::size_t>(slot) * dim, dim,
                  out.data() + static_cast<std::size_t>(i) * dim);
  }
  miss_positions.clear();
  for (std::int64_t i = 0; i < n; ++i)
    if (slots_[i] == IdHashMap::kAbsent) miss_positions.push_back(i);
  const auto misses = static_cast<std::int64_t>(miss_positions.size());
  stats_.hits += n - misses;
  stats_.misses += misses;
}

void FeatureCache::locate(std::span<const NodeId> ids, std::span<const float*> rows,
                          std::span<const std::int64_t> at,
                          std::vector<std::int64_t>& miss_positions) {
  const auto n = static_cast<std::int64_t>(ids.size());
  TESSEL_EXPECTS(at.size() == ids.size(), "FeatureCache::locate: {} positions for {} ids",
                 at.size(), ids.size());
  miss_positions.clear();
  const auto dim = static_cast<std::size_t>(feature_dim_);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t slot = ids_.empty() ? IdHashMap::kAbsent : index_.find(ids[i]);
    if (slot == IdHashMap::kAbsent) {
      miss_positions.push_back(i);
      continue;
    }
    const auto to = static_cast<std::size_t>(at[static_cast<std::size_t>(i)]);
    TESSEL_ASSERT(to < rows.size(), "FeatureCache::locate: position {} of {}", to, rows.size());
    rows[to] = rows_.data() + static_cast<std::size_t>(slot) * dim;
  }
  const auto misses = static_cast<std::int64_t>(miss_positions.size());
  stats_.hits += n - misses;
  stats_.misses += misses;
}

} // namespace tessel::sampling
