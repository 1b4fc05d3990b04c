// The SIGN MLP's blocks: per-hop linear maps, MLP layers, dropout and ReLU with explicit backward.
#include "tessel/nn/sign_mlp.hpp"

#include "tessel/core/error.hpp"
#include "tessel/kernels/kernels.hpp"
#include "tessel/nn/layers.hpp"

#include <cstring>

namespace tessel::nn {

namespace {

Parameter make_param(std::string name, Tensor value) {
  Parameter p;
  p.name = std::move(name);
  p.grad = Tensor::zeros(value.shape(), DType::f32);
  p.value = std::move(value);
  return p;
}

// Copies columns [col, col + width) of x [n, C] into a contiguous [n, width] tensor (GEMM wants
// contiguous operands), or adds such a tensor back into those columns.
Tensor column_block(const Tensor& x, std::int64_t col, std::int64_t width) {
  const std::int64_t n = x.rows(), c = x.cols();
  Tensor out = Tensor::empty({n, width}, DType::f32);
  const float* src = x.data<float>();
  float* dst = out.data<float>();
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i)
    std::memcpy(dst + i * width, src + i * c + col,
                static_cast<std::size_t>(width) * sizeof(float));
  return out;
}

void store_columns(const Tensor& block, Tensor& x, std::int64_t col) {
  const std::int64_t n = block.rows(), width = block.cols(), c = x.cols();
  const float* src = block.data<float>();
  float* dst = x.data<float>();
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i)
    std::memcpy(dst + i * c + col, src + i * width,
                static_cast<std::size_t>(width) * sizeof(float));
}

} // namespace

SignMlp::SignMlp(const SignMlpConfig& c) : config_(c) {
  TESSEL_EXPECTS(c.hops >= 0, "sign-mlp: --hops {} must be >= 0", c.hops);
  TESSEL_EXPECTS(c.mlp_layers >= 1, "sign-mlp: --mlp-layers {} must be >= 1", c.mlp_layers);
  TESSEL_EXPECTS(c.feature_dim > 0 && c.out_dim > 0 && c.hidden > 0,
                 "sign-mlp: feature dim {}, hidden {} and classes {} must be > 0", c.feature_dim,
                 c.hidden, c.out_dim);
  TESSEL_EXPECTS(c.dropout >= 0.0f && c.dropout < 1.0f, "sign-mlp: dropout {} outside [0, 1)",
                 c.dropout);
  blocks_.resize(static_cast<std::size_t>(num_blocks()));
  // Every matrix has its own init key (block, index), so a block's values do not depend on
  // the other blocks' sizes or on which rank builds it.
  for (int k = 0; k <= c.hops; ++k) {
    const rng::Key key{c.seed, rng::Stream::init, 0, static_cast<std::uint32_t>(k), 0};
    const std::string name = "hop" + std::to_string(k);
    blocks_[0].weights.push_back(
        make_param(name + ".weight", glorot_uniform(c.feature_dim, c.hidden, key, 0)));
    blocks_[0].biases.push_back(make_param(name + ".bias", Tensor::zeros({c.hidden}, DType::f32)));
  }
  for (int b = 1; b < num_blocks(); ++b) {
    const rng::Key key{c.seed, rng::Stream::init, 0, 0, static_cast<std::uint32_t>(b)};
    const std::string name = "mlp" + std::to_string(b - 1);
    blocks_[b].weights.push_back(
        make_param(name + ".weight", glorot_uniform(block_in_dim(b), block_out_dim(b), key, 1)));
    blocks_[b].biases.push_back(
        make_param(name + ".bias", Tensor::zeros({block_out_dim(b)}, DType::f32)));
  }
}

std::int64_t SignMlp::block_in_dim(int block) const {
  if (block == 0) return (config_.hops + 1) * config_.feature_dim;
  return block == 1 ? (config_.hops + 1) * config_.hidden : config_.hidden;
}

std::int64_t SignMlp::block_out_dim(int block) const {
  if (block == num_blocks() - 1) return config_.out_dim;
  return block == 0 ? (config_.hops + 1) * config_.hidden : config_.hidden;
}

std::int64_t SignMlp::block_flops_per_row(int block) const {
  if (block == 0) return (config_.hops + 1) * config_.feature_dim * config_.hidden;
  return block_in_dim(block) * block_out_dim(block);
}

Tensor SignMlp::forward(int block, const Tensor& x, std::span<const NodeId> ids,
                        const rng::Key& key_in, bool training, Saved& saved) const {
  TESSEL_EXPECTS(block >= 0 && block < num_blocks(), "sign-mlp: block {} of {}", block,
                 num_blocks());
  TESSEL_EXPECTS(x.dtype() == DType::f32 && x.dim() == 2 && x.cols() == block_in_dim(block) &&
                     x.device().is_cpu(),
                 "sign-mlp block {}: input {} expected f32 [n, {}] on cpu", block, x.describe(),
                 block_in_dim(block));
  TESSEL_EXPECTS(static_cast<std::int64_t>(ids.size()) == x.rows(),
                 "sign-mlp block {}: {} node ids for {} rows", block, ids.size(), x.rows());
  rng::Key key = key_in;
  key.layer = static_cast<std::uint32_t>(block);
  if (training && config_.dropout > 0.0f) {
    saved.input = Tensor::empty(x.shape(), DType::f32);
    saved.mask = Tensor::empty(kernels::dropout_mask_shape(x), DType::u8);
    kernels::dropout_forward(x, ids, key, config_.dropout, saved.input, saved.mask);
  } else {
    saved.input = x;
    saved.mask = Tensor();
  }
  const Block& b = blocks_[static_cast<std::size_t>(block)];
  Tensor y = Tensor::empty({x.rows(), block_out_dim(block)}, DType::f32);
  if (block == 0) {
    const std::int64_t f = config_.feature_dim, h = config_.hidden;
    for (int k = 0; k <= config_.hops; ++k) {
      const Tensor hop_in = config_.hops == 0 ? saved.input : column_block(saved.input, k * f, f);
      Tensor hop_out = config_.hops == 0 ? y : Tensor::empty({x.rows(), h}, DType::f32);
      kernels::gemm(hop_in, false, b.weights[k].value, false, hop_out);
      kernels::add_bias(hop_out, b.biases[k].value);
      if (config_.hops > 0) store_columns(hop_out, y, k * h);
    }
  } else {
    kernels::gemm(saved.input, false, b.weights[0].value, false, y);
    kernels::add_bias(y, b.biases[0].value);
  }
  if (block + 1 < num_blocks()) {
    kernels::relu_forward(y, y);
    saved.output = y;
  } else {
    saved.output = Tensor();
  }
  return y;
}

Tensor SignMlp::backward(int block, const Tensor& grad_out_in, const Saved& saved,
                         bool need_input_grad) {
  TESSEL_EXPECTS(block >= 0 && block < num_blocks(), "sign-mlp: block {} of {}", block,
                 num_blocks());
  TESSEL_EXPECTS(saved.input.defined(), "sign-mlp block {}: backward without a forward", block);
  TESSEL_EXPECTS(grad_out_in.rows() == saved.input.rows() &&
                     grad_out_in.cols() == block_out_dim(block),
                 "sign-mlp block {}: output gradient {} expected [{}, {}]", block,
                 grad_out_in.describe(), saved.input.rows(), block_out_dim(block));
  Tensor grad_out = grad_out_in;
  if (block + 1 < num_blocks()) {
    grad_out = Tensor::empty(grad_out_in.shape(), DType::f32);
    kernels::relu_backward(grad_out_in, saved.output, grad_out);
  }
  Block& b = blocks_[static_cast<std::size_t>(block)];
  Tensor grad_in;
  if (need_input_grad) grad_in = Tensor::empty(saved.input.shape(), DType::f32);
  if (block == 0) {
    const std::int64_t f = config_.feature_dim, h = config_.hidden;
    for (int k = 0; k <= config_.hops; ++k) {
      const Tensor hop_in = config_.hops == 0 ? saved.input : column_block(saved.input, k * f, f);
      const Tensor hop_grad = config_.hops == 0 ? grad_out : column_block(grad_out, k * h, h);
      kernels::gemm(hop_in, true, hop_grad, false, b.weights[k].grad, 1.0f, 1.0f);
      kernels::column_sums(hop_grad, b.biases[k].grad, true);
      if (need_input_grad) {
        Tensor hop_grad_in = Tensor::empty({hop_in.rows(), f}, DType::f32);
        kernels::gemm(hop_grad, false, b.weights[k].value, true, hop_grad_in);
        store_columns(hop_grad_in, grad_in, k * f);
      }
    }
  } else {
    kernels::gemm(saved.input, true, grad_out, false, b.weights[0].grad, 1.0f, 1.0f);
    kernels::column_sums(grad_out, b.biases[0].grad, true);
    if (need_input_grad) kernels::gemm(grad_out, false, b.weights[0].value, true, grad_in);
  }
  if (need_input_grad && saved.mask.defined())
    kernels::dropout_backward(grad_in, saved.mask, config_.dropout, grad_in);
  return grad_in;
}

std::vector<Parameter*> SignMlp::parameters(int block) {
  Block& b = blocks_[static_cast<std::size_t>(block)];
  std::vector<Parameter*> out;
  for (std::size_t i = 0; i < b.weights.size(); ++i) {
    out.push_back(&b.weights[i]);
    out.push_back(&b.biases[i]);
  }
  return out;
}

std::vector<Parameter*> SignMlp::parameters() {
  std::vector<Parameter*> out;
  for (int b = 0; b < num_blocks(); ++b)
    for (Parameter* p : parameters(b))
      out.push_back(p);
  return out;
}

void SignMlp::zero_grad(int first_block, int end_block) {
  for (int b = first_block; b < end_block; ++b)
    for (Parameter* p : parameters(b))
      p->grad.fill_zero();
}

} // namespace tessel::nn
