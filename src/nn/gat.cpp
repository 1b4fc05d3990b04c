// The GAT layer and the attention side of the Aggregator interface.
#include "tessel/nn/gat.hpp"

#include "tessel/core/error.hpp"
#include "tessel/kernels/kernels.hpp"

namespace tessel::nn {

// ---- Aggregator: attention defaults ----

const kernels::SparseMatrix& Aggregator::attention_graph(Device) {
  TESSEL_FAIL("this aggregation has no edges to attend over (attention needs a graph aggregator)");
}
const Tensor& Aggregator::attention_ids(Device) {
  TESSEL_FAIL("this aggregation has no edges to attend over (attention needs a graph aggregator)");
}
Tensor Aggregator::exchange_rows(const Tensor&) {
  TESSEL_FAIL("this aggregation has no edges to attend over (attention needs a graph aggregator)");
}
Tensor Aggregator::exchange_rows_backward(const Tensor&) {
  TESSEL_FAIL("this aggregation has no edges to attend over (attention needs a graph aggregator)");
}

void AttentionEdges::reset(kernels::SparseMatrix pattern, Tensor ids) {
  pattern_ = std::move(pattern);
  graph_ = kernels::SparseMatrix();
  ids_ = std::move(ids);
  ids_on_ = Tensor();
}

const kernels::SparseMatrix& AttentionEdges::graph(Device device) {
  if (!graph_.indptr.defined() || graph_.device() != device)
    graph_ = kernels::add_self_loops(pattern_.device() == device ? pattern_ : pattern_.to(device));
  return graph_;
}

const Tensor& AttentionEdges::ids(Device device) {
  TESSEL_EXPECTS(ids_.defined(), "attention: the aggregator knows no ids for its sources");
  if (ids_.device() == device) return ids_;
  if (!ids_on_.defined() || ids_on_.device() != device) ids_on_ = ids_.to(device);
  return ids_on_;
}

// ---- GAT ----

namespace {
Parameter gat_parameter(std::string name, Tensor value) {
  Parameter p;
  p.name = std::move(name);
  p.grad = Tensor::zeros(value.shape(), DType::f32, value.device());
  p.value = std::move(value);
  return p;
}
} // namespace

GatLayer::GatLayer(const std::string& prefix, std::int64_t in_dim, std::int64_t head_dim,
                   int heads, bool average, const rng::Key& key, Device device)
    : weight_(gat_parameter(prefix + ".weight",
                            glorot_uniform(in_dim, heads * head_dim, key, 0, device))),
      // The attention vectors: Glorot over [heads, head_dim], stored flat.
      att_src_(gat_parameter(prefix + ".att_src",
                             glorot_uniform(heads, head_dim, key, 1, device).reshape({heads * head_dim}))),
      att_dst_(gat_parameter(prefix + ".att_dst",
                             glorot_uniform(heads, head_dim, key, 2, device).reshape({heads * head_dim}))),
      bias_(gat_parameter(prefix + ".bias",
                          Tensor::zeros({average ? head_dim : heads * head_dim}, DType::f32, device))),
      heads_(heads), head_dim_(head_dim), average_(average) {
  TESSEL_EXPECTS(heads >= 1 && head_dim >= 1 && in_dim >= 1,
                 "GatLayer: {} heads of {} columns from {} inputs", heads, head_dim, in_dim);
}

Tensor GatLayer::forward(Tensor x, Aggregator& agg, const InputRecompute& recompute) {
  const Device device = weight_.value.device();
  TESSEL_EXPECTS(x.defined() && x.dtype() == DType::f32 && x.dim() == 2 &&
                     x.rows() == agg.num_src() && x.cols() == in_dim() && x.device() == device,
                 "GatLayer: input {} expected f32 [{}, {}] on {}",
                 x.defined() ? x.describe() : std::string("undefined"), agg.num_src(), in_dim(),
                 device.str());
  agg_ = &agg;
  const std::int64_t hf = heads_ * head_dim_;
  Tensor packed;
  dst_term_ = Tensor::empty({agg.num_dst(), heads_}, DType::f32, device);
  {
    Tensor wh = Tensor::empty({x.rows(), hf}, DType::f32, device);
    kernels::gemm(x, false, weight_.value, false, wh);
    input_.save(std::move(x), recompute);
    packed = Tensor::empty({wh.rows(), hf + heads_}, DType::f32, device);
    kernels::attention_project(wh, att_src_.value, att_dst_.value, heads_, packed, dst_term_);
  }
  // One exchange: the halo rows arrive with their source terms.
  packed_ = agg.exchange_rows(packed);
  packed = Tensor();
  const kernels::SparseMatrix& graph = agg.attention_graph(device);
  kernels::AttentionDropout dropout;
  dropout.key = dropout_key_;
  dropout.p = dropout_p_;
  if (dropout_p_ > 0.0f) dropout.ids = agg.attention_ids(device);
  used_p_ = dropout_p_;
  alpha_ = Tensor::empty({graph.nnz(), heads_}, DType::f32, device);
  Tensor out = Tensor::empty({agg.num_dst(), out_dim()}, DType::f32, device);
  kernels::attention_forward(graph, packed_, dst_term_, heads_, average_, dropout, out, alpha_);
  kernels::add_bias(out, bias_.value);
  return out;
}

Tensor GatLayer::backward(const Tensor& grad_out, bool need_input_grad) {
  TESSEL_ASSERT(agg_ != nullptr && alpha_.defined(), "GatLayer::backward before forward");
  const Device device = weight_.value.device();
  kernels::column_sums(grad_out, bias_.grad, true);
  Tensor grad_dst = Tensor::empty(dst_term_.shape(), DType::f32, device);
  Tensor grad_packed;
  {
    Tensor grad_full = Tensor::empty(packed_.shape(), DType::f32, device);
    kernels::attention_backward(agg_->attention_graph(device), packed_, dst_term_, heads_,
                                average_, used_p_, alpha_, grad_out, grad_full, grad_dst);
    alpha_ = Tensor();
    grad_packed = agg_->exchange_rows_backward(grad_full);
  }
  Tensor grad_wh = Tensor::empty({grad_packed.rows(), heads_ * head_dim_}, DType::f32, device);
  kernels::attention_project_backward(packed_, grad_packed, grad_dst, att_src_.value,
                                      att_dst_.value, heads_, grad_wh, att_src_.grad,
                                      att_dst_.grad);
  packed_ = Tensor();
  dst_term_ = Tensor();
  grad_packed = Tensor();
  input_.add_transposed_times(grad_wh, weight_.grad);
  input_.release();
  if (!need_input_grad) return {};
  Tensor grad_in = Tensor::empty({grad_wh.rows(), in_dim()}, DType::f32, device);
  kernels::gemm(grad_wh, false, weight_.value, true, grad_in);
  return grad_in;
}

} // namespace tessel::nn
