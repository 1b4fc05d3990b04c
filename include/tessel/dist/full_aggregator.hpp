// The full-batch Aggregator: halo exchange plus SpMM over a partition's owned rows. Used by
// full-batch training and by the full-neighbor evaluation of sampled training.
#pragma once

#include "tessel/core/rng.hpp"
#include "tessel/core/timer.hpp"
#include "tessel/kernels/sparse.hpp"
#include "tessel/nn/aggregation_matrices.hpp"
#include "tessel/nn/aggregator.hpp"
#include "tessel/partition/part.hpp"
#include "tessel/dist/halo.hpp"
#include "tessel/dist/halo_aggregation.hpp"

#include <vector>

namespace tessel::dist {

// The part's in-neighbour pattern (no values) over owned + halo columns. With `ascending`, each
// row's columns in ascending local id: the order the partitioner writes, which a sampler that
// has since sorted the rows by source id (sampling::sort_rows_by_key) no longer shows.
LocalCsr part_pattern(const partition::Part& part, bool ascending = false);

// The aggregation matrices of a part: its in-neighbor pattern over owned + halo columns (see
// part_pattern) and the whole-graph in-degrees of those columns, on `device` (the weights and
// the transpose are then built there by kernel ops).
nn::AggregationMatrices part_matrices(const partition::Part& part, Device device = Device::cpu(),
                                      bool ascending = false);

// Aggregation over owned rows with owned + halo columns. The matrices (nn::AggregationMatrices)
// are built once per normalization from the part's graph and whole-graph degrees.
class FullAggregator final : public nn::Aggregator {
 public:
  // Aggregates tensors on `device` (activations and matrices stay there); halo rows travel
  // through `data` (the control communicator `comm` when null).
  // With `ascending_rows`, the part's rows are read with their columns in ascending local id
  // (part_pattern): for an aggregator built after a sampler reordered them.
  FullAggregator(const partition::Part& part, comm::Communicator& comm,
                 comm::Communicator* data = nullptr, Device device = Device::cpu(),
                 bool ascending_rows = false)
      : part_(part), halo_(part, comm, data), device_(device), ascending_rows_(ascending_rows),
        matrices_(part_matrices(part, device, ascending_rows)) {}
  FullAggregator(const FullAggregator&) = delete;
  FullAggregator& operator=(const FullAggregator&) = delete;

  // Builds the matrix of `norm` and its transpose now instead of on first use, then drops the
  // pattern: a run that aggregates with one Norm needs nothing else.
  void prepare(nn::Norm norm) {
    (void)matrices_.forward(norm);
    (void)matrices_.backward(norm);
    matrices_.release_pattern();
  }

  // --boundary-sampling (BNS-GCN): from now on the graph keeps each boundary node with
  // probability p, decided by its source-dataset id alone (key.uniform(id, 0) < p), so its owner
  // and every rank holding it as halo agree without a message. Rows of the other boundary nodes
  // neither travel nor are read: their edges are dropped, and the matrices are normalized by
  // the degrees of the graph that remains (each node's kept in-edges, counted by its owner and
  // exchanged once). With p = 1 the matrices and the exchange are the whole graph's, bit for
  // bit. use_full_graph() returns to the whole graph (evaluation, inference). Collective.
  void sample_boundary(const rng::Key& key, double p, nn::Norm norm);
  void use_full_graph();
  bool boundary_sampled() const { return sampled_; }

  // --halo-aggregation pre|auto (SuperGCN): from now on the rows crossing each cut follow
  // plan_halo_aggregation (sums computed by the owner where that sends fewer rows), in
  // training and evaluation alike; the aggregation equals the plain one up to rounding.
  // Needs the matrix of `norm` (prepare) and the whole graph (no boundary sampling after it).
  // Collective.
  void aggregate_halos(HaloAggregation how, nn::Norm norm, comm::Communicator& comm);
  // Of the rows this rank receives per exchange, the partial sums (0 without aggregate_halos).
  std::int64_t pre_rows() const { return pre_rows_; }

  // Seconds spent exchanging halos (rows and gradients: what the exchange does not hide behind
  // compute) since the last reset.
  double halo_seconds() const { return halo_seconds_; }
  void reset_halo_seconds() { halo_seconds_ = 0; }

  // Where aggregate() and aggregate_backward() add their seconds ("aggregate", "communicate").
  void set_phases(PhaseTimes* phases) { phases_ = phases; }

  // The exchange arguments (codec, byte count) that the halo exchanges of aggregate(),
  // aggregate_backward() and the attention exchange are given while the scope that
  // exchange_with() returns lives: a training pass gives its --halo-dtype and its count. Outside
  // one (evaluation, inference), and for sample_boundary's degree exchange always, halos travel
  // exact and uncounted, so predictions do not depend on the wire.
  class ExchangeScope {
   public:
    explicit ExchangeScope(FullAggregator& aggregator) : aggregator_(aggregator) {}
    ~ExchangeScope() { aggregator_.exchange_ = {}; }
    ExchangeScope(const ExchangeScope&) = delete;
    ExchangeScope& operator=(const ExchangeScope&) = delete;

   private:
    FullAggregator& aggregator_;
  };
  [[nodiscard]] ExchangeScope exchange_with(const ExchangeArgs& args) {
    exchange_ = args;
    return ExchangeScope(*this);
  }
  // The weighted matrix of `norm` (num_owned x owned + halo columns) that aggregate() applies:
  // layer-wise inference over row blocks applies it a block of rows at a time.
  const kernels::SparseMatrix& weighted_matrix(nn::Norm norm) { return matrices().forward(norm); }
  const HaloExchange& halo() const { return halo_; }
  HaloExchange& halo() { return halo_; }

  std::int64_t num_src() const override { return part_.num_owned; }
  std::int64_t num_dst() const override { return part_.num_owned; }
  std::span<const NodeId> src_ids() const override {
    return {part_.orig_id.data(), static_cast<std::size_t>(part_.num_owned)};
  }

  const Tensor* src_ids_on(Device device) override {
    if (device.is_cpu()) return nullptr;  // the host span serves the CPU twin directly
    if (!src_ids_device_.defined() || src_ids_device_.device() != device)
      src_ids_device_ = Tensor::from_vector(std::vector<NodeId>(
                                                part_.orig_id.begin(),
                                                part_.orig_id.begin() + part_.num_owned))
                            .to(device);
    return &src_ids_device_;
  }

  // Buffers live for one call only (the caching allocator hands the same blocks back next
  // time): an [owned + halo, F] copy held between layers would cost a whole activation.
  Tensor aggregate(const Tensor& x, nn::Norm norm) override {
    Tensor x_full;
    settle(); // the dense work enqueued before belongs to "dense", not to this exchange
    {
      ScopedPhase t(*phases_, "communicate");
      Stopwatch exchange;
      halo_.forward(x, x_full, exchange_);
      settle();
      halo_seconds_ += exchange.seconds();
    }
    ScopedPhase t(*phases_, "aggregate");
    Tensor y;
    matrices().aggregate(x_full, norm, y);
    settle();
    return y;
  }

  Tensor aggregate_backward(const Tensor& grad_out, nn::Norm norm) override {
    Tensor grad_full;
    settle();
    {
      ScopedPhase t(*phases_, "aggregate");
      matrices().aggregate_backward(grad_out, norm, grad_full);
      settle();
    }
    ScopedPhase t(*phases_, "communicate");
    Stopwatch exchange;
    Tensor grad_owned;
    halo_.backward(grad_full, grad_owned, exchange_);
    settle();
    halo_seconds_ += exchange.seconds();
    return grad_owned;
  }

  // Attention (GAT): the part's in-neighbour pattern over owned + halo columns with self loops,
  // the columns' source-dataset ids, and the halo exchange of whole rows (f32, every halo row:
  // compressed, sampled, pre-aggregated and stale halos are refused).
  const kernels::SparseMatrix& attention_graph(Device device) override;
  const Tensor& attention_ids(Device device) override;
  Tensor exchange_rows(const Tensor& x) override;
  Tensor exchange_rows_backward(const Tensor& grad) override;

private:
  void expect_whole_exchange(const char* what) const;
  nn::AggregationMatrices& matrices() { return sampled_ ? epoch_matrices_ : matrices_; }
  // On a GPU, waits for the enqueued work so the phase times measure it, not its launch.
  void settle() {
    if (device_.is_cuda()) kernels::default_context(device_).synchronize();
  }

  const partition::Part& part_;
  HaloExchange halo_;
  ExchangeArgs exchange_;  // see exchange_with
  Device device_;
  bool ascending_rows_ = false;
  PhaseTimes own_phases_;
  PhaseTimes* phases_ = &own_phases_;
  nn::AggregationMatrices matrices_;
  nn::AggregationMatrices epoch_matrices_;  // sample_boundary's graph
  bool sampled_ = false;
  std::int64_t pre_rows_ = 0;
  double halo_seconds_ = 0;
  Tensor src_ids_device_;
  kernels::SparseMatrix attention_graph_;
  Tensor attention_ids_;
};

}  // namespace tessel::dist
