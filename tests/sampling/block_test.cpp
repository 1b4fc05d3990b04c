// Blocks: builder invariants, multi-layer order, and P-rank hop simulation == whole-graph blocks.
#include "tessel/sampling/block.hpp"
#include "tessel/sampling/hop.hpp"
#include "tessel/sampling/id_map.hpp"

#include "sampling_graphs.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <unordered_map>

using namespace tessel;
using namespace tessel::sampling;

TEST(IdHashMap, InsertFindGrowAndReset) {
  IdHashMap map;
  EXPECT_EQ(map.find(3), IdHashMap::kAbsent);
  map.reset(4);
  bool inserted = false;
  for (NodeId id = 0; id < 5000; ++id) {
    EXPECT_EQ(map.insert(id * 1000003 - 77, static_cast<std::int32_t>(id), inserted), id);
    EXPECT_TRUE(inserted);
  }
  EXPECT_EQ(map.size(), 5000);
  EXPECT_EQ(map.insert(5 * 1000003 - 77, 99, inserted), 5);
  EXPECT_FALSE(inserted);
  for (NodeId id = 0; id < 5000; ++id)
    EXPECT_EQ(map.find(id * 1000003 - 77), id);
  EXPECT_EQ(map.find(1), IdHashMap::kAbsent);
  map.reset(2); // a smaller batch after a big one: nothing of the old contents survives
  EXPECT_EQ(map.size(), 0);
  for (NodeId id = 0; id < 5000; ++id)
    ASSERT_EQ(map.find(id * 1000003 - 77), IdHashMap::kAbsent);
  map.insert(42, 7, inserted);
  EXPECT_EQ(map.find(42), 7);
}

// Positions [first, end) of an id array: every indexed id finds its position, ids outside the
// range or absent (including neighbours of indexed ones, which share probe chains) find none.
TEST(PositionIndex, FindsEveryIndexedPositionAndNothingElse) {
  std::vector<NodeId> ids;
  for (NodeId k = 0; k < 5000; ++k) ids.push_back(k * 7919 % 1000003 + (k % 3 == 0 ? 1 << 30 : 0));
  PositionIndex index;
  EXPECT_EQ(index.find(ids[0]), PositionIndex::kAbsent);  // not built
  index.build(ids.data(), 1000, 4000);
  for (std::int64_t p = 0; p < static_cast<std::int64_t>(ids.size()); ++p)
    ASSERT_EQ(index.find(ids[static_cast<std::size_t>(p)]),
              p >= 1000 && p < 4000 ? static_cast<std::int32_t>(p) : PositionIndex::kAbsent)
        << "position " << p;
  for (NodeId id : {NodeId{1000004}, NodeId{999999937}, NodeId{1} << 40})
    EXPECT_EQ(index.find(id), PositionIndex::kAbsent);
  EXPECT_EQ(index.bytes(), 8192 * 4);  // 3,000 keys: a table of 8,192 int32 slots
  PositionIndex empty;
  empty.build(ids.data(), 10, 10);
  EXPECT_EQ(empty.find(ids[10]), PositionIndex::kAbsent);
}

TEST(BlockBuilder, DestinationsFirstThenSourcesInFirstSeenOrder) {
  const std::vector<NodeId> dst{50, 10, 30};
  const std::vector<EdgeId> offsets{0, 3, 3, 6};
  const std::vector<NodeId> neighbors{10, 99, 7, 99, 50, 8};
  BlockBuilder builder;
  const Block b = builder.build(dst, offsets, neighbors);
  EXPECT_EQ(b.dst, dst);
  EXPECT_EQ(b.src, (std::vector<NodeId>{50, 10, 30, 99, 7, 8}));
  EXPECT_EQ(b.adj.num_rows, 3);
  EXPECT_EQ(b.adj.num_cols, 6);
  EXPECT_EQ(b.adj.indptr, offsets);
  EXPECT_EQ(b.adj.indices, (std::vector<LocalId>{1, 3, 4, 3, 0, 5}));
  b.adj.validate("block");
}

TEST(BlockBuilder, RandomBlocksMapBackToTheirEdges) {
  rng::Sequence draw(rng::Key{5, rng::Stream::synthetic}, 0);
  BlockBuilder builder; // reused across sizes, as a training loop does
  Block b;
  for (int trial = 0; trial < 20; ++trial) {
    const auto num_dst = static_cast<std::int64_t>(draw.next_below(2000));
    const auto perm = test::random_permutation(100000, static_cast<std::uint64_t>(trial));
    std::vector<NodeId> dst(perm.begin(), perm.begin() + num_dst);
    std::vector<EdgeId> offsets{0};
    std::vector<NodeId> neighbors;
    for (std::int64_t i = 0; i < num_dst; ++i) {
      const auto k = static_cast<std::int64_t>(draw.next_below(20));
      for (std::int64_t j = 0; j < k; ++j)
        neighbors.push_back(static_cast<NodeId>(draw.next_below(trial % 2 ? 3000 : 100000)));
      offsets.push_back(static_cast<EdgeId>(neighbors.size()));
    }
    builder.build(dst, offsets, neighbors, b);
    ASSERT_EQ(b.num_dst(), num_dst);
    ASSERT_TRUE(std::equal(dst.begin(), dst.end(), b.src.begin()));
    const std::set<NodeId> unique_src(b.src.begin(), b.src.end());
    EXPECT_EQ(unique_src.size(), b.src.size());
    std::set<NodeId> expected_src(dst.begin(), dst.end());
    expected_src.insert(neighbors.begin(), neighbors.end());
    EXPECT_EQ(unique_src, expected_src);
    b.adj.validate("random block");
    EXPECT_EQ(b.adj.indptr, offsets);
    for (std::size_t e = 0; e < neighbors.size(); ++e)
      ASSERT_EQ(b.src[b.adj.indices[e]], neighbors[e]);
  }
}

TEST(BlockBuilder, DenseAndHashMapsBuildTheSameBlocks) {
  rng::Sequence draw(rng::Key{6, rng::Stream::synthetic}, 0);
  BlockBuilder hashed;
  BlockBuilder dense(5000);
  BlockBuilder too_big_for_dense(BlockBuilder::kDenseMaxIds + 1); // falls back to hashing
  Block a, b, c;
  for (int trial = 0; trial < 5; ++trial) {
    const auto perm = test::random_permutation(5000, 100 + static_cast<std::uint64_t>(trial));
    const std::vector<NodeId> dst(perm.begin(), perm.begin() + 300);
    std::vector<EdgeId> offsets{0};
    std::vector<NodeId> neighbors;
    for (std::size_t i = 0; i < dst.size(); ++i) {
      for (int j = 0; j < 10; ++j)
        neighbors.push_back(static_cast<NodeId>(draw.next_below(5000)));
      offsets.push_back(static_cast<EdgeId>(neighbors.size()));
    }
    hashed.build(dst, offsets, neighbors, a);
    dense.build(dst, offsets, neighbors, b);
    too_big_for_dense.build(dst, offsets, neighbors, c);
    EXPECT_EQ(a.src, b.src);
    EXPECT_EQ(a.adj.indices, b.adj.indices);
    EXPECT_EQ(a.src, c.src);
  }
  const std::vector<NodeId> dst{1, 2};
  const std::vector<EdgeId> offsets{0, 1, 1};
  const std::vector<NodeId> outside{5000};
  EXPECT_THROW(dense.build(dst, offsets, outside), InputError);
  const std::vector<NodeId> negative_dst{-1, 2};
  const std::vector<NodeId> inside{7};
  EXPECT_THROW(dense.build(negative_dst, offsets, inside), InputError);
  EXPECT_NO_THROW(hashed.build(negative_dst, offsets, inside)); // the hash map takes any id
}

TEST(BlockBuilder, RejectsRepeatedDestinationsAndBadOffsets) {
  BlockBuilder builder;
  const std::vector<NodeId> dup{1, 2, 1};
  const std::vector<EdgeId> zero3{0, 0, 0, 0};
  const std::vector<NodeId> none;
  EXPECT_THROW(builder.build(dup, zero3, none), InputError);
  const std::vector<NodeId> dst{1, 2};
  const std::vector<EdgeId> short_offsets{0, 1};
  const std::vector<EdgeId> wrong_end{0, 1, 3};
  const std::vector<EdgeId> decreasing{0, 2, 1};
  const std::vector<NodeId> one{5};
  EXPECT_THROW(builder.build(dst, short_offsets, one), InputError);
  EXPECT_THROW(builder.build(dst, wrong_end, one), InputError);
  EXPECT_THROW(builder.build(dst, decreasing, one), InputError);
}

namespace {

// The definition, written the slow way: the sources are the distinct ids of dst followed by
// neighbors, in the order they first appear.
Block reference_block(const std::vector<NodeId>& dst, const std::vector<EdgeId>& offsets,
                      const std::vector<NodeId>& neighbors) {
  Block b;
  b.dst = dst;
  std::map<NodeId, LocalId> number;
  auto see = [&](NodeId id) {
    const auto [it, inserted] = number.emplace(id, static_cast<LocalId>(b.src.size()));
    if (inserted) b.src.push_back(id);
    return it->second;
  };
  for (const NodeId id : dst)
    see(id);
  for (const NodeId id : neighbors)
    b.adj.indices.push_back(see(id));
  b.adj.num_rows = static_cast<std::int64_t>(dst.size());
  b.adj.num_cols = static_cast<std::int64_t>(b.src.size());
  b.adj.indptr = offsets;
  return b;
}

struct BlockInput {
  std::string name;
  std::vector<NodeId> dst;
  std::vector<EdgeId> offsets;
  std::vector<NodeId> neighbors;
};

// Empty frontiers, frontiers without draws, heavy duplicates, destinations drawn again, ids
// beyond 32 bits, and the sizes of a sampled hop.
std::vector<BlockInput> block_inputs() {
  std::vector<BlockInput> inputs;
  inputs.push_back({"empty frontier", {}, {0}, {}});
  inputs.push_back({"no draws", {4, 9, 1}, {0, 0, 0, 0}, {}});
  inputs.push_back({"one row", {7}, {0, 5}, {7, 3, 3, 7, 2}});
  rng::Sequence draw(rng::Key{9, rng::Stream::synthetic}, 0);
  const struct {
    const char* name;
    std::int64_t num_dst;
    std::int64_t max_draws;
    std::int64_t id_range;
    NodeId id_base;
  } shapes[] = {{"heavy duplicates", 40, 30, 60, 0},
                {"sparse ids", 500, 12, 1000000, 0},
                {"ids beyond 32 bits", 300, 8, 5000, NodeId{1} << 40},
                {"hop sized", 6000, 15, 200000, 0},
                {"rows without draws among others", 800, 3, 3000, 0}};
  for (const auto& shape : shapes) {
    BlockInput in;
    in.name = shape.name;
    const auto perm =
        test::random_permutation(std::max<std::int64_t>(shape.id_range, shape.num_dst),
                                 static_cast<std::uint64_t>(shape.num_dst));
    for (std::int64_t i = 0; i < shape.num_dst; ++i)
      in.dst.push_back(shape.id_base + perm[static_cast<std::size_t>(i)]);
    in.offsets.push_back(0);
    for (std::int64_t i = 0; i < shape.num_dst; ++i) {
      const auto k = static_cast<std::int64_t>(
          draw.next_below(static_cast<std::uint64_t>(shape.max_draws + 1)));
      for (std::int64_t j = 0; j < k; ++j) {
        // A quarter of the draws are destinations (as when a hop draws frontier nodes again).
        const bool again = draw.next_below(4) == 0;
        in.neighbors.push_back(
            again ? in.dst[draw.next_below(static_cast<std::uint64_t>(shape.num_dst))]
                  : shape.id_base + static_cast<NodeId>(draw.next_below(
                                        static_cast<std::uint64_t>(shape.id_range))));
      }
      in.offsets.push_back(static_cast<EdgeId>(in.neighbors.size()));
    }
    inputs.push_back(std::move(in));
  }
  return inputs;
}

void expect_same_block(const Block& got, const Block& want, const std::string& what) {
  EXPECT_EQ(got.dst, want.dst) << what;
  EXPECT_EQ(got.src, want.src) << what;
  EXPECT_EQ(got.adj.num_rows, want.adj.num_rows) << what;
  EXPECT_EQ(got.adj.num_cols, want.adj.num_cols) << what;
  EXPECT_EQ(got.adj.indptr, want.adj.indptr) << what;
  EXPECT_EQ(got.adj.indices, want.adj.indices) << what;
}

BlockTensors build_tensors(BlockBuilder& builder, const BlockInput& in, Device device) {
  BlockTensors out;
  builder.build(Tensor::from_vector(in.dst, {static_cast<std::int64_t>(in.dst.size())}).to(device),
                Tensor::from_vector(in.offsets).to(device),
                Tensor::from_vector(in.neighbors, {static_cast<std::int64_t>(in.neighbors.size())})
                    .to(device),
                out);
  return out;
}

} // namespace

TEST(BlockBuilder, SpanAndTensorFormsBuildTheDefinedBlocks) {
  BlockBuilder hashed; // reused across inputs, as the sampler does
  BlockBuilder dense(std::int64_t{1} << 20);
  for (const BlockInput& in : block_inputs()) {
    const Block want = reference_block(in.dst, in.offsets, in.neighbors);
    expect_same_block(hashed.build(in.dst, in.offsets, in.neighbors), want, in.name + " (span)");
    const BlockTensors t = build_tensors(hashed, in, Device::cpu());
    EXPECT_EQ(t.num_dst, static_cast<std::int64_t>(in.dst.size())) << in.name;
    EXPECT_EQ(t.num_src, want.num_src()) << in.name;
    EXPECT_EQ(t.num_edges(), static_cast<std::int64_t>(in.neighbors.size())) << in.name;
    expect_same_block(t.to_block(), want, in.name + " (tensors)");
    const bool fits_dense =
        std::all_of(in.neighbors.begin(), in.neighbors.end(),
                    [](NodeId id) { return id < (NodeId{1} << 20); }) &&
        std::all_of(in.dst.begin(), in.dst.end(), [](NodeId id) { return id < (NodeId{1} << 20); });
    if (fits_dense)
      expect_same_block(build_tensors(dense, in, Device::cpu()).to_block(), want,
                        in.name + " (dense map)");
  }
}

TEST(BlockBuilder, TensorFormRejectsWhatTheSpanFormRejects) {
  BlockBuilder builder;
  BlockTensors out;
  const Tensor dup = Tensor::from_vector(std::vector<NodeId>{1, 2, 1});
  const Tensor zeros4 = Tensor::from_vector(std::vector<EdgeId>{0, 0, 0, 0});
  const Tensor none = Tensor::empty({0}, DType::i64);
  EXPECT_THROW(builder.build(dup, zeros4, none, out), InputError);
  const Tensor dst = Tensor::from_vector(std::vector<NodeId>{1, 2});
  const Tensor one = Tensor::from_vector(std::vector<NodeId>{5});
  EXPECT_THROW(builder.build(dst, Tensor::from_vector(std::vector<EdgeId>{0, 1, 3}), one, out),
               InputError);
  EXPECT_THROW(builder.build(dst, Tensor::from_vector(std::vector<EdgeId>{0, 1}), one, out),
               InputError);
  EXPECT_THROW(builder.build(Tensor::from_vector(std::vector<LocalId>{1, 2}),
                             Tensor::from_vector(std::vector<EdgeId>{0, 1, 1}), one, out),
               InputError);
}

TEST(BlockBuilder, CudaTwinBuildsTheCpuBlocks) {
  if (!device_memory::cuda_available())
    GTEST_SKIP() << "no GPU visible: the CUDA block builder is not compared with the CPU's";
  const Device gpu = Device::cuda(0);
  BlockBuilder cpu, cuda;
  for (const BlockInput& in : block_inputs()) {
    const BlockTensors want = build_tensors(cpu, in, Device::cpu());
    const BlockTensors got = build_tensors(cuda, in, gpu);
    EXPECT_EQ(got.src.device(), gpu) << in.name;
    EXPECT_EQ(got.indices.device(), gpu) << in.name;
    EXPECT_EQ(got.num_src, want.num_src) << in.name;
    expect_same_block(got.to_block(), want.to_block(), in.name + " (CUDA)");
  }
  BlockTensors out;
  const auto on_gpu = [&](auto values) { return Tensor::from_vector(values).to(gpu); };
  EXPECT_THROW(cuda.build(on_gpu(std::vector<NodeId>{1, 2, 1}),
                          on_gpu(std::vector<EdgeId>{0, 0, 0, 0}),
                          Tensor::empty({0}, DType::i64, gpu), out),
               InputError);
  EXPECT_THROW(cuda.build(on_gpu(std::vector<NodeId>{1, 2}), on_gpu(std::vector<EdgeId>{0, 1, 2}),
                          on_gpu(std::vector<NodeId>{5, -3}), out),
               InputError);
  EXPECT_THROW(cuda.build(on_gpu(std::vector<NodeId>{1, 2}), on_gpu(std::vector<EdgeId>{0, 1, 3}),
                          on_gpu(std::vector<NodeId>{5, 6}), out),
               InputError);
}

namespace {

void expect_same_blocks(const std::vector<Block>& a, const std::vector<Block>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t l = 0; l < a.size(); ++l) {
    EXPECT_EQ(a[l].dst, b[l].dst) << "layer " << l;
    EXPECT_EQ(a[l].src, b[l].src) << "layer " << l;
    EXPECT_EQ(a[l].adj.indptr, b[l].adj.indptr) << "layer " << l;
    EXPECT_EQ(a[l].adj.indices, b[l].adj.indices) << "layer " << l;
  }
}

} // namespace

TEST(SampleBlocks, LayerOrderFanoutsAndRealEdges) {
  const Csr g = test::skewed_graph(3000, 20000, 300, 21);
  const auto perm = test::random_permutation(g.num_rows, 3);
  const std::vector<NodeId> seeds(perm.begin(), perm.begin() + 64);
  const std::vector<int> fanouts{7, 4, kAllNeighbors}; // input layer first
  const rng::Key key{9, rng::Stream::sampling, 2, 5};
  const auto blocks = sample_blocks(g, seeds, fanouts, key);
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(blocks[2].dst, seeds);
  for (std::size_t l = 0; l + 1 < blocks.size(); ++l)
    EXPECT_EQ(blocks[l].dst, blocks[l + 1].src);
  for (std::size_t l = 0; l < blocks.size(); ++l) {
    const Block& b = blocks[l];
    b.adj.validate("sampled block");
    ASSERT_TRUE(std::equal(b.dst.begin(), b.dst.end(), b.src.begin()));
    for (std::int64_t i = 0; i < b.num_dst(); ++i) {
      const NodeId v = b.dst[i];
      const auto want = fanouts[l] < 0 ? g.degree(v) : std::min<EdgeId>(fanouts[l], g.degree(v));
      ASSERT_EQ(b.adj.degree(i), want);
      const std::set<NodeId> row(g.indices.begin() + g.indptr[v],
                                 g.indices.begin() + g.indptr[v + 1]);
      for (EdgeId e = b.adj.indptr[i]; e < b.adj.indptr[i + 1]; ++e)
        ASSERT_TRUE(row.count(b.src[b.adj.indices[e]]));
    }
    // The draws of block l are sample_neighbors with key.layer = l.
    rng::Key layer_key = key;
    layer_key.layer = static_cast<std::uint32_t>(l);
    const auto direct = sample_neighbors(g, b.dst, b.dst, fanouts[l], layer_key);
    for (std::size_t e = 0; e < direct.neighbors.size(); ++e)
      ASSERT_EQ(b.src[b.adj.indices[e]], direct.neighbors[e]);
  }
  // Same key, same blocks, also through a reused sampler; another step differs.
  BlockSampler sampler(g);
  std::vector<Block> again;
  sampler.sample(seeds, fanouts, rng::Key{9, rng::Stream::sampling, 2, 6}, again);
  sampler.sample(seeds, fanouts, key, again);
  expect_same_blocks(blocks, again);
  const auto other = sample_blocks(g, seeds, fanouts, rng::Key{9, rng::Stream::sampling, 2, 6});
  EXPECT_NE(other[0].src, blocks[0].src);
}

TEST(SampleBlocks, NodeKeysDecideTheDraws) {
  // Relabel the whole graph: sampling the relabeled graph with node_key = original ids gives
  // blocks that map back to the original-graph blocks exactly.
  const Csr g = test::skewed_graph(1500, 9000, 200, 22);
  const auto new_of = test::random_permutation(g.num_rows, 4); // original -> new
  std::vector<NodeId> orig_of(static_cast<std::size_t>(g.num_rows));
  for (NodeId v = 0; v < g.num_rows; ++v)
    orig_of[new_of[v]] = v;
  std::vector<NodeId> src, dst;
  for (NodeId v = 0; v < g.num_rows; ++v)
    for (EdgeId e = g.indptr[v]; e < g.indptr[v + 1]; ++e) {
      src.push_back(new_of[g.indices[e]]);
      dst.push_back(new_of[v]);
    }
  Csr relabeled = Csr::from_edges(g.num_rows, g.num_rows, src, dst);
  sort_rows_by_key(relabeled, orig_of);
  const std::vector<NodeId> seeds{5, 17, 300, 1200};
  std::vector<NodeId> new_seeds;
  for (NodeId s : seeds)
    new_seeds.push_back(new_of[s]);
  const std::vector<int> fanouts{3, 5};
  const rng::Key key{1, rng::Stream::sampling, 4, 4};
  const auto want = sample_blocks(g, seeds, fanouts, key);
  auto got = sample_blocks(relabeled, new_seeds, fanouts, key, orig_of);
  for (auto& b : got) {
    for (auto& id : b.dst)
      id = orig_of[id];
    for (auto& id : b.src)
      id = orig_of[id];
  }
  expect_same_blocks(want, got);
}

TEST(SampleBlocks, DistributedHopsOnPPartsEqualTheWholeGraph) {
  // Each hop as the data-centric sampler will run it: route the frontier to owners, owners draw
  // from their local CSR (local ids, scrambled numbering) keyed by original id and answer
  // original ids, answers merged and built into a block. P = 1, 2, 4 must all equal the
  // whole-graph blocks.
  const Csr whole = test::skewed_graph(2500, 15000, 300, 23);
  const auto perm = test::random_permutation(whole.num_rows, 8);
  const std::vector<NodeId> seeds(perm.begin(), perm.begin() + 100);
  const std::vector<int> fanouts{10, 5, 3};
  const rng::Key base{77, rng::Stream::sampling, 1, 3};
  const auto want = sample_blocks(whole, seeds, fanouts, base);

  for (int num_parts : {1, 2, 4}) {
    std::vector<int> owner(static_cast<std::size_t>(whole.num_rows));
    for (NodeId v = 0; v < whole.num_rows; ++v)
      owner[v] = static_cast<int>((v * 7 + v / 3) % num_parts);
    const auto parts = test::simulate_parts(whole, owner, num_parts, 40 + num_parts);
    std::vector<Block> got(fanouts.size());
    BlockBuilder builder;
    OwnerRouting routing;
    SampledGlobalNeighbors merged;
    std::span<const NodeId> frontier = seeds;
    for (int l = static_cast<int>(fanouts.size()) - 1; l >= 0; --l) {
      rng::Key key = base;
      key.layer = static_cast<std::uint32_t>(l);
      std::vector<int> frontier_owner;
      for (NodeId v : frontier)
        frontier_owner.push_back(owner[v]);
      route_by_owner(frontier_owner, num_parts, routing);
      std::vector<NodeId> requests;
      gather_by_order(frontier, routing.order, requests);
      std::vector<std::int64_t> answer_counts;
      std::vector<NodeId> answer_ids;
      for (int p = 0; p < num_parts; ++p) { // "owner p" serves its slice of the requests
        const auto& part = parts[static_cast<std::size_t>(p)];
        std::vector<LocalId> rows;
        std::vector<NodeId> keys;
        for (auto k = routing.displs[p]; k < routing.displs[p + 1]; ++k) {
          rows.push_back(part.local_of[requests[k]]);
          keys.push_back(part.orig_id[rows.back()]);
        }
        const auto local = sample_neighbors(part.graph, rows, keys, fanouts[l], key);
        std::vector<NodeId> ids;
        map_ids(local.neighbors, part.orig_id, ids);
        for (std::int64_t i = 0; i < local.num_requests(); ++i)
          answer_counts.push_back(local.offsets[i + 1] - local.offsets[i]);
        answer_ids.insert(answer_ids.end(), ids.begin(), ids.end());
      }
      merge_answers(routing, answer_counts, answer_ids, merged);
      builder.build(frontier, merged.offsets, merged.neighbors, got[l]);
      frontier = got[l].src;
    }
    SCOPED_TRACE("P = " + std::to_string(num_parts));
    expect_same_blocks(want, got);
  }
}

TEST(Hop, RouteAndMergeRoundTrip) {
  const std::vector<int> owner{2, 0, 2, 1, 0};
  OwnerRouting r;
  route_by_owner(owner, 3, r);
  EXPECT_EQ(r.counts, (std::vector<std::int64_t>{2, 1, 2}));
  EXPECT_EQ(r.displs, (std::vector<std::int64_t>{0, 2, 3, 5}));
  EXPECT_EQ(r.order, (std::vector<std::int64_t>{1, 4, 3, 0, 2}));
  // Answers in routed order: request k (frontier position order[k]) answers order[k] * 10 + j.
  const std::vector<std::int64_t> counts{1, 0, 2, 1, 3};
  const std::vector<NodeId> ids{10, 30, 31, 0, 20, 21, 22};
  SampledGlobalNeighbors merged;
  merge_answers(r, counts, ids, merged);
  EXPECT_EQ(merged.offsets, (std::vector<EdgeId>{0, 1, 2, 5, 7, 7}));
  EXPECT_EQ(merged.neighbors, (std::vector<NodeId>{0, 10, 20, 21, 22, 30, 31}));
  const std::vector<int> bad_owner{0, 3};
  EXPECT_THROW(route_by_owner(bad_owner, 3, r), InputError);
  route_by_owner(owner, 3, r);
  const std::vector<std::int64_t> short_counts{1, 2};
  EXPECT_THROW(merge_answers(r, short_counts, ids, merged), InputError);
  const std::vector<std::int64_t> wrong_total{1, 0, 2, 1, 2};
  EXPECT_THROW(merge_answers(r, wrong_total, ids, merged), InputError);
}
