// The dynamic mode's training pass: the graph phase on this rank's snapshots or vertex rows,
// the snapshot <-> vertex transposition between the phases, and the node phase, each timed; the
// model (nn::TemporalGcn) does the arithmetic and the task (temporal_task.hpp) the loss.
#pragma once

#include "tessel/train/runtime.hpp"
#include "snapshot_graph.hpp"
#include "tessel/dist/transposition.hpp"
#include "temporal_task.hpp"
#include "tessel/train/trainer.hpp"
#include "tessel/modes/dynamic.hpp"

#include "tessel/comm/communicator.hpp"
#include "tessel/core/timer.hpp"
#include "tessel/datasets/temporal.hpp"
#include "tessel/nn/optimizer.hpp"
#include "tessel/nn/temporal.hpp"
#include "tessel/partition/temporal.hpp"

#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace tessel::train {

class GraphPhaseTimer;

class TemporalTrainer {
public:
  // The runtime gives the device every tensor of the model lives on and the data plane that
  // carries them (halo rows, the transposition, gradients); counts and metrics use `comm`.
  TemporalTrainer(comm::Communicator& comm, const TrainOptions& options, const Runtime& runtime,
                  partition::TemporalManifest manifest);

  std::vector<nn::Parameter*> parameters() { return model_->parameters(); }
  nn::Optimizer& optimizer() { return *optimizer_; }
  const datasets::TemporalStoreInfo& info() const { return info_; }
  const dist::TemporalLayout& layout() const { return layout_; }
  bool transposes() const { return snapshot_layout_ && recurrent_; }
  std::int64_t hidden() const { return H_; }
  // Process CPU seconds of the last train_epoch's graph, transpose or halo, and recurrent
  // phases (read it before evaluate(), which adds its own).
  const PhaseTimes& cpu_phases() const { return cpu_phases_; }
  std::int64_t take_transpose_bytes() { return std::exchange(transpose_bytes_, 0); }

  // One epoch: forward over the snapshots up to the end of the training range, loss on the
  // training snapshots, backward, gradient all-reduce, optimizer step. Returns the mean loss.
  double train_epoch(int epoch, PhaseTimes& phases);

  // The mean training loss and (with gradients) the all-reduced gradients, without a step.
  // Dropout masks and negatives are those of epoch 1.
  double probe(bool with_gradients);

  // The mean loss of evaluate() over all three splits.
  double evaluation_loss();

  // Forward over every snapshot; per split loss, accuracy, AUC and reciprocal ranks. Link
  // prediction: the training split's pairs use the evaluation negatives (fixed, those of
  // "epoch 0"), so the three splits are measured alike.
  Losses evaluate(PhaseTimes& phases, std::vector<Tensor>* outputs = nullptr);

  // Predictions and embeddings (the recurrence's hidden state, the head's input) of every
  // (snapshot, node), gathered on rank 0 and written there. Collective.
  void write_outputs(const OutputFiles& files);

private:
  void check_options() const;

  // The store holds what the task needs.
  void check_task() const;

  TaskContext task_context() const;

  // The head (and the recurrence) runs on this rank's vertices for all snapshots, except for
  // EvolveGCN in the snapshot layout, whose head runs on whole owned snapshots (no transpose).
  bool node_phase_by_vertex() const { return !snapshot_layout_ || recurrent_; }
  // Snapshots of the graph phase on this rank, below t_end.
  dist::Block graph_snapshots(std::int64_t t_end) const;
  SnapshotGraph& graph(const dist::Block& gs, std::int64_t t);

  // Snapshot g's rows as the model reads them: every row in the snapshot layout; this rank's
  // rows in the vertex layout, the halo rows arriving after the weight multiplication (their
  // exchange timed by `timer`).
  nn::SnapshotRows snapshot_rows(SnapshotGraph& g, GraphPhaseTimer& timer);

  // A pass's host blocks (activations, gradients, exchange buffers) go back to the host block
  // cache when released; past its cap (1 GiB by default) the cache frees the largest idle ones
  // and the next epoch faults them in again: at 100k nodes and P = 1, 120k-170k minor faults
  // per epoch in the recurrent phase. After each pass the cap rises to the most the passes have
  // held beyond the setup's tensors (after each forward and each training pass), so that later
  // epochs reuse those blocks; the idle ones never exceed what a pass held, so the peak
  // resident memory stays a pass's.
  void keep_host_blocks();

  // Waits for the device's queued kernels, so that a phase's seconds are its own (no-op on the
  // CPU).
  void sync_device();

  // One direction of the snapshot <-> vertex transposition when this model and layout
  // transpose (its wall and CPU seconds as "transpose", its bytes counted for the records); else
  // the blocks as they are, moved out. The input outlives the call when it transposes (the
  // result may view it).
  using Transposition = std::vector<Tensor> (*)(comm::Communicator&, const dist::TemporalLayout&,
                                                const std::vector<Tensor>&, std::int64_t,
                                                std::int64_t, Device, dist::TranspositionBuffers*,
                                                DeviceStream);
  std::vector<Tensor> transpose(Transposition direction, std::vector<Tensor>& blocks,
                                std::int64_t t_end, PhaseTimes& phases);

  // The loss of a training pass, all-reduced, and (with gradients) the all-reduced gradients.
  double training_loss(bool with_gradients, std::uint32_t epoch, PhaseTimes& phases);

  // Graph phase on this rank's snapshots below t_end, transposition, node phase.
  std::vector<Tensor> forward(std::int64_t t_end, PhaseTimes& phases, bool training,
                              std::uint32_t epoch);

  std::vector<Tensor> task_loss(const std::vector<Tensor>& out, Losses& l, bool training, bool grad,
                                std::uint32_t epoch, PhaseTimes& phases);

  void backward(const std::vector<Tensor>& grad_out, std::int64_t t_end, PhaseTimes& phases);

  comm::Communicator& comm_;
  comm::Communicator& data_;
  Device device_;
  const TrainOptions& options_;
  partition::TemporalManifest manifest_;
  datasets::TemporalStoreInfo info_;
  dist::TemporalLayout layout_;
  NodePhase phase_;
  // The transposition's exchange buffers, reused every epoch and direction.
  dist::TranspositionBuffers buffers_;
  // Made again once set up (above the store's tensors and parameters): see keep_host_blocks.
  device_memory::HostBlockKeeper host_blocks_;
  bool snapshot_layout_ = true, recurrent_ = true;
  std::int64_t N_ = 0, T_ = 0, H_ = 0, out_dim_ = 1;
  PhaseTimes cpu_phases_;
  std::vector<NodeId> orig_ids_; // relabeled -> source id
  std::vector<SnapshotGraph> graphs_;
  std::optional<nn::TemporalGcn> model_;
  std::unique_ptr<TemporalTask> task_;
  std::unique_ptr<nn::Optimizer> optimizer_;
  std::int64_t transpose_bytes_ = 0;
};

} // namespace tessel::train
