// Negative draws for link prediction: uniform, or by smoothed degree.
#include "tessel/sampling/negatives.hpp"

#include "tessel/core/error.hpp"

#include <algorithm>
#include <cmath>

namespace tessel::sampling {

NegativeSampler NegativeSampler::uniform(std::int64_t num_nodes) {
  TESSEL_EXPECTS(num_nodes >= 1, "negative sampling: {} nodes (expected at least 1)", num_nodes);
  NegativeSampler s;
  s.num_nodes_ = num_nodes;
  return s;
}

NegativeSampler NegativeSampler::by_degree(std::span<const std::int64_t> degree) {
  NegativeSampler s;
  s.num_nodes_ = static_cast<std::int64_t>(degree.size());
  s.cumulative_.resize(degree.size());
  double sum = 0;
  for (std::size_t v = 0; v < degree.size(); ++v) {
    TESSEL_ASSERT(degree[v] >= 0, "negative sampling: node {} has degree {}", v, degree[v]);
    if (degree[v] > 0) sum += std::pow(static_cast<double>(degree[v]), kDegreePower);
    s.cumulative_[v] = sum;
  }
  TESSEL_EXPECTS(sum > 0, "--negative-sampling degree: no node has a training edge");
  return s;
}

std::uint64_t NegativeSampler::draw(const rng::Key& key, std::uint64_t item,
                                    std::uint32_t j) const {
  if (cumulative_.empty()) return key.below(item, j, static_cast<std::uint64_t>(num_nodes_));
  const double u = static_cast<double>(key.u64(item, j) >> 11) * (1.0 / 9007199254740992.0);
  const double target = u * cumulative_.back();
  // The first node whose cumulative weight exceeds the target: a node of weight 0 has the same
  // cumulative weight as the node before it and is never first.
  const auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), target);
  const auto v = it == cumulative_.end() ? cumulative_.size() - 1
                                         : static_cast<std::size_t>(it - cumulative_.begin());
  return static_cast<std::uint64_t>(v);
}

double NegativeSampler::probability(std::int64_t v) const {
  if (cumulative_.empty()) return 1.0 / static_cast<double>(num_nodes_);
  const auto i = static_cast<std::size_t>(v);
  return (cumulative_[i] - (i == 0 ? 0.0 : cumulative_[i - 1])) / cumulative_.back();
}

void add_edge_degrees(std::span<const std::int64_t> pairs, std::span<std::int64_t> degree) {
  const auto n = static_cast<std::int64_t>(degree.size());
  for (const std::int64_t v : pairs) {
    TESSEL_ASSERT(v >= 0 && v < n, "add_edge_degrees: node {} outside [0, {})", v, n);
    ++degree[static_cast<std::size_t>(v)];
  }
}

}  // namespace tessel::sampling
