// GCN and GraphSAGE models: layer stacks with dropout before and ReLU between layers.
#include "tessel/nn/model.hpp"

#include "tessel/core/error.hpp"
#include "tessel/kernels/dense.hpp"
#include "tessel/nn/gat.hpp"
#include "tessel/nn/layers.hpp"

namespace tessel::nn {

struct Model::Impl {
  ModelConfig config;
  std::vector<std::unique_ptr<GraphLayer>> layers;
  // After every layer but the last: ReLU and the next layer's dropout in one step, which keeps
  // 1 bit per element for backward (kernels::relu_dropout_forward), and the probability used.
  std::vector<Tensor> relu_bits;
  std::vector<float> relu_p;
  // The input features' keep bits when forward() may not overwrite its input: layer 0's
  // backward applies them again instead of drawing them a second time.
  Tensor input_bits;
  bool has_forward = false;
  Tensor flat_values, flat_grads; // every parameter (gradient) is a view into these
};

namespace {
void validate(const ModelConfig& c) {
  TESSEL_EXPECTS(c.kind == ModelKind::gcn || c.kind == ModelKind::sage || c.kind == ModelKind::gat,
                 "model: kind '{}' is not gcn, sage or gat", option_word(c.kind));
  TESSEL_EXPECTS(c.heads >= 1 && c.out_heads >= 1, "model: {} heads and {} output heads, need >= 1",
                 c.heads, c.out_heads);
  TESSEL_EXPECTS(c.attn_dropout >= 0.0f && c.attn_dropout < 1.0f,
                 "model: attention dropout {} outside [0, 1)", c.attn_dropout);
  TESSEL_EXPECTS(c.layers >= 1, "model: {} layers, need at least 1", c.layers);
  TESSEL_EXPECTS(c.in_dim > 0 && c.out_dim > 0, "model: input dim {} and output dim {} must be > 0",
                 c.in_dim, c.out_dim);
  TESSEL_EXPECTS(c.layers == 1 || c.hidden > 0, "model: hidden size {} must be > 0", c.hidden);
  TESSEL_EXPECTS(c.dropout >= 0.0f && c.dropout < 1.0f, "model: dropout {} outside [0, 1)",
                 c.dropout);
}
} // namespace

Model::Model(const ModelConfig& config) : impl_(std::make_unique<Impl>()) {
  validate(config);
  impl_->config = config;
  for (int l = 0; l < config.layers; ++l) {
    const bool gat = config.kind == ModelKind::gat;
    const std::int64_t hidden_width = gat ? config.hidden * config.heads : config.hidden;
    const std::int64_t in = l == 0 ? config.in_dim : hidden_width;
    const std::int64_t out = l == config.layers - 1 ? config.out_dim : config.hidden;
    // Each layer draws its weights from its own key, so layer l's initial values do not
    // depend on the other layers' sizes.
    rng::Key key{config.seed, rng::Stream::init, 0, 0, static_cast<std::uint32_t>(l)};
    const std::string prefix = "layer" + std::to_string(l);
    if (gat) {
      const bool last = l == config.layers - 1;
      impl_->layers.push_back(std::make_unique<GatLayer>(
          prefix, in, out, last ? config.out_heads : config.heads, last, key, config.device));
    } else if (config.kind == ModelKind::gcn)
      impl_->layers.push_back(std::make_unique<GcnLayer>(prefix, in, out, key, config.device));
    else
      impl_->layers.push_back(std::make_unique<SageLayer>(prefix, in, out, key, config.device));
  }
  impl_->relu_bits.resize(static_cast<std::size_t>(config.layers - 1));
  impl_->relu_p.assign(static_cast<std::size_t>(config.layers - 1), 0.0f);
  // Move every parameter and gradient into one flat buffer each, so the gradient all-reduce
  // of data-parallel training is a single collective on the model's device.
  std::int64_t total = 0;
  for (Parameter* p : parameters()) total += p->value.numel();
  impl_->flat_values = Tensor::empty({total}, DType::f32, config.device);
  impl_->flat_grads = Tensor::zeros({total}, DType::f32, config.device);
  std::int64_t at = 0;
  for (Parameter* p : parameters()) {
    const std::int64_t n = p->value.numel();
    Tensor value = impl_->flat_values.rows_slice(at, at + n).reshape(p->value.shape());
    value.copy_from(p->value);
    p->value = value;
    p->grad = impl_->flat_grads.rows_slice(at, at + n).reshape(p->grad.shape());
    at += n;
  }
}

Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

const ModelConfig& Model::config() const {
  return impl_->config;
}

namespace {

void expect_rows(const Tensor& h, const Aggregator& agg, int layer) {
  TESSEL_EXPECTS(h.rows() == agg.num_src(),
                 "model: layer {} gets {} rows but its aggregator has {} sources", layer, h.rows(),
                 agg.num_src());
}

// Dropout of every row of `x` into `out` (which may be x itself), with the draws keyed by agg's
// source ids; `bits` (when defined) receives the keep bits.
void dropout_rows(const Tensor& x, Aggregator& agg, const rng::Key& key, float p, Tensor& out,
                  Tensor& bits) {
  if (const Tensor* ids = agg.src_ids_on(x.device()))
    kernels::dropout_forward(x, *ids, key, p, out, bits);
  else
    kernels::dropout_forward(x, agg.src_ids(), key, p, out, bits);
}

} // namespace

Model::InputDropout Model::input_dropout(const rng::Key& dropout_key, bool training) const {
  rng::Key key = dropout_key;
  key.layer = 0;
  return {key, training ? impl_->config.dropout : 0.0f};
}

Tensor Model::forward(const Tensor& x, std::span<Aggregator* const> aggregators,
                      const rng::Key& dropout_key, bool training, Input input) {
  auto& m = *impl_;
  TESSEL_EXPECTS(static_cast<int>(aggregators.size()) == m.config.layers,
                 "model: {} aggregators for {} layers", aggregators.size(), m.config.layers);
  m.has_forward = false;
  const float p = training ? m.config.dropout : 0.0f;
  auto layer_key = [&](int l) {
    rng::Key key = dropout_key;
    key.layer = static_cast<std::uint32_t>(l);
    return key;
  };
  Tensor h = x;
  for (int l = 0; l < m.config.layers; ++l) {
    const auto i = static_cast<std::size_t>(l);
    Aggregator& agg = *aggregators[i];
    expect_rows(h, agg, l);
    InputRecompute recompute;
    if (l == 0 && p > 0.0f && input != Input::dropped) {
      const rng::Key key = input_dropout(dropout_key, training).key;
      Tensor no_bits;
      if (input == Input::scratch) {
        // Dropped in place: layer 0 keeps the dropped rows themselves for its backward.
        dropout_rows(h, agg, key, p, h, no_bits);
      } else if (!m.layers[i]->reads_input_again()) {
        // The caller keeps x, and layer 0 reads the dropped copy once: no keep bits to save
        // (writing them made this pass 1.1-1.2x slower).
        Tensor dropped = Tensor::empty(h.shape(), DType::f32, h.device()), no_bits;
        m.input_bits = Tensor();
        dropout_rows(h, agg, key, p, dropped, no_bits);
        h = std::move(dropped);
      } else {
        // The caller keeps x: the dropped copy lives only while layer 0's forward runs, and
        // where layer 0 needs its input again the saved keep bits are applied to x's rows (the
        // same values, bit for bit, without drawing them twice).
        Tensor dropped = Tensor::empty(h.shape(), DType::f32, h.device());
        Tensor& bits = m.input_bits;
        const auto shape = kernels::dropout_mask_shape(h);
        if (!bits.defined() || bits.shape() != shape || bits.device() != h.device())
          bits = Tensor::empty(shape, DType::u8, h.device());
        dropout_rows(h, agg, key, p, dropped, bits);
        recompute = [features = h, bits, p](std::int64_t begin, std::int64_t end, Tensor& rows) {
          kernels::dropout_backward(features.rows_slice(begin, end), bits.rows_slice(begin, end),
                                    p, rows);
        };
        h = std::move(dropped);
      }
    }
    if (auto* gat = dynamic_cast<GatLayer*>(m.layers[i].get())) {
      rng::Key key = dropout_key;
      key.layer = kAttentionDropoutLayer + static_cast<std::uint32_t>(l);
      gat->set_attention_dropout(key, training ? m.config.attn_dropout : 0.0f);
    }
    h = m.layers[i]->forward(std::move(h), agg, recompute);
    if (l + 1 < m.config.layers) {
      // Layer l + 1's input: ReLU, then its dropout (keyed by its aggregator's source ids), in
      // place, with 1 bit per element kept for backward.
      Aggregator& next = *aggregators[i + 1];
      expect_rows(h, next, l + 1);
      Tensor& bits = m.relu_bits[i];
      if (!bits.defined() || bits.rows() != h.rows() || bits.cols() != (h.cols() + 7) / 8 ||
          bits.device() != h.device())
        bits = Tensor::empty({h.rows(), (h.cols() + 7) / 8}, DType::u8, h.device());
      const rng::Key key = layer_key(l + 1);
      if (const Tensor* ids = next.src_ids_on(h.device()))
        kernels::relu_dropout_forward(h, *ids, key, p, h, bits);
      else
        kernels::relu_dropout_forward(h, next.src_ids(), key, p, h, bits);
      m.relu_p[i] = p;
    }
  }
  m.has_forward = true;
  return h;
}

Tensor Model::infer(const Tensor& x, std::span<Aggregator* const> aggregators,
                    const std::function<void(int)>& after_layer, Tensor* last_hidden) {
  auto& m = *impl_;
  TESSEL_EXPECTS(static_cast<int>(aggregators.size()) == m.config.layers,
                 "model: {} aggregators for {} layers", aggregators.size(), m.config.layers);
  m.has_forward = false;
  Tensor h = x;
  for (int l = 0; l < m.config.layers; ++l) {
    Aggregator& agg = *aggregators[static_cast<std::size_t>(l)];
    TESSEL_EXPECTS(h.rows() == agg.num_src(),
                   "model: layer {} gets {} rows but its aggregator has {} sources", l, h.rows(),
                   agg.num_src());
    if (last_hidden && l > 0 && l + 1 == m.config.layers) *last_hidden = h.clone();
    if (auto* gat = dynamic_cast<GatLayer*>(m.layers[static_cast<std::size_t>(l)].get()))
      gat->set_attention_dropout(rng::Key{}, 0.0f);
    h = m.layers[static_cast<std::size_t>(l)]->forward(std::move(h), agg);
    if (l + 1 < m.config.layers) kernels::relu_forward(h, h);
    if (after_layer) after_layer(l);
  }
  return h;
}

GraphLayer& Model::layer(int l) {
  TESSEL_EXPECTS(l >= 0 && l < impl_->config.layers, "model: no layer {}", l);
  return *impl_->layers[static_cast<std::size_t>(l)];
}

int Model::num_layers() const { return impl_->config.layers; }

bool Model::infer_blocks_possible() const {
  const ModelKind kind = impl_->config.kind;
  return kind == ModelKind::gcn || kind == ModelKind::sage;
}

Tensor Model::infer_blocks(const std::function<void(std::int64_t, std::int64_t, Tensor&)>& rows,
                           std::int64_t num_rows, std::int64_t block_rows,
                           std::span<Aggregator* const> aggregators,
                           const std::function<void(int)>& after_layer, Tensor* last_hidden) {
  auto& m = *impl_;
  TESSEL_EXPECTS(static_cast<int>(aggregators.size()) == m.config.layers,
                 "model: {} aggregators for {} layers", aggregators.size(), m.config.layers);
  m.has_forward = false;
  Tensor h;
  for (int l = 0; l < m.config.layers; ++l) {
    Aggregator& agg = *aggregators[static_cast<std::size_t>(l)];
    GraphLayer& layer = *m.layers[static_cast<std::size_t>(l)];
    if (l == 0) {
      h = layer.infer_blocks(rows, num_rows, agg, block_rows);
    } else {
      TESSEL_EXPECTS(h.rows() == agg.num_src(),
                     "model: layer {} gets {} rows but its aggregator has {} sources", l, h.rows(),
                     agg.num_src());
      if (last_hidden && l + 1 == m.config.layers) *last_hidden = h.clone();
      h = layer.forward(std::move(h), agg);
    }
    if (l + 1 < m.config.layers) kernels::relu_forward(h, h);
    if (after_layer) after_layer(l);
  }
  return h;
}

void Model::backward(const Tensor& grad_logits) {
  auto& m = *impl_;
  TESSEL_EXPECTS(m.has_forward, "model: backward() needs a forward() first");
  m.has_forward = false; // the layers release what they saved as their backward uses it
  Tensor grad = grad_logits;
  for (int l = m.config.layers - 1; l >= 0; --l) {
    const auto i = static_cast<std::size_t>(l);
    if (l + 1 < m.config.layers) {
      // grad is layer l + 1's fresh input gradient: owned here, so updated in place.
      kernels::relu_dropout_backward(grad, m.relu_bits[i], m.relu_p[i], grad);
    }
    // Layer 0's input is the features: no gradient needed (and none sent to halo owners).
    grad = m.layers[i]->backward(grad, l > 0);
  }
}

std::vector<Parameter*> Model::parameters() {
  std::vector<Parameter*> params;
  for (auto& layer : impl_->layers)
    for (Parameter* p : layer->parameters())
      params.push_back(p);
  return params;
}

void Model::zero_grad() {
  impl_->flat_grads.fill_zero();
}

Tensor& Model::flat_parameters() {
  return impl_->flat_values;
}

Tensor& Model::flat_gradients() {
  return impl_->flat_grads;
}

} // namespace tessel::nn
