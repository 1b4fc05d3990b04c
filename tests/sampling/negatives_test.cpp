// Link prediction's negative draws: the degree-biased distribution on a small graph, and draws
// that depend on (key, edge id, j) alone.
#include "tessel/sampling/negatives.hpp"

#include "tessel/core/error.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tessel {
namespace {

// A star plus a path: node 0 has degree 4, node 5 none.
std::vector<std::int64_t> small_graph_degrees() {
  const std::vector<std::int64_t> pairs = {0, 1, 0, 2, 0, 3, 0, 4, 1, 2, 3, 6};
  std::vector<std::int64_t> degree(7, 0);
  sampling::add_edge_degrees(pairs, degree);
  return degree;
}

TEST(NegativeSampler, DegreeDrawsFollowDegreeToTheThreeQuarters) {
  const std::vector<std::int64_t> degree = small_graph_degrees();
  EXPECT_EQ(degree, (std::vector<std::int64_t>{4, 2, 2, 2, 1, 0, 1}));
  const auto sampler = sampling::NegativeSampler::by_degree(degree);
  double total = 0;
  for (const std::int64_t d : degree) total += std::pow(static_cast<double>(d), 0.75);
  const rng::Key key{9, rng::Stream::negatives, 3, 0, 0};
  const int draws = 200000;
  std::vector<int> count(7, 0);
  for (int e = 0; e < draws / 4; ++e)
    for (std::uint32_t j = 0; j < 4; ++j) ++count[sampler.draw(key, static_cast<std::uint64_t>(e), j)];
  EXPECT_EQ(count[5], 0);  // degree 0: never drawn
  for (std::size_t v = 0; v < degree.size(); ++v) {
    const double p = std::pow(static_cast<double>(degree[v]), 0.75) / total;
    EXPECT_NEAR(sampler.probability(static_cast<std::int64_t>(v)), p, 1e-12) << v;
    // Five standard deviations of a binomial count.
    const double sd = std::sqrt(draws * p * (1 - p));
    EXPECT_NEAR(count[v], draws * p, 5 * sd + 1) << "node " << v;
  }
  // Node 0 (degree 4) against node 4 (degree 1): 4^0.75 = 2.83 times as often.
  EXPECT_NEAR(static_cast<double>(count[0]) / count[4], std::pow(4.0, 0.75), 0.1);
}

// A draw is a function of (key, edge id, j): the same whatever other edges a rank draws for
// and in whatever order (so P ranks, each drawing its own edges, draw what one rank draws).
TEST(NegativeSampler, DrawsDependOnTheEdgeIdAlone) {
  const auto degree = small_graph_degrees();
  const auto by_degree = sampling::NegativeSampler::by_degree(degree);
  const auto uniform = sampling::NegativeSampler::uniform(7);
  const rng::Key key{1, rng::Stream::negatives, 5, 0, 0};
  std::vector<std::uint64_t> forward, backward;
  for (std::uint64_t e = 0; e < 50; ++e) forward.push_back(by_degree.draw(key, e, 1));
  for (std::uint64_t e = 50; e-- > 0;) backward.push_back(by_degree.draw(key, e, 1));
  for (std::size_t i = 0; i < 50; ++i) EXPECT_EQ(forward[i], backward[49 - i]);
  // The uniform sampler is key.below (the draws of runs before --negative-sampling existed).
  for (std::uint64_t e = 0; e < 50; ++e) EXPECT_EQ(uniform.draw(key, e, 2), key.below(e, 2, 7));
  // Another epoch's key draws other negatives.
  const rng::Key other{1, rng::Stream::negatives, 6, 0, 0};
  int same = 0;
  for (std::uint64_t e = 0; e < 50; ++e) same += by_degree.draw(other, e, 1) == forward[e];
  EXPECT_LT(same, 40);
}

TEST(NegativeSampler, GraphWithoutTrainingEdgesIsRefused) {
  const std::vector<std::int64_t> none(4, 0);
  EXPECT_THROW(sampling::NegativeSampler::by_degree(none), InputError);
}

}  // namespace
}  // namespace tessel
