// The Hadamard link scoring head with its backward pass and binary cross-entropy with logits
// (kernel ops, on the embeddings' device), and exact AUC and reciprocal rank (host).
#include "tessel/nn/link.hpp"

#include "tessel/core/error.hpp"
#include "tessel/kernels/link.hpp"
#include "tessel/kernels/loss.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

namespace tessel::nn {

namespace {

void check_pairs(std::span<const LocalId> src, std::span<const LocalId> dst) {
  TESSEL_EXPECTS(src.size() == dst.size(), "link_scores: {} sources for {} destinations",
                 src.size(), dst.size());
}

// A host span as an i32 tensor on `device`.
Tensor upload(std::span<const LocalId> ids, Device device) {
  Tensor t = Tensor::from_vector(std::vector<LocalId>(ids.begin(), ids.end()));
  return device.is_cpu() ? t : t.to(device);
}

} // namespace

Tensor link_scores(const Tensor& z, std::span<const LocalId> src, std::span<const LocalId> dst,
                   const Tensor& w, const Tensor& b) {
  check_pairs(src, dst);
  const Device d = z.device();
  Tensor scores = Tensor::empty({static_cast<std::int64_t>(src.size())}, DType::f32, d);
  kernels::link_scores(z, upload(src, d), upload(dst, d), w, b, scores);
  return scores;
}

void link_scores_backward(const Tensor& z, std::span<const LocalId> src,
                          std::span<const LocalId> dst, const Tensor& w, const Tensor& grad_scores,
                          Tensor& grad_z, Tensor& grad_w, Tensor& grad_b) {
  check_pairs(src, dst);
  const Device d = z.device();
  kernels::link_scores_backward(z, upload(src, d), upload(dst, d), w, grad_scores, grad_z, grad_w,
                                grad_b);
}

double binary_cross_entropy_sum(const Tensor& scores, std::span<const float> labels, double scale,
                                Tensor* grad) {
  TESSEL_EXPECTS(scores.numel() == static_cast<std::int64_t>(labels.size()),
                 "binary_cross_entropy: {} scores for {} labels", scores.numel(), labels.size());
  Tensor y =
      Tensor::from_vector(std::vector<float>(labels.begin(), labels.end()), {scores.numel()});
  if (!scores.device().is_cpu()) y = y.to(scores.device());
  return kernels::binary_cross_entropy(scores.reshape({scores.numel()}), y, scale, grad);
}

double roc_auc(std::span<const float> positive, std::span<const float> negative) {
  if (positive.empty() || negative.empty()) return 0.5;
  std::vector<float> neg(negative.begin(), negative.end());
  std::sort(neg.begin(), neg.end());
  // Twice the count of won pairs (a tie is half a win), exact in integers.
  std::int64_t twice_wins = 0;
  for (float p : positive) {
    const auto [lo, hi] = std::equal_range(neg.begin(), neg.end(), p);
    twice_wins += 2 * (lo - neg.begin()) + (hi - lo);
  }
  return static_cast<double>(twice_wins) /
         (2.0 * static_cast<double>(positive.size()) * static_cast<double>(negative.size()));
}

double reciprocal_rank(float positive, std::span<const float> negatives) {
  std::int64_t higher = 0, equal = 0;
  for (float n : negatives) {
    higher += n > positive;
    equal += n == positive;
  }
  return 1.0 / (1.0 + static_cast<double>(higher) + 0.5 * static_cast<double>(equal));
}

double average_precision(std::span<const float> positive, std::span<const float> negative) {
  if (positive.empty()) return 0.0;
  // (score, is positive), highest score first; each run of equal scores is one threshold.
  std::vector<std::pair<float, bool>> all;
  all.reserve(positive.size() + negative.size());
  for (float p : positive) all.emplace_back(p, true);
  for (float n : negative) all.emplace_back(n, false);
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  const double total = static_cast<double>(positive.size());
  double ap = 0, previous_recall = 0;
  std::int64_t true_pos = 0, seen = 0;
  for (std::size_t i = 0; i < all.size();) {
    std::size_t j = i;
    while (j < all.size() && all[j].first == all[i].first) {
      true_pos += all[j].second;
      ++seen;
      ++j;
    }
    const double recall = static_cast<double>(true_pos) / total;
    ap += (recall - previous_recall) * static_cast<double>(true_pos) / static_cast<double>(seen);
    previous_recall = recall;
    i = j;
  }
  return ap;
}

double hits_at_k(std::span<const float> positive, std::span<const float> negative, std::int64_t k) {
  TESSEL_EXPECTS(k >= 1, "hits@{}: K must be at least 1", k);
  if (positive.empty()) return 0.0;
  if (static_cast<std::int64_t>(negative.size()) < k) return 1.0;
  std::vector<float> neg(negative.begin(), negative.end());
  std::nth_element(neg.begin(), neg.begin() + (k - 1), neg.end(), std::greater<float>());
  const float threshold = neg[static_cast<std::size_t>(k - 1)];
  const auto hits = std::count_if(positive.begin(), positive.end(),
                                  [threshold](float p) { return p > threshold; });
  return static_cast<double>(hits) / static_cast<double>(positive.size());
}

double mean_reciprocal_rank(std::span<const float> positive, std::span<const float> negatives,
                            std::int64_t k) {
  TESSEL_EXPECTS(k >= 1 && negatives.size() == positive.size() * static_cast<std::size_t>(k),
                 "mrr: {} negatives for {} positives of {} each", negatives.size(),
                 positive.size(), k);
  if (positive.empty()) return 0.0;
  double sum = 0;
  for (std::size_t i = 0; i < positive.size(); ++i)
    sum += reciprocal_rank(positive[i], negatives.subspan(i * static_cast<std::size_t>(k),
                                                          static_cast<std::size_t>(k)));
  return sum / static_cast<double>(positive.size());
}

} // namespace tessel::nn
