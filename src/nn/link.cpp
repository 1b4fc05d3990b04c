// The Hadamard link scoring head with its backward pass, binary cross-entropy with logits, and
// exact AUC and reciprocal rank. Host code: dynamic mode, their only user, runs on the CPU.
#include "tessel/nn/link.hpp"

#include "tessel/core/error.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace tessel::nn {

namespace {

void check_head(const Tensor& z, std::span<const LocalId> src, std::span<const LocalId> dst,
                const Tensor& w) {
  TESSEL_EXPECTS(z.device().is_cpu() && z.dtype() == DType::f32 && z.shape().size() == 2,
                 "link_scores: z must be a f32 [rows, H] tensor on the CPU");
  TESSEL_EXPECTS(src.size() == dst.size(), "link_scores: {} sources for {} destinations",
                 src.size(), dst.size());
  TESSEL_EXPECTS(w.numel() == z.cols(), "link_scores: w has {} entries for H = {}", w.numel(),
                 z.cols());
}

} // namespace

Tensor link_scores(const Tensor& z, std::span<const LocalId> src, std::span<const LocalId> dst,
                   const Tensor& w, const Tensor& b) {
  check_head(z, src, dst, w);
  const std::int64_t H = z.cols(), n = static_cast<std::int64_t>(src.size());
  Tensor scores = Tensor::empty({n}, DType::f32);
  const float* pz = z.data<float>();
  const float* pw = w.data<float>();
  const float bias = b.data<float>()[0];
  float* out = scores.data<float>();
#pragma omp parallel for schedule(static) if (n > 4096)
  for (std::int64_t j = 0; j < n; ++j) {
    const float* a = pz + static_cast<std::int64_t>(src[j]) * H;
    const float* c = pz + static_cast<std::int64_t>(dst[j]) * H;
    float s = 0;
    for (std::int64_t k = 0; k < H; ++k)
      s += pw[k] * a[k] * c[k];
    out[j] = s + bias;
  }
  return scores;
}

void link_scores_backward(const Tensor& z, std::span<const LocalId> src,
                          std::span<const LocalId> dst, const Tensor& w, const Tensor& grad_scores,
                          Tensor& grad_z, Tensor& grad_w, Tensor& grad_b) {
  check_head(z, src, dst, w);
  TESSEL_EXPECTS(grad_scores.numel() == static_cast<std::int64_t>(src.size()) &&
                     grad_z.shape() == z.shape() && grad_w.numel() == w.numel(),
                 "link_scores_backward: shapes do not match the forward pass");
  const std::int64_t H = z.cols(), n = static_cast<std::int64_t>(src.size()), rows = z.rows();
  const float* pz = z.data<float>();
  const float* pw = w.data<float>();
  const float* g = grad_scores.data<float>();
  float* gz = grad_z.data<float>();
  // Rows of grad_z: pairs share rows in any pattern, so each thread owns a range of rows and
  // walks all pairs, adding only into its rows. A row then receives its terms in pair order (the
  // source's before the destination's within a pair), exactly as one thread adding pair after
  // pair would: the same floats at any thread count.
  const bool parallel = n > 4096 && rows > 1;
#pragma omp parallel if (parallel)
  {
    const std::int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const std::int64_t row_begin = rows * t / threads, row_end = rows * (t + 1) / threads;
    for (std::int64_t j = 0; j < n; ++j) {
      const float gj = g[j];
      if (gj == 0.0f) continue;
      const std::int64_t u = src[j], v = dst[j];
      const bool mine_u = u >= row_begin && u < row_end, mine_v = v >= row_begin && v < row_end;
      if (!mine_u && !mine_v) continue;
      const float* a = pz + u * H;
      const float* c = pz + v * H;
      if (mine_u) {
        float* ga = gz + u * H;
        for (std::int64_t k = 0; k < H; ++k) ga[k] += gj * pw[k] * c[k];
      }
      if (mine_v) {
        float* gc = gz + v * H;
        for (std::int64_t k = 0; k < H; ++k) gc[k] += gj * pw[k] * a[k];
      }
    }
  }
  // grad_w and grad_b: double sums over fixed blocks of pairs, then over the blocks in order, so
  // the rounding does not depend on the thread count either.
  constexpr std::int64_t kBlock = 4096;
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(static_cast<std::size_t>(blocks * (H + 1)), 0.0);
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t b = 0; b < blocks; ++b) {
    double* gw = partial.data() + b * (H + 1);
    for (std::int64_t j = b * kBlock; j < std::min(n, (b + 1) * kBlock); ++j) {
      const float gj = g[j];
      if (gj == 0.0f) continue;
      const float* a = pz + static_cast<std::int64_t>(src[j]) * H;
      const float* c = pz + static_cast<std::int64_t>(dst[j]) * H;
      for (std::int64_t k = 0; k < H; ++k) gw[k] += static_cast<double>(gj) * a[k] * c[k];
      gw[H] += gj;
    }
  }
  std::vector<double> sum(static_cast<std::size_t>(H + 1), 0.0);
  for (std::int64_t b = 0; b < blocks; ++b)
    for (std::int64_t k = 0; k <= H; ++k) sum[k] += partial[b * (H + 1) + k];
  for (std::int64_t k = 0; k < H; ++k)
    grad_w.data<float>()[k] += static_cast<float>(sum[k]);
  grad_b.data<float>()[0] += static_cast<float>(sum[H]);
}

double binary_cross_entropy_sum(const Tensor& scores, std::span<const float> labels, double scale,
                                Tensor* grad) {
  TESSEL_EXPECTS(scores.numel() == static_cast<std::int64_t>(labels.size()),
                 "binary_cross_entropy: {} scores for {} labels", scores.numel(), labels.size());
  const std::int64_t n = scores.numel();
  const float* s = scores.data<float>();
  float* g = grad ? grad->data<float>() : nullptr;
  double sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static) if (n > 4096)
  for (std::int64_t j = 0; j < n; ++j) {
    const double x = s[j], y = labels[j];
    // softplus(x) = max(x, 0) + log1p(exp(-|x|)): no overflow for large |x|.
    sum += std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))) - y * x;
    if (g) {
      const double sigmoid =
          x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
      g[j] = static_cast<float>(scale * (sigmoid - y));
    }
  }
  return sum;
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

} // namespace tessel::nn
