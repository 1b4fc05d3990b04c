// Message-flow blocks (one per GNN layer) and multi-layer sampling on a whole graph.
#pragma once

#include "tessel/core/csr.hpp"
#include "tessel/core/rng.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/sampling/id_map.hpp"
#include "tessel/sampling/neighbor_sampler.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace tessel::sampling {

// The bipartite message-flow graph of one GNN layer. Ids in dst/src are global ids of whatever
// id space the caller sampled in (original ids, relabeled ids, whole-graph ids); adj is in
// block-local ids: row i aggregates into dst[i], column j reads src[j]. The destinations come
// first among the sources in the same order (src[i] == dst[i] for i < num_dst), so a layer's
// self term for dst[i] is row i of its input.
struct Block {
  std::vector<NodeId> dst; // [num_dst]
  std::vector<NodeId> src; // [num_src], num_src >= num_dst
  LocalCsr adj;            // num_dst x num_src; row i = drawn in-neighbors of dst[i]

  std::int64_t num_dst() const { return static_cast<std::int64_t>(dst.size()); }
  std::int64_t num_src() const { return static_cast<std::int64_t>(src.size()); }
  std::int64_t num_edges() const { return adj.num_edges(); }
};

// A Block whose arrays are tensors on one device: what the forward pass reads where the blocks
// never leave the GPU. The destinations are src[0, num_dst), as in Block.
struct BlockTensors {
  std::int64_t num_dst = 0;
  std::int64_t num_src = 0;
  Tensor src;     // i64 [num_src]: global ids, destinations first, then first-seen order
  Tensor indptr;  // i64 [num_dst + 1]
  Tensor indices; // i32 [num_edges]: block-local source ids
  // Filled by whoever knows them (the sampler): i64 [num_src] original ids (dropout keys) and
  // whole-graph in-degrees (GCN normalization) of the sources.
  Tensor src_orig;
  Tensor src_degree;

  std::int64_t num_edges() const { return indices.defined() ? indices.numel() : 0; }
  // Host copy as a Block (dst, src, adj), for tests and checks.
  Block to_block() const;
};

// Builds blocks from sampled neighbor lists, deduplicating sources with a reused id map.
class BlockBuilder {
public:
  // Largest id space for which a dense map is allowed (8 bytes per possible id: 128 MiB).
  static constexpr std::int64_t kDenseMaxIds = std::int64_t{1} << 24;

  // id_bound > 0 promises every id is in [0, id_bound): up to kDenseMaxIds a dense array
  // replaces the hash map (about twice as fast while it stays in cache); ids are then checked
  // against the bound. 0 (or a larger bound) uses the hash map: any int64 ids.
  explicit BlockBuilder(std::int64_t id_bound = 0);

  // dst: distinct destination ids [n]; offsets [n + 1] and neighbors [offsets[n]]: the drawn
  // neighbors of dst[i] are neighbors[offsets[i], offsets[i+1]) (same id space as dst).
  // Sources are the destinations followed by every other neighbor in first-seen order (so the
  // result is a pure function of the inputs); adj keeps the neighbors' order within each row.
  // Host memory; single-threaded. Throws InputError if a destination repeats or the offsets
  // do not describe `neighbors`. `out` is overwritten, its capacity reused. When first_seen is
  // given it receives, for each source after the destinations (src[num_dst + k]), the index k
  // into `neighbors` where it first appears, so a caller can carry per-neighbor data (ids in
  // another space, degrees) over to the sources without a second lookup.
  void build(std::span<const NodeId> dst, std::span<const EdgeId> offsets,
             std::span<const NodeId> neighbors, Block& out,
             std::vector<EdgeId>* first_seen = nullptr);
  Block build(std::span<const NodeId> dst, std::span<const EdgeId> offsets,
              std::span<const NodeId> neighbors) {
    Block out;
    build(dst, offsets, neighbors, out);
    return out;
  }

  // The same relabelling as an op on tensors of one device: dst i64 [n] (distinct, >= 0),
  // offsets i64 [n + 1], neighbors i64 [offsets[n]] (>= 0) give out.src, out.indptr (offsets
  // itself, shared) and out.indices, identical to build()'s src and adj (the same first-seen
  // order). CPU tensors run build() (the code the CPU sampler uses); CUDA tensors run the CUDA
  // twin on the device's stream (a hash table of first positions, a scan, a scatter), which
  // waits for the device once to learn num_src and leaves everything else on the device.
  // src_orig and src_degree are left empty. Throws InputError as build() does (a repeated
  // destination, offsets that do not end at the neighbor count, negative ids on CUDA); the CUDA
  // twin does not check that the offsets are monotone (they come from a scan there).
  void build(const Tensor& dst, const Tensor& offsets, const Tensor& neighbors, BlockTensors& out);

private:
  IdHashMap map_;
  Block scratch_; // the CPU tensor form's result before it becomes tensors
  DenseIdMap dense_;
  bool use_dense_ = false;
};

// Multi-layer sampling on one whole graph (the P = 1 reference the distributed sampler must
// reproduce). Order of the result, for fanouts of length L:
//   blocks[l] is the block of GNN layer l, sampled with fanouts[l] and key.layer = l;
//   blocks[L-1].dst == seeds, blocks[l].dst == blocks[l+1].src, blocks[0].src are the nodes whose
//   input features the batch needs.
// Sampling runs from the output layer (l = L-1, starting at the seeds) back to the input, as in
// DGL: fanouts "15,10,5" give the input layer 15 draws per node and the seeds 5.
// Keeps its buffers between calls, so a training loop allocates only while batches grow.
class BlockSampler {
public:
  // graph: a whole graph whose rows are in canonical order for node_key (sort_rows_by_key).
  // node_key[v]: v's key for the RNG (its original id); empty means v itself. Both are
  // referenced, not copied: they must outlive the sampler.
  explicit BlockSampler(const Csr& graph, std::span<const NodeId> node_key = {});

  // seeds: distinct node ids of graph; fanouts: one per layer, each >= 0 or -1 (all);
  // base_key: seed/stream/epoch/step of this batch (layer is set per block). Fills `blocks`.
  void sample(std::span<const NodeId> seeds, std::span<const int> fanouts, const rng::Key& base_key,
              std::vector<Block>& blocks);

private:
  const Csr& graph_;
  std::span<const NodeId> node_key_;
  SampledGlobalNeighbors sampled_;
  std::vector<NodeId> row_keys_;
  BlockBuilder builder_;
};

// One-shot form of BlockSampler::sample (same arguments and order).
std::vector<Block> sample_blocks(const Csr& graph, std::span<const NodeId> seeds,
                                 std::span<const int> fanouts, const rng::Key& base_key,
                                 std::span<const NodeId> node_key = {});

} // namespace tessel::sampling
