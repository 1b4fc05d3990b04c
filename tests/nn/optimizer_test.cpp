// Optimizers: steps against hand-computed values, state export and resume, argument errors.
#include "nn_test_util.hpp"

#include "tessel/nn/optimizer.hpp"

namespace tessel {
namespace {

nn::Parameter param(const std::string& name, std::vector<float> values) {
  nn::Parameter p;
  p.name = name;
  p.value = Tensor::from_vector(values);
  p.grad = Tensor::zeros({static_cast<std::int64_t>(values.size())}, DType::f32);
  return p;
}

TEST(Optimizer, AdamFirstStepsByHand) {
  nn::OptimizerConfig c;
  c.lr = 0.1f;
  c.weight_decay = 0.5f;
  auto adam = nn::make_optimizer(c);
  nn::Parameter p = param("w", {2.0f});
  nn::Parameter* ps[] = {&p};
  // Step 1: g = 1 + 0.5 * 2 = 2; m = 0.2, v = 0.004; m_hat = 2, v_hat = 4;
  // p = 2 - 0.1 * 2 / (2 + 1e-8) = 1.9.
  p.grad.data<float>()[0] = 1.0f;
  adam->step(ps);
  EXPECT_NEAR(p.value.data<float>()[0], 1.9, 1e-6);
  // Step 2: g = 1 + 0.95 = 1.95; m = 0.18 + 0.195 = 0.375; v = 0.003996 + 0.00380250;
  // m_hat = 0.375 / 0.19, v_hat = 0.0077985 / 0.001999.
  adam->step(ps);
  const double m_hat = 0.375 / 0.19,
               v_hat = (0.999 * 0.004 + 0.001 * 1.95 * 1.95) / (1 - 0.999 * 0.999);
  EXPECT_NEAR(p.value.data<float>()[0], 1.9 - 0.1 * m_hat / (std::sqrt(v_hat) + 1e-8), 1e-5);
}

TEST(Optimizer, SgdPlainAndMomentumByHand) {
  nn::OptimizerConfig c;
  c.kind = nn::OptimizerKind::sgd;
  c.lr = 0.5f;
  auto sgd = nn::make_optimizer(c);
  nn::Parameter p = param("w", {1.0f, -1.0f});
  p.grad.data<float>()[0] = 0.2f;
  p.grad.data<float>()[1] = -0.4f;
  nn::Parameter* ps[] = {&p};
  sgd->step(ps);
  EXPECT_FLOAT_EQ(p.value.data<float>()[0], 0.9f);
  EXPECT_FLOAT_EQ(p.value.data<float>()[1], -0.8f);
  EXPECT_TRUE(sgd->state().empty());
  c.momentum = 0.9f;
  auto momentum = nn::make_optimizer(c);
  nn::Parameter q = param("w", {1.0f});
  q.grad.data<float>()[0] = 1.0f;
  nn::Parameter* qs[] = {&q};
  momentum->step(qs); // buf = 1, q = 0.5
  momentum->step(qs); // buf = 1.9, q = 0.5 - 0.95
  EXPECT_NEAR(q.value.data<float>()[0], -0.45, 1e-6);
}

// Save the state after k steps, restore into a fresh optimizer: the next steps are identical.
void check_resume(const std::string& kind) {
  nn::OptimizerConfig c;
  c.kind = option_value<nn::OptimizerKind>(kind);
  c.lr = 0.05f;
  c.weight_decay = 1e-3f;
  c.momentum = kind == "sgd" ? 0.9f : 0.0f;
  auto reference = nn::make_optimizer(c);
  nn::Parameter a = param("layer0.weight", {0.3f, -0.7f, 1.1f});
  nn::Parameter b = param("layer0.bias", {0.0f, 0.2f});
  nn::Parameter* ps[] = {&a, &b};
  auto set_grads = [&](int step) {
    for (nn::Parameter* p : ps)
      for (std::int64_t i = 0; i < p->grad.numel(); ++i)
        p->grad.data<float>()[i] = std::sin(1.0f + static_cast<float>(step * 3 + i));
  };
  for (int s = 0; s < 3; ++s) {
    set_grads(s);
    reference->step(ps);
  }
  const auto saved = reference->state();
  const Tensor saved_a = a.value.clone(), saved_b = b.value.clone();
  for (int s = 3; s < 6; ++s) {
    set_grads(s);
    reference->step(ps);
  }
  const Tensor final_a = a.value.clone(), final_b = b.value.clone();
  // Resume.
  auto resumed = nn::make_optimizer(c);
  resumed->load_state(saved);
  a.value.copy_from(saved_a);
  b.value.copy_from(saved_b);
  for (int s = 3; s < 6; ++s) {
    set_grads(s);
    resumed->step(ps);
  }
  EXPECT_EQ(std::memcmp(a.value.raw(), final_a.raw(), final_a.nbytes()), 0) << kind;
  EXPECT_EQ(std::memcmp(b.value.raw(), final_b.raw(), final_b.nbytes()), 0) << kind;
  std::vector<std::string> names;
  for (const auto& [name, t] : saved)
    names.push_back(name);
  if (kind == "adam")
    EXPECT_EQ(names,
              (std::vector<std::string>{"adam.step", "adam.m.layer0.bias", "adam.m.layer0.weight",
                                        "adam.v.layer0.bias", "adam.v.layer0.weight"}));
  else
    EXPECT_EQ(names,
              (std::vector<std::string>{"sgd.momentum.layer0.bias", "sgd.momentum.layer0.weight"}));
}

TEST(Optimizer, StateRoundTripResumesTheSameTrajectory) {
  check_resume("adam");
  check_resume("sgd");
}

TEST(Optimizer, BadConfigsAndStatesAreInputErrors) {
  nn::OptimizerConfig c;
  EXPECT_THROW(option_value<nn::OptimizerKind>("rmsprop"), InputError);
  c.kind = nn::OptimizerKind::adam;
  c.lr = 0.0f;
  EXPECT_THROW(nn::make_optimizer(c), InputError);
  c.lr = 0.1f;
  auto adam = nn::make_optimizer(c);
  EXPECT_THROW(adam->load_state({{"sgd.momentum.w", Tensor::zeros({1}, DType::f32)}}), InputError);
  EXPECT_THROW(adam->load_state({{"adam.step", Tensor::zeros({1}, DType::f32)}}), InputError);
}

} // namespace
} // namespace tessel
