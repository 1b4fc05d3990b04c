// GNN models (GCN, GraphSAGE) as stacks of layers with hand-written backward passes.
#pragma once

#include "tessel/core/option_words.hpp"
#include "tessel/core/rng.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/nn/aggregator.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tessel::nn {

class GraphLayer;

// A trainable tensor and its gradient (same shape, f32).
struct Parameter {
  std::string name;  // "layer0.weight", "layer1.self_weight", ...
  Tensor value;
  Tensor grad;
};

// --model: the static GNNs (Model below), the pipeline's SIGN MLP and the temporal GNNs
// (TemporalGcn).
enum class ModelKind { gcn, sage, gcn_gru, gcn_lstm, evolvegcn_o, sign_mlp, gat };
inline std::span<const OptionWord<ModelKind>> option_words(ModelKind) {
  static constexpr OptionWord<ModelKind> words[] = {
      {"gcn", ModelKind::gcn},           {"sage", ModelKind::sage},
      {"gcn-gru", ModelKind::gcn_gru},   {"gcn-lstm", ModelKind::gcn_lstm},
      {"evolvegcn-o", ModelKind::evolvegcn_o}, {"sign-mlp", ModelKind::sign_mlp},
      {"gat", ModelKind::gat}};
  return words;
}

struct ModelConfig {
  ModelKind kind = ModelKind::gcn;  // Model: gcn, sage or gat
  std::int64_t in_dim = 0;
  std::int64_t hidden = 16;
  std::int64_t out_dim = 0;
  int layers = 2;
  float dropout = 0.5f;  // applied to the input of every layer while training
  // GAT: `hidden` is one head's width; hidden layers concatenate `heads` heads (their output
  // is heads * hidden wide), the output layer averages `out_heads` heads of out_dim columns;
  // attn_dropout drops attention coefficients while training.
  int heads = 1;
  int out_heads = 1;
  float attn_dropout = 0.0f;
  std::uint64_t seed = 0;
  Device device = Device::cpu();
};

// Layer l reads aggregators[l]; ReLU between layers, none after the last (logits out).
// GAT's attention dropout draws from dropout_key with layer = kAttentionDropoutLayer + l.
// Dropout masks come from dropout_key with layer = l and are keyed by the aggregator's
// src_ids(), so they do not depend on the rank count.
inline constexpr std::uint32_t kAttentionDropoutLayer = 256;

class Model {
 public:
  explicit Model(const ModelConfig& config);  // Glorot-uniform weights, zero biases, from seed
  ~Model();
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;

  const ModelConfig& config() const;
  // What forward() may do with its input. `kept` (the full graph's features): x stays as it
  // was. `scratch`: the caller never reads x again (a step's gathered rows on a GPU), so the
  // input dropout is applied in place. `dropped`: x holds the input dropout already, drawn by
  // the caller with input_dropout() while it gathered the rows (kernels::gather_dropout_rows).
  enum class Input { kept, scratch, dropped };
  // The key and probability of the input features' dropout in forward(..., training): layer 0's
  // draws, keyed per row by aggregators[0]'s source ids.
  struct InputDropout {
    rng::Key key;
    float p = 0.0f;
  };
  InputDropout input_dropout(const rng::Key& dropout_key, bool training) const;
  // x: [aggregators[0]->num_src(), in_dim] -> logits [aggregators.back()->num_dst(), out_dim].
  Tensor forward(const Tensor& x, std::span<Aggregator* const> aggregators,
                 const rng::Key& dropout_key, bool training, Input input = Input::kept);
  // Layer-wise inference (no dropout): the same logits as forward(..., training = false), with
  // ReLU applied in place, since no backward follows. Each layer's input replaces what the last
  // training forward kept, so inference runs in the memory training released. after_layer(l),
  // when given, runs once layer l is done (progress reports). backward() needs a new forward().
  // last_hidden, when given (and the model has at least 2 layers), receives the last hidden
  // layer's output (after its ReLU): the input of the output layer, one row per source row.
  Tensor infer(const Tensor& x, std::span<Aggregator* const> aggregators,
               const std::function<void(int)>& after_layer = {}, Tensor* last_hidden = nullptr);
  // infer() with layer 0's input read in row blocks (GraphLayer::infer_blocks): the features
  // are never held whole. The same logits as infer() up to the last bits (layer 0 transforms
  // before it aggregates, block by block); bit for bit the same for any source of the same
  // rows. infer_blocks_possible(): the model's first layer has this (GCN, GraphSAGE).
  bool infer_blocks_possible() const;
  // Layer l of the model, for inference driven from outside (GraphLayer::infer_aggregated).
  GraphLayer& layer(int l);
  int num_layers() const;
  Tensor infer_blocks(const std::function<void(std::int64_t, std::int64_t, Tensor&)>& rows,
                      std::int64_t num_rows, std::int64_t block_rows,
                      std::span<Aggregator* const> aggregators,
                      const std::function<void(int)>& after_layer = {},
                      Tensor* last_hidden = nullptr);
  // Accumulates parameter gradients from d loss / d logits (call zero_grad() first). Uses the
  // aggregators and activations of the last forward().
  void backward(const Tensor& grad_logits);
  std::vector<Parameter*> parameters();
  void zero_grad();
  // All parameters (gradients) as one f32 [total] tensor on the model's device, in the order
  // of parameters(); each Parameter's value and grad are views into these.
  Tensor& flat_parameters();
  Tensor& flat_gradients();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessel::nn
