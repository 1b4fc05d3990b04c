// The corrupted destinations of link prediction's training negatives (--negative-sampling):
// draw j of training edge `item` is a function of (key, item, j) alone, so every rank and every
// rank count draws the same negatives for the same edge.
//   uniform: a node uniform in [0, N) (key.below).
//   degree:  node v with probability proportional to degree(v)^0.75 (word2vec's smoothed
//            unigram distribution), degree counted over the whole graph's training edges; nodes
//            of degree 0 are never drawn. One 53-bit uniform per draw, looked up in the
//            cumulative weights (binary search).
#pragma once

#include "tessel/core/option_words.hpp"
#include "tessel/core/rng.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace tessel::sampling {

enum class NegativeSampling { uniform, degree };
inline std::span<const OptionWord<NegativeSampling>> option_words(NegativeSampling) {
  static constexpr OptionWord<NegativeSampling> words[] = {{"uniform", NegativeSampling::uniform},
                                                           {"degree", NegativeSampling::degree}};
  return words;
}

class NegativeSampler {
 public:
  // The exponent of the degree-biased distribution.
  static constexpr double kDegreePower = 0.75;

  static NegativeSampler uniform(std::int64_t num_nodes);
  // degree: one count per node of the whole graph (the same table on every rank); at least one
  // must be positive.
  static NegativeSampler by_degree(std::span<const std::int64_t> degree);

  std::int64_t num_nodes() const { return num_nodes_; }
  // Draw j of item `item` (a training edge's id).
  std::uint64_t draw(const rng::Key& key, std::uint64_t item, std::uint32_t j) const;
  // The probability of drawing node v.
  double probability(std::int64_t v) const;

 private:
  std::int64_t num_nodes_ = 0;
  std::vector<double> cumulative_;  // degree mode: inclusive prefix sums of the weights
};

// Each node's degree among training edges (src, dst) [n, 2] flattened, both endpoints counted:
// adds into degree (one slot per node of the graph).
void add_edge_degrees(std::span<const std::int64_t> pairs, std::span<std::int64_t> degree);

}  // namespace tessel::sampling
