// Finite-difference gradient checks of the GRU and LSTM cells over short sequences, and of an
// LSTM used as EvolveGCN's weight recurrence (the state is the input of the next step).
#include "nn_test_util.hpp"

#include "tessel/nn/recurrent.hpp"

namespace tessel {
namespace {

const rng::Key kKey{7, rng::Stream::init, 0, 0, 0};
constexpr int kSteps = 3;

void zero(const std::vector<nn::Parameter*>& params) {
  for (nn::Parameter* p : params) p->grad.fill_zero();
}

TEST(RecurrentGradient, GruSequence) {
  nn::GruCell cell("gru", 3, 4, kKey);
  std::vector<Tensor> xs, rs;
  for (int t = 0; t < kSteps; ++t) {
    xs.push_back(test::random_tensor({5, 3}, 10 + t));
    rs.push_back(test::random_tensor({5, 4}, 20 + t));
  }
  Tensor h0 = test::random_tensor({5, 4}, 30, -0.5f, 0.5f);
  auto loss = [&] {
    double s = 0;
    Tensor h = h0;
    for (int t = 0; t < kSteps; ++t) {
      h = cell.forward(xs[t], h);
      s += test::weighted_sum(h, rs[t]);
    }
    cell.clear();
    return s;
  };
  zero(cell.parameters());
  Tensor h = h0;
  for (int t = 0; t < kSteps; ++t) h = cell.forward(xs[t], h);
  Tensor carry = Tensor::zeros({5, 4}, DType::f32);
  std::vector<Tensor> grad_x(kSteps);
  for (int t = kSteps - 1; t >= 0; --t) {
    Tensor g = rs[t].clone();
    for (std::int64_t i = 0; i < g.numel(); ++i) g.data<float>()[i] += carry.data<float>()[i];
    auto [dx, dh] = cell.backward(g, true);
    grad_x[t] = dx;
    carry = dh;
  }
  for (nn::Parameter* p : cell.parameters())
    test::expect_gradient(p->name, p->value, p->grad.clone(), loss);
  for (int t = 0; t < kSteps; ++t) test::expect_gradient("x", xs[t], grad_x[t], loss);
  test::expect_gradient("h0", h0, carry, loss);
}

TEST(RecurrentGradient, LstmSequence) {
  nn::LstmCell cell("lstm", 3, 4, kKey);
  std::vector<Tensor> xs, rh, rc;
  for (int t = 0; t < kSteps; ++t) {
    xs.push_back(test::random_tensor({5, 3}, 10 + t));
    rh.push_back(test::random_tensor({5, 4}, 20 + t));
  }
  // The loss also reads the last cell state, so its gradient path is checked directly.
  const Tensor rc_last = test::random_tensor({5, 4}, 40);
  Tensor h0 = test::random_tensor({5, 4}, 30, -0.5f, 0.5f);
  Tensor c0 = test::random_tensor({5, 4}, 31, -0.5f, 0.5f);
  auto loss = [&] {
    double s = 0;
    nn::LstmCell::State st{h0, c0};
    for (int t = 0; t < kSteps; ++t) {
      st = cell.forward(xs[t], st);
      s += test::weighted_sum(st.h, rh[t]);
    }
    s += test::weighted_sum(st.c, rc_last);
    cell.clear();
    return s;
  };
  zero(cell.parameters());
  nn::LstmCell::State st{h0, c0};
  for (int t = 0; t < kSteps; ++t) st = cell.forward(xs[t], st);
  nn::LstmCell::State carry{Tensor::zeros({5, 4}, DType::f32), rc_last.clone()};
  std::vector<Tensor> grad_x(kSteps);
  for (int t = kSteps - 1; t >= 0; --t) {
    Tensor g = rh[t].clone();
    for (std::int64_t i = 0; i < g.numel(); ++i) g.data<float>()[i] += carry.h.data<float>()[i];
    auto [dx, dprev] = cell.backward({g, carry.c}, true);
    grad_x[t] = dx;
    carry = dprev;
  }
  for (nn::Parameter* p : cell.parameters())
    test::expect_gradient(p->name, p->value, p->grad.clone(), loss);
  for (int t = 0; t < kSteps; ++t) test::expect_gradient("x", xs[t], grad_x[t], loss);
  test::expect_gradient("h0", h0, carry.h, loss);
  test::expect_gradient("c0", c0, carry.c, loss);
}

// EvolveGCN-O: W_t = LSTM(input W_{t-1}, state (W_{t-1}, c_{t-1})), W_0 a parameter.
TEST(RecurrentGradient, EvolveGcnWeightRecurrence) {
  nn::LstmCell cell("evolve", 4, 4, kKey);
  Tensor w0 = test::random_tensor({3, 4}, 50, -0.5f, 0.5f);
  std::vector<Tensor> rs;
  for (int t = 0; t < kSteps; ++t) rs.push_back(test::random_tensor({3, 4}, 60 + t));
  auto loss = [&] {
    double s = 0;
    nn::LstmCell::State st{w0, Tensor::zeros({3, 4}, DType::f32)};
    for (int t = 0; t < kSteps; ++t) {
      st = cell.forward(st.h, st);
      s += test::weighted_sum(st.h, rs[t]);
    }
    cell.clear();
    return s;
  };
  zero(cell.parameters());
  nn::LstmCell::State st{w0, Tensor::zeros({3, 4}, DType::f32)};
  for (int t = 0; t < kSteps; ++t) st = cell.forward(st.h, st);
  Tensor carry_h = Tensor::zeros({3, 4}, DType::f32), carry_c;
  for (int t = kSteps - 1; t >= 0; --t) {
    Tensor g = rs[t].clone();
    for (std::int64_t i = 0; i < g.numel(); ++i) g.data<float>()[i] += carry_h.data<float>()[i];
    auto [dx, dprev] = cell.backward({g, carry_c}, true);
    carry_h = dprev.h;
    for (std::int64_t i = 0; i < dx.numel(); ++i) carry_h.data<float>()[i] += dx.data<float>()[i];
    carry_c = dprev.c;
  }
  for (nn::Parameter* p : cell.parameters())
    test::expect_gradient(p->name, p->value, p->grad.clone(), loss);
  test::expect_gradient("w0", w0, carry_h, loss);
}

}  // namespace
}  // namespace tessel
