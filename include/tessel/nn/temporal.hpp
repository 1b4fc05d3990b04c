// Dynamic GNNs over graph snapshots, with explicit forward and backward passes: GCN layers on
// each snapshot, then a per-node recurrence across snapshots (GCN-GRU, GCN-LSTM) or a recurrence
// over the GCN weights themselves (EvolveGCN-O: W_t = LSTM(W_{t-1})), and a linear head.
//
// The model does the arithmetic; the caller owns the layout. It runs the graph phase one
// snapshot at a time (the rows it holds, reaching other ranks' rows through the SnapshotRows it
// passes), moves the blocks to wherever the recurrence runs, and runs the node phase on them.
#pragma once

#include "tessel/core/rng.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/core/types.hpp"
#include "tessel/kernels/sparse.hpp"
#include "tessel/nn/model.hpp"
#include "tessel/nn/recurrent.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

namespace tessel::nn {

enum class TemporalKind { gcn_gru, gcn_lstm, evolvegcn_o };
// The temporal model of a --model kind; none for the other kinds.
inline std::optional<TemporalKind> temporal_kind(ModelKind kind) {
  switch (kind) {
    case ModelKind::gcn_gru: return TemporalKind::gcn_gru;
    case ModelKind::gcn_lstm: return TemporalKind::gcn_lstm;
    case ModelKind::evolvegcn_o: return TemporalKind::evolvegcn_o;
    default: return std::nullopt;
  }
}

struct TemporalConfig {
  TemporalKind kind = TemporalKind::gcn_gru;
  int layers = 1;
  std::int64_t in_dim = 0, hidden = 0, out_dim = 1;
  float dropout = 0.0f;
  std::uint64_t seed = 0;
  Device device = Device::cpu();
};

// One snapshot's rows as the graph phase holds them: its normalized adjacency (A and A^T), the
// source node ids of its rows (dropout masks are keyed by them, so they do not depend on the
// layout or the rank count) and, when A reads rows other ranks hold, the exchange that appends
// them to x W (gather) and sends their gradients back (scatter). Without gather, A reads the
// rows of x W as they are.
struct SnapshotRows {
  const kernels::SparseMatrix& forward;
  const kernels::SparseMatrix& backward;
  std::span<const NodeId> ids;
  std::function<Tensor(const Tensor&)> gather, scatter;
};

// A node-phase block: the snapshot it is and the source ids of its rows.
struct NodeBlock {
  std::int64_t t = 0;
  std::span<const NodeId> ids;
};

class TemporalGcn {
public:
  explicit TemporalGcn(const TemporalConfig& config);
  TemporalGcn(const TemporalGcn&) = delete;
  TemporalGcn& operator=(const TemporalGcn&) = delete;

  // The parameters every rank sees only part of (their gradients are all-reduced), the
  // replicated ones (EvolveGCN's weight recurrence: computed identically everywhere), and both.
  // All of them are views of one flat value and one flat gradient buffer on the device, the
  // partial ones first.
  std::vector<Parameter*> parameters();
  Tensor& partial_gradients() { return partial_gradients_; }
  void zero_grad() { flat_gradients_.fill_zero(); }
  bool recurrent() const { return config_.kind != TemporalKind::evolvegcn_o; }
  bool evolves() const { return config_.kind == TemporalKind::evolvegcn_o; }
  const Parameter& head_weight() const { return head_weight_; }
  const Parameter& head_bias() const { return head_bias_; }
  Parameter& head_weight() { return head_weight_; }
  Parameter& head_bias() { return head_bias_; }

  // Forward. begin_forward sets up a pass over snapshots [0, t_end) holding `snapshots` of them
  // (EvolveGCN: it runs the weight recurrence); snapshot_forward runs the GCN layers of
  // snapshot t on its features x, keeping what the backward needs in `slot`; node_forward runs
  // the recurrence over the blocks (in snapshot order) and the head. `training`: dropout on
  // each layer's input with the masks of `epoch`. With `apply_head` false (link prediction),
  // node_forward returns the head's inputs instead of its outputs.
  void begin_forward(std::int64_t t_end, std::int64_t snapshots);
  Tensor snapshot_forward(std::size_t slot, std::int64_t t, const Tensor& x,
                          const SnapshotRows& rows, bool training, std::uint32_t epoch);
  std::vector<Tensor> node_forward(std::vector<Tensor> blocks, std::span<const NodeBlock> where,
                                   bool training, std::uint32_t epoch, bool apply_head);
  // The recurrence's hidden states of the last node_forward (the head's inputs before dropout).
  const std::vector<Tensor>& embeddings() const { return embeddings_; }

  // Backward, in the reverse order: node_backward takes d loss / d output per block (with
  // apply_head false: d loss / d head input; the head's gradients were added by the caller) and
  // returns d loss / d block; snapshot_backward takes d loss / d snapshot_forward's result; then
  // end_backward runs the weight recurrence's backward (EvolveGCN) after `allreduce` has summed
  // the per-snapshot weight gradients over ranks. Gradients add into Parameter::grad.
  std::vector<Tensor> node_backward(const std::vector<Tensor>& grad_out, bool apply_head);
  void begin_backward(std::int64_t t_end);
  void snapshot_backward(std::size_t slot, std::int64_t t, Tensor dz, const SnapshotRows& rows);
  void end_backward(std::int64_t t_end, const std::function<void(Tensor&)>& allreduce);

private:
  struct Layer {
    Parameter weight, bias;         // weight: shared, or EvolveGCN's initial weight
    std::optional<LstmCell> evolve; // EvolveGCN-O weight recurrence
    std::vector<Tensor> weights;    // EvolveGCN: W_t of the last forward
    Tensor grad_flat;               // EvolveGCN: d loss / d W_t of every t, flat
    std::vector<Tensor> grads;      // views of grad_flat, one per snapshot
    const Tensor& weight_at(std::int64_t t) const {
      return weights.empty() ? weight.value : weights[t];
    }
  };
  struct Saved {
    Tensor input, output; // input after dropout
    Tensor mask;          // dropout mask of the input (undefined: none)
  };
  Tensor dropout(const Tensor& x, std::span<const NodeId> ids, std::uint32_t epoch, std::int64_t t,
                 std::uint32_t layer, bool training, Tensor& mask) const;
  void dropout_backward(Tensor& grad, const Tensor& mask) const;
  void flatten();

  TemporalConfig config_;
  std::vector<Layer> layers_;
  std::optional<GruCell> gru_;
  std::optional<LstmCell> lstm_;
  Parameter head_weight_, head_bias_;
  std::vector<Parameter*> replicated_, partial_;
  Tensor flat_values_, flat_gradients_, partial_gradients_;
  std::vector<std::vector<Saved>> saved_; // per graph-phase slot, per layer
  std::vector<Tensor> embeddings_, head_inputs_, head_masks_;
};

} // namespace tessel::nn
