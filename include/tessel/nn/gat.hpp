// Graph attention (GAT, Velickovic et al.): a multi-head attention layer over an Aggregator's
// edges, on the fused kernels of tessel/kernels/attention.hpp.
#pragma once

#include "tessel/core/rng.hpp"
#include "tessel/nn/layers.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::nn {

// out[v] = || over heads h (or the mean over them: `average`) of
//   sum over u in N(v) + {v} of alpha_vu[h] z_u[h],   z_u = x_u W (H heads of F columns),
//   alpha_v.[h] = softmax over the row of LeakyReLU_0.2(a_src[h] . z_u[h] + a_dst[h] . z_v[h]),
// plus a bias. The halo rows an aggregator exchanges carry z_u and a_src . z_u together (one
// exchange per layer), and their gradients go back the same way. Attention dropout (p) drops
// coefficients by (key, destination id, source id, head): set_attention_dropout before each
// forward.
class GatLayer final : public GraphLayer {
public:
  GatLayer(const std::string& prefix, std::int64_t in_dim, std::int64_t head_dim, int heads,
           bool average, const rng::Key& key, Device device);
  // The next forward's attention dropout: p = 0 turns it off (evaluation, inference).
  void set_attention_dropout(const rng::Key& key, float p) {
    dropout_key_ = key;
    dropout_p_ = p;
  }
  Tensor forward(Tensor x, Aggregator& agg, const InputRecompute& recompute = {}) override;
  Tensor backward(const Tensor& grad_out, bool need_input_grad) override;
  std::vector<Parameter*> parameters() override {
    return {&weight_, &att_src_, &att_dst_, &bias_};
  }
  std::int64_t in_dim() const override { return weight_.value.rows(); }
  std::int64_t out_dim() const override { return average_ ? head_dim_ : heads_ * head_dim_; }
  int heads() const { return heads_; }
  bool reads_input_again() const override { return true; }  // dW = X^T dZ

private:
  Parameter weight_, att_src_, att_dst_, bias_;
  int heads_;
  std::int64_t head_dim_;
  bool average_;
  rng::Key dropout_key_;
  float dropout_p_ = 0.0f, used_p_ = 0.0f;
  Aggregator* agg_ = nullptr;
  SavedInput input_;
  Tensor packed_, dst_term_, alpha_;  // the forward's, over every column (halos included)
};

} // namespace tessel::nn
