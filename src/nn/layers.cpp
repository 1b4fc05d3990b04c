// Forward and backward of Linear, GCN, GraphSAGE, ReLU and dropout, and Glorot initialization.
#include "tessel/nn/layers.hpp"

#include "tessel/core/error.hpp"
#include "tessel/kernels/kernels.hpp"

#include <algorithm>
#include <cmath>

namespace tessel::nn {

namespace {

Tensor new_like(std::int64_t rows, std::int64_t cols, Device device) {
  return Tensor::empty({rows, cols}, DType::f32, device);
}

Parameter make_parameter(std::string name, Tensor value) {
  Parameter p;
  p.name = std::move(name);
  p.grad = Tensor::zeros(value.shape(), DType::f32, value.device());
  p.value = std::move(value);
  return p;
}

Parameter make_bias(std::string name, std::int64_t dim, Device device) {
  return make_parameter(std::move(name), Tensor::zeros({dim}, DType::f32, device));
}

// out[num_rows, W.cols] = x W (+ out when accumulate).
void matmul(const Tensor& x, const Tensor& w, Tensor& out, bool accumulate) {
  kernels::gemm(x, false, w, false, out, 1.0f, accumulate ? 1.0f : 0.0f);
}

void expect_input(const char* layer, const Tensor& x, std::int64_t rows, std::int64_t in_dim,
                  Device device) {
  TESSEL_EXPECTS(x.defined() && x.dtype() == DType::f32 && x.dim() == 2,
                 "{}: input must be f32 of rank 2, got {}", layer,
                 x.defined() ? x.describe() : std::string("undefined"));
  TESSEL_EXPECTS(x.rows() == rows && x.cols() == in_dim, "{}: input {} expected [{}, {}]", layer,
                 x.describe(), rows, in_dim);
  TESSEL_EXPECTS(x.device() == device, "{}: input on {}, parameters on {}", layer, x.device().str(),
                 device.str());
}

} // namespace

Tensor glorot_uniform(std::int64_t fan_in, std::int64_t fan_out, const rng::Key& key,
                      std::uint64_t item, Device device) {
  Tensor w = Tensor::empty({fan_in, fan_out}, DType::f32);
  const double limit = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  rng::Sequence draws(key, item);
  float* data = w.data<float>();
  for (std::int64_t i = 0; i < w.numel(); ++i)
    data[i] = static_cast<float>((2.0 * draws.next_double() - 1.0) * limit);
  return device.is_cpu() ? w : w.to(device);
}

// ---- Linear ----

Linear::Linear(const std::string& name, std::int64_t in_dim, std::int64_t out_dim,
               const rng::Key& key, Device device)
    : weight_(make_parameter(name + ".weight", glorot_uniform(in_dim, out_dim, key, 0, device))),
      bias_(make_bias(name + ".bias", out_dim, device)) {}

Tensor Linear::forward(const Tensor& x) {
  expect_input("Linear", x, x.rows(), weight_.value.rows(), weight_.value.device());
  input_ = x;
  Tensor y = new_like(x.rows(), weight_.value.cols(), x.device());
  matmul(x, weight_.value, y, false);
  kernels::add_bias(y, bias_.value);
  return y;
}

Tensor Linear::backward(const Tensor& grad_out, bool need_input_grad) {
  TESSEL_ASSERT(input_.defined(), "Linear::backward before forward");
  kernels::gemm(input_, true, grad_out, false, weight_.grad, 1.0f, 1.0f);
  kernels::column_sums(grad_out, bias_.grad, true);
  if (!need_input_grad) return {};
  Tensor grad_in = new_like(input_.rows(), input_.cols(), input_.device());
  kernels::gemm(grad_out, false, weight_.value, true, grad_in);
  return grad_in;
}

// ---- Saved inputs ----

namespace {
// Rows per recomputed chunk: 2^25 elements (128 MiB of f32) keep the GEMMs large enough to run
// at full speed while the chunk stays small beside an [N, F] activation.
constexpr std::int64_t kRecomputeChunkElements = std::int64_t{1} << 25;
} // namespace

void SavedInput::save(Tensor x, const InputRecompute& recompute) {
  cols_ = x.cols();
  device_ = x.device();
  if (recompute) {
    recompute_ = recompute;
    value_ = Tensor();
  } else {
    recompute_ = nullptr;
    value_ = std::move(x);
  }
}

void SavedInput::for_chunks(
    std::int64_t rows,
    const std::function<void(const Tensor&, std::int64_t, std::int64_t)>& fn) const {
  TESSEL_ASSERT(saved(), "a layer's backward ran without its forward");
  if (value_.defined()) {
    fn(value_.rows_slice(0, rows), 0, rows);
    return;
  }
  const std::int64_t chunk = std::max<std::int64_t>(1, kRecomputeChunkElements / std::max<std::int64_t>(cols_, 1));
  Tensor buffer = new_like(std::min(chunk, rows), cols_, device_);
  for (std::int64_t begin = 0; begin < rows; begin += chunk) {
    const std::int64_t end = std::min(rows, begin + chunk);
    Tensor part = buffer.rows_slice(0, end - begin);
    recompute_(begin, end, part);
    fn(part, begin, end);
  }
}

void SavedInput::add_transposed_times(const Tensor& g, Tensor& dw) const {
  for_chunks(g.rows(), [&](const Tensor& x, std::int64_t begin, std::int64_t end) {
    kernels::gemm(x, true, g.rows_slice(begin, end), false, dw, 1.0f, 1.0f);
  });
}

void SavedInput::times(const Tensor& w, Tensor& out, bool accumulate) const {
  for_chunks(out.rows(), [&](const Tensor& x, std::int64_t begin, std::int64_t end) {
    Tensor rows = out.rows_slice(begin, end);
    matmul(x, w, rows, accumulate);
  });
}

// ---- Layer-wise inference over row blocks ----

namespace {

// x w for an input read in row blocks: out (f32 [num_rows, w.cols]) rows [b, e) = X[b, e) w
// (+ out's rows when accumulate), each block written by rows() into one reused buffer.
void blocks_times(const InputRecompute& rows, std::int64_t num_rows, std::int64_t block_rows,
                  const Tensor& w, Tensor& out, bool accumulate) {
  if (num_rows == 0) return;
  TESSEL_EXPECTS(block_rows > 0, "inference blocks of {} rows", block_rows);
  Tensor buffer = new_like(std::min(block_rows, num_rows), w.rows(), w.device());
  for (std::int64_t begin = 0; begin < num_rows; begin += block_rows) {
    const std::int64_t end = std::min(num_rows, begin + block_rows);
    Tensor block = buffer.rows_slice(0, end - begin);
    rows(begin, end, block);
    Tensor dst = out.rows_slice(begin, end);
    matmul(block, w, dst, accumulate);
  }
}

} // namespace

Tensor GraphLayer::infer_blocks(const InputRecompute&, std::int64_t, Aggregator&, std::int64_t) {
  TESSEL_FAIL("this layer has no inference over row blocks (GCN and GraphSAGE have)");
}

Norm GraphLayer::infer_norm() const {
  TESSEL_FAIL("this layer has no inference over row blocks (GCN and GraphSAGE have)");
}

void GraphLayer::infer_aggregated(const Tensor&, const Tensor&, Tensor&) {
  TESSEL_FAIL("this layer has no inference over row blocks (GCN and GraphSAGE have)");
}

void GraphLayer::infer_transform(const Tensor&, Tensor&) {
  TESSEL_FAIL("this layer has no inference over row blocks (GCN and GraphSAGE have)");
}

void GraphLayer::infer_transformed(const Tensor&, Tensor&) {
  TESSEL_FAIL("this layer has no inference over row blocks (GCN and GraphSAGE have)");
}

// ---- GCN ----

GcnLayer::GcnLayer(const std::string& prefix, std::int64_t in_dim, std::int64_t out_dim,
                   const rng::Key& key, Device device)
    : weight_(make_parameter(prefix + ".weight", glorot_uniform(in_dim, out_dim, key, 0, device))),
      bias_(make_bias(prefix + ".bias", out_dim, device)) {}

Tensor GcnLayer::forward(Tensor x, Aggregator& agg, const InputRecompute& recompute) {
  expect_input("GcnLayer", x, agg.num_src(), in_dim(), weight_.value.device());
  agg_ = &agg;
  input_.release();
  aggregated_ = Tensor();
  Tensor out;
  if (transforms_first()) {
    Tensor transformed = new_like(x.rows(), out_dim(), x.device());
    matmul(x, weight_.value, transformed, false);
    input_.save(std::move(x), recompute);
    out = agg.aggregate(transformed, Norm::gcn);
  } else {
    aggregated_ = agg.aggregate(x, Norm::gcn);
    x = Tensor(); // aggregate-first never reads X again: free it before the output exists
    out = new_like(agg.num_dst(), out_dim(), aggregated_.device());
    matmul(aggregated_, weight_.value, out, false);
  }
  kernels::add_bias(out, bias_.value);
  return out;
}

Tensor GcnLayer::backward(const Tensor& grad_out, bool need_input_grad) {
  TESSEL_ASSERT(agg_ != nullptr, "GcnLayer::backward before forward");
  kernels::column_sums(grad_out, bias_.grad, true);
  if (transforms_first()) {
    // out = Â (X W): d/d(XW) = Âᵀ G, then dW = Xᵀ (Âᵀ G), dX = (Âᵀ G) Wᵀ.
    const Tensor grad_transformed = agg_->aggregate_backward(grad_out, Norm::gcn);
    input_.add_transposed_times(grad_transformed, weight_.grad);
    input_.release(); // before grad_in exists: the two never need to be held together
    if (!need_input_grad) return {};
    Tensor grad_in = new_like(grad_transformed.rows(), in_dim(), grad_transformed.device());
    kernels::gemm(grad_transformed, false, weight_.value, true, grad_in);
    return grad_in;
  }
  // out = (Â X) W: dW = (Â X)ᵀ G, dX = Âᵀ (G Wᵀ). Layer 0 skips the aggregation backward.
  TESSEL_ASSERT(aggregated_.defined(), "GcnLayer::backward twice after one forward");
  kernels::gemm(aggregated_, true, grad_out, false, weight_.grad, 1.0f, 1.0f);
  aggregated_ = Tensor();
  if (!need_input_grad) return {};
  Tensor grad_aggregated = new_like(grad_out.rows(), in_dim(), grad_out.device());
  kernels::gemm(grad_out, false, weight_.value, true, grad_aggregated);
  return agg_->aggregate_backward(grad_aggregated, Norm::gcn);
}

Tensor GcnLayer::infer_blocks(const InputRecompute& rows, std::int64_t num_rows, Aggregator& agg,
                              std::int64_t block_rows) {
  TESSEL_EXPECTS(num_rows == agg.num_src(), "GcnLayer: {} input rows, {} sources", num_rows,
                 agg.num_src());
  agg_ = nullptr;
  input_.release();
  aggregated_ = Tensor();
  Tensor transformed = new_like(num_rows, out_dim(), weight_.value.device());
  blocks_times(rows, num_rows, block_rows, weight_.value, transformed, false);
  Tensor out = agg.aggregate(transformed, Norm::gcn);
  kernels::add_bias(out, bias_.value);
  return out;
}

Norm GcnLayer::infer_norm() const { return Norm::gcn; }

void GcnLayer::infer_aggregated(const Tensor& aggregated, const Tensor&, Tensor& out) {
  matmul(aggregated, weight_.value, out, false);
  kernels::add_bias(out, bias_.value);
}

void GcnLayer::infer_transform(const Tensor& x, Tensor& transformed) {
  matmul(x, weight_.value, transformed, false);
}

void GcnLayer::infer_transformed(const Tensor&, Tensor& out) {
  kernels::add_bias(out, bias_.value);
}

// ---- GraphSAGE ----

SageLayer::SageLayer(const std::string& prefix, std::int64_t in_dim, std::int64_t out_dim,
                     const rng::Key& key, Device device)
    : self_weight_(
          make_parameter(prefix + ".self_weight", glorot_uniform(in_dim, out_dim, key, 0, device))),
      neigh_weight_(make_parameter(prefix + ".neigh_weight",
                                   glorot_uniform(in_dim, out_dim, key, 1, device))),
      bias_(make_bias(prefix + ".bias", out_dim, device)) {}

Tensor SageLayer::forward(Tensor x, Aggregator& agg, const InputRecompute& recompute) {
  expect_input("SageLayer", x, agg.num_src(), in_dim(), self_weight_.value.device());
  TESSEL_EXPECTS(agg.num_dst() <= agg.num_src(), "SageLayer: {} destinations but {} sources",
                 agg.num_dst(), agg.num_src());
  agg_ = &agg;
  input_.release();
  aggregated_ = Tensor();
  const Device device = x.device();
  Tensor out;
  if (transforms_first()) {
    Tensor transformed = new_like(x.rows(), out_dim(), device);
    matmul(x, neigh_weight_.value, transformed, false);
    out = agg.aggregate(transformed, Norm::mean);
    transformed = Tensor();
    matmul(x.rows_slice(0, agg.num_dst()), self_weight_.value, out, true);
    input_.save(std::move(x), recompute);
  } else {
    aggregated_ = agg.aggregate(x, Norm::mean);
    // With a recompute, X is freed before the output exists and the self term redraws it in
    // chunks: X, mean_agg(X) and the output are never held at once.
    input_.save(std::move(x), recompute);
    out = new_like(agg.num_dst(), out_dim(), device);
    matmul(aggregated_, neigh_weight_.value, out, false);
    input_.times(self_weight_.value, out, true);
  }
  kernels::add_bias(out, bias_.value);
  return out;
}

Tensor SageLayer::infer_blocks(const InputRecompute& rows, std::int64_t num_rows,
                               Aggregator& agg, std::int64_t block_rows) {
  TESSEL_EXPECTS(num_rows == agg.num_src() && agg.num_dst() <= num_rows,
                 "SageLayer: {} input rows, {} sources, {} destinations", num_rows, agg.num_src(),
                 agg.num_dst());
  agg_ = nullptr;
  input_.release();
  aggregated_ = Tensor();
  const Device device = self_weight_.value.device();
  // Two passes over the input (X W_neigh, then X_dst W_self added into the aggregation) rather
  // than one holding both products: the input is read twice, the output is held once.
  Tensor transformed = new_like(num_rows, out_dim(), device);
  blocks_times(rows, num_rows, block_rows, neigh_weight_.value, transformed, false);
  Tensor out = agg.aggregate(transformed, Norm::mean);
  transformed = Tensor();
  blocks_times(rows, agg.num_dst(), block_rows, self_weight_.value, out, true);
  kernels::add_bias(out, bias_.value);
  return out;
}

Norm SageLayer::infer_norm() const { return Norm::mean; }

void SageLayer::infer_aggregated(const Tensor& aggregated, const Tensor& self_rows, Tensor& out) {
  matmul(aggregated, neigh_weight_.value, out, false);
  matmul(self_rows, self_weight_.value, out, true);
  kernels::add_bias(out, bias_.value);
}

void SageLayer::infer_transform(const Tensor& x, Tensor& transformed) {
  matmul(x, neigh_weight_.value, transformed, false);
}

// The order of forward()'s transform-first branch: mean(X W_neigh), + X_dst W_self, + b.
void SageLayer::infer_transformed(const Tensor& self_rows, Tensor& out) {
  matmul(self_rows, self_weight_.value, out, true);
  kernels::add_bias(out, bias_.value);
}

Tensor SageLayer::backward(const Tensor& grad_out, bool need_input_grad) {
  TESSEL_ASSERT(agg_ != nullptr, "SageLayer::backward before forward");
  kernels::column_sums(grad_out, bias_.grad, true);
  input_.add_transposed_times(grad_out, self_weight_.grad); // X_dstᵀ G
  Tensor grad_in;
  if (transforms_first()) {
    const Tensor grad_transformed = agg_->aggregate_backward(grad_out, Norm::mean);
    input_.add_transposed_times(grad_transformed, neigh_weight_.grad);
    input_.release(); // before grad_in exists
    if (!need_input_grad) return {};
    grad_in = new_like(grad_transformed.rows(), in_dim(), grad_transformed.device());
    kernels::gemm(grad_transformed, false, neigh_weight_.value, true, grad_in);
  } else {
    TESSEL_ASSERT(aggregated_.defined(), "SageLayer::backward twice after one forward");
    kernels::gemm(aggregated_, true, grad_out, false, neigh_weight_.grad, 1.0f, 1.0f);
    aggregated_ = Tensor();
    input_.release();
    if (!need_input_grad) return {};
    Tensor grad_aggregated = new_like(grad_out.rows(), in_dim(), grad_out.device());
    kernels::gemm(grad_out, false, neigh_weight_.value, true, grad_aggregated);
    grad_in = agg_->aggregate_backward(grad_aggregated, Norm::mean);
  }
  // The self term reaches only the destination rows, which are the first sources.
  Tensor grad_in_dst = grad_in.rows_slice(0, grad_out.rows());
  kernels::gemm(grad_out, false, self_weight_.value, true, grad_in_dst, 1.0f, 1.0f);
  return grad_in;
}

// ---- ReLU, dropout ----

Tensor Relu::forward(const Tensor& x) {
  output_ = Tensor::empty(x.shape(), DType::f32, x.device());
  kernels::relu_forward(x, output_);
  return output_;
}

Tensor Relu::backward(const Tensor& grad_out) {
  Tensor grad_in = Tensor::empty(grad_out.shape(), DType::f32, grad_out.device());
  kernels::relu_backward(grad_out, output_, grad_in);
  return grad_in;
}

template <class RowIds>
Tensor Dropout::forward_rows(const Tensor& x, const RowIds& row_ids, const rng::Key& key,
                             bool training) {
  active_ = training && p_ > 0.0f;
  if (!active_) {
    mask_ = Tensor();
    return x;
  }
  Tensor y = Tensor::empty(x.shape(), DType::f32, x.device());
  mask_ = Tensor::empty(kernels::dropout_mask_shape(x), DType::u8, x.device());
  kernels::dropout_forward(x, row_ids, key, p_, y, mask_);
  return y;
}

Tensor Dropout::forward(const Tensor& x, std::span<const NodeId> row_ids, const rng::Key& key,
                        bool training) {
  return forward_rows(x, row_ids, key, training);
}

Tensor Dropout::forward(const Tensor& x, const Tensor& row_ids, const rng::Key& key,
                        bool training) {
  return forward_rows(x, row_ids, key, training);
}

Tensor Dropout::backward(const Tensor& grad_out) {
  if (!active_) return grad_out;
  Tensor grad_in = Tensor::empty(grad_out.shape(), DType::f32, grad_out.device());
  kernels::dropout_backward(grad_out, mask_, p_, grad_in);
  return grad_in;
}

void normalize_rows(Tensor& features) {
  kernels::normalize_rows(features);
}

} // namespace tessel::nn
