// Block construction (source dedup in first-seen order) and whole-graph multi-layer sampling.
#include "tessel/sampling/block.hpp"

#if defined(TESSEL_WITH_CUDA)
#include "cuda/relabel_cuda.hpp"
#endif

#include "tessel/core/error.hpp"

#include <algorithm>
#include <limits>

namespace tessel::sampling {

namespace {

// The builder's loop, for either map type.
template <class Map>
void build_block(Map& map, std::span<const NodeId> dst, std::span<const EdgeId> offsets,
                 std::span<const NodeId> neighbors, Block& out, std::vector<EdgeId>* first_seen) {
  const auto num_dst = static_cast<std::int64_t>(dst.size());
  const auto num_edges = static_cast<std::int64_t>(neighbors.size());
  // Most batches repeat sources heavily; start a hash table for a fraction of the edges and let
  // it grow, so its used range stays small and cache-resident.
  map.reset(num_dst + num_edges / 4);
  out.dst.assign(dst.begin(), dst.end());
  out.src.assign(dst.begin(), dst.end());
  if (first_seen) first_seen->clear();
  bool inserted = false;
  for (std::int64_t i = 0; i < num_dst; ++i) {
    map.insert(dst[i], static_cast<LocalId>(i), inserted);
    TESSEL_EXPECTS(inserted, "build_block: destination {} appears twice, expected distinct ids",
                   dst[i]);
  }

  LocalCsr& adj = out.adj;
  adj.num_rows = num_dst;
  adj.indptr.assign(offsets.begin(), offsets.end());
  adj.indices.resize(static_cast<std::size_t>(num_edges));
  adj.values.clear();
  // The probes are random accesses; prefetching well ahead hides most of their latency.
  constexpr std::int64_t kPrefetchDistance = 32;
  for (std::int64_t e = 0; e < num_edges; ++e) {
    if (e + kPrefetchDistance < num_edges) map.prefetch(neighbors[e + kPrefetchDistance]);
    const NodeId id = neighbors[e];
    const LocalId local = map.insert(id, static_cast<LocalId>(out.src.size()), inserted);
    if (inserted) {
      out.src.push_back(id);
      if (first_seen) first_seen->push_back(e);
    }
    adj.indices[e] = local;
  }
  adj.num_cols = static_cast<std::int64_t>(out.src.size());
}

} // namespace

BlockBuilder::BlockBuilder(std::int64_t id_bound)
    : dense_(id_bound > 0 && id_bound <= kDenseMaxIds ? id_bound : 0),
      use_dense_(id_bound > 0 && id_bound <= kDenseMaxIds) {}

void BlockBuilder::build(std::span<const NodeId> dst, std::span<const EdgeId> offsets,
                         std::span<const NodeId> neighbors, Block& out,
                         std::vector<EdgeId>* first_seen) {
  const auto num_dst = static_cast<std::int64_t>(dst.size());
  const auto num_edges = static_cast<std::int64_t>(neighbors.size());
  TESSEL_EXPECTS(static_cast<std::int64_t>(offsets.size()) == num_dst + 1,
                 "build_block: {} offsets for {} destinations, expected {}", offsets.size(),
                 num_dst, num_dst + 1);
  TESSEL_EXPECTS(offsets.front() == 0 && offsets.back() == num_edges,
                 "build_block: offsets run from {} to {}, expected 0 to {} (the neighbor count)",
                 offsets.front(), offsets.back(), num_edges);
  TESSEL_EXPECTS(num_dst + num_edges < std::numeric_limits<LocalId>::max(),
                 "build_block: {} destinations + {} neighbors exceed the 32-bit block-local ids",
                 num_dst, num_edges);
  for (std::int64_t i = 0; i < num_dst; ++i)
    TESSEL_EXPECTS(offsets[i] <= offsets[i + 1], "build_block: offsets decrease at {} ({} > {})", i,
                   offsets[i], offsets[i + 1]);
  if (!use_dense_) {
    build_block(map_, dst, offsets, neighbors, out, first_seen);
    return;
  }
  const NodeId bound = dense_.bound();
  auto outside = [bound](NodeId id) { return id < 0 || id >= bound; };
  const auto bad_dst = std::find_if(dst.begin(), dst.end(), outside);
  TESSEL_EXPECTS(bad_dst == dst.end(), "build_block: destination {} outside the id bound [0, {})",
                 bad_dst == dst.end() ? 0 : *bad_dst, bound);
  const auto bad = std::find_if(neighbors.begin(), neighbors.end(), outside);
  TESSEL_EXPECTS(bad == neighbors.end(), "build_block: neighbor {} outside the id bound [0, {})",
                 bad == neighbors.end() ? 0 : *bad, bound);
  build_block(dense_, dst, offsets, neighbors, out, first_seen);
}

void BlockBuilder::build(const Tensor& dst, const Tensor& offsets, const Tensor& neighbors,
                         BlockTensors& out) {
  TESSEL_EXPECTS(dst.defined() && dst.dim() == 1 && dst.dtype() == DType::i64,
                 "build_block: destinations are {}, expected i64 [n]", dst.describe());
  TESSEL_EXPECTS(offsets.defined() && offsets.dim() == 1 && offsets.dtype() == DType::i64 &&
                     offsets.numel() == dst.numel() + 1,
                 "build_block: offsets are {}, expected i64 [{}]", offsets.describe(),
                 dst.numel() + 1);
  TESSEL_EXPECTS(neighbors.defined() && neighbors.dim() == 1 && neighbors.dtype() == DType::i64,
                 "build_block: neighbors are {}, expected i64 [edges]", neighbors.describe());
  const Device device = dst.device();
  TESSEL_EXPECTS(offsets.device() == device && neighbors.device() == device,
                 "build_block: tensors on {}, {}, {}, expected one device", device.str(),
                 offsets.device().str(), neighbors.device().str());
  const std::int64_t num_dst = dst.numel();
  const std::int64_t num_edges = neighbors.numel();
  TESSEL_EXPECTS(num_dst + num_edges < std::numeric_limits<LocalId>::max(),
                 "build_block: {} destinations + {} neighbors exceed the 32-bit block-local ids",
                 num_dst, num_edges);
  out.num_dst = num_dst;
  out.indptr = offsets;
  out.src_orig = Tensor();
  out.src_degree = Tensor();
  if (device.is_cpu()) {
    build(std::span<const NodeId>(dst.data<NodeId>(), static_cast<std::size_t>(num_dst)),
          std::span<const EdgeId>(offsets.data<EdgeId>(), static_cast<std::size_t>(num_dst) + 1),
          std::span<const NodeId>(neighbors.data<NodeId>(), static_cast<std::size_t>(num_edges)),
          scratch_);
    out.num_src = scratch_.num_src();
    out.src = Tensor::from_vector(scratch_.src, {out.num_src});
    out.indices = Tensor::from_vector(scratch_.adj.indices, {num_edges});
    return;
  }
#if defined(TESSEL_WITH_CUDA)
  out.num_src = cuda::relabel_block(dst, offsets, neighbors, out.src, out.indices);
#else
  TESSEL_FAIL("build_block: device {} is not supported in a build without CUDA", device.str());
#endif
}

Block BlockTensors::to_block() const {
  auto host = [](const Tensor& t) { return t.device().is_cpu() ? t : t.to(Device::cpu()); };
  const Tensor s = host(src), p = host(indptr), i = host(indices);
  Block b;
  b.src.assign(s.data<NodeId>(), s.data<NodeId>() + num_src);
  b.dst.assign(b.src.begin(), b.src.begin() + num_dst);
  b.adj.num_rows = num_dst;
  b.adj.num_cols = num_src;
  b.adj.indptr.assign(p.data<EdgeId>(), p.data<EdgeId>() + num_dst + 1);
  b.adj.indices.assign(i.data<LocalId>(), i.data<LocalId>() + num_edges());
  return b;
}

BlockSampler::BlockSampler(const Csr& graph, std::span<const NodeId> node_key)
    : graph_(graph), node_key_(node_key), builder_(graph.num_rows) {
  TESSEL_EXPECTS(node_key.empty() || static_cast<std::int64_t>(node_key.size()) == graph.num_rows,
                 "BlockSampler: {} node keys for a graph of {} nodes, expected one per node",
                 node_key.size(), graph.num_rows);
  TESSEL_EXPECTS(graph.num_rows == graph.num_cols,
                 "BlockSampler: graph is {}x{}, expected a square whole-graph CSR", graph.num_rows,
                 graph.num_cols);
}

void BlockSampler::sample(std::span<const NodeId> seeds, std::span<const int> fanouts,
                          const rng::Key& base_key, std::vector<Block>& blocks) {
  TESSEL_EXPECTS(!fanouts.empty(), "sample_blocks: no fanouts, expected one per layer");
  const auto num_layers = static_cast<std::int64_t>(fanouts.size());
  blocks.resize(static_cast<std::size_t>(num_layers));
  std::span<const NodeId> frontier = seeds;
  for (std::int64_t l = num_layers - 1; l >= 0; --l) {
    std::span<const NodeId> keys = frontier;
    if (!node_key_.empty()) {
      map_ids(frontier, node_key_, row_keys_);
      keys = row_keys_;
    }
    rng::Key key = base_key;
    key.layer = static_cast<std::uint32_t>(l);
    sample_neighbors(graph_, frontier, keys, fanouts[static_cast<std::size_t>(l)], key, sampled_);
    Block& block = blocks[static_cast<std::size_t>(l)];
    builder_.build(frontier, sampled_.offsets, sampled_.neighbors, block);
    frontier = block.src;
  }
}

std::vector<Block> sample_blocks(const Csr& graph, std::span<const NodeId> seeds,
                                 std::span<const int> fanouts, const rng::Key& base_key,
                                 std::span<const NodeId> node_key) {
  BlockSampler sampler(graph, node_key);
  std::vector<Block> blocks;
  sampler.sample(seeds, fanouts, base_key, blocks);
  return blocks;
}

} // namespace tessel::sampling
