// The part's aggregation pattern, and the full-batch aggregator's boundary-node sampling (the
// epoch's graph, degrees and exchange) and halo pre-aggregation.
#include "tessel/dist/full_aggregator.hpp"

#include "tessel/core/error.hpp"
#include "tessel/kernels/attention.hpp"

#include <algorithm>

namespace tessel::dist {

LocalCsr part_pattern(const partition::Part& part, bool ascending) {
  const LocalCsr& graph = part.graph;
  LocalCsr pattern;
  pattern.num_rows = graph.num_rows;
  pattern.num_cols = graph.num_cols;
  pattern.indptr = graph.indptr;
  pattern.indices = graph.indices;
  if (ascending) {
#pragma omp parallel for schedule(dynamic, 4096)
    for (std::int64_t r = 0; r < pattern.num_rows; ++r) {
      const auto first = pattern.indices.begin() + pattern.indptr[r];
      const auto last = pattern.indices.begin() + pattern.indptr[r + 1];
      if (!std::is_sorted(first, last)) std::sort(first, last);
    }
  }
  return pattern;
}

nn::AggregationMatrices part_matrices(const partition::Part& part, Device device,
                                      bool ascending) {
  const std::vector<std::int64_t> degree(
      part.degree.begin(), part.degree.begin() + static_cast<std::ptrdiff_t>(part.graph.num_cols));
  nn::AggregationMatrices matrices;
  kernels::SparseMatrix pattern = kernels::SparseMatrix::from_csr(part_pattern(part, ascending),
                                                                  device);
  matrices.reset(std::move(pattern), Tensor::from_vector(degree).to(device));
  return matrices;
}

void FullAggregator::sample_boundary(const rng::Key& key, double p, nn::Norm norm) {
  TESSEL_EXPECTS(!halo_.combined(), "boundary sampling: the halos are pre-aggregated");
  TESSEL_EXPECTS(p > 0.0 && p <= 1.0, "boundary sampling: fraction {} outside (0, 1]", p);
  const std::int64_t n = part_.num_owned, h = part_.num_halo;
  auto kept = [&key, p](NodeId id) {
    return static_cast<double>(key.uniform(static_cast<std::uint64_t>(id), 0)) < p;
  };
  std::vector<char> halo_kept(static_cast<std::size_t>(h));
  for (std::int64_t j = 0; j < h; ++j)
    halo_kept[static_cast<std::size_t>(j)] = kept(part_.orig_id[static_cast<std::size_t>(n + j)]);
  // The epoch's in-neighbour pattern: owned columns, and the halo columns kept. A node's degree
  // in it is its whole-graph degree less the in-edges dropped at its owner.
  const LocalCsr& graph = part_.graph;
  LocalCsr pattern;
  pattern.num_rows = n;
  pattern.num_cols = n + h;
  pattern.indptr.assign(static_cast<std::size_t>(n + 1), 0);
  pattern.indices.reserve(graph.indices.size());
  std::vector<float> owned_degree(static_cast<std::size_t>(n));
  for (std::int64_t v = 0; v < n; ++v) {
    std::int64_t dropped = 0;
    for (EdgeId e = graph.indptr[v]; e < graph.indptr[v + 1]; ++e) {
      const LocalId c = graph.indices[static_cast<std::size_t>(e)];
      if (c < n || halo_kept[static_cast<std::size_t>(c - n)])
        pattern.indices.push_back(c);
      else
        ++dropped;
    }
    pattern.indptr[static_cast<std::size_t>(v + 1)] = static_cast<EdgeId>(pattern.indices.size());
    owned_degree[static_cast<std::size_t>(v)] =
        static_cast<float>(part_.degree[static_cast<std::size_t>(v)] - dropped);
  }
  // The halo columns' degrees come from their owners, through the whole exchange in f32 (exact
  // for counts below 2^24: the default ExchangeArgs), outside the bytes a training epoch reports
  // for its halos.
  halo_.keep_all();
  const Tensor owned = Tensor::from_vector(owned_degree, {n, 1}).to(device_);
  Tensor full;
  halo_.forward(owned, full);
  const Tensor host = full.to(Device::cpu());
  std::vector<std::int64_t> degree(static_cast<std::size_t>(n + h));
  for (std::int64_t i = 0; i < n + h; ++i)
    degree[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(host.data<float>()[i]);
  TESSEL_ASSERT(n + h == 0 || host.numel() == n + h, "degree exchange: {} rows for {}",
                host.numel(), n + h);
  halo_.keep_rows(kept);
  epoch_matrices_.reset(kernels::SparseMatrix::from_csr(pattern, device_),
                        Tensor::from_vector(degree).to(device_));
  (void)epoch_matrices_.forward(norm);
  (void)epoch_matrices_.backward(norm);
  sampled_ = true;
}

void FullAggregator::aggregate_halos(HaloAggregation how, nn::Norm norm,
                                     comm::Communicator& comm) {
  if (how == HaloAggregation::post) return;
  const LocalCsr weighted = matrices_.forward(norm).to_csr();
  HaloAggregationPlan plan = plan_halo_aggregation(part_, weighted, how, comm);
  matrices_.reset_weighted(kernels::SparseMatrix::from_csr(plan.local, device_), norm);
  halo_.set_combination(kernels::SparseMatrix::from_csr(plan.combine), std::move(plan.send_per_peer),
                        std::move(plan.recv_per_peer));
  pre_rows_ = plan.pre_rows;
  prepare(norm);
}

void FullAggregator::use_full_graph() {
  if (!sampled_) return;
  halo_.keep_all();
  epoch_matrices_ = nn::AggregationMatrices();
  sampled_ = false;
}

const kernels::SparseMatrix& FullAggregator::attention_graph(Device device) {
  TESSEL_EXPECTS(device == device_, "attention: the part's graph is on {}, not {}", device_.str(),
                 device.str());
  if (!attention_graph_.indptr.defined()) {
    attention_graph_ = kernels::add_self_loops(
        kernels::SparseMatrix::from_csr(part_pattern(part_, ascending_rows_), device_));
  }
  return attention_graph_;
}

const Tensor& FullAggregator::attention_ids(Device device) {
  TESSEL_EXPECTS(device == device_, "attention: the part's ids are on {}, not {}", device_.str(),
                 device.str());
  if (!attention_ids_.defined())
    attention_ids_ = Tensor::from_vector(std::vector<NodeId>(
                                             part_.orig_id.begin(),
                                             part_.orig_id.begin() + part_.num_local()))
                         .to(device_);
  return attention_ids_;
}

void FullAggregator::expect_whole_exchange(const char* what) const {
  TESSEL_EXPECTS(exchange_.codec == kernels::RowCodec::f32,
                 "--model gat exchanges its halo rows in f32 only (--halo-dtype {} is refused)",
                 kernels::row_codec_name(exchange_.codec));
  TESSEL_EXPECTS(!sampled_ && !halo_.combined() && !halo_.stale(),
                 "--model gat needs every halo row, exact and current, for its {} (boundary "
                 "sampling, --halo-aggregation pre|auto and --stale-halo are refused)",
                 what);
}

Tensor FullAggregator::exchange_rows(const Tensor& x) {
  expect_whole_exchange("attention");
  Tensor x_full;
  settle();
  ScopedPhase t(*phases_, "communicate");
  Stopwatch exchange;
  halo_.forward(x, x_full, exchange_);
  settle();
  halo_seconds_ += exchange.seconds();
  return x_full;
}

Tensor FullAggregator::exchange_rows_backward(const Tensor& grad) {
  expect_whole_exchange("attention gradients");
  Tensor grad_owned;
  settle();
  ScopedPhase t(*phases_, "communicate");
  Stopwatch exchange;
  halo_.backward(grad, grad_owned, exchange_);
  settle();
  halo_seconds_ += exchange.seconds();
  return grad_owned;
}

}  // namespace tessel::dist
