// SIGN MLP: finite-difference gradient checks of the per-hop maps and the MLP blocks (dropout
// on), masks keyed by (node, block), and blocks that chain like the whole model.
#include "nn_test_util.hpp"

#include "tessel/nn/loss.hpp"
#include "tessel/nn/sign_mlp.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

namespace tessel {
namespace {

nn::SignMlpConfig small_config(int hops, float dropout) {
  nn::SignMlpConfig c;
  c.hops = hops;
  c.feature_dim = 3;
  c.hidden = 4;
  c.out_dim = 3;
  c.mlp_layers = 3;
  c.dropout = dropout;
  c.seed = 7;
  return c;
}

const rng::Key kDropoutKey{11, rng::Stream::dropout, 2, 5, 0};

// Biases start at zero: a row whose inputs dropout zeroes entirely would then sit exactly on a
// ReLU kink, where the finite difference sees half a slope. Non-zero biases move it off.
void randomize_biases(nn::SignMlp& model) {
  std::uint32_t seed = 50;
  for (nn::Parameter* p : model.parameters())
    if (p->name.ends_with(".bias"))
      p->value.copy_from(test::random_tensor(p->value.shape(), seed++, 0.1f, 0.4f));
}
constexpr double kStep = 1e-3;

TEST(SignMlp, EveryBlockPassesAFiniteDifferenceCheck) {
  for (int hops : {0, 2})
    for (float dropout : {0.0f, 0.3f}) {
      nn::SignMlp model(small_config(hops, dropout));
      randomize_biases(model);
      const std::vector<NodeId> ids = {4, 9, 1, 30, 2};
      for (int b = 0; b < model.num_blocks(); ++b) {
        SCOPED_TRACE("hops " + std::to_string(hops) + " dropout " + std::to_string(dropout) +
                     " block " + std::to_string(b));
        // Inputs away from ReLU kinks: the finite difference must not cross one.
        Tensor x = test::random_tensor({5, model.block_in_dim(b)}, 10 + b, 0.2f, 1.0f);
        const Tensor r = test::random_tensor({5, model.block_out_dim(b)}, 20 + b);
        model.zero_grad(0, model.num_blocks());
        nn::SignMlp::Saved saved;
        (void)model.forward(b, x, ids, kDropoutKey, true, saved);
        const Tensor grad_x = model.backward(b, r, saved, true);
        auto loss = [&] {
          nn::SignMlp::Saved s;
          return test::weighted_sum(model.forward(b, x, ids, kDropoutKey, true, s), r);
        };
        // A small step: ReLU kinks near an output would otherwise fall inside the difference.
        for (nn::Parameter* p : model.parameters(b))
          test::expect_gradient(p->name, p->value, p->grad.clone(), loss, kStep);
        test::expect_gradient("input", x, grad_x, loss, kStep);
        EXPECT_FALSE(model.backward(b, r, saved, false).defined());
      }
    }
}

TEST(SignMlp, WholeModelWithLossPassesAFiniteDifferenceCheck) {
  nn::SignMlp model(small_config(1, 0.2f));
  randomize_biases(model);
  const std::vector<NodeId> ids = {0, 1, 2, 3};
  const std::vector<LocalId> rows = {0, 1, 2, 3};
  const std::vector<std::int64_t> labels = {0, 2, 1, 2};
  Tensor x = test::random_tensor({4, model.block_in_dim(0)}, 3, 0.0f, 1.0f);
  auto run = [&](std::vector<nn::SignMlp::Saved>& saved) {
    Tensor h = x;
    for (int b = 0; b < model.num_blocks(); ++b)
      h = model.forward(b, h, ids, kDropoutKey, true, saved[b]);
    return h;
  };
  std::vector<nn::SignMlp::Saved> saved(model.num_blocks());
  model.zero_grad(0, model.num_blocks());
  const Tensor logits = run(saved);
  const auto loss = nn::softmax_cross_entropy(logits, rows, labels, 0.25);
  Tensor g = loss.grad;
  for (int b = model.num_blocks() - 1; b >= 0; --b)
    g = model.backward(b, g, saved[b], b > 0);
  auto objective = [&] {
    std::vector<nn::SignMlp::Saved> s(model.num_blocks());
    return 0.25 * nn::softmax_cross_entropy(run(s), rows, labels, 0.25).loss_sum;
  };
  for (nn::Parameter* p : model.parameters())
    test::expect_gradient(p->name, p->value, p->grad.clone(), objective, kStep);
}

TEST(SignMlp, DropoutMasksDependOnNodeAndBlockNotOnBatchComposition) {
  nn::SignMlp model(small_config(1, 0.5f));
  const Tensor x = test::random_tensor({4, model.block_in_dim(0)}, 3, 0.5f, 1.0f);
  const std::vector<NodeId> ids = {10, 11, 12, 13};
  nn::SignMlp::Saved whole, half;
  const Tensor y = model.forward(0, x, ids, kDropoutKey, true, whole);
  // Rows 2..3 alone draw the same dropout masks as inside the batch of four, bit for bit (the
  // mask is a function of node id, block and key).
  const Tensor tail = x.rows_slice(2, 4).clone();
  const Tensor y_tail = model.forward(0, tail, std::span(ids).subspan(2), kDropoutKey, true, half);
  ASSERT_EQ(half.mask.numel() * 2, whole.mask.numel());
  EXPECT_EQ(std::memcmp(half.mask.data<std::uint8_t>(),
                        whole.mask.data<std::uint8_t>() + 2 * whole.mask.cols(),
                        static_cast<std::size_t>(half.mask.numel())),
            0);
  // Their outputs agree within rounding, not bit for bit: the CPU GEMM (oneDNN) may block the
  // K-term dot products differently for 2 rows than for 4 (it does on AVX2), so each output
  // may differ by a few ulps per accumulation step. Inputs and weights are O(1) and K is small,
  // so K * eps relative to the output's magnitude (plus one) bounds the difference.
  const double k = static_cast<double>(model.block_in_dim(0));
  for (std::int64_t i = 0; i < y_tail.numel(); ++i) {
    const double want = y.data<float>()[2 * y.cols() + i];
    EXPECT_NEAR(y_tail.data<float>()[i], want,
                4.0 * k * std::numeric_limits<float>::epsilon() * (1.0 + std::abs(want)));
  }
  // The same key draws the same mask again; another block (below) draws another.
  rng::Key other = kDropoutKey;
  nn::SignMlp::Saved again;
  (void)model.forward(0, x, ids, other, true, again);
  EXPECT_EQ(std::memcmp(again.mask.data<std::uint8_t>(), whole.mask.data<std::uint8_t>(),
                        static_cast<std::size_t>(whole.mask.numel())),
            0);
  const Tensor h = test::random_tensor({4, model.block_in_dim(1)}, 4, 0.5f, 1.0f);
  nn::SignMlp::Saved b1;
  (void)model.forward(1, h, ids, kDropoutKey, true, b1);
  const Tensor b0_mask_cols = whole.mask;
  std::int64_t differ = 0;
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = 0; j < std::min(b1.mask.cols(), b0_mask_cols.cols()); ++j)
      differ += b1.mask.data<std::uint8_t>()[i * b1.mask.cols() + j] !=
                b0_mask_cols.data<std::uint8_t>()[i * b0_mask_cols.cols() + j];
  EXPECT_GT(differ, 0);
}

TEST(SignMlp, RejectsBadConfigurationsAndShapes) {
  auto c = small_config(2, 0.0f);
  c.mlp_layers = 0;
  EXPECT_THROW(nn::SignMlp{c}, InputError);
  nn::SignMlp model(small_config(2, 0.0f));
  nn::SignMlp::Saved saved;
  const std::vector<NodeId> ids = {0, 1};
  EXPECT_THROW(model.forward(0, Tensor::zeros({2, 5}, DType::f32), ids, kDropoutKey, false, saved),
               InputError);
  EXPECT_EQ(model.block_in_dim(0), 9);
  EXPECT_EQ(model.block_out_dim(0), 12);
  EXPECT_EQ(model.block_in_dim(1), 12);
  EXPECT_EQ(model.block_out_dim(3), 3);
}

} // namespace
} // namespace tessel
