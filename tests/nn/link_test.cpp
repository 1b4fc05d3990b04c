// Link prediction pieces: AUC and reciprocal rank on hand-computed cases, binary cross-entropy
// against its formula, a finite-difference gradient check of the scoring head under it, and its
// parallel backward giving the same floats at every thread count.
#include "nn_test_util.hpp"

#include "tessel/core/error.hpp"
#include "tessel/nn/link.hpp"
#include "tessel/nn/link_decoder.hpp"

#include <omp.h>

#include <cstring>
#include <limits>

namespace tessel {
namespace {

TEST(LinkMetrics, AucOfHandComputedRankings) {
  const std::vector<float> pos = {0.9f, 0.8f, 0.7f}, neg = {0.1f, 0.2f, 0.3f, 0.4f};
  EXPECT_DOUBLE_EQ(nn::roc_auc(pos, neg), 1.0); // every positive above every negative
  EXPECT_DOUBLE_EQ(nn::roc_auc(neg, pos), 0.0); // reversed
  const std::vector<float> same = {0.5f, 0.5f};
  EXPECT_DOUBLE_EQ(nn::roc_auc(same, same), 0.5); // all ties
  // pos {3, 1}, neg {2, 1, 0}: wins of 3: 3; of 1: one win (0), one tie (1): 1.5; 4.5 / 6.
  const std::vector<float> p2 = {3.0f, 1.0f}, n2 = {2.0f, 1.0f, 0.0f};
  EXPECT_DOUBLE_EQ(nn::roc_auc(p2, n2), 0.75);
  // Order of the inputs does not matter.
  const std::vector<float> p3 = {1.0f, 3.0f}, n3 = {0.0f, 2.0f, 1.0f};
  EXPECT_DOUBLE_EQ(nn::roc_auc(p3, n3), 0.75);
  EXPECT_DOUBLE_EQ(nn::roc_auc({}, n2), 0.5);
}

TEST(LinkMetrics, ReciprocalRankByHand) {
  const std::vector<float> neg = {0.1f, 0.5f, 0.9f};
  EXPECT_DOUBLE_EQ(nn::reciprocal_rank(1.0f, neg), 1.0);       // rank 1
  EXPECT_DOUBLE_EQ(nn::reciprocal_rank(0.6f, neg), 0.5);       // rank 2
  EXPECT_DOUBLE_EQ(nn::reciprocal_rank(0.0f, neg), 0.25);      // rank 4
  EXPECT_DOUBLE_EQ(nn::reciprocal_rank(0.5f, neg), 1.0 / 2.5); // one above, one tie: 2.5
  // MRR of three positives with these negatives: (1 + 1/2 + 1/4) / 3.
  const double mrr = (nn::reciprocal_rank(1.0f, neg) + nn::reciprocal_rank(0.6f, neg) +
                      nn::reciprocal_rank(0.0f, neg)) /
                     3.0;
  EXPECT_DOUBLE_EQ(mrr, 1.75 / 3.0);
}

// OGB's evaluators and scikit-learn's average precision, against values worked out by hand.
TEST(LinkMetrics, AveragePrecisionByHand) {
  // Ranked: 0.9 P, 0.8 N, 0.6 P, 0.4 N, 0.3 P: 1/3 * 1 + 1/3 * 2/3 + 1/3 * 3/5 = 34/45.
  const std::vector<float> pos = {0.9f, 0.6f, 0.3f}, neg = {0.8f, 0.4f};
  EXPECT_NEAR(nn::average_precision(pos, neg), 34.0 / 45.0, 1e-12);
  // A tie is one threshold: recall 1 at precision 1/2.
  const std::vector<float> one = {0.5f};
  EXPECT_DOUBLE_EQ(nn::average_precision(one, one), 0.5);
  EXPECT_DOUBLE_EQ(nn::average_precision(pos, {}), 1.0);
  EXPECT_DOUBLE_EQ(nn::average_precision({}, neg), 0.0);
}

TEST(LinkMetrics, HitsAtKByHand) {
  const std::vector<float> pos = {0.9f, 0.55f, 0.2f}, neg = {0.8f, 0.6f, 0.1f, 0.5f};
  EXPECT_DOUBLE_EQ(nn::hits_at_k(pos, neg, 1), 1.0 / 3.0);  // above 0.8
  EXPECT_DOUBLE_EQ(nn::hits_at_k(pos, neg, 2), 1.0 / 3.0);  // above 0.6
  EXPECT_DOUBLE_EQ(nn::hits_at_k(pos, neg, 3), 2.0 / 3.0);  // above 0.5
  EXPECT_DOUBLE_EQ(nn::hits_at_k(pos, neg, 4), 1.0);        // above 0.1
  EXPECT_DOUBLE_EQ(nn::hits_at_k(pos, neg, 5), 1.0);        // fewer negatives than K
  // Strictly above: a positive equal to the threshold is no hit.
  const std::vector<float> tie = {0.6f};
  EXPECT_DOUBLE_EQ(nn::hits_at_k(tie, neg, 2), 0.0);
}

TEST(LinkMetrics, MeanReciprocalRankByHand) {
  // Positive 0.5 among {0.7, 0.5}: rank 1 + 1 + 1/2 = 2.5; positive 0.9 among {0.1, 0.2}: 1.
  const std::vector<float> pos = {0.5f, 0.9f}, neg = {0.7f, 0.5f, 0.1f, 0.2f};
  EXPECT_DOUBLE_EQ(nn::mean_reciprocal_rank(pos, neg, 2), (0.4 + 1.0) / 2.0);
  EXPECT_THROW((void)nn::mean_reciprocal_rank(pos, neg, 3), InputError);
}

TEST(LinkHead, BinaryCrossEntropyMatchesItsFormulaAndStaysFinite) {
  Tensor s = Tensor::from_vector(std::vector<float>{0.0f, 2.0f, -1.0f, 200.0f, -200.0f}, {5});
  const std::vector<float> y = {1, 0, 1, 1, 0};
  Tensor g = Tensor::empty({5}, DType::f32);
  const double sum = nn::binary_cross_entropy_sum(s, y, 0.5, &g);
  auto sp = [](double x) { return std::log1p(std::exp(x)); };
  // softplus(s) - y s: log 2, softplus(2), softplus(-1) + 1, ~0, ~0.
  EXPECT_NEAR(sum, std::log(2.0) + sp(2.0) + sp(-1.0) + 1.0, 1e-9);
  EXPECT_FLOAT_EQ(g.data<float>()[0], 0.5f * (0.5f - 1.0f));
  EXPECT_NEAR(g.data<float>()[1], 0.5 / (1.0 + std::exp(-2.0)), 1e-7);
  EXPECT_NEAR(g.data<float>()[3], 0.0, 1e-7);
  EXPECT_NEAR(g.data<float>()[4], 0.0, 1e-7);
}

// Central differences of sum BCE(score(z, w, b)) against link_scores_backward, with a row used
// as both endpoint of one pair and in several pairs (the gradient must accumulate).
TEST(LinkHead, ScoringHeadGradientMatchesFiniteDifferences) {
  Tensor z = test::random_tensor({5, 4}, 1);
  Tensor w = test::random_tensor({4, 1}, 2);
  Tensor b = Tensor::from_vector(std::vector<float>{0.3f}, {1});
  const std::vector<LocalId> src = {0, 1, 2, 3, 4, 2, 0};
  const std::vector<LocalId> dst = {1, 2, 3, 4, 0, 2, 3};
  const std::vector<float> y = {1, 0, 1, 0, 1, 0, 1};
  const double scale = 1.0 / 7.0;
  auto loss = [&] {
    return scale *
           nn::binary_cross_entropy_sum(nn::link_scores(z, src, dst, w, b), y, 1.0, nullptr);
  };
  Tensor scores = nn::link_scores(z, src, dst, w, b);
  // The score is the formula of the header.
  double expect0 = 0.3;
  for (int k = 0; k < 4; ++k)
    expect0 += w.data<float>()[k] * z.data<float>()[0 * 4 + k] * z.data<float>()[1 * 4 + k];
  EXPECT_NEAR(scores.data<float>()[0], expect0, 1e-6);
  Tensor grad_s = Tensor::empty({7}, DType::f32);
  nn::binary_cross_entropy_sum(scores, y, scale, &grad_s);
  Tensor gz = Tensor::zeros(z.shape(), DType::f32), gw = Tensor::zeros(w.shape(), DType::f32),
         gb = Tensor::zeros({1}, DType::f32);
  nn::link_scores_backward(z, src, dst, w, grad_s, gz, gw, gb);
  test::expect_gradient("z", z, gz, loss, 1e-2, 1e-2, 1e-4);
  test::expect_gradient("w", w, gw, loss, 1e-2, 1e-2, 1e-4);
  test::expect_gradient("b", b, gb, loss, 1e-2, 1e-2, 1e-4);
}

// The backward pass scatters into rows that many pairs share: at 1, 2, 3 and 4 threads it gives
// the same bits, and the sums of adding pair after pair on one thread.
TEST(LinkHead, ScoringHeadBackwardIsTheSameAtEveryThreadCount) {
  const std::int64_t rows = 301, H = 7, n = 20011;
  Tensor z = test::random_tensor({rows, H}, 3);
  Tensor w = test::random_tensor({H, 1}, 4);
  Tensor g = test::random_tensor({n}, 5);
  std::vector<LocalId> src(n), dst(n);
  for (std::int64_t j = 0; j < n; ++j) {
    // Skewed rows (row 0 is in a fifth of the pairs), some self pairs, some zero gradients.
    src[j] = static_cast<LocalId>(j % 5 == 0 ? 0 : (j * 7919) % rows);
    dst[j] = static_cast<LocalId>(j % 11 == 0 ? src[j] : (j * 104729 + 13) % rows);
    if (j % 13 == 0) g.data<float>()[j] = 0.0f;
  }
  // One thread adding pair after pair: the order the parallel pass must keep per row.
  std::vector<float> expect_z(static_cast<std::size_t>(rows * H), 0.0f);
  double expect_w0 = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    const float gj = g.data<float>()[j];
    if (gj == 0.0f) continue;
    const float* a = z.data<float>() + src[j] * H;
    const float* c = z.data<float>() + dst[j] * H;
    const float* pw = w.data<float>();
    for (std::int64_t k = 0; k < H; ++k) {
      expect_z[src[j] * H + k] += gj * pw[k] * c[k];
      expect_z[dst[j] * H + k] += gj * pw[k] * a[k];
    }
    expect_w0 += static_cast<double>(gj) * a[0] * c[0];
  }
  const int saved_threads = omp_get_max_threads();
  std::vector<Tensor> results;
  for (int threads : {1, 2, 3, 4}) {
    omp_set_num_threads(threads);
    Tensor gz = Tensor::zeros(z.shape(), DType::f32), gw = Tensor::zeros(w.shape(), DType::f32),
           gb = Tensor::zeros({1}, DType::f32);
    nn::link_scores_backward(z, src, dst, w, g, gz, gw, gb);
    for (std::int64_t i = 0; i < rows * H; ++i)
      ASSERT_NEAR(gz.data<float>()[i], expect_z[i], 1e-4 * (1.0 + std::fabs(expect_z[i])))
          << threads << " threads, entry " << i;
    EXPECT_NEAR(gw.data<float>()[0], expect_w0, 1e-5 * std::fabs(expect_w0)) << threads;
    if (!results.empty()) {
      EXPECT_EQ(std::memcmp(gz.data<float>(), results[0].data<float>(), gz.nbytes()), 0)
          << threads << " threads";
      EXPECT_EQ(std::memcmp(gw.data<float>(), results[1].data<float>(), gw.nbytes()), 0)
          << threads << " threads";
      EXPECT_EQ(gb.data<float>()[0], results[2].data<float>()[0]) << threads << " threads";
    } else {
      results = {gz, gw, gb};
    }
  }
  omp_set_num_threads(saved_threads);
}

} // namespace
} // namespace tessel

namespace tessel {
namespace {

// The MLP decoder: central differences of sum BCE(decoder(z)) against its backward pass, for
// the embeddings (a row shared by several pairs and a self pair) and each of its parameters.
TEST(LinkDecoder, MlpGradientMatchesFiniteDifferences) {
  const std::int64_t H = 4;
  Tensor z = test::random_tensor({5, H}, 11);
  nn::LinkDecoder decoder(nn::LinkDecoderKind::mlp, H, 7);
  ASSERT_EQ(decoder.parameters().size(), 4u);
  // Non-zero biases, so the gradient check covers them away from their initial zeros.
  for (nn::Parameter* p : decoder.parameters())
    if (p->name.ends_with(".bias"))
      for (std::int64_t i = 0; i < p->value.numel(); ++i)
        p->value.data<float>()[i] = 0.1f * static_cast<float>(i + 1);
  const std::vector<LocalId> src = {0, 1, 2, 3, 4, 2, 0};
  const std::vector<LocalId> dst = {1, 2, 3, 4, 0, 2, 3};
  const std::vector<float> y = {1, 0, 1, 0, 1, 0, 1};
  const double scale = 1.0 / 7.0;
  auto loss = [&] {
    return scale * nn::binary_cross_entropy_sum(decoder.forward(z, src, dst), y, 1.0, nullptr);
  };
  // The score is W2 relu(W1 (z_s * z_d) + b1) + b2, by hand for pair 0.
  const auto params = decoder.parameters();
  const float *w1 = params[0]->value.data<float>(), *b1 = params[1]->value.data<float>();
  const float *w2 = params[2]->value.data<float>(), *b2 = params[3]->value.data<float>();
  double expect0 = b2[0];
  for (std::int64_t o = 0; o < H; ++o) {
    double pre = b1[o];
    for (std::int64_t k = 0; k < H; ++k)
      pre += static_cast<double>(z.data<float>()[k]) * z.data<float>()[H + k] * w1[k * H + o];
    expect0 += std::max(pre, 0.0) * w2[o];
  }
  Tensor scores = decoder.forward(z, src, dst);
  EXPECT_NEAR(scores.data<float>()[0], expect0, 1e-5);
  // Symmetric in the two endpoints.
  EXPECT_FLOAT_EQ(decoder.forward(z, dst, src).data<float>()[3], scores.data<float>()[3]);
  scores = decoder.forward(z, src, dst);
  Tensor grad_s = Tensor::empty({7}, DType::f32);
  nn::binary_cross_entropy_sum(scores, y, scale, &grad_s);
  decoder.zero_grad();
  Tensor gz = Tensor::zeros(z.shape(), DType::f32);
  decoder.backward(grad_s, gz);
  std::vector<Tensor> grads;
  for (nn::Parameter* p : params) grads.push_back(p->grad.clone());
  test::expect_gradient("z", z, gz, loss, 1e-3, 1e-2, 1e-4);
  for (std::size_t i = 0; i < params.size(); ++i)
    test::expect_gradient(params[i]->name, params[i]->value, grads[i], loss, 1e-3, 1e-2, 1e-4);
}

// The dot decoder is the inner product, and its backward pass that of link_scores with w = 1.
TEST(LinkDecoder, DotIsTheInnerProductWithoutParameters) {
  Tensor z = test::random_tensor({4, 3}, 12);
  nn::LinkDecoder decoder(nn::LinkDecoderKind::dot, 3, 7);
  EXPECT_TRUE(decoder.parameters().empty());
  const std::vector<LocalId> src = {0, 3}, dst = {2, 3};
  const Tensor s = decoder.forward(z, src, dst);
  for (int j = 0; j < 2; ++j) {
    double expect = 0;
    for (int k = 0; k < 3; ++k)
      expect += static_cast<double>(z.data<float>()[src[j] * 3 + k]) * z.data<float>()[dst[j] * 3 + k];
    EXPECT_NEAR(s.data<float>()[j], expect, 1e-6);
  }
  Tensor gz = Tensor::zeros(z.shape(), DType::f32);
  decoder.backward(Tensor::from_vector(std::vector<float>{1.0f, 0.5f}, {2}), gz);
  // d <z0, z2> / d z0 = z2; row 3 is both endpoints of the second pair: 2 * 0.5 * z3.
  for (int k = 0; k < 3; ++k) {
    EXPECT_FLOAT_EQ(gz.data<float>()[k], z.data<float>()[2 * 3 + k]);
    EXPECT_FLOAT_EQ(gz.data<float>()[3 * 3 + k], z.data<float>()[3 * 3 + k]);
  }
}

// The same seed gives the same decoder (every rank builds its own); another seed another one.
TEST(LinkDecoder, MlpInitialValuesDependOnTheSeedOnly) {
  nn::LinkDecoder a(nn::LinkDecoderKind::mlp, 6, 3), b(nn::LinkDecoderKind::mlp, 6, 3),
      c(nn::LinkDecoderKind::mlp, 6, 4);
  const auto pa = a.parameters(), pb = b.parameters(), pc = c.parameters();
  EXPECT_EQ(pa[0]->name, "decoder.0.weight");
  EXPECT_EQ(pa[3]->name, "decoder.1.bias");
  EXPECT_EQ(pa[2]->value.shape(), (std::vector<std::int64_t>{6, 1}));
  EXPECT_EQ(std::memcmp(pa[0]->value.data<float>(), pb[0]->value.data<float>(), 36 * sizeof(float)), 0);
  EXPECT_NE(std::memcmp(pa[0]->value.data<float>(), pc[0]->value.data<float>(), 36 * sizeof(float)), 0);
}

}  // namespace
}  // namespace tessel
