// GCN-GRU, GCN-LSTM and EvolveGCN-O: the graph phase per snapshot, the node phase over blocks,
// and their backward passes, on kernel ops.
#include "tessel/nn/temporal.hpp"

#include "tessel/kernels/dense.hpp"
#include "tessel/nn/layers.hpp"

#include <string>

namespace tessel::nn {
namespace {

Tensor matmul(const Tensor& a, bool ta, const Tensor& b, bool tb) {
  Tensor y =
      Tensor::empty({ta ? a.cols() : a.rows(), tb ? b.rows() : b.cols()}, DType::f32, a.device());
  kernels::gemm(a, ta, b, tb, y);
  return y;
}

void add_into(Tensor& y, const Tensor& x) {
  kernels::axpy(1.0f, x, y);
}

Parameter parameter(const std::string& name, Tensor value) {
  Tensor grad = Tensor::zeros(value.shape(), DType::f32);
  return Parameter{name, std::move(value), std::move(grad)};
}

} // namespace

TemporalGcn::TemporalGcn(const TemporalConfig& config) : config_(config) {
  const bool evolve = evolves();
  const std::int64_t H = config.hidden;
  for (int l = 0; l < config.layers; ++l) {
    const std::int64_t in = l == 0 ? config.in_dim : H;
    const rng::Key key{config.seed, rng::Stream::init, 0, 0, static_cast<std::uint32_t>(l)};
    const std::string name = "gcn" + std::to_string(l);
    Layer layer;
    layer.weight =
        parameter(name + (evolve ? ".initial_weight" : ".weight"), glorot_uniform(in, H, key, 0));
    layer.bias = parameter(name + ".bias", Tensor::zeros({H}, DType::f32));
    if (evolve) {
      const rng::Key ekey{config.seed, rng::Stream::init, 1, 0, static_cast<std::uint32_t>(l)};
      layer.evolve.emplace(name + ".evolve", H, H, ekey);
    }
    layers_.push_back(std::move(layer));
  }
  const rng::Key rkey{config.seed, rng::Stream::init, 2, 0, 0};
  if (config.kind == TemporalKind::gcn_gru) gru_.emplace("gru", H, H, rkey);
  if (config.kind == TemporalKind::gcn_lstm) lstm_.emplace("lstm", H, H, rkey);
  const rng::Key hkey{config.seed, rng::Stream::init, 3, 0, 0};
  head_weight_ = parameter("head.weight", glorot_uniform(H, config.out_dim, hkey, 0));
  head_bias_ = parameter("head.bias", Tensor::zeros({config.out_dim}, DType::f32));
  for (Layer& layer : layers_) {
    if (evolve) {
      replicated_.push_back(&layer.weight);
      for (Parameter* p : layer.evolve->parameters())
        replicated_.push_back(p);
    } else {
      partial_.push_back(&layer.weight);
    }
    partial_.push_back(&layer.bias);
  }
  if (gru_)
    for (Parameter* p : gru_->parameters())
      partial_.push_back(p);
  if (lstm_)
    for (Parameter* p : lstm_->parameters())
      partial_.push_back(p);
  partial_.push_back(&head_weight_);
  partial_.push_back(&head_bias_);
  flatten();
}

std::vector<Parameter*> TemporalGcn::parameters() {
  std::vector<Parameter*> all = replicated_;
  all.insert(all.end(), partial_.begin(), partial_.end());
  return all;
}

// Every parameter moves into the flat value and gradient buffers on the device (partial
// parameters first), its value and grad becoming views into them.
void TemporalGcn::flatten() {
  std::vector<Parameter*> order = partial_;
  order.insert(order.end(), replicated_.begin(), replicated_.end());
  std::int64_t total = 0, partial = 0;
  for (const Parameter* p : order)
    total += p->value.numel();
  for (const Parameter* p : partial_)
    partial += p->value.numel();
  flat_values_ = Tensor::empty({total}, DType::f32, config_.device);
  flat_gradients_ = Tensor::zeros({total}, DType::f32, config_.device);
  std::int64_t at = 0;
  for (Parameter* p : order) {
    const std::int64_t n = p->value.numel();
    Tensor value = flat_values_.rows_slice(at, at + n).reshape(p->value.shape());
    value.copy_from(p->value);
    p->value = value;
    p->grad = flat_gradients_.rows_slice(at, at + n).reshape(p->value.shape());
    at += n;
  }
  partial_gradients_ = flat_gradients_.rows_slice(0, partial);
}

// Dropout on the input of GCN layer `layer` at snapshot t (layer = the GCN layer count: the
// head's input), keyed by (seed, epoch, t, layer) and the rows' source ids. Identity (no mask)
// when not training or p = 0.
Tensor TemporalGcn::dropout(const Tensor& x, std::span<const NodeId> ids, std::uint32_t epoch,
                            std::int64_t t, std::uint32_t layer, bool training,
                            Tensor& mask) const {
  const float p = config_.dropout;
  mask = Tensor();
  if (!training || p <= 0.0f) return x;
  const rng::Key key{config_.seed, rng::Stream::dropout, epoch, static_cast<std::uint32_t>(t),
                     layer};
  Tensor y = Tensor::empty(x.shape(), DType::f32, x.device());
  mask = Tensor::empty(kernels::dropout_mask_shape(x), DType::u8, x.device());
  kernels::dropout_forward(x, ids.first(static_cast<std::size_t>(x.rows())), key, p, y, mask);
  return y;
}

void TemporalGcn::dropout_backward(Tensor& grad, const Tensor& mask) const {
  if (mask.defined()) kernels::dropout_backward(grad, mask, config_.dropout, grad);
}

void TemporalGcn::begin_forward(std::int64_t t_end, std::int64_t snapshots) {
  for (Layer& layer : layers_) {
    layer.weights.clear();
    if (!evolves()) continue;
    layer.evolve->clear();
    LstmCell::State state{layer.weight.value,
                          Tensor::zeros(layer.weight.value.shape(), DType::f32, config_.device)};
    for (std::int64_t t = 0; t < t_end; ++t) {
      state = layer.evolve->forward(state.h, state);
      layer.weights.push_back(state.h);
    }
  }
  saved_.assign(static_cast<std::size_t>(snapshots), {});
}

Tensor TemporalGcn::snapshot_forward(std::size_t slot, std::int64_t t, const Tensor& x,
                                     const SnapshotRows& rows, bool training, std::uint32_t epoch) {
  std::vector<Saved>& saved = saved_[slot];
  Tensor z = x;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    Layer& layer = layers_[l];
    Tensor mask;
    z = dropout(z, rows.ids, epoch, t, static_cast<std::uint32_t>(l), training, mask);
    Tensor xw = matmul(z, false, layer.weight_at(t), false);
    if (rows.gather) xw = rows.gather(xw);
    Tensor y = kernels::spmm(rows.forward, xw);
    kernels::add_bias(y, layer.bias.value);
    kernels::relu_forward(y, y);
    saved.push_back({z, y, mask});
    z = y;
  }
  return z;
}

std::vector<Tensor> TemporalGcn::node_forward(std::vector<Tensor> blocks,
                                              std::span<const NodeBlock> where, bool training,
                                              std::uint32_t epoch, bool apply_head) {
  embeddings_.clear();
  if (gru_) {
    gru_->clear();
    Tensor h;
    for (const Tensor& x : blocks) {
      if (!h.defined()) h = Tensor::zeros({x.rows(), config_.hidden}, DType::f32, config_.device);
      h = gru_->forward(x, h);
      embeddings_.push_back(h);
    }
  } else if (lstm_) {
    lstm_->clear();
    LstmCell::State st;
    for (const Tensor& x : blocks) {
      if (!st.h.defined())
        st = {Tensor::zeros({x.rows(), config_.hidden}, DType::f32, config_.device),
              Tensor::zeros({x.rows(), config_.hidden}, DType::f32, config_.device)};
      st = lstm_->forward(x, st);
      embeddings_.push_back(st.h);
    }
  } else {
    embeddings_ = std::move(blocks);
  }
  head_inputs_.clear();
  head_masks_.assign(embeddings_.size(), Tensor());
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < embeddings_.size(); ++i) {
    head_inputs_.push_back(dropout(embeddings_[i], where[i].ids, epoch, where[i].t,
                                   static_cast<std::uint32_t>(layers_.size()), training,
                                   head_masks_[i]));
    if (!apply_head) {
      out.push_back(head_inputs_.back());
      continue;
    }
    Tensor y = matmul(head_inputs_.back(), false, head_weight_.value, false);
    kernels::add_bias(y, head_bias_.value);
    out.push_back(std::move(y));
  }
  return out;
}

std::vector<Tensor> TemporalGcn::node_backward(const std::vector<Tensor>& grad_out,
                                               bool apply_head) {
  std::vector<Tensor> grad_blocks(embeddings_.size());
  for (std::size_t i = 0; i < embeddings_.size(); ++i) {
    if (!apply_head) {
      grad_blocks[i] = grad_out[i].clone();
    } else {
      kernels::gemm(head_inputs_[i], true, grad_out[i], false, head_weight_.grad, 1.0f, 1.0f);
      kernels::column_sums(grad_out[i], head_bias_.grad, true);
      grad_blocks[i] = matmul(grad_out[i], false, head_weight_.value, true);
    }
    dropout_backward(grad_blocks[i], head_masks_[i]);
  }
  if (grad_blocks.empty()) return grad_blocks;
  const std::vector<std::int64_t> rows{grad_blocks.front().rows(), config_.hidden};
  if (gru_) {
    Tensor carry = Tensor::zeros(rows, DType::f32, config_.device);
    for (std::size_t i = embeddings_.size(); i-- > 0;) {
      add_into(grad_blocks[i], carry);
      auto [dx, dh] = gru_->backward(grad_blocks[i], true);
      grad_blocks[i] = dx;
      carry = dh;
    }
  } else if (lstm_) {
    LstmCell::State carry{Tensor::zeros(rows, DType::f32, config_.device), Tensor()};
    for (std::size_t i = embeddings_.size(); i-- > 0;) {
      add_into(grad_blocks[i], carry.h);
      auto [dx, dprev] = lstm_->backward({grad_blocks[i], carry.c}, true);
      grad_blocks[i] = dx;
      carry = dprev;
    }
  }
  return grad_blocks;
}

// EvolveGCN: layer l's weight gradients of every snapshot are views of one flat buffer, so
// that combining them over ranks is one collective.
void TemporalGcn::begin_backward(std::int64_t t_end) {
  if (!evolves()) return;
  for (Layer& layer : layers_) {
    const Tensor& w0 = layer.weight.value;
    layer.grad_flat = Tensor::zeros({t_end * w0.numel()}, DType::f32, config_.device);
    layer.grads.clear();
    for (std::int64_t t = 0; t < t_end; ++t)
      layer.grads.push_back(
          layer.grad_flat.rows_slice(t * w0.numel(), (t + 1) * w0.numel()).reshape(w0.shape()));
  }
}

void TemporalGcn::snapshot_backward(std::size_t slot, std::int64_t t, Tensor dz,
                                    const SnapshotRows& rows) {
  std::vector<Saved>& saved = saved_[slot];
  for (std::size_t l = layers_.size(); l-- > 0;) {
    Layer& layer = layers_[l];
    Tensor dpre = Tensor::empty(dz.shape(), DType::f32, config_.device);
    kernels::relu_backward(dz, saved[l].output, dpre);
    kernels::column_sums(dpre, layer.bias.grad, true);
    Tensor dxw = kernels::spmm(rows.backward, dpre);
    if (rows.scatter) dxw = rows.scatter(dxw);
    Tensor& wgrad = evolves() ? layer.grads[t] : layer.weight.grad;
    kernels::gemm(saved[l].input, true, dxw, false, wgrad, 1.0f, 1.0f);
    if (l > 0) {
      dz = matmul(dxw, false, layer.weight_at(t), true);
      dropout_backward(dz, saved[l].mask);
    }
  }
}

// The weight recurrence is tiny ([in, H] matrices, t_end steps): it runs where the weights are,
// identically on every rank, once the per-snapshot weight gradients are summed over ranks.
void TemporalGcn::end_backward(std::int64_t t_end, const std::function<void(Tensor&)>& allreduce) {
  if (!evolves()) return;
  for (Layer& layer : layers_) {
    allreduce(layer.grad_flat);
    Tensor carry_h = Tensor::zeros(layer.weight.value.shape(), DType::f32, config_.device), carry_c;
    for (std::int64_t t = t_end; t-- > 0;) {
      Tensor& g = layer.grads[t];
      add_into(g, carry_h);
      auto [dx, dprev] = layer.evolve->backward({g, carry_c}, true);
      carry_h = dprev.h;
      add_into(carry_h, dx);
      carry_c = dprev.c;
    }
    add_into(layer.weight.grad, carry_h);
    layer.grads.clear();
    layer.grad_flat = Tensor();
  }
}

} // namespace tessel::nn
