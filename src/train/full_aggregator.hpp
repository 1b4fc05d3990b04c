// The full-batch Aggregator: halo exchange plus SpMM over a partition's owned rows. Used by
// full-batch training and by the full-neighbor evaluation of sampled training.
#pragma once

#include "tessel/core/timer.hpp"
#include "tessel/kernels/sparse.hpp"
#include "tessel/nn/aggregator.hpp"
#include "tessel/partition/part.hpp"
#include "tessel/train/halo.hpp"

#include <optional>

namespace tessel::train {

// The weighted matrix one aggregation applies. adj: rows = destinations, columns = sources, the
// destinations being the first columns; degree[c]: whole-graph in-degree of column c.
//   gcn:  self loop 1 / (d_v + 1), neighbor u: (d_v / s_v) / sqrt((d_u + 1) (d_v + 1)), where
//         s_v is the row's length. With every neighbor present (s_v = d_v) this is exactly
//         D^-1/2 (A + I) D^-1/2; with a sample it is the unbiased estimate of that row.
//   mean: 1 / s_v for each neighbor (a row without neighbors aggregates to zero).
LocalCsr weighted_adjacency(const LocalCsr& adj, std::span<const std::int64_t> degree, nn::Norm norm);

// Aggregation over owned rows with owned + halo columns. Edge weights are built once per
// normalization; the transposed matrices serve the backward pass.
class FullAggregator final : public nn::Aggregator {
 public:
  FullAggregator(const partition::Part& part, comm::Communicator& comm)
      : part_(part), halo_(part, comm) {}
  FullAggregator(const FullAggregator&) = delete;
  FullAggregator& operator=(const FullAggregator&) = delete;

  // Where aggregate() and aggregate_backward() add their seconds ("aggregate", "communicate").
  void set_phases(PhaseTimes* phases) { phases_ = phases; }
  const HaloExchange& halo() const { return halo_; }

  std::int64_t num_src() const override { return part_.num_owned; }
  std::int64_t num_dst() const override { return part_.num_owned; }
  std::span<const NodeId> src_ids() const override {
    return {part_.orig_id.data(), static_cast<std::size_t>(part_.num_owned)};
  }

  Tensor aggregate(const Tensor& x, nn::Norm norm) override {
    {
      ScopedPhase t(*phases_, "communicate");
      halo_.forward(x, x_full_);
    }
    ScopedPhase t(*phases_, "aggregate");
    const Matrices& m = matrices(norm);
    Tensor y = Tensor::empty({part_.num_owned, x.cols()}, DType::f32, x.device());
    kernels::spmm(m.forward, x_full_, y);
    return y;
  }

  Tensor aggregate_backward(const Tensor& grad_out, nn::Norm norm) override {
    {
      ScopedPhase t(*phases_, "aggregate");
      const Matrices& m = matrices(norm);
      if (!grad_full_.defined() || grad_full_.cols() != grad_out.cols())
        grad_full_ = Tensor::empty({part_.num_local(), grad_out.cols()}, DType::f32);
      kernels::spmm(m.backward, grad_out, grad_full_);
    }
    ScopedPhase t(*phases_, "communicate");
    Tensor grad_owned;
    halo_.backward(grad_full_, grad_owned);
    return grad_owned;
  }

 private:
  struct Matrices {
    kernels::SparseMatrix forward;   // [owned, owned + halo]
    kernels::SparseMatrix backward;  // its transpose
  };

  const Matrices& matrices(nn::Norm norm) {
    auto& slot = norm == nn::Norm::gcn ? gcn_ : mean_;
    if (!slot) {
      LocalCsr weighted = weighted_csr(norm);
      LocalCsr transposed = weighted.transpose();
      slot.emplace(Matrices{kernels::SparseMatrix::from_csr(weighted, Device::cpu()),
                            kernels::SparseMatrix::from_csr(transposed, Device::cpu())});
    }
    return *slot;
  }

  LocalCsr weighted_csr(nn::Norm norm) const {
    return weighted_adjacency(part_.graph, part_.degree, norm);
  }

  const partition::Part& part_;
  HaloExchange halo_;
  PhaseTimes own_phases_;
  PhaseTimes* phases_ = &own_phases_;
  std::optional<Matrices> gcn_, mean_;
  Tensor x_full_;
  Tensor grad_full_;
};

}  // namespace tessel::train
