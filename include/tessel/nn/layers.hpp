// Layers with explicit forward/backward: Linear, GCN, GraphSAGE, ReLU, dropout; Glorot init.
#pragma once

#include "tessel/core/rng.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/nn/aggregator.hpp"
#include "tessel/nn/model.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace tessel::nn {

// f32 [fan_in, fan_out] on `device`, uniform in +-sqrt(6 / (fan_in + fan_out)), drawn in
// row-major order from Philox item `item` of `key`: the same on every rank and process count.
Tensor glorot_uniform(std::int64_t fan_in, std::int64_t fan_out, const rng::Key& key,
                      std::uint64_t item, Device device = Device::cpu());

// Every layer keeps what its backward needs from the last forward; backward adds the
// parameter gradients into Parameter::grad (zero them first) and returns the gradient with
// respect to the input, or an undefined Tensor when need_input_grad is false.

// y = x W + b; W: [in, out], b: [out].
class Linear {
public:
  Linear(const std::string& name, std::int64_t in_dim, std::int64_t out_dim, const rng::Key& key,
         Device device);
  Tensor forward(const Tensor& x);
  Tensor backward(const Tensor& grad_out, bool need_input_grad);
  std::vector<Parameter*> parameters() { return {&weight_, &bias_}; }

private:
  Parameter weight_, bias_;
  Tensor input_;
};

// Writes rows [begin, end) of a layer's input again into `rows` (f32 [end - begin, in_dim], on
// the input's device). Given for inputs that are cheap to redraw, such as the dropout of the
// input features: the layer then need not keep its input for the backward pass.
using InputRecompute = std::function<void(std::int64_t begin, std::int64_t end, Tensor& rows)>;

// A layer's input as its backward pass needs it: kept, or redrawn in row chunks.
class SavedInput {
public:
  // Keeps x, or only `recompute` when one is given (x's storage is then not held here).
  void save(Tensor x, const InputRecompute& recompute);
  void release() { *this = SavedInput(); }
  bool saved() const { return value_.defined() || recompute_ != nullptr; }
  // dw += X[0, rows)^T g. g: f32 [rows, out]; dw: f32 [in, out].
  void add_transposed_times(const Tensor& g, Tensor& dw) const;
  // out = X[0, rows) w (+ out when accumulate). w: f32 [in, out]; out: f32 [rows, out].
  void times(const Tensor& w, Tensor& out, bool accumulate) const;

private:
  // Calls fn(chunk, begin, end) over rows [0, rows) with chunk = X[begin, end).
  void for_chunks(std::int64_t rows,
                  const std::function<void(const Tensor&, std::int64_t, std::int64_t)>& fn) const;
  Tensor value_;
  InputRecompute recompute_;
  std::int64_t cols_ = 0;
  Device device_;
};

// A layer that reads neighbors through an Aggregator. Layers release what they saved as soon
// as their backward pass has used it, and each tensor they return belongs to the caller (it
// may be modified in place).
class GraphLayer {
public:
  virtual ~GraphLayer() = default;
  // x: [agg.num_src(), in_dim] -> [agg.num_dst(), out_dim]. Keeps &agg for backward. Pass x by
  // std::move when the caller no longer needs it: a layer that does not read its input again
  // then frees it before allocating its output. With `recompute`, the layer keeps no copy of its
  // input and redraws the rows it needs in chunks.
  virtual Tensor forward(Tensor x, Aggregator& agg, const InputRecompute& recompute = {}) = 0;
  // Whether forward() reads x again after its aggregation, or backward() reads it: only then is
  // a `recompute` ever called (a dropped input need not keep its keep bits otherwise).
  virtual bool reads_input_again() const = 0;
  // grad_out: [num_dst, out_dim] -> [num_src, in_dim] (or undefined). Once per forward().
  virtual Tensor backward(const Tensor& grad_out, bool need_input_grad) = 0;
  // Inference over an input that is never held whole: rows(begin, end, block) writes input
  // rows [begin, end) (at most block_rows of them, always the same blocks [k block_rows,
  // (k + 1) block_rows)), and the layer transforms each block before it aggregates (whatever
  // order forward() would take), so the result depends on block_rows and on the input's
  // values, not on where the rows come from. Keeps nothing for backward. GAT refuses.
  virtual Tensor infer_blocks(const InputRecompute& rows, std::int64_t num_rows, Aggregator& agg,
                              std::int64_t block_rows);
  // Inference one block of destination rows at a time, aggregating first: out = the layer's
  // output for rows whose neighbor aggregation (with infer_norm()) is `aggregated` [B, in_dim]
  // and whose own input rows are `self_rows` [B, in_dim] (read by GraphSAGE only), no ReLU.
  // Each row's result depends on its own rows and the block's row count only. GAT refuses.
  virtual Norm infer_norm() const;
  virtual void infer_aggregated(const Tensor& aggregated, const Tensor& self_rows, Tensor& out);
  // Inference one block at a time, transforming first (where the output is narrower than the
  // input, as DGL's lin_before_mp: then the rows exchanged and aggregated are the narrow ones).
  // infer_transform(x, t): t [B, out_dim] = the rows x [B, in_dim] through the weight that
  // precedes the aggregation (GCN: W; GraphSAGE: W_neigh). infer_transformed(self_rows, out):
  // `out` [B, out_dim] holds the aggregation (with infer_norm()) of transformed rows; adds the
  // rest in place: GraphSAGE's self_rows [B, in_dim] W_self, then the bias; no ReLU. Each row's
  // result depends on its own rows and the block's row count only. GAT refuses.
  bool infer_transforms_first() const { return out_dim() < in_dim(); }
  virtual void infer_transform(const Tensor& x, Tensor& transformed);
  virtual void infer_transformed(const Tensor& self_rows, Tensor& out);
  virtual std::vector<Parameter*> parameters() = 0;
  virtual std::int64_t in_dim() const = 0;
  virtual std::int64_t out_dim() const = 0;
};

// GCN: out = Â X W + b with Â per Norm::gcn. Aggregates the narrower side: transforms
// first ((X W) then Â) when out_dim < in_dim, else aggregates first (Â X then W); both the
// SpMM and the halo exchange then move min(in, out) columns.
class GcnLayer final : public GraphLayer {
public:
  GcnLayer(const std::string& prefix, std::int64_t in_dim, std::int64_t out_dim,
           const rng::Key& key, Device device);
  Tensor forward(Tensor x, Aggregator& agg, const InputRecompute& recompute = {}) override;
  Tensor backward(const Tensor& grad_out, bool need_input_grad) override;
  Tensor infer_blocks(const InputRecompute& rows, std::int64_t num_rows, Aggregator& agg,
                      std::int64_t block_rows) override;
  Norm infer_norm() const override;
  void infer_aggregated(const Tensor& aggregated, const Tensor& self_rows, Tensor& out) override;
  void infer_transform(const Tensor& x, Tensor& transformed) override;
  void infer_transformed(const Tensor& self_rows, Tensor& out) override;
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  std::int64_t in_dim() const override { return weight_.value.rows(); }
  std::int64_t out_dim() const override { return weight_.value.cols(); }
  bool transforms_first() const { return out_dim() < in_dim(); }
  // Aggregate-first reads X once, through Â X.
  bool reads_input_again() const override { return transforms_first(); }

private:
  Parameter weight_, bias_;
  Aggregator* agg_ = nullptr;
  SavedInput input_;  // X (transform-first only: aggregate-first never reads X again)
  Tensor aggregated_; // Â X (aggregate-first only)
};

// GraphSAGE (mean): out = X_dst W_self + mean_agg(X) W_neigh + b, X_dst = the first num_dst
// rows of X. Same order rule as GcnLayer for the neighbor term.
class SageLayer final : public GraphLayer {
public:
  SageLayer(const std::string& prefix, std::int64_t in_dim, std::int64_t out_dim,
            const rng::Key& key, Device device);
  Tensor forward(Tensor x, Aggregator& agg, const InputRecompute& recompute = {}) override;
  Tensor backward(const Tensor& grad_out, bool need_input_grad) override;
  Tensor infer_blocks(const InputRecompute& rows, std::int64_t num_rows, Aggregator& agg,
                      std::int64_t block_rows) override;
  Norm infer_norm() const override;
  void infer_aggregated(const Tensor& aggregated, const Tensor& self_rows, Tensor& out) override;
  void infer_transform(const Tensor& x, Tensor& transformed) override;
  void infer_transformed(const Tensor& self_rows, Tensor& out) override;
  std::vector<Parameter*> parameters() override { return {&self_weight_, &neigh_weight_, &bias_}; }
  std::int64_t in_dim() const override { return self_weight_.value.rows(); }
  std::int64_t out_dim() const override { return self_weight_.value.cols(); }
  bool transforms_first() const { return out_dim() < in_dim(); }
  // The self term reads X_dst in either order.
  bool reads_input_again() const override { return true; }

private:
  Parameter self_weight_, neigh_weight_, bias_;
  Aggregator* agg_ = nullptr;
  SavedInput input_;
  Tensor aggregated_; // mean_agg(X) (aggregate-first only)
};

class Relu {
public:
  Tensor forward(const Tensor& x);
  Tensor backward(const Tensor& grad_out);

private:
  Tensor output_;
};

// Inverted dropout keyed by (key, row id, column); identity when p == 0 or not training.
class Dropout {
public:
  explicit Dropout(float p) : p_(p) {}
  Tensor forward(const Tensor& x, std::span<const NodeId> row_ids, const rng::Key& key,
                 bool training);
  // row_ids: i64 [rows] on x's device.
  Tensor forward(const Tensor& x, const Tensor& row_ids, const rng::Key& key, bool training);
  Tensor backward(const Tensor& grad_out);
  // u8 [n, ceil(F / 8)], bit j % 8 of byte j / 8 set = column j kept (undefined when inactive)
  const Tensor& mask() const { return mask_; }

private:
  // Both forwards: RowIds is a host span or an i64 device tensor of row ids.
  template <class RowIds>
  Tensor forward_rows(const Tensor& x, const RowIds& row_ids, const rng::Key& key, bool training);

  float p_;
  bool active_ = false;
  Tensor mask_;
};

// Divides each row of `features` (f32 [n, F], any device) by its absolute sum (row-normalized
// input features, as in Kipf & Welling); all-zero rows stay zero.
void normalize_rows(Tensor& features);

} // namespace tessel::nn
