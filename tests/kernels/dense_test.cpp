// Dense ops on the CPU against hand-written references: GEMM, bias, rows, ReLU, dropout,
// normalization, loss, accuracy and the optimizer updates.
#include "kernel_test_util.hpp"

#include "tessel/kernels/kernels.hpp"

#include <algorithm>
#include <numeric>
#include <set>

namespace tessel {
namespace {

float at(const Tensor& t, std::int64_t i, std::int64_t j) {
  return t.data<float>()[i * t.cols() + j];
}

TEST(Gemm, EveryTransposeWithAlphaBeta) {
  const std::int64_t m = 7, n = 5, k = 9;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const Tensor a = test::random_tensor(
          ta ? std::vector<std::int64_t>{k, m} : std::vector<std::int64_t>{m, k}, 1);
      const Tensor b = test::random_tensor(
          tb ? std::vector<std::int64_t>{n, k} : std::vector<std::int64_t>{k, n}, 2);
      Tensor c = test::random_tensor({m, n}, 3);
      const Tensor c0 = c.clone();
      kernels::gemm(a, ta, b, tb, c, 0.5f, 2.0f);
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (std::int64_t l = 0; l < k; ++l)
            s += double(ta ? at(a, l, i) : at(a, i, l)) * (tb ? at(b, j, l) : at(b, l, j));
          EXPECT_NEAR(at(c, i, j), 0.5 * s + 2.0 * at(c0, i, j), 1e-5) << ta << tb;
        }
    }
}

TEST(Gemm, BetaZeroIgnoresNanAndZeroInnerDimension) {
  const Tensor a = test::random_tensor({3, 4}, 1), b = test::random_tensor({4, 2}, 2);
  Tensor c = Tensor::empty({3, 2}, DType::f32);
  std::fill_n(c.data<float>(), 6, std::nanf(""));
  kernels::gemm(a, false, b, false, c);
  for (int i = 0; i < 6; ++i)
    EXPECT_FALSE(std::isnan(c.data<float>()[i]));
  const Tensor a0 = Tensor::empty({3, 0}, DType::f32), b0 = Tensor::empty({0, 2}, DType::f32);
  Tensor c0 = test::random_tensor({3, 2}, 4);
  const Tensor before = c0.clone();
  kernels::gemm(a0, false, b0, false, c0, 1.0f, 0.5f);
  for (int i = 0; i < 6; ++i)
    EXPECT_FLOAT_EQ(c0.data<float>()[i], 0.5f * before.data<float>()[i]);
  Tensor bad = Tensor::empty({3, 3}, DType::f32);
  EXPECT_THROW(kernels::gemm(a, false, b, false, bad), InputError);
}

TEST(Bias, AddAndColumnSums) {
  Tensor y = test::random_tensor({5000, 3}, 1); // more than one row block
  const Tensor y0 = y.clone();
  const Tensor bias = Tensor::from_vector<float>({1.0f, -2.0f, 0.5f});
  kernels::add_bias(y, bias);
  for (std::int64_t i = 0; i < 5000; ++i)
    for (int j = 0; j < 3; ++j)
      ASSERT_FLOAT_EQ(at(y, i, j), at(y0, i, j) + bias.data<float>()[j]);
  Tensor sums = Tensor::from_vector<float>({10.0f, 10.0f, 10.0f});
  kernels::column_sums(y0, sums, /*accumulate=*/true);
  for (int j = 0; j < 3; ++j) {
    double s = 10.0;
    for (std::int64_t i = 0; i < 5000; ++i)
      s += at(y0, i, j);
    EXPECT_NEAR(sums.data<float>()[j], s, 1e-3);
  }
  kernels::column_sums(y0, sums, /*accumulate=*/false);
  double s0 = 0;
  for (std::int64_t i = 0; i < 5000; ++i)
    s0 += at(y0, i, 0);
  EXPECT_NEAR(sums.data<float>()[0], s0, 1e-3);
}

TEST(Rows, GatherAndScatterAddWithRepeats) {
  const Tensor src = test::random_tensor({6, 40}, 1);
  for (DType index_type : {DType::i32, DType::i64}) {
    const std::vector<std::int64_t> idx = {5, 0, 5, 2};
    Tensor index = index_type == DType::i32 ? Tensor::from_vector<std::int32_t>({5, 0, 5, 2})
                                            : Tensor::from_vector<std::int64_t>({5, 0, 5, 2});
    Tensor packed = Tensor::empty({4, 40}, DType::f32);
    kernels::gather_rows(src, index, packed);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 40; ++j)
        ASSERT_EQ(at(packed, i, j), at(src, idx[i], j));
    Tensor out = Tensor::zeros({6, 40}, DType::f32);
    kernels::scatter_add_rows(packed, index, out);
    for (int j = 0; j < 40; ++j) {
      EXPECT_FLOAT_EQ(at(out, 5, j), 2 * at(src, 5, j));
      EXPECT_FLOAT_EQ(at(out, 0, j), at(src, 0, j));
      EXPECT_FLOAT_EQ(at(out, 1, j), 0.0f);
    }
  }
  Tensor wrong_index = Tensor::from_vector<float>({0.0f});
  Tensor out = Tensor::empty({1, 40}, DType::f32);
  EXPECT_THROW(kernels::gather_rows(src, wrong_index, out), InputError);
}

TEST(Rows, SegmentedScatterAddSumsSegmentsInOrder) {
  // Two segments that each name rows 0..n-1 in some order: every out row receives two sums,
  // always segment 0's then segment 1's, whatever the thread count (bit-exact reference).
  const std::int64_t n = 3000, f = 24;
  std::vector<std::int32_t> idx;
  for (std::int64_t i = 0; i < n; ++i)
    idx.push_back(static_cast<std::int32_t>((i * 7) % n));
  for (std::int64_t i = 0; i < n; ++i)
    idx.push_back(static_cast<std::int32_t>(n - 1 - i));
  const Tensor index = Tensor::from_vector(idx);
  const Tensor src = test::random_tensor({2 * n, f}, 3);
  const Tensor base = test::random_tensor({n, f}, 4);
  Tensor out = base.clone();
  const std::vector<std::int64_t> segments{n, n};
  kernels::scatter_add_rows_segmented(src, index, segments, out);
  std::vector<float> expected(base.data<float>(), base.data<float>() + n * f);
  for (std::int64_t i = 0; i < 2 * n; ++i)
    for (std::int64_t j = 0; j < f; ++j)
      expected[idx[i] * f + j] += at(src, i, j);
  for (std::int64_t k = 0; k < n * f; ++k)
    ASSERT_EQ(out.data<float>()[k], expected[k]) << k;
  const std::vector<std::int64_t> short_segments{n, n - 1};
  EXPECT_THROW(kernels::scatter_add_rows_segmented(src, index, short_segments, out), InputError);
}

TEST(Relu, ForwardAndBackward) {
  const Tensor x = Tensor::from_vector<float>({-1.0f, 0.0f, 2.0f, -3.0f, 4.0f, 0.5f}, {2, 3});
  Tensor y = Tensor::empty({2, 3}, DType::f32);
  kernels::relu_forward(x, y);
  const std::vector<float> expected = {0, 0, 2, 0, 4, 0.5f};
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(y.data<float>()[i], expected[i]);
  const Tensor g = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor gx = Tensor::empty({2, 3}, DType::f32);
  kernels::relu_backward(g, y, gx);
  const std::vector<float> expected_g = {0, 0, 3, 0, 5, 6};
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(gx.data<float>()[i], expected_g[i]);
}

TEST(ReluDropout, EqualsReluThenDropoutAndItsBitsGiveTheBackward) {
  const std::int64_t n = 50, f = 29; // f not a multiple of 8: the last bit byte is partial
  const rng::Key key{11, rng::Stream::dropout, 2, 0, 1};
  const Tensor x = test::random_tensor({n, f}, 7, -1.0f, 1.0f);
  std::vector<NodeId> ids(n);
  std::iota(ids.begin(), ids.end(), 300);
  for (const float p : {0.0f, 0.5f}) {
    SCOPED_TRACE(p);
    // Reference: ReLU, then dropout with a mask, then their backward passes one after another.
    Tensor relu = Tensor::empty({n, f}, DType::f32);
    kernels::relu_forward(x, relu);
    Tensor expected = relu.clone(), mask = Tensor::empty({n, f}, DType::u8);
    if (p > 0) kernels::dropout_forward(relu, ids, key, p, expected, mask);
    const Tensor g = test::random_tensor({n, f}, 8);
    Tensor expected_grad = g.clone();
    if (p > 0) kernels::dropout_backward(g, mask, p, expected_grad);
    kernels::relu_backward(expected_grad, relu, expected_grad);

    Tensor y = x.clone();
    Tensor bits = Tensor::empty({n, (f + 7) / 8}, DType::u8);
    kernels::relu_dropout_forward(y, ids, key, p, y, bits);
    Tensor grad = g.clone();
    kernels::relu_dropout_backward(grad, bits, p, grad);
    std::int64_t set = 0;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < f; ++j) {
        ASSERT_EQ(at(y, i, j), at(expected, i, j)) << i << "," << j;
        const bool bit = (bits.data<std::uint8_t>()[i * ((f + 7) / 8) + j / 8] >> (j % 8)) & 1;
        ASSERT_EQ(bit, at(y, i, j) > 0.0f) << i << "," << j;
        ASSERT_EQ(at(grad, i, j), at(expected_grad, i, j)) << i << "," << j;
        set += bit;
      }
    // About half the entries are positive, and dropout keeps about 1 - p of those.
    EXPECT_NEAR(double(set) / (n * f), 0.5 * (1 - p), 0.06);
  }
  // Dropout without a mask writes the same values as with one.
  Tensor with_mask = Tensor::empty({n, f}, DType::f32), mask = Tensor::empty({n, f}, DType::u8);
  Tensor without = Tensor::empty({n, f}, DType::f32), none;
  kernels::dropout_forward(x, ids, key, 0.3f, with_mask, mask);
  kernels::dropout_forward(x, ids, key, 0.3f, without, none);
  EXPECT_EQ(std::memcmp(with_mask.raw(), without.raw(), n * f * sizeof(float)), 0);
  Tensor short_bits = Tensor::empty({n, 3}, DType::u8);
  EXPECT_THROW(kernels::relu_dropout_forward(x, ids, key, 0.3f, without, short_bits), InputError);
}

TEST(Dropout, MaskDependsOnNodeIdNotRowOrder) {
  const std::int64_t n = 200, f = 37;
  const float p = 0.3f;
  const rng::Key key{42, rng::Stream::dropout, 3, 0, 1};
  const Tensor x = test::random_tensor({n, f}, 5, 0.5f, 1.5f); // nonzero everywhere
  std::vector<NodeId> ids(n);
  std::iota(ids.begin(), ids.end(), 1000);
  Tensor y = Tensor::empty({n, f}, DType::f32), mask = Tensor::empty({n, f}, DType::u8);
  kernels::dropout_forward(x, ids, key, p, y, mask);
  // Reverse the rows and their ids: each node's mask row must move with it.
  std::vector<NodeId> reversed(ids.rbegin(), ids.rend());
  Tensor x_rev = Tensor::empty({n, f}, DType::f32);
  for (std::int64_t i = 0; i < n; ++i)
    std::copy_n(x.data<float>() + (n - 1 - i) * f, f, x_rev.data<float>() + i * f);
  Tensor y_rev = Tensor::empty({n, f}, DType::f32), mask_rev = Tensor::empty({n, f}, DType::u8);
  kernels::dropout_forward(x_rev, reversed, key, p, y_rev, mask_rev);
  std::int64_t kept = 0;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < f; ++j) {
      const auto m = mask.data<std::uint8_t>()[i * f + j];
      ASSERT_EQ(m, mask_rev.data<std::uint8_t>()[(n - 1 - i) * f + j]);
      ASSERT_EQ(at(y, i, j), at(y_rev, n - 1 - i, j));
      ASSERT_FLOAT_EQ(at(y, i, j), m ? at(x, i, j) / (1 - p) : 0.0f);
      kept += m;
    }
  EXPECT_NEAR(double(kept) / (n * f), 1 - p, 0.03);
  // A different layer (key) gives a different mask.
  rng::Key other = key;
  other.layer = 2;
  Tensor y2 = Tensor::empty({n, f}, DType::f32), mask2 = Tensor::empty({n, f}, DType::u8);
  kernels::dropout_forward(x, ids, other, p, y2, mask2);
  EXPECT_NE(std::memcmp(mask.raw(), mask2.raw(), n * f), 0);
  // Backward with the same mask.
  const Tensor g = test::random_tensor({n, f}, 6);
  Tensor gx = Tensor::empty({n, f}, DType::f32);
  kernels::dropout_backward(g, mask, p, gx);
  for (std::int64_t i = 0; i < n * f; ++i)
    ASSERT_FLOAT_EQ(gx.data<float>()[i],
                    mask.data<std::uint8_t>()[i] ? g.data<float>()[i] / (1 - p) : 0.0f);
  EXPECT_THROW(kernels::dropout_forward(x, ids, key, 1.0f, y, mask), InputError);
  EXPECT_THROW(kernels::dropout_forward(x, std::span(ids).first(3), key, p, y, mask), InputError);
}

TEST(NormalizeRows, DividesByAbsoluteSum) {
  Tensor x = Tensor::from_vector<float>({1, 3, 0, 0, 0, 0, -1, 1, 2}, {3, 3});
  kernels::normalize_rows(x);
  const std::vector<float> expected = {0.25f, 0.75f, 0, 0, 0, 0, -0.25f, 0.25f, 0.5f};
  for (int i = 0; i < 9; ++i)
    EXPECT_FLOAT_EQ(x.data<float>()[i], expected[i]);
}

TEST(Loss, SoftmaxCrossEntropyAndAccuracyByHand) {
  // Row 0: logits (0, ln 3) -> p = (1/4, 3/4); row 2: (2, 2) -> (1/2, 1/2); row 1 unselected.
  const Tensor logits =
      Tensor::from_vector<float>({0.0f, std::log(3.0f), 5.0f, -5.0f, 2.0f, 2.0f}, {3, 2});
  const std::vector<LocalId> rows = {0, 2};
  const std::vector<std::int64_t> labels = {1, 0};
  Tensor grad = test::random_tensor({3, 2}, 1); // overwritten, zero outside the rows
  const double loss = kernels::softmax_cross_entropy(logits, rows, labels, 0.5, grad);
  EXPECT_NEAR(loss, -std::log(0.75) - std::log(0.5), 1e-6);
  const std::vector<float> expected = {0.125f, -0.125f, 0, 0, -0.25f, 0.25f};
  for (int i = 0; i < 6; ++i)
    EXPECT_NEAR(grad.data<float>()[i], expected[i], 1e-6);
  EXPECT_EQ(kernels::count_correct(logits, rows, labels), 2); // tie -> first maximum (0)
  const std::vector<std::int64_t> wrong = {0, 1};
  EXPECT_EQ(kernels::count_correct(logits, rows, wrong), 0);
  const std::vector<std::int64_t> out_of_range = {2, 0};
  EXPECT_THROW(kernels::count_correct(logits, rows, out_of_range), InputError);
}

TEST(Optim, AdamMatchesHandComputedSteps) {
  Tensor p = Tensor::from_vector<float>({1.0f, -2.0f});
  Tensor m = Tensor::zeros({2}, DType::f32), v = Tensor::zeros({2}, DType::f32);
  const Tensor g = Tensor::from_vector<float>({0.5f, 0.25f});
  kernels::AdamStep step{0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 1};
  double ref_p[2] = {1.0, -2.0}, ref_m[2] = {0, 0}, ref_v[2] = {0, 0};
  for (int t = 1; t <= 3; ++t) {
    step.step = t;
    kernels::adam_update(p, g, m, v, step);
    for (int i = 0; i < 2; ++i) {
      const double gi = g.data<float>()[i] + 0.01 * ref_p[i];
      ref_m[i] = 0.9 * ref_m[i] + 0.1 * gi;
      ref_v[i] = 0.999 * ref_v[i] + 0.001 * gi * gi;
      const double mh = ref_m[i] / (1 - std::pow(0.9, t)), vh = ref_v[i] / (1 - std::pow(0.999, t));
      ref_p[i] -= 0.1 * mh / (std::sqrt(vh) + 1e-8);
      EXPECT_NEAR(p.data<float>()[i], ref_p[i], 1e-5) << "step " << t;
    }
  }
}

TEST(Optim, SgdWithMomentumAndWeightDecay) {
  Tensor p = Tensor::from_vector<float>({1.0f});
  Tensor buf = Tensor::zeros({1}, DType::f32);
  const Tensor g = Tensor::from_vector<float>({2.0f});
  // Step 1: g' = 2 + 0.1 * 1 = 2.1, buf = 2.1, p = 1 - 0.5 * 2.1 = -0.05.
  kernels::sgd_update(p, g, buf, 0.5f, 0.9f, 0.1f);
  EXPECT_NEAR(p.data<float>()[0], -0.05, 1e-6);
  // Step 2: g' = 2 - 0.005 = 1.995, buf = 0.9 * 2.1 + 1.995 = 3.885, p = -0.05 - 1.9425.
  kernels::sgd_update(p, g, buf, 0.5f, 0.9f, 0.1f);
  EXPECT_NEAR(p.data<float>()[0], -1.9925, 1e-5);
  Tensor plain = Tensor::from_vector<float>({1.0f});
  Tensor none;
  kernels::sgd_update(plain, g, none, 0.5f, 0.0f, 0.0f);
  EXPECT_FLOAT_EQ(plain.data<float>()[0], 0.0f);
}

} // namespace
} // namespace tessel
