// GCN and GraphSAGE models: layer stacks with dropout before and ReLU between layers.
#include "tessel/nn/model.hpp"

#include "tessel/core/error.hpp"
#include "tessel/kernels/dense.hpp"
#include "tessel/nn/layers.hpp"

namespace tessel::nn {

struct Model::Impl {
  ModelConfig config;
  std::vector<std::unique_ptr<GraphLayer>> layers;
  std::vector<Dropout> dropouts; // on the input of each layer
  std::vector<Relu> relus;       // after every layer but the last
  bool has_forward = false;
  Tensor flat_values, flat_grads; // every parameter (gradient) is a view into these
};

namespace {
void validate(const ModelConfig& c) {
  TESSEL_EXPECTS(c.kind == "gcn" || c.kind == "sage", "model: kind '{}' is not gcn or sage",
                 c.kind);
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
    const std::int64_t in = l == 0 ? config.in_dim : config.hidden;
    const std::int64_t out = l == config.layers - 1 ? config.out_dim : config.hidden;
    // Each layer draws its weights from its own key, so layer l's initial values do not
    // depend on the other layers' sizes.
    rng::Key key{config.seed, rng::Stream::init, 0, 0, static_cast<std::uint32_t>(l)};
    const std::string prefix = "layer" + std::to_string(l);
    if (config.kind == "gcn")
      impl_->layers.push_back(std::make_unique<GcnLayer>(prefix, in, out, key, config.device));
    else
      impl_->layers.push_back(std::make_unique<SageLayer>(prefix, in, out, key, config.device));
    impl_->dropouts.emplace_back(config.dropout);
    if (l + 1 < config.layers) impl_->relus.emplace_back();
  }
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

Tensor Model::forward(const Tensor& x, std::span<Aggregator* const> aggregators,
                      const rng::Key& dropout_key, bool training) {
  auto& m = *impl_;
  TESSEL_EXPECTS(static_cast<int>(aggregators.size()) == m.config.layers,
                 "model: {} aggregators for {} layers", aggregators.size(), m.config.layers);
  Tensor h = x;
  for (int l = 0; l < m.config.layers; ++l) {
    Aggregator& agg = *aggregators[static_cast<std::size_t>(l)];
    TESSEL_EXPECTS(h.rows() == agg.num_src(),
                   "model: layer {} gets {} rows but its aggregator has {} sources", l, h.rows(),
                   agg.num_src());
    rng::Key key = dropout_key;
    key.layer = static_cast<std::uint32_t>(l);
    if (const Tensor* ids = agg.src_ids_on(h.device()))
      h = m.dropouts[static_cast<std::size_t>(l)].forward(h, *ids, key, training);
    else
      h = m.dropouts[static_cast<std::size_t>(l)].forward(h, agg.src_ids(), key, training);
    h = m.layers[static_cast<std::size_t>(l)]->forward(h, agg);
    if (l + 1 < m.config.layers) h = m.relus[static_cast<std::size_t>(l)].forward(h);
  }
  m.has_forward = true;
  return h;
}

Tensor Model::infer(const Tensor& x, std::span<Aggregator* const> aggregators,
                    const std::function<void(int)>& after_layer) {
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
    h = m.layers[static_cast<std::size_t>(l)]->forward(h, agg);
    if (l + 1 < m.config.layers) kernels::relu_forward(h, h);
    if (after_layer) after_layer(l);
  }
  return h;
}

void Model::backward(const Tensor& grad_logits) {
  auto& m = *impl_;
  TESSEL_EXPECTS(m.has_forward, "model: backward() needs a forward() first");
  Tensor grad = grad_logits;
  for (int l = m.config.layers - 1; l >= 0; --l) {
    const auto i = static_cast<std::size_t>(l);
    if (l + 1 < m.config.layers) grad = m.relus[i].backward(grad);
    // Layer 0's input is the features: no gradient needed (and none sent to halo owners).
    grad = m.layers[i]->backward(grad, l > 0);
    if (l > 0) grad = m.dropouts[i].backward(grad);
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
