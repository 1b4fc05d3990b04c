// Adam and SGD (momentum) over model parameters, with state export for checkpoints.
#include "tessel/nn/optimizer.hpp"

#include "tessel/core/error.hpp"
#include "tessel/kernels/optim.hpp"

#include <map>

namespace tessel::nn {

namespace {

// Per-parameter state tensors, keyed by parameter name; created on the parameter's device at
// its first step, or moved there when they were loaded from a checkpoint on another device.
class StateTable {
public:
  Tensor& get(const std::string& key, const Tensor& like) {
    Tensor& t = tensors_[key];
    if (!t.defined()) {
      t = Tensor::zeros(like.shape(), DType::f32, like.device());
    } else {
      TESSEL_EXPECTS(t.shape() == like.shape() && t.dtype() == DType::f32,
                     "optimizer state {} is {}, parameter is {}", key, t.describe(),
                     like.describe());
      if (t.device() != like.device()) t = t.to(like.device());
    }
    return t;
  }
  void export_to(std::vector<std::pair<std::string, Tensor>>& out) const {
    for (const auto& [key, t] : tensors_)
      out.emplace_back(key, t.to(Device::cpu()));
  }
  void set(const std::string& key, const Tensor& t) {
    TESSEL_EXPECTS(t.dtype() == DType::f32, "optimizer state {}: expected f32, got {}", key,
                   t.describe());
    tensors_[key] = t.clone();
  }
  void clear() { tensors_.clear(); }

private:
  std::map<std::string, Tensor> tensors_;
};

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

class Adam final : public Optimizer {
public:
  explicit Adam(const OptimizerConfig& c) : config_(c) {}

  void step(std::span<Parameter* const> params) override {
    ++step_;
    kernels::AdamStep s{config_.lr,  config_.beta1,        config_.beta2,
                        config_.eps, config_.weight_decay, step_};
    for (Parameter* p : params) {
      Tensor& m = state_.get("adam.m." + p->name, p->value);
      Tensor& v = state_.get("adam.v." + p->name, p->value);
      kernels::adam_update(p->value, p->grad, m, v, s);
    }
  }

  std::vector<std::pair<std::string, Tensor>> state() override {
    std::vector<std::pair<std::string, Tensor>> out;
    out.emplace_back("adam.step", Tensor::from_vector<std::int64_t>({step_}));
    state_.export_to(out);
    return out;
  }

  void load_state(const std::vector<std::pair<std::string, Tensor>>& state) override {
    state_.clear();
    step_ = 0;
    for (const auto& [key, t] : state) {
      if (key == "adam.step") {
        TESSEL_EXPECTS(t.dtype() == DType::i64 && t.numel() == 1,
                       "optimizer state adam.step must be one i64, got {}", t.describe());
        step_ = t.to(Device::cpu()).data<std::int64_t>()[0];
        TESSEL_EXPECTS(step_ >= 0, "optimizer state adam.step is negative ({})", step_);
      } else {
        TESSEL_EXPECTS(starts_with(key, "adam.m.") || starts_with(key, "adam.v."),
                       "optimizer state '{}' is not Adam state (adam.step, adam.m.*, adam.v.*)",
                       key);
        state_.set(key, t);
      }
    }
  }

private:
  OptimizerConfig config_;
  std::int64_t step_ = 0;
  StateTable state_;
};

class Sgd final : public Optimizer {
public:
  explicit Sgd(const OptimizerConfig& c) : config_(c) {}

  void step(std::span<Parameter* const> params) override {
    for (Parameter* p : params) {
      Tensor none;
      Tensor& buf =
          config_.momentum != 0.0f ? state_.get("sgd.momentum." + p->name, p->value) : none;
      kernels::sgd_update(p->value, p->grad, buf, config_.lr, config_.momentum,
                          config_.weight_decay);
    }
  }

  std::vector<std::pair<std::string, Tensor>> state() override {
    std::vector<std::pair<std::string, Tensor>> out;
    state_.export_to(out);
    return out;
  }

  void load_state(const std::vector<std::pair<std::string, Tensor>>& state) override {
    state_.clear();
    for (const auto& [key, t] : state) {
      TESSEL_EXPECTS(starts_with(key, "sgd.momentum."),
                     "optimizer state '{}' is not SGD state (sgd.momentum.*)", key);
      state_.set(key, t);
    }
  }

private:
  OptimizerConfig config_;
  StateTable state_;
};

} // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config) {
  TESSEL_EXPECTS(config.lr > 0.0f, "optimizer: learning rate {} must be > 0", config.lr);
  TESSEL_EXPECTS(config.weight_decay >= 0.0f, "optimizer: weight decay {} must be >= 0",
                 config.weight_decay);
  if (config.kind == OptimizerKind::adam) {
    TESSEL_EXPECTS(config.beta1 >= 0.0f && config.beta1 < 1.0f && config.beta2 >= 0.0f &&
                       config.beta2 < 1.0f && config.eps > 0.0f,
                   "optimizer: Adam needs 0 <= beta1, beta2 < 1 and eps > 0 (got {}, {}, {})",
                   config.beta1, config.beta2, config.eps);
    return std::make_unique<Adam>(config);
  }
  if (config.kind == OptimizerKind::sgd) {
    TESSEL_EXPECTS(config.momentum >= 0.0f && config.momentum < 1.0f,
                   "optimizer: SGD momentum {} outside [0, 1)", config.momentum);
    return std::make_unique<Sgd>(config);
  }
  TESSEL_FAIL("optimizer: kind {} is not adam or sgd", static_cast<int>(config.kind));
}

} // namespace tessel::nn
