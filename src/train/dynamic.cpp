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
#include "trainer.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/timer.hpp"
#include "tessel/datasets/atomic_output.hpp"
#include "tessel/datasets/h5.hpp"
#include "tessel/datasets/temporal.hpp"
#include "tessel/kernels/dense.hpp"
#include "tessel/kernels/loss.hpp"
#include "tessel/kernels/sparse.hpp"
#include "tessel/nn/layers.hpp"
#include "tessel/nn/link.hpp"
#include "tessel/nn/optimizer.hpp"
#include "tessel/nn/recurrent.hpp"
#include "tessel/partition/temporal.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>
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

Tensor matmul(const Tensor& a, bool ta, const Tensor& b, bool tb) {
  Tensor y = Tensor::empty({ta ? a.cols() : a.rows(), tb ? b.rows() : b.cols()}, DType::f32,
                           a.device());
  kernels::gemm(a, ta, b, tb, y);
  return y;
}

void add_into(Tensor& y, const Tensor& x) { kernels::axpy(1.0f, x, y); }

nn::Parameter parameter(const std::string& name, Tensor value) {
  Tensor grad = Tensor::zeros(value.shape(), DType::f32);
  return nn::Parameter{name, std::move(value), std::move(grad)};
}

// ---- the trainer ----

enum class Recurrence { none, gru, lstm };

struct Losses {
  double sum[3] = {0, 0, 0};        // train, valid, test: squared error or cross-entropy
  std::int64_t count[3] = {0, 0, 0};  // targets, or (link prediction) scored pairs
  std::int64_t correct[3] = {0, 0, 0};
  // Link prediction: AUC over all pairs of the split, sum of reciprocal ranks and positives.
  double auc[3] = {0.5, 0.5, 0.5};
  double rr_sum[3] = {0, 0, 0};
  std::int64_t positives[3] = {0, 0, 0};
};

// The pairs one embedding snapshot t scores: the edges of snapshot t + 1 whose destination this
// rank holds, each followed by its negatives (the source replaced by a sampled node). Rows are
// of the embedding block extended by the fetched halo rows.
struct PairBatch {
  int split = -1;  // 0 train, 1 valid, 2 test; -1: nothing to score
  std::vector<LocalId> src, dst;
  std::vector<float> label;
  HaloPlan halo;
};

class DynamicTrainer {
public:
  // The runtime gives the device every tensor of the model lives on and the data plane that
  // carries them (halo rows, the transposition, gradients); counts and metrics use `comm`.
  DynamicTrainer(comm::Communicator& comm, const TrainOptions& options, const Runtime& runtime,
                 partition::TemporalManifest manifest)
      : comm_(comm), data_(*runtime.data), device_(runtime.device), options_(options),
        manifest_(std::move(manifest)) {
    TESSEL_EXPECTS(manifest_.num_parts == comm.size(),
                   "{} holds a temporal partition into {} parts, but {} ranks are running: run "
                   "mpirun -np {}",
                   options.part_dir.string(), manifest_.num_parts, comm.size(),
                   manifest_.num_parts);
    const std::string& kind = options.model.kind;
    TESSEL_EXPECTS(kind == "gcn-gru" || kind == "gcn-lstm" || kind == "evolvegcn-o",
                   "--mode dynamic trains gcn-gru, gcn-lstm or evolvegcn-o, not --model {}", kind);
    TESSEL_EXPECTS(options.dynamic.partition == "snapshot" || options.dynamic.partition == "vertex",
                   "--temporal-partition must be snapshot or vertex, got {}",
                   options.dynamic.partition);
    classification_ = options.dynamic.task == "node-classification";
    link_ = options.dynamic.task == "link-prediction";
    TESSEL_EXPECTS(classification_ || link_ || options.dynamic.task == "node-regression",
                   "--task {} is not supported: use node-regression, node-classification or "
                   "link-prediction",
                   options.dynamic.task);
    TESSEL_EXPECTS(options.dynamic.negatives >= 1 && options.dynamic.eval_negatives >= 1,
                   "--negatives and --eval-negatives must be at least 1");
    TESSEL_EXPECTS(options.model.dropout >= 0.0f && options.model.dropout < 1.0f,
                   "--dropout {} is outside [0, 1)", options.model.dropout);
    recurrence_ = kind == "gcn-gru" ? Recurrence::gru
                  : kind == "gcn-lstm" ? Recurrence::lstm
                                       : Recurrence::none;
    evolve_ = kind == "evolvegcn-o";
    snapshot_layout_ = options.dynamic.partition == "snapshot";
    N_ = manifest_.num_nodes;
    T_ = manifest_.num_snapshots;
    F_ = manifest_.feature_dim;
    H_ = options.model.hidden;
    datasets::TemporalStoreReader reader(manifest_.store);
    info_ = reader.info();
    TESSEL_EXPECTS(info_.num_nodes == N_ && info_.num_snapshots == T_ && info_.feature_dim == F_,
                   "{}: the store does not match partition.json", manifest_.store.string());
    // Snapshot blocks balanced for the work of an epoch: the training range forward and
    // backward, plus the evaluations' share of a forward over all snapshots.
    const int evaluated_epochs = std::max(1, std::min(options.eval_every, options.epochs));
    layout_ = {manifest_.vertex_offsets,
               partition::balanced_snapshot_blocks(T_, info_.train.end, comm.size(),
                                                   1.0 / evaluated_epochs)};
    const int r = comm.rank();
    v0_ = layout_.vertex_offsets[r];
    n_own_ = layout_.vertex_offsets[r + 1] - v0_;
    if (link_)
      TESSEL_EXPECTS(T_ >= 2 && N_ < (std::int64_t{1} << 31),
                     "{}: --task link-prediction needs at least 2 snapshots and fewer than 2^31 "
                     "nodes",
                     manifest_.store.string());
    else if (classification_)
      TESSEL_EXPECTS(info_.num_classes >= 2,
                     "{}: --task node-classification needs class targets (the store has "
                     "regression targets)",
                     manifest_.store.string());
    else
      TESSEL_EXPECTS(info_.num_classes == 0,
                     "{}: the store holds {} classes; use --task node-classification",
                     manifest_.store.string(), info_.num_classes);
    out_dim_ = classification_ ? info_.num_classes : 1;
    // Dropout masks and negative samples are keyed by source node ids, so every partition of
    // the store draws the same ones.
    orig_ids_ = reader.orig_ids();
    if (link_) {
      relabel_.assign(static_cast<std::size_t>(N_), 0);
      for (NodeId g = 0; g < N_; ++g) relabel_[orig_ids_[g]] = g;
    }
    load_graphs(reader);
    if (link_)
      load_link_rows(reader);
    else
      load_targets(reader);
    build_model();
    optimizer_ = nn::make_optimizer(options.optimizer);
    device_memory::host_reset_peak();
    setup_host_bytes_ = device_memory::host_stats().bytes_in_use;
  }

  std::vector<nn::Parameter*> parameters() {
    std::vector<nn::Parameter*> all = replicated_params_;
    all.insert(all.end(), partial_params_.begin(), partial_params_.end());
    return all;
  }
  nn::Optimizer& optimizer() { return *optimizer_; }
  bool classification() const { return classification_; }
  bool link_prediction() const { return link_; }
  const datasets::TemporalStoreInfo& info() const { return info_; }
  const TemporalLayout& layout() const { return layout_; }
  bool transposes() const { return snapshot_layout_ && recurrence_ != Recurrence::none; }
  std::int64_t hidden() const { return H_; }
  // Process CPU seconds of the last train_epoch's graph, transpose or halo, and recurrent
  // phases (read it before evaluate(), which adds its own).
  const PhaseTimes& cpu_phases() const { return cpu_phases_; }

  // One epoch: forward over the snapshots up to the end of the training range, loss on the
  // training snapshots, backward, gradient all-reduce, optimizer step. Returns the mean loss.
  double train_epoch(int epoch, PhaseTimes& phases) {
    cpu_phases_.clear();
    flat_gradients_.fill_zero();
    const std::int64_t t_end = info_.train.end;
    std::vector<Tensor> out = forward(t_end, phases, true, static_cast<std::uint32_t>(epoch));
    Losses losses;
    std::vector<Tensor> grad_out = task_loss(out, losses, true, true, static_cast<std::uint32_t>(epoch), phases);
    backward(grad_out, t_end, phases);
    {
      ScopedPhase t(phases, "communicate");
      allreduce_partial_gradients();
    }
    {
      ScopedPhase t(phases, "dense");
      optimizer_->step(parameters());
    }
    keep_host_blocks();
    double loss[2] = {losses.sum[0], static_cast<double>(losses.count[0])};
    comm_.allreduce(std::span<double>(loss, 2));
    return loss[0] / std::max(1.0, loss[1]);
  }

  // The mean training loss and (with gradients) the all-reduced gradients, without a step.
  // Dropout masks and negatives are those of epoch 1.
  double probe(bool with_gradients) {
    PhaseTimes phases;
    flat_gradients_.fill_zero();
    const std::int64_t t_end = info_.train.end;
    std::vector<Tensor> out = forward(t_end, phases, true, 1);
    Losses losses;
    std::vector<Tensor> grad_out = task_loss(out, losses, true, with_gradients, 1, phases);
    if (with_gradients) {
      backward(grad_out, t_end, phases);
      allreduce_partial_gradients();
    }
    keep_host_blocks();
    double loss[2] = {losses.sum[0], static_cast<double>(losses.count[0])};
    comm_.allreduce(std::span<double>(loss, 2));
    return loss[0] / std::max(1.0, loss[1]);
  }

  // Forward over every snapshot; per split mean loss and (classification) accuracy.
  // The mean loss of evaluate() over all three splits.
  double evaluation_loss() {
    PhaseTimes ignored;
    const Losses l = evaluate(ignored);
    return (l.sum[0] + l.sum[1] + l.sum[2]) /
           static_cast<double>(std::max<std::int64_t>(1, l.count[0] + l.count[1] + l.count[2]));
  }

  // Link prediction: the training split's pairs use the evaluation negatives (fixed, those of
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
      write_snapshot_rows(out, link_ ? H_ : out_dim_, files.predictions,
                          "tessel-temporal-predictions", "/prediction",
                          "float32 [T*N, out]: row t*N+v is the model output for source node v "
                          "at snapshot t (regression: the predicted target; classification: "
                          "logits; link prediction: the embedding the scoring head reads)");
    if (!files.embeddings.empty())
      write_snapshot_rows(embeddings_, H_, files.embeddings, "tessel-temporal-embeddings",
                          "/embedding",
                          "float32 [T*N, hidden]: row t*N+v is source node v's embedding at "
                          "snapshot t (the recurrence's hidden state, the head's input)");
  }

private:
  // Rows of the node phase's blocks (one per (snapshot, row range) of this rank), gathered on
  // rank 0 into source node order and written as `dataset` of a `format` file.
  void write_snapshot_rows(const std::vector<Tensor>& blocks_out, std::int64_t width,
                           const fs::path& path, const std::string& format,
                           const std::string& dataset, const std::string& description) {
    // Each rank sends (t, global row begin, rows) blocks of its outputs to rank 0.
    std::vector<float> values;
    std::vector<std::int64_t> where;  // t, row_begin, rows per block
    for (std::size_t i = 0; i < blocks_out.size(); ++i) {
      const auto [t, rb] = node_block(i);
      where.insert(where.end(), {t, rb, blocks_out[i].rows()});
      const Tensor host = blocks_out[i].to(Device::cpu());
      values.insert(values.end(), host.data<float>(), host.data<float>() + host.numel());
    }
    std::vector<std::int64_t> to_root(static_cast<std::size_t>(comm_.size()), 0);
    to_root[0] = static_cast<std::int64_t>(where.size());
    const auto all_where = comm_.alltoallv<std::int64_t>(where, to_root);
    to_root[0] = static_cast<std::int64_t>(values.size());
    const auto all_values = comm_.alltoallv<float>(values, to_root);
    if (comm_.rank() != 0) return;
    datasets::TemporalStoreReader reader(manifest_.store);
    const auto orig = reader.orig_ids();
    // Rows in source order: position of relabeled node g is orig[g].
    std::vector<float> rows(static_cast<std::size_t>(T_ * N_ * width), 0.0f);
    std::size_t at = 0;
    for (std::size_t b = 0; b < all_where.size(); b += 3) {
      const std::int64_t t = all_where[b], rb = all_where[b + 1], count = all_where[b + 2];
      for (std::int64_t i = 0; i < count; ++i, at += static_cast<std::size_t>(width))
        std::copy_n(&all_values[at], width, &rows[((t * N_) + orig[rb + i]) * width]);
    }
    if (path.has_parent_path()) fs::create_directories(path.parent_path());
    datasets::AtomicOutput output(path);
    {
      h5::File file = h5::File::create(output.temp_path());
      file.set_attr("format", format);
      file.set_attr("version", std::int64_t{1});
      file.set_attr("num_nodes", N_);
      file.set_attr("num_snapshots", T_);
      file.set_attr("task", options_.dynamic.task);
      file.write(dataset, rows.data(), {T_ * N_, width}, description);
      file.close();
    }
    output.commit();
  }

  // Which (snapshot, first global row) the i-th node-phase block is.
  std::pair<std::int64_t, std::int64_t> node_block(std::size_t i) const {
    if (node_phase_by_vertex()) return {static_cast<std::int64_t>(i), v0_};
    return {layout_.snapshot_offsets[comm_.rank()] + static_cast<std::int64_t>(i), 0};
  }
  // The head (and the recurrence) runs on this rank's vertices for all snapshots, except for
  // EvolveGCN in the snapshot layout, whose head runs on whole owned snapshots (no transpose).
  bool node_phase_by_vertex() const { return !snapshot_layout_ || recurrence_ != Recurrence::none; }
  // Snapshots of the graph phase on this rank, below t_end.
  Block graph_snapshots(std::int64_t t_end) const {
    if (snapshot_layout_) return owned_snapshots(layout_, comm_.rank(), t_end);
    return {0, t_end};
  }

  void load_graphs(datasets::TemporalStoreReader& reader) {
    const int r = comm_.rank();
    if (snapshot_layout_) {
      const Block mine = owned_snapshots(layout_, r, T_);
      const auto snaps = reader.snapshots(mine.begin, mine.end);
      for (std::int64_t i = 0; i < mine.size(); ++i) {
        const Csr& s = snaps[i];
        SnapshotGraph g;
        const LocalCsr a = normalized_rows(s, weighted_degree(s), 0, N_, [](NodeId u) { return u; }, N_);
        g.forward = kernels::SparseMatrix::from_csr(a, device_);
        g.backward = g.forward.transpose();
        g.features =
            Tensor::from_vector(reader.features(mine.begin + i, 0, N_), {N_, F_}).to(device_);
        graphs_.push_back(std::move(g));
      }
      return;
    }
    // Vertex layout: each rank reads every snapshot (degrees of halo sources need whole rows)
    // and keeps its rows, with the halo plan of each snapshot.
    const auto snaps = reader.snapshots(0, T_);
    const NodeId v1 = v0_ + n_own_;
    std::vector<std::int64_t> halo_index(static_cast<std::size_t>(N_), -1);
    for (std::int64_t t = 0; t < T_; ++t) {
      const Csr& s = snaps[t];
      std::vector<NodeId> halo;
      for (NodeId v = v0_; v < v1; ++v)
        for (EdgeId e = s.indptr[v]; e < s.indptr[v + 1]; ++e)
          if (s.indices[e] < v0_ || s.indices[e] >= v1) halo.push_back(s.indices[e]);
      std::sort(halo.begin(), halo.end());
      halo.erase(std::unique(halo.begin(), halo.end()), halo.end());
      for (std::size_t i = 0; i < halo.size(); ++i) halo_index[halo[i]] = n_own_ + static_cast<std::int64_t>(i);
      const auto n_halo = static_cast<std::int64_t>(halo.size());
      SnapshotGraph g;
      const LocalCsr a = normalized_rows(
          s, weighted_degree(s), v0_, v1,
          [&](NodeId u) { return (u >= v0_ && u < v1) ? u - v0_ : halo_index[u]; }, n_own_ + n_halo);
      for (NodeId u : halo) halo_index[u] = -1;
      g.forward = kernels::SparseMatrix::from_csr(a, device_);
      g.backward = g.forward.transpose();
      g.features = Tensor::from_vector(reader.features(t, v0_, v1), {n_own_, F_}).to(device_);
      // Ask each owner for its rows among the halo.
      g.halo = make_halo_plan(comm_, layout_, halo, device_);
      graphs_.push_back(std::move(g));
    }
  }

  void load_targets(datasets::TemporalStoreReader& reader) {
    if (node_phase_by_vertex()) {
      for (std::int64_t t = 0; t < T_; ++t) targets_.push_back(reader.targets(t, v0_, v0_ + n_own_));
    } else {
      const Block mine = owned_snapshots(layout_, comm_.rank(), T_);
      for (std::int64_t t = mine.begin; t < mine.end; ++t) targets_.push_back(reader.targets(t, 0, N_));
    }
    // What the loss ops read: regression targets on the training device; the labelled rows and
    // their classes (unlabelled rows hold -1) on the host, as softmax_cross_entropy takes them.
    for (const std::vector<float>& y : targets_) {
      if (!classification_) {
        target_tensors_.push_back(Tensor::from_vector(y).to(device_));
        continue;
      }
      std::vector<LocalId> rows;
      std::vector<std::int64_t> labels;
      for (std::size_t v = 0; v < y.size(); ++v)
        if (y[v] >= 0) {
          rows.push_back(static_cast<LocalId>(v));
          labels.push_back(static_cast<std::int64_t>(y[v]));
        }
      class_rows_.push_back(std::move(rows));
      class_labels_.push_back(std::move(labels));
    }
  }

  // Link prediction: the rows of snapshot t + 1 each embedding snapshot t scores against.
  void load_link_rows(datasets::TemporalStoreReader& reader) {
    const bool by_vertex = node_phase_by_vertex();
    const Block held = by_vertex ? Block{0, T_} : owned_snapshots(layout_, comm_.rank(), T_);
    const NodeId rb = by_vertex ? v0_ : 0, re = by_vertex ? v0_ + n_own_ : N_;
    // A few snapshots at a time: the reader rebuilds them in order from the base and deltas.
    constexpr std::int64_t kChunk = 4;
    for (std::int64_t t0 = held.begin; t0 < held.end; t0 += kChunk) {
      const std::int64_t t1 = std::min(held.end, t0 + kChunk);
      const std::int64_t first = t0 + 1, last = std::min(t1 + 1, T_);
      const std::vector<Csr> snaps =
          first < last ? reader.snapshots(first, last) : std::vector<Csr>();
      for (std::int64_t t = t0; t < t1; ++t) {
        Csr rows;
        rows.num_rows = re - rb;
        rows.num_cols = N_;
        if (t + 1 < T_) {
          const Csr& s = snaps[t + 1 - first];
          rows.indptr.reserve(static_cast<std::size_t>(rows.num_rows + 1));
          for (NodeId v = rb; v < re; ++v) {
            rows.indices.insert(rows.indices.end(), s.indices.begin() + s.indptr[v],
                                s.indices.begin() + s.indptr[v + 1]);
            rows.indptr.push_back(static_cast<EdgeId>(rows.indices.size()));
          }
        } else {
          rows.indptr.assign(static_cast<std::size_t>(rows.num_rows + 1), 0);
        }
        link_rows_.push_back(std::move(rows));
      }
    }
  }

  // Negative k for the edge u -> v of snapshot s: a source drawn uniformly from the nodes, keyed
  // by (seed, epoch, s, k) and the edge's source node ids, redrawn while it is v or a real
  // in-neighbor of v at s (up to 16 draws). `row` lists v's in-neighbors at s, ascending.
  NodeId negative_source(NodeId u, NodeId v, std::span<const NodeId> row, std::int64_t s,
                         std::uint32_t k, std::uint32_t epoch) const {
    const rng::Key key{options_.seed, rng::Stream::sampling, epoch, static_cast<std::uint32_t>(s),
                       k};
    const std::uint64_t item = (static_cast<std::uint64_t>(orig_ids_[v]) << 32) |
                               static_cast<std::uint64_t>(orig_ids_[u]);
    NodeId candidate = v;
    for (std::uint32_t attempt = 0; attempt < 16; ++attempt) {
      candidate = relabel_[key.below(item, attempt, static_cast<std::uint64_t>(N_))];
      if (candidate != v && !std::binary_search(row.begin(), row.end(), candidate)) break;
    }
    return candidate;
  }

  // Link prediction over the head inputs z (one block per embedding snapshot t): the edges of
  // snapshot t + 1 against negatives, scored by the Hadamard head. `training`: the training
  // split only, --negatives per edge drawn for `epoch`; else every split with --eval-negatives
  // (fixed draws), and AUC and reciprocal ranks. With `grad`, returns d(mean BCE)/dz per block.
  // In the vertex-by-vertex node phase the pairs live with their destination's owner and the
  // sources' rows are fetched like a halo (collective).
  std::vector<Tensor> link_loss(const std::vector<Tensor>& z, Losses& l, bool training,
                                bool grad, std::uint32_t epoch) {
    const datasets::SnapshotRange splits[3] = {info_.train, info_.valid, info_.test};
    const int K = training ? options_.dynamic.negatives : options_.dynamic.eval_negatives;
    const bool by_vertex = node_phase_by_vertex();
    std::vector<PairBatch> batches(z.size());
    std::int64_t train_pairs = 0;
    for (std::size_t i = 0; i < z.size(); ++i) {
      const auto [t, first_row] = node_block(i);
      const std::int64_t s = t + 1;
      PairBatch& b = batches[i];
      for (int sp = 0; sp < 3; ++sp)
        if (s < T_ && s >= splits[sp].begin && s < splits[sp].end) b.split = sp;
      if (training && b.split != 0) b.split = -1;
      if (b.split < 0) continue;
      const Csr& rows = link_rows_[i];
      std::vector<NodeId> src_global;
      for (std::int64_t r = 0; r < rows.num_rows; ++r) {
        const NodeId v = first_row + r;
        const std::span<const NodeId> row(rows.indices.data() + rows.indptr[r],
                                          static_cast<std::size_t>(rows.indptr[r + 1] - rows.indptr[r]));
        for (NodeId u : row) {
          src_global.push_back(u);
          b.dst.push_back(static_cast<LocalId>(r));
          b.label.push_back(1.0f);
          for (int k = 0; k < K; ++k) {
            src_global.push_back(negative_source(u, v, row, s, static_cast<std::uint32_t>(k), epoch));
            b.dst.push_back(static_cast<LocalId>(r));
            b.label.push_back(0.0f);
          }
        }
      }
      // Sources outside the held rows come after them, in ascending id (halo order).
      std::vector<NodeId> halo;
      if (by_vertex)
        for (NodeId u : src_global)
          if (u < v0_ || u >= v0_ + n_own_) halo.push_back(u);
      std::sort(halo.begin(), halo.end());
      halo.erase(std::unique(halo.begin(), halo.end()), halo.end());
      b.src.resize(src_global.size());
      for (std::size_t j = 0; j < src_global.size(); ++j) {
        const NodeId u = src_global[j];
        b.src[j] = static_cast<LocalId>(
            !by_vertex ? u
            : (u >= v0_ && u < v0_ + n_own_)
                ? u - v0_
                : n_own_ + (std::lower_bound(halo.begin(), halo.end(), u) - halo.begin()));
      }
      if (by_vertex) b.halo = make_halo_plan(comm_, layout_, halo, device_);
      if (b.split == 0) train_pairs += static_cast<std::int64_t>(b.label.size());
    }
    // The gradient of the mean over the whole job's training pairs.
    const double scale =
        grad ? 1.0 / static_cast<double>(std::max<std::int64_t>(1, comm_.allreduce_value(train_pairs)))
             : 0.0;
    std::vector<Tensor> grads;
    std::vector<float> positive_scores[3], negative_scores[3];
    for (std::size_t i = 0; i < z.size(); ++i) {
      PairBatch& b = batches[i];
      if (grad) grads.push_back(Tensor::zeros(z[i].shape(), DType::f32, device_));
      if (b.split < 0) continue;
      const Tensor rows = by_vertex ? halo_forward(data_, b.halo, z[i]) : z[i];
      const Tensor scores = nn::link_scores(rows, b.src, b.dst, head_weight_.value, head_bias_.value);
      Tensor grad_scores;
      if (grad) grad_scores = Tensor::empty(scores.shape(), DType::f32, device_);
      l.sum[b.split] += nn::binary_cross_entropy_sum(scores, b.label, scale,
                                                     grad ? &grad_scores : nullptr);
      l.count[b.split] += scores.numel();
      if (!training) {
        const Tensor host_scores = scores.to(Device::cpu());
        const float* sc = host_scores.data<float>();
        const std::int64_t group = K + 1;
        for (std::int64_t j = 0; j < scores.numel(); j += group) {
          positive_scores[b.split].push_back(sc[j]);
          negative_scores[b.split].insert(negative_scores[b.split].end(), sc + j + 1, sc + j + group);
          l.rr_sum[b.split] += nn::reciprocal_rank(sc[j], std::span<const float>(sc + j + 1, static_cast<std::size_t>(K)));
          ++l.positives[b.split];
        }
      }
      if (!grad) continue;
      Tensor grad_rows = Tensor::zeros(rows.shape(), DType::f32, device_);
      nn::link_scores_backward(rows, b.src, b.dst, head_weight_.value, grad_scores, grad_rows,
                               head_weight_.grad, head_bias_.grad);
      grads.back() = by_vertex ? halo_backward(data_, b.halo, grad_rows, n_own_) : grad_rows;
    }
    if (!training) {
      // AUC ranks every positive against every negative of the split: rank 0 gathers the
      // scores, computes it exactly and broadcasts it.
      for (int sp = 0; sp < 3; ++sp) {
        std::vector<std::int64_t> to_root(static_cast<std::size_t>(comm_.size()), 0);
        to_root[0] = static_cast<std::int64_t>(positive_scores[sp].size());
        const auto pos = comm_.alltoallv<float>(positive_scores[sp], to_root);
        to_root[0] = static_cast<std::int64_t>(negative_scores[sp].size());
        const auto neg = comm_.alltoallv<float>(negative_scores[sp], to_root);
        if (comm_.rank() == 0) l.auc[sp] = nn::roc_auc(pos, neg);
      }
      comm_.broadcast(l.auc, 3, DType::f64, 0);
    }
    return grads;
  }

  void build_model() {
    const auto& m = options_.model;
    const int L = m.layers;
    for (int l = 0; l < L; ++l) {
      const std::int64_t in = l == 0 ? F_ : H_;
      const rng::Key key{options_.seed, rng::Stream::init, 0, 0, static_cast<std::uint32_t>(l)};
      const std::string name = "gcn" + std::to_string(l);
      Layer layer;
      layer.weight = parameter(name + (evolve_ ? ".initial_weight" : ".weight"),
                               nn::glorot_uniform(in, H_, key, 0));
      layer.bias = parameter(name + ".bias", Tensor::zeros({H_}, DType::f32));
      if (evolve_) {
        const rng::Key ekey{options_.seed, rng::Stream::init, 1, 0, static_cast<std::uint32_t>(l)};
        layer.evolve.emplace(name + ".evolve", H_, H_, ekey);
      }
      layers_.push_back(std::move(layer));
    }
    const rng::Key rkey{options_.seed, rng::Stream::init, 2, 0, 0};
    if (recurrence_ == Recurrence::gru) gru_.emplace("gru", H_, H_, rkey);
    if (recurrence_ == Recurrence::lstm) lstm_.emplace("lstm", H_, H_, rkey);
    const rng::Key hkey{options_.seed, rng::Stream::init, 3, 0, 0};
    head_weight_ = parameter("head.weight", nn::glorot_uniform(H_, out_dim_, hkey, 0));
    head_bias_ = parameter("head.bias", Tensor::zeros({out_dim_}, DType::f32));
    // The weight recurrence is computed identically on every rank (its gradient is all-reduced
    // before its backward), so its parameters are replicated; everything else sees only this
    // rank's rows or snapshots and is all-reduced.
    for (Layer& layer : layers_) {
      if (evolve_) {
        replicated_params_.push_back(&layer.weight);
        for (nn::Parameter* p : layer.evolve->parameters()) replicated_params_.push_back(p);
      } else {
        partial_params_.push_back(&layer.weight);
      }
      partial_params_.push_back(&layer.bias);
    }
    if (gru_) for (nn::Parameter* p : gru_->parameters()) partial_params_.push_back(p);
    if (lstm_) for (nn::Parameter* p : lstm_->parameters()) partial_params_.push_back(p);
    partial_params_.push_back(&head_weight_);
    partial_params_.push_back(&head_bias_);
    flatten_parameters();
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
  // the blocks as they are, moved out. The input outlives the call when it transposes (the result may view it).
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

  // Dropout on the input of GCN layer l at snapshot t, keyed like the static models' masks
  // (seed, epoch, layer) plus the snapshot as the step and the source node id as the row, so
  // the mask does not depend on the layout or the rank count. `layer` = the GCN layer count
  // is the head's input. Identity (no mask) when not training or p = 0.
  Tensor dropout(const Tensor& x, NodeId first_row, std::uint32_t epoch, std::int64_t t,
                 std::uint32_t layer, bool training, Tensor& mask) {
    const float p = options_.model.dropout;
    mask = Tensor();
    if (!training || p <= 0.0f) return x;
    const rng::Key key{options_.seed, rng::Stream::dropout, epoch, static_cast<std::uint32_t>(t),
                       layer};
    Tensor y = Tensor::empty(x.shape(), DType::f32, x.device());
    mask = Tensor::empty(kernels::dropout_mask_shape(x), DType::u8, x.device());
    kernels::dropout_forward(x, std::span<const NodeId>(orig_ids_).subspan(
                                    static_cast<std::size_t>(first_row),
                                    static_cast<std::size_t>(x.rows())),
                             key, p, y, mask);
    return y;
  }
  void dropout_backward(Tensor& grad, const Tensor& mask) {
    if (mask.defined()) kernels::dropout_backward(grad, mask, options_.model.dropout, grad);
  }

  std::vector<Tensor> forward(std::int64_t t_end, PhaseTimes& phases, bool training,
                              std::uint32_t epoch) {
    // The weight recurrence counts in the graph phase, in wall and in CPU seconds alike.
    GraphPhaseTimer graph_phase;
    // EvolveGCN-O: the weights of snapshot t, W_t = LSTM(W_{t-1}), W_{-1} = the initial weight.
    for (Layer& layer : layers_) {
      layer.weights.clear();
      if (!evolve_) continue;
      layer.evolve->clear();
      nn::LstmCell::State state{layer.weight.value,
                                Tensor::zeros(layer.weight.value.shape(), DType::f32, device_)};
      for (std::int64_t t = 0; t < t_end; ++t) {
        state = layer.evolve->forward(state.h, state);
        layer.weights.push_back(state.h);
      }
    }
    // Graph phase.
    const Block gs = graph_snapshots(t_end);
    cache_.assign(static_cast<std::size_t>(gs.size()), {});
    std::vector<Tensor> g_out;
    for (std::int64_t t = gs.begin; t < gs.end; ++t) {
      SnapshotGraph& g = graphs_[snapshot_layout_ ? t - gs.begin : t];
      auto& saved = cache_[t - gs.begin];
      Tensor z = g.features;
      // The graph phase holds every row in the snapshot layout, this rank's rows in the vertex
      // layout (halo rows arrive after the weight multiplication).
      const NodeId first_row = snapshot_layout_ ? 0 : v0_;
      for (std::size_t l = 0; l < layers_.size(); ++l) {
        Layer& layer = layers_[l];
        const Tensor& w = evolve_ ? layer.weights[t] : layer.weight.value;
        Tensor mask;
        z = dropout(z, first_row, epoch, t, static_cast<std::uint32_t>(l), training, mask);
        Tensor xw = matmul(z, false, w, false);
        if (!snapshot_layout_)
          xw = graph_phase.halo([&] { return halo_forward(data_, g.halo, xw); });
        Tensor y = kernels::spmm(g.forward, xw);
        kernels::add_bias(y, layer.bias.value);
        kernels::relu_forward(y, y);
        saved.push_back({z, y, mask});
        z = y;
      }
      g_out.push_back(z);
    }
    sync_device();
    graph_phase.finish(phases, cpu_phases_, !snapshot_layout_);
    // Transposition to the vertex layout for the recurrence.
    std::vector<Tensor> blocks = transpose(snapshots_to_vertices, g_out, t_end, phases);
    // Recurrent phase and head.
    Stopwatch rec;
    ScopedCpu rec_cpu(cpu_phases_, "recurrent");
    embeddings_.clear();
    if (recurrence_ == Recurrence::gru) {
      gru_->clear();
      Tensor h = Tensor::zeros({n_own_, H_}, DType::f32, device_);
      for (const Tensor& x : blocks) {
        h = gru_->forward(x, h);
        embeddings_.push_back(h);
      }
    } else if (recurrence_ == Recurrence::lstm) {
      lstm_->clear();
      nn::LstmCell::State st{Tensor::zeros({n_own_, H_}, DType::f32, device_),
                             Tensor::zeros({n_own_, H_}, DType::f32, device_)};
      for (const Tensor& x : blocks) {
        st = lstm_->forward(x, st);
        embeddings_.push_back(st.h);
      }
    } else {
      embeddings_ = std::move(blocks);
    }
    // The head's input: the embeddings after dropout. Link prediction returns it (its scoring
    // head needs rows of other ranks); the node tasks apply the linear head here.
    head_inputs_.clear();
    head_masks_.assign(embeddings_.size(), Tensor());
    std::vector<Tensor> out;
    for (std::size_t i = 0; i < embeddings_.size(); ++i) {
      const auto [t, first_row] = node_block(i);
      head_inputs_.push_back(dropout(embeddings_[i], first_row, epoch, t,
                                     static_cast<std::uint32_t>(layers_.size()), training,
                                     head_masks_[i]));
      if (link_) {
        out.push_back(head_inputs_.back());
        continue;
      }
      Tensor y = matmul(head_inputs_.back(), false, head_weight_.value, false);
      kernels::add_bias(y, head_bias_.value);
      out.push_back(std::move(y));
    }
    sync_device();
    phases.add("recurrent", rec.seconds());
    // Before the backward pass releases the forward's blocks.
    keep_host_blocks();
    return out;
  }

  // The task's loss over the node phase's outputs; `training`: the training split as trained
  // (link prediction: the training negatives of `epoch`), else every split as evaluated.
  std::vector<Tensor> task_loss(const std::vector<Tensor>& out, Losses& l, bool training,
                                bool grad, std::uint32_t epoch, PhaseTimes& phases) {
    if (!link_) return loss_and_grad(out, l, grad);
    ScopedPhase p(phases, "link");
    return link_loss(out, l, training, grad, epoch);
  }

  // Loss over the node-phase outputs by split; with `grad`, d(mean training loss)/d out. The
  // loss ops run on the outputs' device (softmax cross-entropy over the labelled rows, or the
  // squared error of every row) and return their sums in double.
  std::vector<Tensor> loss_and_grad(const std::vector<Tensor>& out, Losses& l, bool grad) {
    const datasets::SnapshotRange splits[3] = {info_.train, info_.valid, info_.test};
    std::vector<Tensor> grads;
    // The global count of training targets scales the gradient so P ranks compute the mean
    // loss of the whole graph.
    const double scale = 1.0 / static_cast<double>(train_targets());
    for (std::size_t i = 0; i < out.size(); ++i) {
      const std::int64_t t = node_block(i).first;
      const std::size_t k = node_phase_by_vertex() ? static_cast<std::size_t>(t) : i;
      const Tensor& o = out[i];
      Tensor g;
      if (grad) g = Tensor::zeros(o.shape(), DType::f32, device_);
      for (int s = 0; s < 3; ++s) {
        if (t < splits[s].begin || t >= splits[s].end) continue;
        const bool with_grad = grad && s == 0;
        if (classification_) {
          const std::vector<LocalId>& rows = class_rows_[k];
          const std::vector<std::int64_t>& labels = class_labels_[k];
          // The op writes a gradient either way: evaluation gives it a scratch tensor.
          Tensor g_out = with_grad ? g : Tensor::empty(o.shape(), DType::f32, device_);
          l.sum[s] += kernels::softmax_cross_entropy(o, rows, labels, scale, g_out);
          l.correct[s] += kernels::count_correct(o, rows, labels);
          l.count[s] += static_cast<std::int64_t>(rows.size());
        } else {
          l.sum[s] += kernels::squared_error(o, target_tensors_[k], scale, with_grad ? &g : nullptr);
          l.count[s] += o.rows();
        }
      }
      grads.push_back(std::move(g));
    }
    return grads;
  }

  std::int64_t train_targets() {
    if (train_targets_ >= 0) return train_targets_;
    std::int64_t count = 0;
    for (std::size_t i = 0; i < targets_.size(); ++i) {
      const std::int64_t t = node_block(i).first;
      if (t < info_.train.begin || t >= info_.train.end) continue;
      for (float y : targets_[i]) count += (!classification_ || y >= 0) ? 1 : 0;
    }
    train_targets_ = comm_.allreduce_value(count);
    TESSEL_EXPECTS(train_targets_ > 0, "{}: no training targets", manifest_.store.string());
    return train_targets_;
  }

  void backward(const std::vector<Tensor>& grad_out, std::int64_t t_end, PhaseTimes& phases) {
    Stopwatch rec;
    std::optional<ScopedCpu> rec_cpu(std::in_place, cpu_phases_, "recurrent");
    // Head and recurrence, last snapshot first.
    // Link prediction's grad_out is already the gradient of the head's input (its head's
    // parameters got theirs in link_loss).
    std::vector<Tensor> grad_blocks(embeddings_.size());
    for (std::size_t i = 0; i < embeddings_.size(); ++i) {
      if (link_) {
        grad_blocks[i] = grad_out[i].clone();
      } else {
        kernels::gemm(head_inputs_[i], true, grad_out[i], false, head_weight_.grad, 1.0f, 1.0f);
        kernels::column_sums(grad_out[i], head_bias_.grad, true);
        grad_blocks[i] = matmul(grad_out[i], false, head_weight_.value, true);
      }
      dropout_backward(grad_blocks[i], head_masks_[i]);
    }
    if (recurrence_ == Recurrence::gru) {
      Tensor carry = Tensor::zeros({n_own_, H_}, DType::f32, device_);
      for (std::size_t i = embeddings_.size(); i-- > 0;) {
        add_into(grad_blocks[i], carry);
        auto [dx, dh] = gru_->backward(grad_blocks[i], true);
        grad_blocks[i] = dx;
        carry = dh;
      }
    } else if (recurrence_ == Recurrence::lstm) {
      nn::LstmCell::State carry{Tensor::zeros({n_own_, H_}, DType::f32, device_), Tensor()};
      for (std::size_t i = embeddings_.size(); i-- > 0;) {
        add_into(grad_blocks[i], carry.h);
        auto [dx, dprev] = lstm_->backward({grad_blocks[i], carry.c}, true);
        grad_blocks[i] = dx;
        carry = dprev;
      }
    }
    sync_device();
    phases.add("recurrent", rec.seconds());
    rec_cpu.reset();
    std::vector<Tensor> grad_g = transpose(vertices_to_snapshots, grad_blocks, t_end, phases);
    // Graph phase backward.
    GraphPhaseTimer graph_phase;
    const Block gs = graph_snapshots(t_end);
    // EvolveGCN: layer l's weight gradients of every snapshot, views of one flat buffer so that
    // combining them over ranks is one collective.
    std::vector<Tensor> grad_w_flat(layers_.size());
    std::vector<std::vector<Tensor>> grad_w(layers_.size());
    if (evolve_)
      for (std::size_t l = 0; l < layers_.size(); ++l) {
        const Tensor& w0 = layers_[l].weight.value;
        grad_w_flat[l] = Tensor::zeros({t_end * w0.numel()}, DType::f32, device_);
        for (std::int64_t t = 0; t < t_end; ++t)
          grad_w[l].push_back(
              grad_w_flat[l].rows_slice(t * w0.numel(), (t + 1) * w0.numel()).reshape(w0.shape()));
      }
    for (std::int64_t t = gs.begin; t < gs.end; ++t) {
      SnapshotGraph& g = graphs_[snapshot_layout_ ? t - gs.begin : t];
      auto& saved = cache_[t - gs.begin];
      Tensor dz = grad_g[t - gs.begin];
      for (std::size_t l = layers_.size(); l-- > 0;) {
        Layer& layer = layers_[l];
        Tensor dpre = Tensor::empty(dz.shape(), DType::f32, device_);
        kernels::relu_backward(dz, saved[l].output, dpre);
        kernels::column_sums(dpre, layer.bias.grad, true);
        Tensor dxw = kernels::spmm(g.backward, dpre);
        if (!snapshot_layout_)
          dxw = graph_phase.halo([&] { return halo_backward(data_, g.halo, dxw, n_own_); });
        Tensor& wgrad = evolve_ ? grad_w[l][t] : layer.weight.grad;
        kernels::gemm(saved[l].input, true, dxw, false, wgrad, 1.0f, 1.0f);
        if (l > 0) {
          const Tensor& w = evolve_ ? layer.weights[t] : layer.weight.value;
          dz = matmul(dxw, false, w, true);
          dropout_backward(dz, saved[l].mask);
        }
      }
    }
    sync_device();
    graph_phase.finish(phases, cpu_phases_, !snapshot_layout_);
    if (!evolve_) return;
    // The weight recurrence: combine the per-snapshot weight gradients of all ranks (each rank
    // saw only its snapshots or rows), then run its backward identically everywhere.
    ScopedPhase p(phases, "recurrent");
    ScopedCpu weight_cpu(cpu_phases_, "recurrent");
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      Layer& layer = layers_[l];
      {
        ScopedPhase c(phases, "communicate");
        data_.allreduce(grad_w_flat[l]);
      }
      // The recurrence is tiny ([in, H] matrices, t_end steps): it runs where the weights are,
      // on the training device, identically on every rank.
      Tensor carry_h = Tensor::zeros(layer.weight.value.shape(), DType::f32, device_), carry_c;
      for (std::int64_t t = t_end; t-- > 0;) {
        Tensor& g = grad_w[l][t];
        add_into(g, carry_h);
        auto [dx, dprev] = layer.evolve->backward({g, carry_c}, true);
        carry_h = dprev.h;
        add_into(carry_h, dx);
        carry_c = dprev.c;
      }
      add_into(layer.weight.grad, carry_h);
    }
  }

  // The gradients of the parameters each rank saw only part of are the front of the flat
  // gradient buffer: one all-reduce on the data plane.
  void allreduce_partial_gradients() {
    if (comm_.size() == 1) return;
    data_.allreduce(partial_gradients_);
  }

  // Moves every parameter into one flat value buffer and one flat gradient buffer on the
  // training device (partial parameters first, then the replicated ones), each Parameter's
  // value and grad becoming views into them.
  void flatten_parameters() {
    std::vector<nn::Parameter*> order = partial_params_;
    order.insert(order.end(), replicated_params_.begin(), replicated_params_.end());
    std::int64_t total = 0, partial = 0;
    for (const nn::Parameter* p : order) total += p->value.numel();
    for (const nn::Parameter* p : partial_params_) partial += p->value.numel();
    flat_values_ = Tensor::empty({total}, DType::f32, device_);
    flat_gradients_ = Tensor::zeros({total}, DType::f32, device_);
    std::int64_t at = 0;
    for (nn::Parameter* p : order) {
      const std::int64_t n = p->value.numel();
      Tensor value = flat_values_.rows_slice(at, at + n).reshape(p->value.shape());
      value.copy_from(p->value);
      p->value = value;
      p->grad = flat_gradients_.rows_slice(at, at + n).reshape(p->value.shape());
      at += n;
    }
    partial_gradients_ = flat_gradients_.rows_slice(0, partial);
  }

public:
  std::int64_t take_transpose_bytes() { return std::exchange(transpose_bytes_, 0); }

private:
  struct Layer {
    nn::Parameter weight, bias;             // weight: shared, or EvolveGCN's initial weight
    std::optional<nn::LstmCell> evolve;     // EvolveGCN-O weight recurrence
    std::vector<Tensor> weights;            // EvolveGCN: W_t of the last forward
  };
  struct Saved {
    Tensor input, output;  // input after dropout
    Tensor mask;           // dropout mask of the input (undefined: none)
  };

  comm::Communicator& comm_;
  comm::Communicator& data_;
  Device device_;
  const TrainOptions& options_;
  partition::TemporalManifest manifest_;
  datasets::TemporalStoreInfo info_;
  TemporalLayout layout_;
  // The transposition's exchange buffers, reused every epoch and direction.
  TranspositionBuffers buffers_;
  // Host bytes in use once set up (the store's tensors, parameters): see keep_host_blocks.
  std::int64_t setup_host_bytes_ = 0;
  bool classification_ = false, evolve_ = false, snapshot_layout_ = true;
  Recurrence recurrence_ = Recurrence::none;
  std::int64_t N_ = 0, T_ = 0, F_ = 0, H_ = 0, out_dim_ = 1;
  NodeId v0_ = 0;
  std::int64_t n_own_ = 0;
  PhaseTimes cpu_phases_;
  std::vector<SnapshotGraph> graphs_;
  std::vector<std::vector<float>> targets_;
  std::vector<Tensor> target_tensors_;                  // regression: targets_ on the device
  std::vector<std::vector<LocalId>> class_rows_;         // classification: labelled rows
  std::vector<std::vector<std::int64_t>> class_labels_;  // and their classes
  std::int64_t train_targets_ = -1;
  std::vector<Layer> layers_;
  std::optional<nn::GruCell> gru_;
  std::optional<nn::LstmCell> lstm_;
  nn::Parameter head_weight_, head_bias_;
  std::vector<nn::Parameter*> replicated_params_, partial_params_;
  Tensor flat_values_, flat_gradients_, partial_gradients_;  // see flatten_parameters
  std::unique_ptr<nn::Optimizer> optimizer_;
  std::vector<std::vector<Saved>> cache_;
  std::vector<Tensor> embeddings_;
  std::vector<Tensor> head_inputs_, head_masks_;
  bool link_ = false;
  std::vector<NodeId> orig_ids_, relabel_;  // relabeled -> source id and back (link only)
  // Link prediction: for embedding snapshot t, the in-neighbor rows of snapshot t + 1 this rank
  // scores (its vertices, or the whole snapshot when it holds whole snapshots), global ids.
  std::vector<Csr> link_rows_;
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
    cls_ = trainer_.classification();
    link_ = trainer_.link_prediction();
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
