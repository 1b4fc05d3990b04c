// A partition's graph sampled on a device: on a GPU, CSR and per-node answers in device memory or
// in pinned host memory read over UVA when the graph does not fit; on the CPU, its twin.
#pragma once

#include "tessel/core/csr.hpp"
#include "tessel/core/option_words.hpp"
#include "tessel/core/rng.hpp"
#include "tessel/core/tensor.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tessel::sampling {

// Where the sampled graph lives (--graph-placement).
enum class GraphPlacement : std::uint8_t {
  device,    // device memory: fastest, needs the bytes on the GPU
  pinned,    // page-locked host memory mapped into the GPU's address space (UVA reads over PCIe)
  automatic, // a request only: choose_graph_placement picks one of the two by size
};
inline std::span<const OptionWord<GraphPlacement>> option_words(GraphPlacement) {
  static constexpr OptionWord<GraphPlacement> words[] = {{"auto", GraphPlacement::automatic},
                                                         {"device", GraphPlacement::device},
                                                         {"pinned", GraphPlacement::pinned}};
  return words;
}

// The placement for `requested` of a graph of `bytes` on `device`. automatic takes device memory
// when the graph needs at most a quarter of the GPU's free memory (the rest is left to features,
// activations and the cache), else pinned. `reason` receives one line saying what was chosen and
// why.
GraphPlacement choose_graph_placement(GraphPlacement requested, std::int64_t bytes, Device device,
                                      std::string& reason);

// The graph one rank answers sampling requests from, on a device. Rows are the part's owned
// nodes (in-neighbor lists over owned + halo columns, canonical order); for every column u it
// keeps the answer an owner sends for a draw of u: its global id (the requester has no use for
// more per draw: see DistributedSampler::hop). The draws are the CPU sampler's
// (sampling::floyd_positions keyed by each row's original id), so a GPU rank and a CPU rank
// answer the same request with the same neighbors in the same order. On a CUDA device (builds
// with TESSEL_WITH_CUDA; the constructor throws in others) the CUDA kernels draw; on
// Device::cpu() (every build) a CPU twin keeps the arrays in host memory and draws with the CPU
// sampler itself, so the device-resident sampling path runs, and is tested, without a GPU.
class DeviceGraph {
public:
  // graph: num_rows owned rows over num_cols columns, in canonical order; row_keys: the
  // original id of each row [num_rows]; row_degrees: its whole-graph in-degree [num_rows];
  // answers: [num_cols]. Copies them to `device` or to
  // mapped pinned host memory (on Device::cpu(): to host memory, whatever `placement` says,
  // and placement() is device). Throws InputError for a row of 2^32 or more neighbors on CUDA.
  DeviceGraph(const LocalCsr& graph, std::span<const NodeId> row_keys,
              std::span<const std::int64_t> row_degrees, std::span<const NodeId> answers,
              Device device, GraphPlacement placement);
  ~DeviceGraph();
  DeviceGraph(const DeviceGraph&) = delete;
  DeviceGraph& operator=(const DeviceGraph&) = delete;

  GraphPlacement placement() const;
  // Bytes of the CSR, row keys and answers (wherever they live).
  std::int64_t bytes() const;

  // Draws min(fanout, degree) neighbors of each row in `rows` (local ids < num_rows, host
  // memory) with `key` on the GPU and returns, in host memory, offsets [rows + 1] (draws of
  // request i are [offsets[i], offsets[i+1])) and answers[d] for draw d.
  // `answers` only grows (its capacity is reused). Synchronous on the device's stream.
  void sample(std::span<const LocalId> rows, int fanout, const rng::Key& key,
              std::vector<EdgeId>& offsets, std::vector<NodeId>& answers);

  // The device-resident form, for a frontier whose nodes are all rows of this graph (at one
  // rank the whole frontier; at more, the requests routed to this owner): frontier i64 [n] global ids on the device, row = id - first_row. Fills
  // offsets i64 [n + 1] and draws i64 [offsets[n]] (the answers: global ids) on the device, on
  // the device's stream (ordered with the model's kernels), and returns the draw count, for
  // which it waits once. The same draws as sample(). Throws InputError for an id outside the
  // rows.
  std::int64_t sample(const Tensor& frontier, NodeId first_row, int fanout, const rng::Key& key,
                      Tensor& offsets, Tensor& draws);
  // orig and degree i64 [n] on the device: the original id and degree of row ids[i] - first_row
  // (-1 for an id outside the rows), on the device's stream, without waiting.
  void row_info(const Tensor& ids, NodeId first_row, Tensor& orig, Tensor& degree);
  // ids copied to an i64 tensor on the device, asynchronously on the device's stream.
  Tensor upload(std::span<const NodeId> ids);

  struct Impl;     // the CUDA side
  struct HostTwin; // the CPU twin (Device::cpu())

private:
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<HostTwin> host_; // set: the graph lives on the CPU

};

} // namespace tessel::sampling
