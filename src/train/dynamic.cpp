// Dynamic mode: GCN per snapshot + per-node GRU/LSTM (gcn-gru, gcn-lstm) or EvolveGCN-O, trained
// across ranks with snapshot partitioning (graph phase on a block of snapshots, one all-to-all to
// vertex partitioning for the recurrent phase and back) or vertex partitioning (halo exchange
// per snapshot), for node regression, node classification or link prediction; the mode's
// metric, record fields, checkpoint fields and predictions under the shared driver (train.cpp).
#include "tessel/train/dynamic.hpp"

#include "checkpoint.hpp"
#include "runtime.hpp"
#include "snapshot_graph.hpp"
#include "temporal_layout.hpp"
#include "temporal_task.hpp"
#include "trainer.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/timer.hpp"
#include "tessel/datasets/temporal.hpp"
#include "tessel/kernels/dense.hpp"
#include "tessel/kernels/sparse.hpp"
#include "tessel/nn/optimizer.hpp"
#include "tessel/nn/temporal.hpp"
#include "tessel/partition/temporal.hpp"

#include <algorithm>
#include <optional>

namespace tessel::train {
namespace fs = std::filesystem;

namespace {

// RAII: adds the process CPU seconds of the scope to a phase (beside ScopedPhase's wall seconds,
// which other jobs on the same cores inflate and CPU seconds much less, except where MPI
// busy-polls while this rank waits for a peer: the transposition and the halo exchange).
class ScopedCpu {
 public:
  ScopedCpu(PhaseTimes& times, std::string phase)
      : times_(times), phase_(std::move(phase)), start_(process_cpu_seconds()) {}
  ~ScopedCpu() { times_.add(phase_, process_cpu_seconds() - start_); }
  ScopedCpu(const ScopedCpu&) = delete;
  ScopedCpu& operator=(const ScopedCpu&) = delete;

 private:
  PhaseTimes& times_;
  std::string phase_;
  double start_;
};

// The graph phase's wall and CPU seconds from construction to finish(), with the halo
// exchanges inside it (vertex layout) counted apart as "halo".
class GraphPhaseTimer {
 public:
  GraphPhaseTimer() : cpu0_(process_cpu_seconds()) {}
  // Runs one halo exchange and returns its result, timed as halo.
  template <class F>
  Tensor halo(F&& exchange) {
    Stopwatch watch;
    const double cpu0 = process_cpu_seconds();
    Tensor out = exchange();
    halo_s_ += watch.seconds();
    halo_cpu_ += process_cpu_seconds() - cpu0;
    return out;
  }
  void finish(PhaseTimes& wall, PhaseTimes& cpu, bool with_halo) {
    wall.add("graph", watch_.seconds() - halo_s_);
    cpu.add("graph", process_cpu_seconds() - cpu0_ - halo_cpu_);
    if (!with_halo) return;
    wall.add("halo", halo_s_);
    cpu.add("halo", halo_cpu_);
  }

 private:
  Stopwatch watch_;
  double cpu0_;
  double halo_s_ = 0, halo_cpu_ = 0;
};

// ---- the trainer ----

nn::TemporalKind temporal_kind(const std::string& kind) {
  return kind == "gcn-gru" ? nn::TemporalKind::gcn_gru
         : kind == "gcn-lstm" ? nn::TemporalKind::gcn_lstm
                              : nn::TemporalKind::evolvegcn_o;
}

// The layout's part of a pass: the graph phase on this rank's snapshots or rows, the
// transposition between the phases, and the node phase, each timed; the model does the
// arithmetic and the task the loss.
class DynamicTrainer {
public:
  // The runtime gives the device every tensor of the model lives on and the data plane that
  // carries them (halo rows, the transposition, gradients); counts and metrics use `comm`.
  DynamicTrainer(comm::Communicator& comm, const TrainOptions& options, const Runtime& runtime,
                 partition::TemporalManifest manifest)
      : comm_(comm), data_(*runtime.data), device_(runtime.device), options_(options),
        manifest_(std::move(manifest)) {
    check_options();
    const std::string& kind = options.model.kind;
    snapshot_layout_ = options.dynamic.partition == "snapshot";
    recurrent_ = kind != "evolvegcn-o";
    N_ = manifest_.num_nodes;
    T_ = manifest_.num_snapshots;
    H_ = options.model.hidden;
    datasets::TemporalStoreReader reader(manifest_.store);
    info_ = reader.info();
    TESSEL_EXPECTS(info_.num_nodes == N_ && info_.num_snapshots == T_ &&
                       info_.feature_dim == manifest_.feature_dim,
                   "{}: the store does not match partition.json", manifest_.store.string());
    // Snapshot blocks balanced for the work of an epoch: the training range forward and
    // backward, plus the evaluations' share of a forward over all snapshots.
    const int evaluated_epochs = std::max(1, std::min(options.eval_every, options.epochs));
    layout_ = {manifest_.vertex_offsets,
               partition::balanced_snapshot_blocks(T_, info_.train.end, comm.size(),
                                                   1.0 / evaluated_epochs)};
    const int r = comm.rank();
    phase_ = {.by_vertex = node_phase_by_vertex(),
              .first_snapshot = layout_.snapshot_offsets[r],
              .v0 = layout_.vertex_offsets[r],
              .n_own = vertex_count(layout_, r),
              .num_nodes = N_,
              .num_snapshots = T_};
    check_task();
    // Dropout masks and negative samples are keyed by source node ids, so every partition of
    // the store draws the same ones.
    orig_ids_ = reader.orig_ids();
    graphs_ = load_snapshot_graphs(comm_, data_, reader, orig_ids_, layout_, snapshot_layout_, device_);
    out_dim_ = options.dynamic.task == "node-classification" ? info_.num_classes : 1;
    model_.emplace(nn::TemporalConfig{.kind = temporal_kind(kind),
                                      .layers = options.model.layers,
                                      .in_dim = manifest_.feature_dim,
                                      .hidden = H_,
                                      .out_dim = out_dim_,
                                      .dropout = options.model.dropout,
                                      .seed = options.seed,
                                      .device = device_});
    task_ = make_temporal_task(task_context(), reader, *model_);
    optimizer_ = nn::make_optimizer(options.optimizer);
    device_memory::host_reset_peak();
    setup_host_bytes_ = device_memory::host_stats().bytes_in_use;
  }

  std::vector<nn::Parameter*> parameters() { return model_->parameters(); }
  nn::Optimizer& optimizer() { return *optimizer_; }
  const datasets::TemporalStoreInfo& info() const { return info_; }
  const TemporalLayout& layout() const { return layout_; }
  bool transposes() const { return snapshot_layout_ && recurrent_; }
  std::int64_t hidden() const { return H_; }
  // Process CPU seconds of the last train_epoch's graph, transpose or halo, and recurrent
  // phases (read it before evaluate(), which adds its own).
  const PhaseTimes& cpu_phases() const { return cpu_phases_; }
  std::int64_t take_transpose_bytes() { return std::exchange(transpose_bytes_, 0); }

  // One epoch: forward over the snapshots up to the end of the training range, loss on the
  // training snapshots, backward, gradient all-reduce, optimizer step. Returns the mean loss.
  double train_epoch(int epoch, PhaseTimes& phases) {
    cpu_phases_.clear();
    const double loss = training_loss(true, static_cast<std::uint32_t>(epoch), phases);
    {
      ScopedPhase t(phases, "dense");
      optimizer_->step(parameters());
    }
    keep_host_blocks();
    return loss;
  }

  // The mean training loss and (with gradients) the all-reduced gradients, without a step.
  // Dropout masks and negatives are those of epoch 1.
  double probe(bool with_gradients) {
    PhaseTimes phases;
    const double loss = training_loss(with_gradients, 1, phases);
    keep_host_blocks();
    return loss;
  }

  // The mean loss of evaluate() over all three splits.
  double evaluation_loss() {
    PhaseTimes ignored;
    const Losses l = evaluate(ignored);
    return (l.sum[0] + l.sum[1] + l.sum[2]) /
           static_cast<double>(std::max<std::int64_t>(1, l.count[0] + l.count[1] + l.count[2]));
  }

  // Forward over every snapshot; per split loss, accuracy, AUC and reciprocal ranks. Link
  // prediction: the training split's pairs use the evaluation negatives (fixed, those of
  // "epoch 0"), so the three splits are measured alike.
  Losses evaluate(PhaseTimes& phases, std::vector<Tensor>* outputs = nullptr) {
    std::vector<Tensor> out = forward(T_, phases, false, 0);
    Losses l;
    task_loss(out, l, false, false, 0, phases);
    comm_.allreduce(std::span<double>(l.sum, 3));
    comm_.allreduce(std::span<std::int64_t>(l.count, 3));
    comm_.allreduce(std::span<std::int64_t>(l.correct, 3));
    comm_.allreduce(std::span<double>(l.rr_sum, 3));
    comm_.allreduce(std::span<std::int64_t>(l.positives, 3));
    if (outputs) *outputs = std::move(out);
    return l;
  }

  // Predictions and embeddings (the recurrence's hidden state, the head's input) of every
  // (snapshot, node), gathered on rank 0 and written there. Collective.
  void write_outputs(const OutputFiles& files) {
    PhaseTimes ignored;
    std::vector<Tensor> out;
    evaluate(ignored, &out);
    // Link prediction's outputs are the embeddings its scoring head reads.
    if (!files.predictions.empty())
      write_snapshot_rows(task_context(), out, task_->applies_head() ? out_dim_ : H_,
                          files.predictions, "tessel-temporal-predictions", "/prediction",
                          "float32 [T*N, out]: row t*N+v is the model output for source node v "
                          "at snapshot t (regression: the predicted target; classification: "
                          "logits; link prediction: the embedding the scoring head reads)");
    if (!files.embeddings.empty())
      write_snapshot_rows(task_context(), model_->embeddings(), H_, files.embeddings,
                          "tessel-temporal-embeddings", "/embedding",
                          "float32 [T*N, hidden]: row t*N+v is source node v's embedding at "
                          "snapshot t (the recurrence's hidden state, the head's input)");
  }

private:
  void check_options() const {
    const TrainOptions& options = options_;
    TESSEL_EXPECTS(manifest_.num_parts == comm_.size(),
                   "{} holds a temporal partition into {} parts, but {} ranks are running: run "
                   "mpirun -np {}",
                   options.part_dir.string(), manifest_.num_parts, comm_.size(),
                   manifest_.num_parts);
    const std::string& kind = options.model.kind;
    TESSEL_EXPECTS(kind == "gcn-gru" || kind == "gcn-lstm" || kind == "evolvegcn-o",
                   "--mode dynamic trains gcn-gru, gcn-lstm or evolvegcn-o, not --model {}", kind);
    TESSEL_EXPECTS(options.dynamic.partition == "snapshot" || options.dynamic.partition == "vertex",
                   "--temporal-partition must be snapshot or vertex, got {}",
                   options.dynamic.partition);
    const std::string& task = options.dynamic.task;
    TESSEL_EXPECTS(task == "node-classification" || task == "link-prediction" ||
                       task == "node-regression",
                   "--task {} is not supported: use node-regression, node-classification or "
                   "link-prediction",
                   task);
    TESSEL_EXPECTS(options.dynamic.negatives >= 1 && options.dynamic.eval_negatives >= 1,
                   "--negatives and --eval-negatives must be at least 1");
    TESSEL_EXPECTS(options.model.dropout >= 0.0f && options.model.dropout < 1.0f,
                   "--dropout {} is outside [0, 1)", options.model.dropout);
  }

  // The store holds what the task needs.
  void check_task() const {
    const std::string& task = options_.dynamic.task;
    if (task == "link-prediction")
      TESSEL_EXPECTS(T_ >= 2 && N_ < (std::int64_t{1} << 31),
                     "{}: --task link-prediction needs at least 2 snapshots and fewer than 2^31 "
                     "nodes",
                     manifest_.store.string());
    else if (task == "node-classification")
      TESSEL_EXPECTS(info_.num_classes >= 2,
                     "{}: --task node-classification needs class targets (the store has "
                     "regression targets)",
                     manifest_.store.string());
    else
      TESSEL_EXPECTS(info_.num_classes == 0,
                     "{}: the store holds {} classes; use --task node-classification",
                     manifest_.store.string(), info_.num_classes);
  }

  TaskContext task_context() const {
    return {comm_, data_, device_, options_, layout_, info_, phase_, orig_ids_, manifest_.store};
  }

  // The head (and the recurrence) runs on this rank's vertices for all snapshots, except for
  // EvolveGCN in the snapshot layout, whose head runs on whole owned snapshots (no transpose).
  bool node_phase_by_vertex() const { return !snapshot_layout_ || recurrent_; }
  // Snapshots of the graph phase on this rank, below t_end.
  Block graph_snapshots(std::int64_t t_end) const {
    if (snapshot_layout_) return owned_snapshots(layout_, comm_.rank(), t_end);
    return {0, t_end};
  }
  SnapshotGraph& graph(const Block& gs, std::int64_t t) {
    return graphs_[snapshot_layout_ ? t - gs.begin : t];
  }

  // Snapshot g's rows as the model reads them: every row in the snapshot layout; this rank's
  // rows in the vertex layout, the halo rows arriving after the weight multiplication (their
  // exchange timed by `timer`).
  nn::SnapshotRows snapshot_rows(SnapshotGraph& g, GraphPhaseTimer& timer) {
    const std::span<const NodeId> ids(orig_ids_);
    if (snapshot_layout_) return {g.forward, g.backward, ids, {}, {}};
    return {g.forward, g.backward, ids.subspan(static_cast<std::size_t>(phase_.v0)),
            [&g, &timer](const Tensor& xw) {
              return timer.halo([&] {
                Tensor full;
                g.halo->forward(xw, full);
                return full;
              });
            },
            [&g, &timer](const Tensor& dxw) {
              return timer.halo([&] {
                Tensor owned;
                g.halo->backward(dxw, owned);
                return owned;
              });
            }};
  }

  // A pass's host blocks (activations, gradients, exchange buffers) go back to the host block
  // cache when released; past its cap (1 GiB by default) the cache frees the largest idle ones
  // and the next epoch faults them in again: at 100k nodes and P = 1, 120k-170k minor faults
  // per epoch in the recurrent phase. After each pass the cap rises to the most the passes have
  // held beyond the setup's tensors (after each forward and each training pass), so that later
  // epochs reuse those blocks; the idle ones never exceed what a pass held, so the peak
  // resident memory stays a pass's.
  void keep_host_blocks() {
    const std::int64_t held = device_memory::host_stats().peak_bytes_reserved - setup_host_bytes_;
    if (held > 0) device_memory::host_cache_keep(static_cast<std::size_t>(held));
  }

  // Waits for the device's queued kernels, so that a phase's seconds are its own (no-op on the
  // CPU).
  void sync_device() {
    if (device_.is_cuda()) kernels::default_context(device_).synchronize();
  }

  // One direction of the snapshot <-> vertex transposition when this model and layout
  // transpose (its wall and CPU seconds as "transpose", its bytes counted for the records); else
  // the blocks as they are, moved out. The input outlives the call when it transposes (the
  // result may view it).
  using Transposition = std::vector<Tensor> (*)(comm::Communicator&, const TemporalLayout&,
                                                const std::vector<Tensor>&, std::int64_t,
                                                std::int64_t, Device, TranspositionBuffers*);
  std::vector<Tensor> transpose(Transposition direction, std::vector<Tensor>& blocks,
                                std::int64_t t_end, PhaseTimes& phases) {
    if (!transposes()) return std::move(blocks);
    ScopedPhase p(phases, "transpose");
    ScopedCpu c(cpu_phases_, "transpose");
    const std::int64_t before = data_.bytes_sent();
    std::vector<Tensor> out = direction(data_, layout_, blocks, t_end, H_, device_, &buffers_);
    transpose_bytes_ += data_.bytes_sent() - before;
    return out;
  }

  // The loss of a training pass, all-reduced, and (with gradients) the all-reduced gradients.
  double training_loss(bool with_gradients, std::uint32_t epoch, PhaseTimes& phases) {
    model_->zero_grad();
    const std::int64_t t_end = info_.train.end;
    std::vector<Tensor> out = forward(t_end, phases, true, epoch);
    Losses losses;
    std::vector<Tensor> grad_out = task_loss(out, losses, true, with_gradients, epoch, phases);
    if (with_gradients) {
      backward(grad_out, t_end, phases);
      // The gradients of the parameters each rank saw only part of are the front of the flat
      // gradient buffer: one all-reduce on the data plane.
      ScopedPhase t(phases, "communicate");
      if (comm_.size() > 1) data_.allreduce(model_->partial_gradients());
    }
    double loss[2] = {losses.sum[0], static_cast<double>(losses.count[0])};
    comm_.allreduce(std::span<double>(loss, 2));
    return loss[0] / std::max(1.0, loss[1]);
  }

  // Graph phase on this rank's snapshots below t_end, transposition, node phase.
  std::vector<Tensor> forward(std::int64_t t_end, PhaseTimes& phases, bool training,
                              std::uint32_t epoch) {
    // The weight recurrence counts in the graph phase, in wall and in CPU seconds alike.
    GraphPhaseTimer graph_phase;
    const Block gs = graph_snapshots(t_end);
    model_->begin_forward(t_end, gs.size());
    std::vector<Tensor> g_out;
    for (std::int64_t t = gs.begin; t < gs.end; ++t) {
      SnapshotGraph& g = graph(gs, t);
      g_out.push_back(model_->snapshot_forward(static_cast<std::size_t>(t - gs.begin), t,
                                               g.features, snapshot_rows(g, graph_phase),
                                               training, epoch));
    }
    sync_device();
    graph_phase.finish(phases, cpu_phases_, !snapshot_layout_);
    std::vector<Tensor> blocks = transpose(snapshots_to_vertices, g_out, t_end, phases);
    Stopwatch rec;
    ScopedCpu rec_cpu(cpu_phases_, "recurrent");
    std::vector<nn::NodeBlock> where;
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      const auto [t, first_row] = phase_.block(i);
      where.push_back({t, std::span<const NodeId>(orig_ids_).subspan(
                              static_cast<std::size_t>(first_row))});
    }
    std::vector<Tensor> out =
        model_->node_forward(std::move(blocks), where, training, epoch, task_->applies_head());
    sync_device();
    phases.add("recurrent", rec.seconds());
    // Before the backward pass releases the forward's blocks.
    keep_host_blocks();
    return out;
  }

  std::vector<Tensor> task_loss(const std::vector<Tensor>& out, Losses& l, bool training,
                                bool grad, std::uint32_t epoch, PhaseTimes& phases) {
    if (task_->applies_head()) return task_->loss(out, l, training, grad, epoch);
    ScopedPhase p(phases, "link");
    return task_->loss(out, l, training, grad, epoch);
  }

  void backward(const std::vector<Tensor>& grad_out, std::int64_t t_end, PhaseTimes& phases) {
    Stopwatch rec;
    std::optional<ScopedCpu> rec_cpu(std::in_place, cpu_phases_, "recurrent");
    std::vector<Tensor> grad_blocks = model_->node_backward(grad_out, task_->applies_head());
    sync_device();
    phases.add("recurrent", rec.seconds());
    rec_cpu.reset();
    std::vector<Tensor> grad_g = transpose(vertices_to_snapshots, grad_blocks, t_end, phases);
    GraphPhaseTimer graph_phase;
    const Block gs = graph_snapshots(t_end);
    model_->begin_backward(t_end);
    for (std::int64_t t = gs.begin; t < gs.end; ++t) {
      SnapshotGraph& g = graph(gs, t);
      model_->snapshot_backward(static_cast<std::size_t>(t - gs.begin), t, grad_g[t - gs.begin],
                                snapshot_rows(g, graph_phase));
    }
    sync_device();
    graph_phase.finish(phases, cpu_phases_, !snapshot_layout_);
    if (!model_->evolves()) return;
    // The weight recurrence: combine the per-snapshot weight gradients of all ranks (each rank
    // saw only its snapshots or rows), then run its backward identically everywhere.
    ScopedPhase p(phases, "recurrent");
    ScopedCpu weight_cpu(cpu_phases_, "recurrent");
    model_->end_backward(t_end, [&](Tensor& grads) {
      ScopedPhase c(phases, "communicate");
      data_.allreduce(grads);
    });
  }

  comm::Communicator& comm_;
  comm::Communicator& data_;
  Device device_;
  const TrainOptions& options_;
  partition::TemporalManifest manifest_;
  datasets::TemporalStoreInfo info_;
  TemporalLayout layout_;
  NodePhase phase_;
  // The transposition's exchange buffers, reused every epoch and direction.
  TranspositionBuffers buffers_;
  // Host bytes in use once set up (the store's tensors, parameters): see keep_host_blocks.
  std::int64_t setup_host_bytes_ = 0;
  bool snapshot_layout_ = true, recurrent_ = true;
  std::int64_t N_ = 0, T_ = 0, H_ = 0, out_dim_ = 1;
  PhaseTimes cpu_phases_;
  std::vector<NodeId> orig_ids_;  // relabeled -> source id
  std::vector<SnapshotGraph> graphs_;
  std::optional<nn::TemporalGcn> model_;
  std::unique_ptr<TemporalTask> task_;
  std::unique_ptr<nn::Optimizer> optimizer_;
  std::int64_t transpose_bytes_ = 0;
};

}  // namespace

// The trainer keeps pointers to its own members and a reference to its options: built in place,
// next to its own copy of the options.
struct DynamicModelProbe::Impl {
  TrainOptions options;
  Runtime runtime;
  DynamicTrainer trainer;
  Impl(comm::Communicator& comm, const TrainOptions& o)
      : options(o),
        runtime{Device::cpu(), &kernels::default_context(Device::cpu()), &comm, &comm},
        trainer(comm, options, runtime, partition::read_temporal_manifest(o.part_dir)) {}
};

DynamicModelProbe::DynamicModelProbe(comm::Communicator& comm, const TrainOptions& options)
    : impl_(std::make_unique<Impl>(comm, options)) {}
DynamicModelProbe::~DynamicModelProbe() = default;
double DynamicModelProbe::loss(bool with_gradients) { return impl_->trainer.probe(with_gradients); }
double DynamicModelProbe::evaluation_loss() { return impl_->trainer.evaluation_loss(); }
std::vector<nn::Parameter*> DynamicModelProbe::parameters() { return impl_->trainer.parameters(); }

namespace {

std::string format_mb(double bytes) { return fmt::format("{:.2f} MB", bytes / 1e6); }

// The mode as the shared driver runs it: its validation metric (accuracy, AUC or MSE, by task),
// the all-to-all bytes of every epoch against the analytic volume, link prediction's MRR, and
// the test MRR at the best epoch in checkpoints.
class DynamicMode final : public Trainer {
public:
  DynamicMode(comm::Communicator& comm, const TrainOptions& options, const Runtime& runtime,
              const partition::TemporalManifest& manifest)
      : comm_(comm), options_(options), device_(runtime.device),
        trainer_(comm, options, runtime, manifest) {
    const auto& info = trainer_.info();
    cls_ = options.dynamic.task == "node-classification";
    link_ = options.dynamic.task == "link-prediction";
    metric_ = {.name = cls_ ? "acc" : link_ ? "auc" : "mse",
               .higher_is_better = cls_ || link_,
               .picks_best = info.valid.size() > 0};
    // Analytic all-to-all volume of one epoch: forward + backward transpositions over the
    // training snapshots, plus the evaluation forward over all snapshots.
    const std::int64_t H = trainer_.hidden();
    if (trainer_.transposes()) {
      analytic_train_ = 2 * transposition_bytes(trainer_.layout(), info.train.end, H);
      analytic_eval_ = transposition_bytes(trainer_.layout(), info.num_snapshots, H);
    }
  }

  RunInfo run_info() const {
    const auto& info = trainer_.info();
    const nlohmann::json model_json = {{"kind", options_.model.kind},
                                       {"hidden", options_.model.hidden},
                                       {"layers", options_.model.layers},
                                       {"task", options_.dynamic.task},
                                       {"optimizer", options_.optimizer.kind}};
    const auto& blocks = trainer_.layout().snapshot_offsets;
    std::string block_text;
    if (options_.dynamic.partition == "snapshot")
      for (int q = 0; q < comm_.size(); ++q)
        block_text += fmt::format("{}[{}, {})", q == 0 ? ", snapshot blocks " : " ", blocks[q],
                                  blocks[q + 1]);
    return {.mode = "dynamic",
            .model_json = model_json.dump(),
            .setup_line = fmt::format(
                "dynamic training: {}, {} {} layout, {} hidden {}, dropout {}, task {}, {} "
                "nodes x {} snapshots (training [{}, {})){}",
                log::counted(comm_.size(), "rank"), options_.model.kind, options_.dynamic.partition,
                log::counted(options_.model.layers, "GCN layer"), options_.model.hidden,
                options_.model.dropout, options_.dynamic.task,
                info.num_nodes, info.num_snapshots, info.train.begin, info.train.end,
                block_text),
            .runtime_line = ""};
  }

  std::vector<nn::Parameter*> parameters() override { return trainer_.parameters(); }
  nn::Optimizer& optimizer() override { return trainer_.optimizer(); }
  double train_epoch(int epoch, PhaseTimes& phases, nlohmann::json& extra) override {
    const std::int64_t faults = process_minor_faults();
    const double loss = trainer_.train_epoch(epoch, phases);
    // Pages faulted in by the training pass: host blocks it had to take fresh from the system.
    extra["minor_faults"] =
        comm_.allreduce_value(process_minor_faults() - faults, comm::ReduceOp::max);
    // Every rank records the same phase names, so these reductions match up.
    for (const auto& [name, s] : trainer_.cpu_phases().all())
      extra["phases_cpu"][name] = comm_.allreduce_value(s, comm::ReduceOp::max);
    return loss;
  }
  // The validation metric per split (0 for a split without targets), and the MRR per split.
  Accuracy evaluate(PhaseTimes& phases) override {
    PhaseTimes eval_phases;
    Stopwatch w;
    const Losses l = trainer_.evaluate(eval_phases);
    phases.add("eval", w.seconds());
    double split[3] = {0, 0, 0};
    for (int s = 0; s < 3; ++s) {
      split[s] = l.count[s] == 0 ? 0.0
                 : cls_          ? static_cast<double>(l.correct[s]) / static_cast<double>(l.count[s])
                 : link_         ? l.auc[s]
                                 : l.sum[s] / static_cast<double>(l.count[s]);
      mrr_[s] = l.positives[s] > 0 ? l.rr_sum[s] / static_cast<double>(l.positives[s]) : 0.0;
    }
    last_test_ = split[2];
    last_test_mrr_ = mrr_[2];
    return {split[0], split[1], split[2]};
  }
  void write_outputs(const OutputFiles& files) override { trainer_.write_outputs(files); }

  ValidationMetric metric() const override { return metric_; }
  void end_epoch(EpochMetrics& m) override {
    const std::int64_t transpose_bytes = comm_.allreduce_value(trainer_.take_transpose_bytes());
    const std::int64_t analytic = analytic_train_ + (m.evaluated ? analytic_eval_ : 0);
    m.extra["transpose_bytes"] = transpose_bytes;
    m.extra["analytic_transpose_bytes"] = analytic;
    m.extra["host_allocations"] = comm_.allreduce_value(
        device_memory::host_stats().device_allocations, comm::ReduceOp::max);
    if (device_.is_cuda()) {
      kernels::default_context(device_).synchronize();
      const auto mem = device_memory::stats(device_);
      m.extra["gpu_allocations"] =
          comm_.allreduce_value(mem.device_allocations, comm::ReduceOp::max);
      m.extra["gpu_cache_hits"] = comm_.allreduce_value(mem.cache_hits, comm::ReduceOp::max);
      m.extra["gpu_peak_bytes"] =
          comm_.allreduce_value(mem.peak_bytes_in_use, comm::ReduceOp::max);
    }
    if (link_ && m.evaluated)
      m.extra.update({{"train_mrr", mrr_[0]}, {"valid_mrr", mrr_[1]}, {"test_mrr", mrr_[2]}});
    total_analytic_ += analytic;
    total_transpose_ += transpose_bytes;
  }
  void describe_epoch(const EpochMetrics& m, std::string& evaluation,
                      std::string& sent) const override {
    if (link_ && m.evaluated)
      evaluation +=
          fmt::format(" | mrr train {:.4f} valid {:.4f} test {:.4f}", mrr_[0], mrr_[1], mrr_[2]);
    const std::string between_hosts =
        m.several_hosts ? fmt::format("between hosts {}, ",
                                      format_mb(static_cast<double>(m.comm_bytes_between_hosts)))
                        : std::string();
    sent = fmt::format("{} ({}all-to-all {}, analytic {})",
                       format_mb(static_cast<double>(m.comm_bytes)), between_hosts,
                       format_mb(m.extra.at("transpose_bytes").get<double>()),
                       format_mb(m.extra.at("analytic_transpose_bytes").get<double>()));
  }
  void best_epoch_changed() override { best_test_mrr_ = mrr_[2]; }
  void save_state(CheckpointMeta& meta) const override { meta.test_mrr_at_best = best_test_mrr_; }
  void restore_state(const CheckpointMeta& meta) override {
    if (meta.best_epoch > 0) best_test_mrr_ = meta.test_mrr_at_best;
  }
  // The summary: the best epoch's values, the last evaluation's test values, and bytes per
  // epoch (all of them, the all-to-all's and the analytic all-to-all volume).
  void finish(comm::Communicator& /*comm*/, const Runtime& /*runtime*/, TrainResult& result,
              nlohmann::json& summary) override {
    const std::string& name = metric_.name;
    nlohmann::json s;
    if (result.best_epoch > 0) {
      s = {{"best_epoch", result.best_epoch},
           {"valid_" + name,
            metric_.picks_best ? nlohmann::json(result.best_valid_acc) : nlohmann::json(nullptr)},
           {"test_" + name, result.test_acc_at_best}};
      if (link_) s["test_mrr"] = best_test_mrr_;
    }
    s["final_test_" + name] = last_test_;
    if (link_) s["final_test_mrr"] = last_test_mrr_;
    std::int64_t total_bytes = 0;
    for (const EpochMetrics& m : result.epochs) total_bytes += m.comm_bytes;
    const auto epochs = static_cast<double>(std::max<std::size_t>(1, result.epochs.size()));
    s["bytes_per_epoch"] = static_cast<double>(total_bytes) / epochs;
    s["transpose_bytes_per_epoch"] = static_cast<double>(total_transpose_) / epochs;
    s["analytic_transpose_bytes_per_epoch"] = static_cast<double>(total_analytic_) / epochs;
    if (options_.dynamic.partition == "snapshot")
      s["snapshot_blocks"] = trainer_.layout().snapshot_offsets;
    result.summary = s;
    summary["model"] = options_.model.kind;
    summary["temporal_partition"] = options_.dynamic.partition;
    summary["task"] = options_.dynamic.task;
    summary.update(result.summary);
  }
  void log_outcome(const TrainResult& result) const override {
    log::result("final test {} {:.4f}{}; bytes per epoch {} (all-to-all {}, analytic {})",
              metric_.name, last_test_,
              result.best_epoch > 0 && metric_.picks_best
                  ? fmt::format(", best valid at epoch {}", result.best_epoch)
                  : std::string(),
              format_mb(result.summary["bytes_per_epoch"].get<double>()),
              format_mb(result.summary["transpose_bytes_per_epoch"].get<double>()),
              format_mb(result.summary["analytic_transpose_bytes_per_epoch"].get<double>()));
  }

private:
  comm::Communicator& comm_;
  const TrainOptions& options_;
  Device device_;
  DynamicTrainer trainer_;
  bool cls_ = false, link_ = false;
  ValidationMetric metric_;
  std::int64_t analytic_train_ = 0, analytic_eval_ = 0;
  std::int64_t total_analytic_ = 0, total_transpose_ = 0;
  double mrr_[3] = {0, 0, 0};  // of the latest evaluation
  double last_test_ = 0, last_test_mrr_ = 0, best_test_mrr_ = 0;
};

}  // namespace

void dynamic_defaults(TrainOptions& options,
                      const std::function<bool(const std::string&)>& given) {
  if (options.dynamic.task != "node-regression") return;
  if (!given("--layers")) options.model.layers = 1;
  if (!given("--dropout")) options.model.dropout = 0.0f;
}

LoadedPart load_temporal_part(comm::Communicator& /*comm*/, TrainOptions& options) {
  LoadedPart loaded;
  loaded.temporal = partition::read_temporal_manifest(options.part_dir);
  loaded.activity = fmt::format(
      "setting up dynamic training of {} with --hidden {} on {} nodes x {} snapshots x {} "
      "features (lower --hidden)",
      options.model.kind, options.model.hidden, loaded.temporal->num_nodes,
      loaded.temporal->num_snapshots, loaded.temporal->feature_dim);
  return loaded;
}

// --device and --comm as in the other modes: a GPU per rank (ranks may share one, the data
// plane then staging through pinned host memory) or the CPU.
std::unique_ptr<Trainer> make_dynamic_trainer(TrainerContext context) {
  return std::make_unique<DynamicMode>(context.comm, context.options, context.runtime,
                                       *context.loaded.temporal);
}

RunInfo dynamic_run_info(const Trainer& trainer, const TrainerContext& /*context*/) {
  return static_cast<const DynamicMode&>(trainer).run_info();
}

TrainResult train_dynamic(comm::Communicator& comm, const TrainOptions& options) {
  TrainOptions dynamic = options;
  dynamic.mode = "dynamic";
  return train(comm, dynamic);
}

}  // namespace tessel::train
