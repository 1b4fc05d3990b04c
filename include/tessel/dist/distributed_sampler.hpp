// Data-centric distributed sampling: frontier nodes are sampled by their owners, input feature
// rows are fetched from their owners through a cache of hot remote rows.
#pragma once

#include "tessel/comm/communicator.hpp"
#include "tessel/core/rng.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/core/timer.hpp"
#include "tessel/partition/part.hpp"
#include "tessel/sampling/block.hpp"
#include "tessel/sampling/device_feature_store.hpp"
#include "tessel/sampling/device_graph.hpp"
#include "tessel/sampling/feature_cache.hpp"
#include "tessel/sampling/feature_rows.hpp"
#include "tessel/sampling/hop.hpp"
#include "tessel/sampling/id_map.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace tessel::dist {

// Byte and row counters since the last reset_counters(), this rank's share.
struct SamplerCounters {
  std::int64_t sampled_edges = 0;      // neighbor draws this rank made (for any requester)
  std::int64_t remote_requests = 0;    // node ids this rank sent to another owner: frontier
                                       // nodes to draw, or sources to tell their original id
                                       // and degree
  std::int64_t answer_ids = 0;         // neighbor ids that came back from other owners
  std::int64_t remote_adjacency = 0;   // sum of (degree + 1) of nodes sampled for other ranks
  std::int64_t input_rows = 0;         // rows of blocks[0].src over all steps
  std::int64_t remote_input_rows = 0;  // of them, owned by another rank
  std::int64_t fetched_rows = 0;       // remote rows fetched from owners (cache misses)
  std::int64_t cache_hits = 0;
  std::int64_t sample_bytes = 0;       // sampling requests sent and replies and answers received
};

// A dropout applied to fetched rows on their way into a step's input, in the same pass as their
// gather (p = 0: none): row i is keyed by row_ids[i], with the draws of kernels::dropout_forward.
struct RowDropout {
  rng::Key key;
  float p = 0.0f;
  std::span<const NodeId> row_ids;
};

// One per rank; every call marked collective must be made by all ranks in the same order.
// Node ids in blocks are relabeled global ids (part p owns [offsets[p], offsets[p+1])).
class DistributedSampler {
 public:
  // Sorts part.graph's rows by original id (the canonical order sampling needs). fanouts: one
  // per layer, input layer first (-1 = all neighbors); batch_size: seeds per rank per step.
  // comm is the control plane (host memory, counts); data, when given, is the data plane that
  // sample_device moves its device tensors over (the same ranks; comm otherwise).
  DistributedSampler(partition::Part& part, const partition::Manifest& manifest,
                     comm::Communicator& comm, std::uint64_t seed, std::vector<int> fanouts,
                     std::int64_t batch_size, comm::Communicator* data = nullptr);
  ~DistributedSampler();

  // Splits this rank's training nodes into the epoch's steps: each node goes to the step drawn
  // from (seed, epoch, its original id), so the global batch of a step is the same set for
  // every rank count, and each rank takes the seeds it owns (ascending by original id).
  // step_counts: global batch sizes. Collective (one allreduce).
  void assign_steps(int epoch, std::vector<std::vector<LocalId>>& step_seeds,
                    std::vector<std::int64_t>& step_counts, PhaseTimes& phases);

  // Samples the blocks of one step for `seeds` (owned local ids): blocks()[l] feeds layer l,
  // blocks().back().dst are the seeds. Draws use key (seed, sampling, epoch, step, layer) and
  // the nodes' original ids. Collective (3 alltoallv per layer and 2 more that ask owners for
  // the original ids and degrees of input-block sources the part does not hold; this rank's own
  // frontier nodes are drawn here and never enter the exchange).
  void sample(int epoch, std::uint32_t step, std::span<const LocalId> seeds, PhaseTimes& phases);
  // sample() for seeds given as distinct relabeled global ids, owned by any rank (link
  // prediction's endpoints): each is drawn by its owner, as frontier nodes are. Collective.
  void sample_nodes(int epoch, std::uint32_t step, std::span<const NodeId> seed_ids,
                    PhaseTimes& phases);
  const std::vector<sampling::Block>& blocks() const { return blocks_; }
  // Original ids and whole-graph in-degrees of blocks()[layer].src, in src order (from the part
  // for owned and halo nodes, from the owner once per node for the others: see hop()).
  std::span<const NodeId> src_orig(int layer) const { return src_orig_[layer]; }
  std::span<const std::int64_t> src_degree(int layer) const { return src_degree_[layer]; }

  // Chooses and fills the remote feature cache: policy degree ranks the halo by degree,
  // presample counts remote input nodes over a few presampled steps; none or an empty budget
  // disables it. Collective.
  void setup_cache(sampling::CachePolicy policy, const sampling::CacheBudget& budget,
                   sampling::OwnedFeatureRows& owned_rows);
  void setup_cache(sampling::CachePolicy policy, const sampling::CacheBudget& budget,
                   std::span<const float> owned_features);
  const sampling::FeatureCache& cache() const { return cache_; }

  // Feature rows [nodes, F] of `nodes` (global ids): owned rows from owned_features, cached
  // remote rows from the cache, the rest fetched from their owners in one exchange; then all
  // of them gathered into the result in one pass, with `dropout` applied. Collective.
  // Owned rows are read through owned_rows (in memory, or from the part file: see
  // sampling::OwnedFeatureRows), also those that other ranks ask this one for.
  Tensor fetch_features(std::span<const NodeId> nodes, sampling::OwnedFeatureRows& owned_rows,
                        PhaseTimes& phases, const RowDropout& dropout = {});
  Tensor fetch_features(std::span<const NodeId> nodes, std::span<const float> owned_features,
                        PhaseTimes& phases, const RowDropout& dropout = {});

  // Owners draw on `device` from here on (the CUDA sampler: the same draws, answers written on
  // the GPU): the owned graph goes to device memory or to pinned host memory read over UVA, as
  // `placement` says (automatic: by size); the choice is logged. A CUDA device needs a CUDA
  // build; Device::cpu() (any build) takes the device graph's CPU twin (host memory, the CPU
  // sampler's code), which runs sample_device on the CPU: the path CI tests without a GPU.
  void sample_on_device(Device device, sampling::GraphPlacement placement);
  // Whether sample_device can run: owners draw on the device graph (at any rank count) and
  // route_on_host(true) was not asked for.
  bool device_resident() const;
  // The fallback: with true, sample_device refuses and callers route through sample() (frontier
  // and answers in host memory over the control plane, blocks built on the host) even where the
  // owners draw on the device graph.
  void route_on_host(bool on_host) { route_on_host_ = on_host; }
  // sample() with the blocks built and kept on the device (after sample_on_device): draws,
  // relabelling (BlockBuilder's CUDA twin, or build() on the CPU), the sources' original ids and
  // degrees, all on `stream` (the device's main stream by default; the CPU twin ignores it): the
  // exchanges over `data` are given it, and the sampler's kernels, copies and buffers (whose
  // fronts take no stream) reach it through a device_memory::StreamScope opened on it for the
  // call. A stream other than the main one needs a `data` communicator no other stream uses.
  // The same blocks as sample(). At more than one rank the
  // frontier is routed on the device too (see hop_device): per-rank counts cross the control
  // plane, the ids the data plane. Collective at more than one rank. device_blocks()[l] feeds
  // layer l; device_blocks()[0].src are the step's input nodes, which fetch_features_device
  // takes where they are. Each call makes new tensors, so a caller may keep a step's blocks
  // while the next is sampled.
  void sample_device(int epoch, std::uint32_t step, std::span<const LocalId> seeds,
                     PhaseTimes& phases, DeviceStream stream = DeviceStream::main());
  const std::vector<sampling::BlockTensors>& device_blocks() const { return device_blocks_; }
  // Moves device_blocks() out, leaving it empty. For blocks used on another stream than the one
  // they were sampled on: the sampler then drops no reference to them on its own stream, so the
  // caching allocator never hands their memory to its stream while another may still read it.
  std::vector<sampling::BlockTensors> take_device_blocks() { return std::move(device_blocks_); }
  // Where the GPU reads the graph (after sample_on_device).
  sampling::GraphPlacement graph_placement() const;

  // The GPU's feature store (instead of setup_cache): the part's own rows in pinned host memory
  // read over UVA, and the hottest rows, owned or remote, copied to device memory once. Policy
  // degree ranks owned and halo nodes by degree, presample by how often a few presampled steps
  // need them as input; the budget sizes it as for setup_cache (a ratio of owned + halo rows);
  // none or no budget caches nothing. Collective; a CUDA device needs a CUDA build,
  // Device::cpu() takes the store's CPU twin (the path CI tests without a GPU).
  void setup_device_store(sampling::CachePolicy policy, const sampling::CacheBudget& budget,
                          Device device);
  // Rows [nodes, F] on the store's device from its tiers; remote rows the cache lacks come from
  // their owners over the data plane (see fetch_planned_rows) straight into device memory, and
  // the gather reads them there (admitting some into the cache). All on `stream`, as
  // sample_device. Collective.
  Tensor fetch_features_device(std::span<const NodeId> nodes, PhaseTimes& phases,
                               DeviceStream stream = DeviceStream::main());
  // The same from nodes i64 [n] on the store's device (device_blocks()[0].src): the store sorts
  // them into tiers on the device, and only the remote ids its hot rows lack come to the host
  // (for the admission slots and the owners' counts).
  Tensor fetch_features_device(const Tensor& nodes, PhaseTimes& phases,
                               DeviceStream stream = DeviceStream::main());
  // The store's per-tier counters (after setup_device_store), null on the CPU.
  const sampling::DeviceFeatureStore* device_store() const { return device_store_.get(); }
  // Rows the feature cache holds (host cache or device store).
  std::int64_t cache_rows() const {
    return device_store_ ? device_store_->cache_rows() : cache_.size();
  }

  // Whether fetch_features reads its rows in the order they lie in memory (environment
  // TESSEL_GATHER_SORT=1) instead of the step's order (the default, measured faster on the CPU
  // tried). Same result either way.
  static bool gather_sorted();

  const SamplerCounters& counters() const { return counters_; }
  // Process CPU seconds spent in the "sample" phase since the last reset_counters(): unlike its
  // wall time, not inflated when other processes share the cores.
  double sample_cpu_seconds() const { return sample_cpu_seconds_; }
  void reset_counters();

private:
  // One hop's draws in frontier order: the draws of frontier node i are ids[offsets[i],
  // offsets[i + 1]) (global ids). Grow-only buffers: offsets.back() is the draw count, not
  // ids.size().
  struct HopDraws {
    std::vector<EdgeId> offsets;
    std::vector<NodeId> ids;
  };
  // The hop interface (src/dist/hop_route.hpp) and its two routes: one step's hops and blocks in
  // host memory (sample()) or on the device (sample_device() at more than one rank).
  class HopRoute;
  class HostRoute;
  class DeviceRoute;
  // One step's hops and blocks through `route`, from the output layer back to the input.
  void run_hops(HopRoute& route, int epoch, std::uint32_t step, std::span<const NodeId> seed_ids,
                PhaseTimes& phases);
  // The relabeled global ids of `seeds` (owned local ids; checked).
  std::vector<NodeId> seed_global_ids(std::span<const LocalId> seeds) const;
  // Draws `fanout` neighbors of each frontier node (global ids) into `draws` with `key`, and
  // fills the frontier's original ids and degrees (from part_ or from the nodes' owners);
  // draws == nullptr fetches only those. Collective.
  void hop(std::span<const NodeId> frontier, int fanout, const rng::Key& key, PhaseTimes& phases,
           HopDraws* draws, std::vector<NodeId>& frontier_orig,
           std::vector<std::int64_t>& frontier_degree);
  // hop()'s steps: route, answer (request_rows, draw_rows, pack_replies), return, merge.
  struct HopExchange;
  void route_requests(HopExchange& x, std::vector<NodeId>& frontier_orig,
                      std::vector<std::int64_t>& frontier_degree);
  void answer_requests(HopExchange& x, int fanout, const rng::Key& key);
  std::int64_t request_rows(const HopExchange& x, std::span<LocalId> rows,
                            std::span<NodeId> row_keys) const;
  void draw_rows(HopExchange& x, std::span<const LocalId> rows, std::span<const NodeId> row_keys,
                 int fanout, const rng::Key& key);
  void pack_replies(HopExchange& x, std::span<const LocalId> rows);
  void return_replies(const HopExchange& x);
  void fill_frontier_info(const HopExchange& x, std::vector<NodeId>& frontier_orig,
                          std::vector<std::int64_t>& frontier_degree) const;
  void merge_draws(const HopExchange& x);
  // sample_device at more than one rank (run_hops through the device route: hop_device for
  // every hop, then relabelling).
  void sample_device_routed(int epoch, std::uint32_t step, std::span<const LocalId> seeds,
                            PhaseTimes& phases, DeviceStream stream);
  // hop() on the device: frontier i64 [n] (global ids); fills *offsets i64 [n + 1] and *draws
  // (global ids) in frontier order, and the frontier's original ids and degrees; draws ==
  // nullptr asks owners only for the original ids and degrees the part lacks. Its exchanges
  // over the data plane run on `stream`. Collective.
  void hop_device(const Tensor& frontier, int fanout, const rng::Key& key, PhaseTimes& phases,
                  Tensor* offsets, Tensor* draws, Tensor& frontier_orig, Tensor& frontier_degree,
                  DeviceStream stream);
  // hop_device()'s steps: route, send, answer (with count_device_answers), return.
  struct DeviceHopExchange;
  void route_device(DeviceHopExchange& x, const Tensor& frontier, Tensor& frontier_orig,
                    Tensor& frontier_degree);
  void send_device_requests(DeviceHopExchange& x);
  void answer_device_requests(DeviceHopExchange& x, int fanout, const rng::Key& key);
  void count_device_answers(DeviceHopExchange& x, const Tensor& request_offsets,
                            const Tensor& in_degree);
  void return_device_replies(DeviceHopExchange& x, std::int64_t n);
  // The "presample" cache policy's candidates: input nodes of the first steps of a presampled
  // epoch (epoch key 0, never used by training, which starts at 1, so no training draw is
  // reused), scored by how many of those steps need them; only nodes another rank owns when
  // remote_only. Collective (the steps' sampling is).
  void presampled_inputs(bool remote_only, std::vector<NodeId>& candidates,
                         std::vector<std::int64_t>& score);
  // The network tier of fetch_features_device after the store's plan (summary) listed
  // network_ids_: their rows from exchange_rows, then the store's gather. Collective.
  Tensor fetch_planned_rows(const sampling::PlanSummary& summary, DeviceStream stream);
  // Rows f32 [ids, F] on the store's device of remote `ids`: the ids go to their owners over the
  // data plane (per-rank counts over the control plane), each owner gathers their rows on its
  // device from its store (serve()), and the rows come back over the data plane in routed order:
  // the row of ids[k] is row row_of[k]; the data plane's transfers run on `stream`. Collective
  // (at one rank, ids must be empty).
  Tensor exchange_rows(std::span<const NodeId> ids, std::vector<std::int64_t>& row_of,
                       DeviceStream stream);
  // Feature rows of remote nodes from their owners, left where they arrive: ids[k]'s row is
  // row row_of[k] of `received` ([ids.size(), feature_dim], in routed order). Collective.
  void fetch_remote_rows(std::span<const NodeId> ids, sampling::OwnedFeatureRows& owned_rows,
                         std::vector<float>& received, std::vector<std::int64_t>& row_of);

  partition::Part& part_;
  const partition::Manifest& manifest_;
  comm::Communicator& comm_;
  // The communicator the sampler's device tensors cross (sample_device's exchanges): the
  // trainer gives the sampler one of its own where it samples on a stream of its own.
  comm::Communicator& data_;
  std::uint64_t seed_;
  std::vector<int> fanouts_;
  std::int64_t batch_size_;
  // Halo node h (local id num_owned + h) -> its relabeled global id; owned local id l is
  // offset + l, so only the halo's are held.
  std::vector<NodeId> halo_global_;
  NodeId global_of(LocalId l) const {
    return l < num_owned_ ? offset_ + l : halo_global_[static_cast<std::size_t>(l - num_owned_)];
  }
  // Every local id's global id [owned + halo] (the device graph's table, the cache's candidates).
  std::vector<NodeId> local_globals() const;
  std::int64_t num_owned_ = 0;
  NodeId offset_ = 0;
  std::vector<sampling::Block> blocks_;
  sampling::BlockBuilder builder_;
  sampling::OwnerRouting routing_;
  sampling::SampledNeighbors sampled_;
  std::vector<HopDraws> draws_;                                    // [layer]
  std::vector<std::vector<NodeId>> src_orig_;                      // [layer][src]
  std::vector<std::vector<std::int64_t>> src_degree_;              // [layer][src]
  // The seeds' original ids and degrees, which the output hop fills and nothing reads (they
  // are blocks_.back().src's first entries, filled by the next hop).
  std::vector<NodeId> seed_orig_;
  std::vector<std::int64_t> seed_degree_;
  // global id -> halo index h of the part's halo nodes (through halo_global_)
  sampling::PositionIndex halo_local_;
  // Per request, served and received: the draw count (with draws), then the original id and
  // degree where the request was flagged.
  std::vector<std::int64_t> replies_, back_replies_;
  std::vector<std::int64_t> request_pos_;      // frontier position of each request sent
  std::vector<std::int64_t> back_reply_start_; // where each reply starts in back_replies_
  std::vector<EdgeId> back_start_;             // where each answer starts in back_ids_
  std::vector<NodeId> answer_ids_, back_ids_;  // global id per draw
  sampling::FeatureCache cache_;
  SamplerCounters counters_;
  double sample_cpu_seconds_ = 0;
  std::unique_ptr<sampling::DeviceGraph> device_graph_;  // set: owners draw on the GPU
  std::vector<EdgeId> device_offsets_;                    // draw offsets of the GPU's answers
  std::vector<sampling::BlockTensors> device_blocks_;     // sample_device's blocks
  bool route_on_host_ = false;                            // route_on_host(true): no sample_device
  std::unique_ptr<HostRoute> host_route_;      // set up by the constructor
  std::unique_ptr<DeviceRoute> device_route_;  // set up by sample_on_device
  // On the device graph's device: the parts' id ranges [parts + 1], and the owned and halo nodes
  // sorted by global id with their original ids and degrees (sample_device's routing).
  Tensor owner_offsets_, known_ids_, known_orig_, known_degree_;
  std::unique_ptr<sampling::DeviceFeatureStore> device_store_;  // set: features on the GPU
  std::vector<NodeId> network_ids_;          // a step's rows from owners, in the plan's order
  std::vector<std::int64_t> network_row_of_; // where each arrives among the received rows
};

}  // namespace tessel::dist
