// HaloExchange on hand-built parts of a ring: forward delivers owners' rows, backward sums
// halo gradients at their owners.
#include "tessel/comm/mpi_communicator.hpp"
#include "tessel/core/rng.hpp"
#include "tessel/kernels/sparse.hpp"
#include "tessel/dist/full_aggregator.hpp"
#include "tessel/dist/halo.hpp"
#include "tessel/dist/halo_aggregation.hpp"
#include "tessel/sampling/neighbor_sampler.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <vector>

using namespace tessel;
using namespace tessel::dist;

namespace {

// Ring of n nodes split into contiguous ranges; node v's in-neighbors are v-1 and v+1 (mod n)
// plus v+3 to create halos that are not adjacent ranges. Global id == original id here.
partition::Part ring_part(int rank, int parts, std::int64_t n) {
  partition::Part part;
  part.part_id = rank;
  part.num_parts = parts;
  const std::int64_t begin = n * rank / parts, end = n * (rank + 1) / parts;
  part.offset = begin;
  part.num_owned = end - begin;
  std::map<NodeId, LocalId> halo_index;
  std::vector<NodeId> halo_global;
  part.graph.num_rows = part.num_owned;
  for (std::int64_t v = begin; v < end; ++v) {
    // Reverse order of first appearance so halo order differs from owner order.
    for (NodeId u : {(v + 3) % n, (v + n - 1) % n, (v + 1) % n}) {
      LocalId l;
      if (u >= begin && u < end) {
        l = static_cast<LocalId>(u - begin);
      } else {
        auto it = halo_index.find(u);
        if (it == halo_index.end()) {
          it = halo_index.emplace(u, static_cast<LocalId>(halo_global.size())).first;
          halo_global.push_back(u);
        }
        l = static_cast<LocalId>(part.num_owned + it->second);
      }
      part.graph.indices.push_back(l);
    }
    part.graph.indptr.push_back(static_cast<EdgeId>(part.graph.indices.size()));
  }
  part.num_halo = static_cast<std::int64_t>(halo_global.size());
  part.graph.num_cols = part.num_owned + part.num_halo;
  for (NodeId g : halo_global) {
    int owner = 0;
    while (g >= n * (owner + 1) / parts) ++owner;
    part.halo_owner.push_back(owner);
    part.halo_owner_local.push_back(static_cast<std::int32_t>(g - n * owner / parts));
  }
  for (std::int64_t v = begin; v < end; ++v) part.orig_id.push_back(v);
  part.orig_id.insert(part.orig_id.end(), halo_global.begin(), halo_global.end());
  return part;
}

// For each node of the ring, how many parts hold it as halo (only the nodes `kept` accepts).
std::vector<int> halo_holders(std::int64_t n, int parts,
                              const std::function<bool(NodeId)>& kept = [](NodeId) { return true; }) {
  std::vector<int> holders(static_cast<std::size_t>(n), 0);
  for (int r = 0; r < parts; ++r) {
    const partition::Part other = ring_part(r, parts, n);
    for (std::int64_t h = 0; h < other.num_halo; ++h) {
      const NodeId id = other.orig_id[other.num_owned + h];
      if (kept(id)) ++holders[static_cast<std::size_t>(id)];
    }
  }
  return holders;
}

}  // namespace

TEST(HaloExchange, ForwardDeliversOwnerRowsBackwardSumsAtOwners) {
  auto comm = comm::make_mpi_communicator();
  const std::int64_t n = 40, f = 3;
  const partition::Part part = ring_part(comm->rank(), comm->size(), n);
  dist::HaloExchange halo(part, *comm);

  // Row of global node g holds (g, 10 g, 100 g).
  Tensor x = Tensor::empty({part.num_owned, f}, DType::f32);
  for (std::int64_t i = 0; i < part.num_owned; ++i)
    for (std::int64_t j = 0; j < f; ++j)
      x.data<float>()[i * f + j] = static_cast<float>((part.offset + i) * (j == 0 ? 1 : j == 1 ? 10 : 100));
  Tensor full;
  halo.forward(x, full);
  ASSERT_EQ(full.rows(), part.num_local());
  for (std::int64_t l = 0; l < part.num_local(); ++l)
    for (std::int64_t j = 0; j < f; ++j)
      EXPECT_EQ(full.data<float>()[l * f + j],
                static_cast<float>(part.orig_id[l] * (j == 0 ? 1 : j == 1 ? 10 : 100)))
          << "local " << l;

  // Backward: every local row (owned or halo) carries gradient 1; an owned node's gradient
  // must become 1 + (number of other ranks holding it as halo).
  Tensor grad_full = Tensor::empty({part.num_local(), f}, DType::f32);
  for (std::int64_t i = 0; i < grad_full.numel(); ++i) grad_full.data<float>()[i] = 1.0f;
  Tensor grad_owned;
  halo.backward(grad_full, grad_owned);
  const std::vector<int> holders = halo_holders(n, comm->size());
  for (std::int64_t i = 0; i < part.num_owned; ++i)
    EXPECT_EQ(grad_owned.data<float>()[i * f], 1.0f + holders[part.offset + i]) << "node " << i;
  EXPECT_EQ(halo.rows_received(), part.num_halo);
}

// keep_rows: only the rows of kept nodes travel, and the choice is the same on both sides of
// every cut (an owner sends exactly the kept rows its peers receive); halo rows not kept are
// zero and send no gradient back; keep_all restores the whole exchange.
TEST(HaloExchange, KeptRowsTravelAloneAndBothSidesAgree) {
  auto comm = comm::make_mpi_communicator();
  const std::int64_t n = 40, f = 2;
  const partition::Part part = ring_part(comm->rank(), comm->size(), n);
  dist::HaloExchange halo(part, *comm);
  const rng::Key key{3, rng::Stream::boundary, 5, 0, 0};
  auto kept = [&key](NodeId id) { return key.uniform(static_cast<std::uint64_t>(id), 0) < 0.5f; };
  halo.keep_rows(kept);

  Tensor x = Tensor::empty({part.num_owned, f}, DType::f32);
  for (std::int64_t i = 0; i < x.numel(); ++i)
    x.data<float>()[i] = static_cast<float>(part.offset + i / f + 1);
  Tensor full;
  halo.forward(x, full);
  std::int64_t kept_halo = 0;
  for (std::int64_t h = 0; h < part.num_halo; ++h) {
    const NodeId id = part.orig_id[part.num_owned + h];
    const float want = kept(id) ? static_cast<float>(id + 1) : 0.0f;
    kept_halo += kept(id);
    for (std::int64_t j = 0; j < f; ++j)
      EXPECT_EQ(full.data<float>()[(part.num_owned + h) * f + j], want) << "halo node " << id;
  }
  EXPECT_EQ(halo.rows_received(), kept_halo);
  // What every rank sends equals what the others receive from it, counted over all ranks.
  const auto sent = comm->allreduce_value<std::int64_t>(halo.rows_sent());
  const auto received = comm->allreduce_value<std::int64_t>(halo.rows_received());
  EXPECT_EQ(sent, received);
  if (comm->size() > 1) {
    EXPECT_GT(received, 0);
  }

  Tensor grad_full = Tensor::empty({part.num_local(), f}, DType::f32);
  for (std::int64_t i = 0; i < grad_full.numel(); ++i) grad_full.data<float>()[i] = 1.0f;
  Tensor grad_owned;
  halo.backward(grad_full, grad_owned);
  const std::vector<int> holders = halo_holders(n, comm->size(), kept);
  for (std::int64_t i = 0; i < part.num_owned; ++i)
    EXPECT_EQ(grad_owned.data<float>()[i * f], 1.0f + holders[part.offset + i]) << "node " << i;

  halo.keep_all();
  EXPECT_EQ(halo.rows_received(), part.num_halo);
  halo.forward(x, full);
  for (std::int64_t h = 0; h < part.num_halo; ++h)
    EXPECT_EQ(full.data<float>()[(part.num_owned + h) * f],
              static_cast<float>(part.orig_id[part.num_owned + h] + 1));
}

namespace {

// Row of global node g: (g + 1, 2 g + 1, ...) scaled by `scale`, so epochs differ.
Tensor owned_rows(const partition::Part& part, std::int64_t f, float scale) {
  Tensor x = Tensor::empty({part.num_owned, f}, DType::f32);
  for (std::int64_t i = 0; i < part.num_owned; ++i)
    for (std::int64_t j = 0; j < f; ++j)
      x.data<float>()[i * f + j] = scale * static_cast<float>((part.offset + i) * (j + 1) + 1);
  return x;
}

float halo_value(const partition::Part& part, std::int64_t h, std::int64_t j, float scale) {
  return scale * static_cast<float>(part.orig_id[part.num_owned + h] * (j + 1) + 1);
}

}  // namespace

// min_vertex_cover against brute force on small random bipartite graphs: the result covers
// every edge and no smaller subset of the vertices does.
TEST(HaloAggregation, MinVertexCoverIsMinimum) {
  std::mt19937 gen(11);
  for (int trial = 0; trial < 300; ++trial) {
    const int nl = 1 + static_cast<int>(gen() % 6), nr = 1 + static_cast<int>(gen() % 6);
    std::vector<std::int64_t> indptr{0};
    std::vector<std::int32_t> right;
    std::vector<std::pair<int, int>> edges;
    for (int l = 0; l < nl; ++l) {
      for (int r = 0; r < nr; ++r)
        if (gen() % 3 == 0) {
          right.push_back(r);
          edges.emplace_back(l, r);
        }
      indptr.push_back(static_cast<std::int64_t>(right.size()));
    }
    const dist::BipartiteCover cover = dist::min_vertex_cover(nl, nr, indptr, right);
    std::int64_t counted = 0;
    for (char c : cover.left) counted += c;
    for (char c : cover.right) counted += c;
    EXPECT_EQ(counted, cover.size);
    for (auto [l, r] : edges) EXPECT_TRUE(cover.left[l] || cover.right[r]) << "trial " << trial;
    int best = nl + nr;
    for (std::uint32_t mask = 0; mask < (1u << (nl + nr)); ++mask) {
      bool covers = true;
      for (auto [l, r] : edges) covers = covers && (((mask >> l) & 1u) || ((mask >> (nl + r)) & 1u));
      if (covers) best = std::min(best, std::popcount(mask));
    }
    EXPECT_EQ(cover.size, best) << "trial " << trial;
  }
}

// Pre- and auto-aggregation compute the same aggregation as sending every boundary row, forward
// and backward, and auto never sends more rows than post.
TEST(HaloAggregation, PreAndAutoEqualPostForwardAndBackward) {
  auto comm = comm::make_mpi_communicator();
  const std::int64_t n = 40, f = 3;
  const partition::Part part = ring_part(comm->rank(), comm->size(), n);
  LocalCsr weighted = part.graph;
  for (std::int64_t v = 0; v < part.num_owned; ++v)
    for (EdgeId e = weighted.indptr[v]; e < weighted.indptr[v + 1]; ++e)
      weighted.values.push_back(
          1.0f / static_cast<float>(1 + (part.orig_id[v] + part.orig_id[weighted.indices[e]]) % 5));
  const kernels::SparseMatrix plain_a = kernels::SparseMatrix::from_csr(weighted);
  const Tensor x = owned_rows(part, f, 0.5f);
  Tensor g = Tensor::empty({part.num_owned, f}, DType::f32);
  for (std::int64_t i = 0; i < g.numel(); ++i) g.data<float>()[i] = static_cast<float>(i % 7) - 3.0f;

  dist::HaloExchange plain(part, *comm);
  Tensor full;
  plain.forward(x, full);
  const Tensor want = kernels::spmm(plain_a, full);
  Tensor want_grad;
  plain.backward(kernels::spmm(plain_a.transpose(), g), want_grad);
  const auto post_rows = comm->allreduce_value<std::int64_t>(plain.rows_received());

  for (dist::HaloAggregation how : {dist::HaloAggregation::pre, dist::HaloAggregation::automatic}) {
    SCOPED_TRACE(option_word(how));
    dist::HaloAggregationPlan plan = dist::plan_halo_aggregation(part, weighted, how, *comm);
    const kernels::SparseMatrix a = kernels::SparseMatrix::from_csr(plan.local);
    dist::HaloExchange halo(part, *comm);
    halo.set_combination(kernels::SparseMatrix::from_csr(plan.combine), plan.send_per_peer,
                         plan.recv_per_peer);
    EXPECT_EQ(halo.rows_received(), plan.post_rows + plan.pre_rows);
    Tensor full2;
    halo.forward(x, full2);
    const Tensor got = kernels::spmm(a, full2);
    for (std::int64_t i = 0; i < want.numel(); ++i)
      EXPECT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-5f * (1 + std::abs(want.data<float>()[i])));
    Tensor grad;
    halo.backward(kernels::spmm(a.transpose(), g), grad);
    for (std::int64_t i = 0; i < want_grad.numel(); ++i)
      EXPECT_NEAR(grad.data<float>()[i], want_grad.data<float>()[i],
                  1e-5f * (1 + std::abs(want_grad.data<float>()[i])));
    const auto rows = comm->allreduce_value<std::int64_t>(halo.rows_received());
    EXPECT_EQ(rows, comm->allreduce_value<std::int64_t>(halo.rows_sent()));
    if (how == dist::HaloAggregation::automatic) {
      EXPECT_LE(rows, post_rows);
    }
    if (how == dist::HaloAggregation::pre && comm->size() > 1) {
      EXPECT_GT(comm->allreduce_value<std::int64_t>(plan.pre_rows), 0);
    }
  }
}

// --stale-halo: the first epoch is exact; epoch e reads the halo rows (and adds the halo
// gradients) of epoch e - 1; with smoothing gamma, epoch 2 reads gamma x0 + (1 - gamma) x1.
TEST(HaloExchange, StaleEpochReadsThePreviousEpoch) {
  auto comm = comm::make_mpi_communicator();
  const std::int64_t n = 40, f = 2;
  const partition::Part part = ring_part(comm->rank(), comm->size(), n);
  const std::vector<int> holders = halo_holders(n, comm->size());
  for (float gamma : {0.0f, 0.25f}) {
    SCOPED_TRACE(gamma);
    dist::HaloExchange halo(part, *comm);
    halo.set_stale(true, gamma);
    for (int epoch = 0; epoch < 3; ++epoch) {
      halo.begin_epoch();
      const float scale = static_cast<float>(epoch + 1);
      Tensor full;
      halo.forward(owned_rows(part, f, scale), full);
      // Epoch 0 exact, 1 reads epoch 0, 2 reads epoch 1 (smoothed with epoch 0).
      const float read = epoch == 0 ? 1.0f : static_cast<float>(epoch);
      const float smoothed = epoch == 2 ? gamma * 1.0f + (1.0f - gamma) * 2.0f : read;
      for (std::int64_t h = 0; h < part.num_halo; ++h)
        for (std::int64_t j = 0; j < f; ++j)
          EXPECT_NEAR(full.data<float>()[(part.num_owned + h) * f + j], halo_value(part, h, j, smoothed),
                      1e-4f)
              << "epoch " << epoch << " halo " << h;
      for (std::int64_t i = 0; i < part.num_owned * f; ++i)
        EXPECT_EQ(full.data<float>()[i], owned_rows(part, f, scale).data<float>()[i]);
      // Every local row's gradient is `scale`: an owned node gets scale + holders * (the
      // previous epoch's scale, smoothed).
      Tensor grad_full = Tensor::empty({part.num_local(), f}, DType::f32);
      for (std::int64_t i = 0; i < grad_full.numel(); ++i) grad_full.data<float>()[i] = scale;
      Tensor grad_owned;
      halo.backward(grad_full, grad_owned);
      for (std::int64_t i = 0; i < part.num_owned; ++i)
        EXPECT_NEAR(grad_owned.data<float>()[i * f], scale + holders[part.offset + i] * smoothed, 1e-5f)
            << "epoch " << epoch << " node " << i;
    }
    halo.set_stale(false);
    Tensor full;
    halo.forward(owned_rows(part, f, 7.0f), full);
    for (std::int64_t h = 0; h < part.num_halo; ++h)
      EXPECT_EQ(full.data<float>()[(part.num_owned + h) * f], halo_value(part, h, 0, 7.0f));
  }
}

// Sampled mode builds its evaluation aggregator at the first evaluation, after the sampler has
// sorted every row of the part's graph by its columns' original ids: read with `ascending_rows`,
// the part gives back the pattern the partitioner wrote (columns in ascending local id) and the
// aggregator sums as one built before the sort, bit for bit.
TEST(FullAggregator, AscendingRowsReadTheLoadedOrderAfterTheSamplerSortedThem) {
  auto comm = comm::make_mpi_communicator();
  const std::int64_t n = 40, f = 3;
  partition::Part part = ring_part(comm->rank(), comm->size(), n);
  for (std::int64_t v = 0; v < part.num_owned; ++v)
    std::sort(part.graph.indices.begin() + part.graph.indptr[v],
              part.graph.indices.begin() + part.graph.indptr[v + 1]);
  // Original ids that run against the local ids, so the sort by them reverses every row.
  for (NodeId& id : part.orig_id) id = n - 1 - id;
  part.degree.assign(static_cast<std::size_t>(part.num_local()), 3);
  const LocalCsr loaded = part.graph;
  const Tensor x = owned_rows(part, f, 0.5f);
  Tensor want;
  {
    dist::FullAggregator before(part, *comm);
    want = before.aggregate(x, nn::Norm::gcn);
  }
  sampling::sort_rows_by_key(part.graph, part.orig_id);
  ASSERT_NE(part.graph.indices, loaded.indices) << "the sort by original id changed no row";
  const LocalCsr pattern = dist::part_pattern(part, true);
  EXPECT_EQ(pattern.indptr, loaded.indptr);
  EXPECT_EQ(pattern.indices, loaded.indices);
  EXPECT_EQ(pattern.num_cols, loaded.num_cols);
  dist::FullAggregator after(part, *comm, nullptr, Device::cpu(), true);
  const Tensor got = after.aggregate(x, nn::Norm::gcn);
  ASSERT_EQ(got.numel(), want.numel());
  for (std::int64_t i = 0; i < want.numel(); ++i)
    EXPECT_EQ(std::bit_cast<std::uint32_t>(got.data<float>()[i]),
              std::bit_cast<std::uint32_t>(want.data<float>()[i]))
        << "element " << i;
}
