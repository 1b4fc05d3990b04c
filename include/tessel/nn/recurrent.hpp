// Recurrent cells with explicit backward passes (GRU, LSTM), for dynamic GNNs: per-node
// recurrences across snapshots and the EvolveGCN weight recurrence.
#pragma once

#include "tessel/core/rng.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/nn/model.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessel::nn {

// GRU (PyTorch's equations): r = s(x Wir + bir + h Whr + bhr), z = s(x Wiz + biz + h Whz + bhz),
// n = tanh(x Win + bin + r * (h Whn + bhn)), h' = (1 - z) n + z h. Weights are [in, 3H] and
// [H, 3H] with gate columns in the order r, z, n. f32 tensors, on the device of the parameters
// (inputs must be there too; the gate arithmetic is a kernel op with CPU and CUDA twins).
//
// Every forward() pushes what its backward needs on a stack; backward() pops the most recent,
// so a sequence is differentiated by calling backward() in reverse step order. backward() adds
// parameter gradients into Parameter::grad (zero them first).
class GruCell {
public:
  GruCell(const std::string& prefix, std::int64_t in_dim, std::int64_t hidden, const rng::Key& key);
  // x: [n, in], h: [n, H] -> h': [n, H].
  Tensor forward(const Tensor& x, const Tensor& h);
  // grad_h_next: [n, H] -> {grad_x [n, in] (undefined unless need_input_grad), grad_h [n, H]}.
  std::pair<Tensor, Tensor> backward(const Tensor& grad_h_next, bool need_input_grad);
  void clear() { saved_.clear(); }
  std::vector<Parameter*> parameters() { return {&w_input_, &w_hidden_, &b_input_, &b_hidden_}; }
  std::int64_t in_dim() const { return w_input_.value.rows(); }
  std::int64_t hidden() const { return w_hidden_.value.rows(); }

private:
  struct Saved {
    Tensor x, h, r, z, n, hn;  // hn = h Whn + bhn
  };
  Parameter w_input_, w_hidden_, b_input_, b_hidden_;
  std::vector<Saved> saved_;
};

// LSTM: [i f g o] = x Wi + h Wh + b, i f o sigmoid, g tanh; c' = f c + i g; h' = o tanh(c').
// Wi: [in, 4H], Wh: [H, 4H], b: [4H], gate columns in the order i, f, g, o. Same stack
// discipline as GruCell.
class LstmCell {
public:
  struct State {
    Tensor h, c;  // [n, H] each
  };
  LstmCell(const std::string& prefix, std::int64_t in_dim, std::int64_t hidden, const rng::Key& key);
  State forward(const Tensor& x, const State& state);
  // grad: d loss / d (h', c') (grad.c may be undefined: zero) -> {grad_x, d loss / d (h, c)}.
  std::pair<Tensor, State> backward(const State& grad, bool need_input_grad);
  void clear() { saved_.clear(); }
  std::vector<Parameter*> parameters() { return {&w_input_, &w_hidden_, &bias_}; }
  std::int64_t in_dim() const { return w_input_.value.rows(); }
  std::int64_t hidden() const { return w_hidden_.value.rows(); }

private:
  struct Saved {
    Tensor x, h, c, gates, c_next;  // gates after their activations
  };
  Parameter w_input_, w_hidden_, bias_;
  std::vector<Saved> saved_;
};

}  // namespace tessel::nn
