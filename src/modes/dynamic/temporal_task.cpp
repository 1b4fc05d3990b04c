// Node regression, node classification and link prediction over the dynamic model's outputs.
#include "temporal_task.hpp"

#include "snapshot_graph.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/rng.hpp"
#include "tessel/datasets/atomic_output.hpp"
#include "tessel/datasets/h5.hpp"
#include "tessel/kernels/loss.hpp"
#include "tessel/nn/link.hpp"

#include <algorithm>

namespace tessel::train {
namespace {

// The splits a snapshot may fall in: train, valid, test.
struct Splits {
  datasets::SnapshotRange range[3];
  explicit Splits(const datasets::TemporalStoreInfo& info)
      : range{info.train, info.valid, info.test} {}
};

// Regression targets of every row, or the labelled rows and their classes: the loss ops run on
// the outputs' device (softmax cross-entropy over the labelled rows, or the squared error of
// every row) and return their sums in double.
class NodeTask final : public TemporalTask {
public:
  NodeTask(const TaskContext& context, datasets::TemporalStoreReader& reader)
      : c_(context), classification_(context.info.num_classes > 0) {
    const NodePhase& np = c_.phase;
    const dist::Block held = np.by_vertex ? dist::Block{0, np.num_snapshots}
                                    : dist::owned_snapshots(c_.layout, c_.comm.rank(), np.num_snapshots);
    for (std::int64_t t = held.begin; t < held.end; ++t)
      targets_.push_back(reader.targets(t, np.row_begin(), np.row_end()));
    // Regression targets on the training device; the labelled rows and their classes
    // (unlabelled rows hold -1) on the host, as softmax_cross_entropy takes them.
    for (const std::vector<float>& y : targets_) {
      if (!classification_) {
        target_tensors_.push_back(Tensor::from_vector(y).to(c_.device));
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

  bool applies_head() const override { return true; }

  std::vector<Tensor> loss(const std::vector<Tensor>& out, Losses& l, bool /*training*/, bool grad,
                           std::uint32_t /*epoch*/) override {
    const Splits splits(c_.info);
    std::vector<Tensor> grads;
    // The global count of training targets scales the gradient so P ranks compute the mean
    // loss of the whole graph.
    const double scale = 1.0 / static_cast<double>(train_targets());
    for (std::size_t i = 0; i < out.size(); ++i) {
      const std::int64_t t = c_.phase.block(i).first;
      const std::size_t k = c_.phase.by_vertex ? static_cast<std::size_t>(t) : i;
      const Tensor& o = out[i];
      Tensor g;
      if (grad) g = Tensor::zeros(o.shape(), DType::f32, c_.device);
      for (int s = 0; s < 3; ++s) {
        if (t < splits.range[s].begin || t >= splits.range[s].end) continue;
        const bool with_grad = grad && s == 0;
        if (classification_) {
          const std::vector<LocalId>& rows = class_rows_[k];
          const std::vector<std::int64_t>& labels = class_labels_[k];
          // The op writes a gradient either way: evaluation gives it a scratch tensor.
          Tensor g_out = with_grad ? g : Tensor::empty(o.shape(), DType::f32, c_.device);
          l.sum[s] += kernels::softmax_cross_entropy(o, rows, labels, scale, g_out);
          l.correct[s] += kernels::count_correct(o, rows, labels);
          l.count[s] += static_cast<std::int64_t>(rows.size());
        } else {
          l.sum[s] +=
              kernels::squared_error(o, target_tensors_[k], scale, with_grad ? &g : nullptr);
          l.count[s] += o.rows();
        }
      }
      grads.push_back(std::move(g));
    }
    return grads;
  }

private:
  std::int64_t train_targets() {
    if (train_targets_ >= 0) return train_targets_;
    std::int64_t count = 0;
    for (std::size_t i = 0; i < targets_.size(); ++i) {
      const std::int64_t t = c_.phase.block(i).first;
      if (t < c_.info.train.begin || t >= c_.info.train.end) continue;
      for (float y : targets_[i])
        count += (!classification_ || y >= 0) ? 1 : 0;
    }
    train_targets_ = c_.comm.allreduce_value(count);
    TESSEL_EXPECTS(train_targets_ > 0, "{}: no training targets", c_.store.string());
    return train_targets_;
  }

  TaskContext c_;
  bool classification_ = false;
  std::vector<std::vector<float>> targets_;
  std::vector<Tensor> target_tensors_;                  // regression: targets_ on the device
  std::vector<std::vector<LocalId>> class_rows_;        // classification: labelled rows
  std::vector<std::vector<std::int64_t>> class_labels_; // and their classes
  std::int64_t train_targets_ = -1;
};

// The pairs one embedding snapshot t scores: the edges of snapshot t + 1 whose destination this
// rank holds, each followed by its negatives (the source replaced by a sampled node). Rows are
// of the embedding block extended by the fetched halo rows.
struct PairBatch {
  int split = -1; // 0 train, 1 valid, 2 test; -1: nothing to score
  std::vector<LocalId> src, dst;
  std::vector<float> label;
  std::unique_ptr<dist::HaloExchange> halo; // the vertex-by-vertex node phase
};

// Link prediction over the head inputs z (one block per embedding snapshot t), scored by the
// Hadamard head. In the vertex-by-vertex node phase the pairs live with their destination's
// owner and the sources' rows are fetched like a halo.
class LinkTask final : public TemporalTask {
public:
  LinkTask(const TaskContext& context, datasets::TemporalStoreReader& reader,
           nn::TemporalGcn& model)
      : c_(context), model_(model) {
    const auto N = c_.phase.num_nodes;
    relabel_.assign(static_cast<std::size_t>(N), 0);
    for (NodeId g = 0; g < N; ++g)
      relabel_[c_.orig_ids[g]] = g;
    load_rows(reader);
  }

  bool applies_head() const override { return false; }

  // `training`: the training split only, --negatives per edge drawn for `epoch`; else every
  // split with --eval-negatives (fixed draws), and AUC and reciprocal ranks. With `grad`,
  // returns d(mean BCE)/dz per block.
  std::vector<Tensor> loss(const std::vector<Tensor>& z, Losses& l, bool training, bool grad,
                           std::uint32_t epoch) override {
    const int K = training ? c_.options.negatives : c_.options.mode_options.get<DynamicOptions>().eval_negatives;
    std::vector<PairBatch> batches(z.size());
    std::int64_t train_pairs = 0;
    for (std::size_t i = 0; i < z.size(); ++i) {
      batches[i] = pairs(i, training, K, epoch);
      if (batches[i].split == 0) train_pairs += static_cast<std::int64_t>(batches[i].label.size());
    }
    // The gradient of the mean over the whole job's training pairs.
    const double scale = grad ? 1.0 / static_cast<double>(std::max<std::int64_t>(
                                          1, c_.comm.allreduce_value(train_pairs)))
                              : 0.0;
    std::vector<Tensor> grads;
    std::vector<float> positive_scores[3], negative_scores[3];
    const bool by_vertex = c_.phase.by_vertex;
    const Tensor& head_w = model_.head_weight().value;
    for (std::size_t i = 0; i < z.size(); ++i) {
      PairBatch& b = batches[i];
      if (grad) grads.push_back(Tensor::zeros(z[i].shape(), DType::f32, c_.device));
      if (b.split < 0) continue;
      Tensor rows = z[i];
      if (by_vertex) b.halo->forward(z[i], rows);
      const Tensor scores = nn::link_scores(rows, b.src, b.dst, head_w, model_.head_bias().value);
      Tensor grad_scores;
      if (grad) grad_scores = Tensor::empty(scores.shape(), DType::f32, c_.device);
      l.sum[b.split] +=
          nn::binary_cross_entropy_sum(scores, b.label, scale, grad ? &grad_scores : nullptr);
      l.count[b.split] += scores.numel();
      if (!training) {
        const Tensor host_scores = scores.to(Device::cpu());
        const float* sc = host_scores.data<float>();
        const std::int64_t group = K + 1;
        for (std::int64_t j = 0; j < scores.numel(); j += group) {
          positive_scores[b.split].push_back(sc[j]);
          negative_scores[b.split].insert(negative_scores[b.split].end(), sc + j + 1,
                                          sc + j + group);
          l.rr_sum[b.split] += nn::reciprocal_rank(
              sc[j], std::span<const float>(sc + j + 1, static_cast<std::size_t>(K)));
          ++l.positives[b.split];
        }
      }
      if (!grad) continue;
      Tensor grad_rows = Tensor::zeros(rows.shape(), DType::f32, c_.device);
      nn::link_scores_backward(rows, b.src, b.dst, head_w, grad_scores, grad_rows,
                               model_.head_weight().grad, model_.head_bias().grad);
      if (by_vertex)
        b.halo->backward(grad_rows, grads.back());
      else
        grads.back() = grad_rows;
    }
    if (!training) auc(positive_scores, negative_scores, l);
    return grads;
  }

private:
  // For embedding snapshot t, the in-neighbor rows of snapshot t + 1 this rank scores (its
  // vertices, or the whole snapshot when it holds whole snapshots), global ids.
  void load_rows(datasets::TemporalStoreReader& reader) {
    const NodePhase& np = c_.phase;
    const std::int64_t T = np.num_snapshots;
    const dist::Block held = np.by_vertex ? dist::Block{0, T} : dist::owned_snapshots(c_.layout, c_.comm.rank(), T);
    const NodeId rb = np.row_begin(), re = np.row_end();
    // A few snapshots at a time: the reader rebuilds them in order from the base and deltas.
    constexpr std::int64_t kChunk = 4;
    for (std::int64_t t0 = held.begin; t0 < held.end; t0 += kChunk) {
      const std::int64_t t1 = std::min(held.end, t0 + kChunk);
      const std::int64_t first = t0 + 1, last = std::min(t1 + 1, T);
      const std::vector<Csr> snaps =
          first < last ? reader.snapshots(first, last) : std::vector<Csr>();
      for (std::int64_t t = t0; t < t1; ++t) {
        Csr rows;
        rows.num_rows = re - rb;
        rows.num_cols = np.num_nodes;
        if (t + 1 < T) {
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
        rows_.push_back(std::move(rows));
      }
    }
  }

  // Negative k for the edge u -> v of snapshot s: a source drawn uniformly from the nodes, keyed
  // by (seed, epoch, s, k) and the edge's source node ids, redrawn while it is v or a real
  // in-neighbor of v at s (up to 16 draws). `row` lists v's in-neighbors at s, ascending.
  NodeId negative_source(NodeId u, NodeId v, std::span<const NodeId> row, std::int64_t s,
                         std::uint32_t k, std::uint32_t epoch) const {
    const rng::Key key{c_.options.seed, rng::Stream::sampling, epoch, static_cast<std::uint32_t>(s),
                       k};
    const std::uint64_t item = (static_cast<std::uint64_t>(c_.orig_ids[v]) << 32) |
                               static_cast<std::uint64_t>(c_.orig_ids[u]);
    NodeId candidate = v;
    for (std::uint32_t attempt = 0; attempt < 16; ++attempt) {
      candidate =
          relabel_[key.below(item, attempt, static_cast<std::uint64_t>(c_.phase.num_nodes))];
      if (candidate != v && !std::binary_search(row.begin(), row.end(), candidate)) break;
    }
    return candidate;
  }

  // The pairs block i scores, K negatives per edge, and the plan that fetches their sources.
  // Collective in the vertex-by-vertex node phase.
  PairBatch pairs(std::size_t i, bool training, int K, std::uint32_t epoch) {
    const Splits splits(c_.info);
    const NodePhase& np = c_.phase;
    const auto [t, first_row] = np.block(i);
    const std::int64_t s = t + 1;
    PairBatch b;
    for (int sp = 0; sp < 3; ++sp)
      if (s < np.num_snapshots && s >= splits.range[sp].begin && s < splits.range[sp].end)
        b.split = sp;
    if (training && b.split != 0) b.split = -1;
    if (b.split < 0) return b;
    const Csr& rows = rows_[i];
    std::vector<NodeId> src_global;
    for (std::int64_t r = 0; r < rows.num_rows; ++r) {
      const NodeId v = first_row + r;
      const std::span<const NodeId> row(
          rows.indices.data() + rows.indptr[r],
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
    const NodeId v0 = np.v0, v1 = np.v0 + np.n_own;
    std::vector<NodeId> halo;
    if (np.by_vertex)
      for (NodeId u : src_global)
        if (u < v0 || u >= v1) halo.push_back(u);
    std::sort(halo.begin(), halo.end());
    halo.erase(std::unique(halo.begin(), halo.end()), halo.end());
    b.src.resize(src_global.size());
    for (std::size_t j = 0; j < src_global.size(); ++j) {
      const NodeId u = src_global[j];
      b.src[j] = static_cast<LocalId>(
          !np.by_vertex ? u
          : (u >= v0 && u < v1)
              ? u - v0
              : np.n_own + (std::lower_bound(halo.begin(), halo.end(), u) - halo.begin()));
    }
    if (np.by_vertex) b.halo = make_snapshot_halo(c_.comm, c_.data, c_.layout, halo, c_.orig_ids);
    return b;
  }

  // AUC ranks every positive against every negative of the split: rank 0 gathers the scores,
  // computes it exactly and broadcasts it.
  void auc(const std::vector<float> (&positive)[3], const std::vector<float> (&negative)[3],
           Losses& l) {
    for (int sp = 0; sp < 3; ++sp) {
      std::vector<std::int64_t> to_root(static_cast<std::size_t>(c_.comm.size()), 0);
      to_root[0] = static_cast<std::int64_t>(positive[sp].size());
      const auto pos = c_.comm.alltoallv<float>(positive[sp], to_root);
      to_root[0] = static_cast<std::int64_t>(negative[sp].size());
      const auto neg = c_.comm.alltoallv<float>(negative[sp], to_root);
      if (c_.comm.rank() == 0) l.auc[sp] = nn::roc_auc(pos, neg);
    }
    c_.comm.broadcast(l.auc, 3, DType::f64, 0);
  }

  TaskContext c_;
  nn::TemporalGcn& model_;
  std::vector<NodeId> relabel_; // source id -> relabeled node
  std::vector<Csr> rows_;
};

} // namespace

std::unique_ptr<TemporalTask> make_temporal_task(const TaskContext& context,
                                                 datasets::TemporalStoreReader& reader,
                                                 nn::TemporalGcn& model) {
  if (context.options.task == DynamicTask::link_prediction)
    return std::make_unique<LinkTask>(context, reader, model);
  return std::make_unique<NodeTask>(context, reader);
}

void write_snapshot_rows(const TaskContext& c, const std::vector<Tensor>& blocks,
                         std::int64_t width, const std::filesystem::path& path,
                         const std::string& format, const std::string& dataset,
                         const std::string& description) {
  namespace fs = std::filesystem;
  // Each rank sends (t, global row begin, rows) blocks of its outputs to rank 0.
  std::vector<float> values;
  std::vector<std::int64_t> where; // t, row_begin, rows per block
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const auto [t, rb] = c.phase.block(i);
    where.insert(where.end(), {t, rb, blocks[i].rows()});
    const Tensor host = blocks[i].to(Device::cpu());
    values.insert(values.end(), host.data<float>(), host.data<float>() + host.numel());
  }
  std::vector<std::int64_t> to_root(static_cast<std::size_t>(c.comm.size()), 0);
  to_root[0] = static_cast<std::int64_t>(where.size());
  const auto all_where = c.comm.alltoallv<std::int64_t>(where, to_root);
  to_root[0] = static_cast<std::int64_t>(values.size());
  const auto all_values = c.comm.alltoallv<float>(values, to_root);
  if (c.comm.rank() != 0) return;
  const std::int64_t N = c.phase.num_nodes, T = c.phase.num_snapshots;
  // Rows in source order: position of relabeled node g is orig[g].
  const std::vector<NodeId>& orig = c.orig_ids;
  std::vector<float> rows(static_cast<std::size_t>(T * N * width), 0.0f);
  std::size_t at = 0;
  for (std::size_t b = 0; b < all_where.size(); b += 3) {
    const std::int64_t t = all_where[b], rb = all_where[b + 1], count = all_where[b + 2];
    for (std::int64_t i = 0; i < count; ++i, at += static_cast<std::size_t>(width))
      std::copy_n(&all_values[at], width, &rows[((t * N) + orig[rb + i]) * width]);
  }
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  datasets::AtomicOutput output(path);
  {
    h5::File file = h5::File::create(output.temp_path());
    file.set_attr("format", format);
    file.set_attr("version", std::int64_t{1});
    file.set_attr("num_nodes", N);
    file.set_attr("num_snapshots", T);
    file.set_attr("task", option_word(c.options.task));
    file.write(dataset, rows.data(), {T * N, width}, description);
    file.close();
  }
  output.commit();
}

} // namespace tessel::train
