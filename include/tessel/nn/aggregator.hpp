// Aggregator: how a GNN layer reaches neighbor rows, independent of the training mode.
#pragma once

#include "tessel/core/option_words.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/core/types.hpp"
#include "tessel/kernels/sparse.hpp"

#include <cstdint>
#include <span>

namespace tessel::nn {

// Edge weights an aggregation applies.
enum class Norm {
  // GCN: out[v] = sum over u in N(v) + {v} of x[u] / sqrt((deg(u) + 1) (deg(v) + 1)),
  // deg = in-degree in the whole graph (so every rank count computes the same numbers).
  gcn,
  // GraphSAGE mean: out[v] = mean over u in N(v) of x[u] (0 when v has no neighbors).
  mean,
};
// The words of the pipeline's --operator, the propagation of its precomputed hop features.
inline std::span<const OptionWord<Norm>> option_words(Norm) {
  static constexpr OptionWord<Norm> words[] = {{"gcn", Norm::gcn}, {"mean", Norm::mean}};
  return words;
}

// One message-passing step from num_src() source rows to num_dst() destination rows. The
// destinations are the first num_dst() sources (full-batch: dst == src == owned nodes;
// sampled: the block's destination nodes come first among its sources).
// Full-batch implementations exchange halo rows inside aggregate() and send halo gradients
// back to their owners inside aggregate_backward(): both are collective calls there.
class Aggregator {
 public:
  virtual ~Aggregator() = default;
  virtual std::int64_t num_src() const = 0;
  virtual std::int64_t num_dst() const = 0;
  // Ids of the source rows that do not depend on the rank count (the source dataset's node
  // ids): dropout masks and other counter-based draws are keyed by them.
  virtual std::span<const NodeId> src_ids() const = 0;
  // src_ids() as an i64 tensor on `device` when the aggregator keeps one there (saves an
  // upload per dropout on a GPU), else null.
  virtual const Tensor* src_ids_on(Device device) { return nullptr; }
  // x: [num_src, F] f32 -> [num_dst, F].
  virtual Tensor aggregate(const Tensor& x, Norm norm) = 0;
  // grad_out: [num_dst, F] -> gradient with respect to x, [num_src, F].
  virtual Tensor aggregate_backward(const Tensor& grad_out, Norm norm) = 0;

  // Attention (GAT) weighs each edge itself, so it reads the edges rather than a weighted
  // matrix. The columns are the num_src() sources followed by any rows another rank owns
  // (full-batch halos): attention_graph() is the num_dst() x columns in-neighbour pattern with a
  // self loop in front of every row (kernels::add_self_loops), on `device`; attention_ids() the
  // columns' ids (i64 [columns] on `device`: src_ids() and then the halo rows' ids), which key
  // the attention dropout. The defaults refuse: an aggregator without edges has no attention.
  virtual const kernels::SparseMatrix& attention_graph(Device device);
  virtual const Tensor& attention_ids(Device device);
  // x: [num_src, F] -> [columns, F]: the sources and the halo rows, in the one exchange a layer
  // makes (the identity without halos). Collective in full-batch training.
  virtual Tensor exchange_rows(const Tensor& x);
  // The backward of exchange_rows: grad [columns, F] -> [num_src, F], the halo rows' gradients
  // sent to and summed at their owners. Collective in full-batch training.
  virtual Tensor exchange_rows_backward(const Tensor& grad);
};

// What an aggregator without halos keeps for attention: its pattern with self loops and its
// source ids, built on first use per device.
class AttentionEdges {
 public:
  // pattern: num_dst x num_src in-neighbour pattern; ids: i64 [num_src] (either on any device).
  void reset(kernels::SparseMatrix pattern, Tensor ids);
  const kernels::SparseMatrix& graph(Device device);
  const Tensor& ids(Device device);

 private:
  kernels::SparseMatrix pattern_, graph_;
  Tensor ids_, ids_on_;
};

}  // namespace tessel::nn
