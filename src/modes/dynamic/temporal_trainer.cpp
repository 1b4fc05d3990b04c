// The dynamic mode's training pass over snapshots: phases, transposition, timing.
#include "temporal_trainer.hpp"

#include "mode_entries.hpp"

#include "tessel/core/error.hpp"
#include "tessel/kernels/dense.hpp"

#include <algorithm>

namespace tessel::train {
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

} // namespace

// The graph phase's wall and CPU seconds from construction to finish(), with the halo
// exchanges inside it (vertex layout) counted apart as "halo".
class GraphPhaseTimer {
public:
  GraphPhaseTimer() : cpu0_(process_cpu_seconds()) {}
  // Runs one halo exchange and returns its result, timed as halo.
  template <class F> Tensor halo(F&& exchange) {
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

TemporalTrainer::TemporalTrainer(comm::Communicator& comm, const TrainOptions& options,
                                 const Runtime& runtime, partition::TemporalManifest manifest)
    : comm_(comm), data_(*runtime.data), device_(runtime.device), options_(options),
      manifest_(std::move(manifest)) {
  check_options();
  const nn::TemporalKind kind = *nn::temporal_kind(options.model.kind);
  snapshot_layout_ = options.mode_options.get<DynamicOptions>().partition == TemporalPartition::snapshot;
  recurrent_ = kind != nn::TemporalKind::evolvegcn_o;
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
  // (--eval-every 0: no evaluation at all.)
  const int evaluated_epochs = std::max(1, std::min(options.eval_every, options.epochs));
  layout_ = {manifest_.vertex_offsets,
             partition::balanced_snapshot_blocks(T_, info_.train.end, comm.size(),
                                                 options.eval_every > 0 ? 1.0 / evaluated_epochs
                                                                        : 0.0)};
  const int r = comm.rank();
  phase_ = {.by_vertex = node_phase_by_vertex(),
            .first_snapshot = layout_.snapshot_offsets[r],
            .v0 = layout_.vertex_offsets[r],
            .n_own = dist::vertex_count(layout_, r),
            .num_nodes = N_,
            .num_snapshots = T_};
  check_task();
  // Dropout masks and negative samples are keyed by source node ids, so every partition of
  // the store draws the same ones.
  orig_ids_ = reader.orig_ids();
  graphs_ =
      load_snapshot_graphs(comm_, data_, reader, orig_ids_, layout_, snapshot_layout_, device_);
  out_dim_ = options.task == DynamicTask::node_classification ? info_.num_classes : 1;
  model_.emplace(nn::TemporalConfig{.kind = kind,
                                    .layers = options.model.layers,
                                    .in_dim = manifest_.feature_dim,
                                    .hidden = H_,
                                    .out_dim = out_dim_,
                                    .dropout = options.model.dropout,
                                    .seed = options.seed,
                                    .device = device_});
  task_ = make_temporal_task(task_context(), reader, *model_);
  optimizer_ = nn::make_optimizer(options.optimizer);
  host_blocks_ = device_memory::HostBlockKeeper();
}

double TemporalTrainer::train_epoch(int epoch, PhaseTimes& phases) {
  cpu_phases_.clear();
  const double loss = training_loss(true, static_cast<std::uint32_t>(epoch), phases);
  {
    ScopedPhase t(phases, "dense");
    optimizer_->step(parameters());
  }
  keep_host_blocks();
  return loss;
}

double TemporalTrainer::probe(bool with_gradients) {
  PhaseTimes phases;
  const double loss = training_loss(with_gradients, 1, phases);
  keep_host_blocks();
  return loss;
}

double TemporalTrainer::evaluation_loss() {
  PhaseTimes ignored;
  const Losses l = evaluate(ignored);
  return (l.sum[0] + l.sum[1] + l.sum[2]) /
         static_cast<double>(std::max<std::int64_t>(1, l.count[0] + l.count[1] + l.count[2]));
}

Losses TemporalTrainer::evaluate(PhaseTimes& phases, std::vector<Tensor>* outputs) {
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

void TemporalTrainer::write_outputs(const OutputFiles& files) {
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

void TemporalTrainer::check_options() const {
  const TrainOptions& options = options_;
  check_dynamic_options(options, comm_.size());
  TESSEL_EXPECTS(manifest_.num_parts == comm_.size(),
                 "{} holds a temporal partition into {} parts, but {} ranks are running: run "
                 "mpirun -np {}",
                 options.part_dir.string(), manifest_.num_parts, comm_.size(), manifest_.num_parts);
}

void TemporalTrainer::check_task() const {
  const DynamicTask task = options_.task;
  if (task == DynamicTask::link_prediction)
    TESSEL_EXPECTS(T_ >= 2 && N_ < (std::int64_t{1} << 31),
                   "{}: --task link-prediction needs at least 2 snapshots and fewer than 2^31 "
                   "nodes",
                   manifest_.store.string());
  else if (task == DynamicTask::node_classification)
    TESSEL_EXPECTS(info_.num_classes >= 2,
                   "{}: --task node-classification needs class targets (the store has "
                   "regression targets)",
                   manifest_.store.string());
  else
    TESSEL_EXPECTS(info_.num_classes == 0,
                   "{}: the store holds {} classes; use --task node-classification",
                   manifest_.store.string(), info_.num_classes);
}

TaskContext TemporalTrainer::task_context() const {
  return {comm_, data_, device_, options_, layout_, info_, phase_, orig_ids_, manifest_.store};
}

dist::Block TemporalTrainer::graph_snapshots(std::int64_t t_end) const {
  if (snapshot_layout_) return dist::owned_snapshots(layout_, comm_.rank(), t_end);
  return {0, t_end};
}

SnapshotGraph& TemporalTrainer::graph(const dist::Block& gs, std::int64_t t) {
  return graphs_[snapshot_layout_ ? t - gs.begin : t];
}

nn::SnapshotRows TemporalTrainer::snapshot_rows(SnapshotGraph& g, GraphPhaseTimer& timer) {
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

void TemporalTrainer::keep_host_blocks() { host_blocks_.keep(); }

void TemporalTrainer::sync_device() {
  if (device_.is_cuda()) kernels::default_context(device_).synchronize();
}

std::vector<Tensor> TemporalTrainer::transpose(Transposition direction, std::vector<Tensor>& blocks,
                                               std::int64_t t_end, PhaseTimes& phases) {
  if (!transposes()) return std::move(blocks);
  ScopedPhase p(phases, "transpose");
  ScopedCpu c(cpu_phases_, "transpose");
  const std::int64_t before = data_.bytes_sent();
  std::vector<Tensor> out = direction(data_, layout_, blocks, t_end, H_, device_, &buffers_,
                                          DeviceStream::main());
  transpose_bytes_ += data_.bytes_sent() - before;
  return out;
}

double TemporalTrainer::training_loss(bool with_gradients, std::uint32_t epoch,
                                      PhaseTimes& phases) {
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
    if (comm_.size() > 1) data_.allreduce(model_->partial_gradients(), DeviceStream::main());
  }
  double loss[2] = {losses.sum[0], static_cast<double>(losses.count[0])};
  comm_.allreduce(std::span<double>(loss, 2));
  return loss[0] / std::max(1.0, loss[1]);
}

std::vector<Tensor> TemporalTrainer::forward(std::int64_t t_end, PhaseTimes& phases, bool training,
                                             std::uint32_t epoch) {
  // The weight recurrence counts in the graph phase, in wall and in CPU seconds alike.
  GraphPhaseTimer graph_phase;
  const dist::Block gs = graph_snapshots(t_end);
  model_->begin_forward(t_end, gs.size());
  std::vector<Tensor> g_out;
  for (std::int64_t t = gs.begin; t < gs.end; ++t) {
    SnapshotGraph& g = graph(gs, t);
    g_out.push_back(model_->snapshot_forward(static_cast<std::size_t>(t - gs.begin), t, g.features,
                                             snapshot_rows(g, graph_phase), training, epoch));
  }
  sync_device();
  graph_phase.finish(phases, cpu_phases_, !snapshot_layout_);
  std::vector<Tensor> blocks = transpose(dist::snapshots_to_vertices, g_out, t_end, phases);
  Stopwatch rec;
  ScopedCpu rec_cpu(cpu_phases_, "recurrent");
  std::vector<nn::NodeBlock> where;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const auto [t, first_row] = phase_.block(i);
    where.push_back(
        {t, std::span<const NodeId>(orig_ids_).subspan(static_cast<std::size_t>(first_row))});
  }
  std::vector<Tensor> out =
      model_->node_forward(std::move(blocks), where, training, epoch, task_->applies_head());
  sync_device();
  phases.add("recurrent", rec.seconds());
  // Before the backward pass releases the forward's blocks.
  keep_host_blocks();
  return out;
}

std::vector<Tensor> TemporalTrainer::task_loss(const std::vector<Tensor>& out, Losses& l,
                                               bool training, bool grad, std::uint32_t epoch,
                                               PhaseTimes& phases) {
  if (task_->applies_head()) return task_->loss(out, l, training, grad, epoch);
  ScopedPhase p(phases, "link");
  return task_->loss(out, l, training, grad, epoch);
}

void TemporalTrainer::backward(const std::vector<Tensor>& grad_out, std::int64_t t_end,
                               PhaseTimes& phases) {
  Stopwatch rec;
  std::optional<ScopedCpu> rec_cpu(std::in_place, cpu_phases_, "recurrent");
  std::vector<Tensor> grad_blocks = model_->node_backward(grad_out, task_->applies_head());
  sync_device();
  phases.add("recurrent", rec.seconds());
  rec_cpu.reset();
  std::vector<Tensor> grad_g = transpose(dist::vertices_to_snapshots, grad_blocks, t_end, phases);
  GraphPhaseTimer graph_phase;
  const dist::Block gs = graph_snapshots(t_end);
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
    data_.allreduce(grads, DeviceStream::main());
  });
}

} // namespace tessel::train
