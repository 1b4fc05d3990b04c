// HaloExchange on hand-built parts of a ring: forward delivers owners' rows, backward sums
// halo gradients at their owners.
#include "tessel/comm/mpi_communicator.hpp"
#include "tessel/core/rng.hpp"
#include "tessel/train/halo.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <vector>

using namespace tessel;

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
  train::HaloExchange halo(part, *comm);

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
  train::HaloExchange halo(part, *comm);
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
