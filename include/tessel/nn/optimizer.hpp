// Optimizers (Adam, SGD with momentum) with L2 weight decay, and their checkpointable state.
#pragma once

#include "tessel/nn/model.hpp"

#include <memory>
#include <string>
#include <vector>

namespace tessel::nn {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Updates every parameter from its grad (weight decay adds wd * value to the gradient, as
  // torch.optim does without decoupling).
  virtual void step(std::span<Parameter* const> params) = 0;
  // Named state tensors ("adam.m.layer0.weight", ..., "adam.step") for checkpoints.
  virtual std::vector<std::pair<std::string, Tensor>> state() = 0;
  virtual void load_state(const std::vector<std::pair<std::string, Tensor>>& state) = 0;
};

// --optimizer.
enum class OptimizerKind { adam, sgd };
inline std::span<const OptionWord<OptimizerKind>> option_words(OptimizerKind) {
  static constexpr OptionWord<OptimizerKind> words[] = {{"adam", OptimizerKind::adam},
                                                        {"sgd", OptimizerKind::sgd}};
  return words;
}

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::adam;
  float lr = 0.01f;
  float weight_decay = 0.0f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adam
  float momentum = 0.0f;                           // sgd
};

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config);

}  // namespace tessel::nn
