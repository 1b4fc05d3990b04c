// CPU twin of DeviceGraph: the device-resident sampling path on Device::cpu(), drawing with the
// CPU sampler (sample_neighbors), so its draws are the CPU sampler's by construction.
#include "cpu/device_graph_host.hpp"

#include "tessel/core/error.hpp"

#include <algorithm>

namespace tessel::sampling {

DeviceGraph::HostTwin::HostTwin(const LocalCsr& graph_in, std::span<const NodeId> keys,
                                std::span<const std::int64_t> degrees,
                                std::span<const NodeId> answer_table)
    : graph(graph_in), row_keys(keys.begin(), keys.end()),
      row_degrees(degrees.begin(), degrees.end()),
      answers(answer_table.begin(), answer_table.end()) {
  TESSEL_EXPECTS(static_cast<std::int64_t>(row_keys.size()) == graph.num_rows,
                 "DeviceGraph: {} row keys for {} rows", row_keys.size(), graph.num_rows);
  TESSEL_EXPECTS(static_cast<std::int64_t>(row_degrees.size()) == graph.num_rows,
                 "DeviceGraph: {} row degrees for {} rows", row_degrees.size(), graph.num_rows);
  TESSEL_EXPECTS(static_cast<std::int64_t>(answers.size()) == graph.num_cols,
                 "DeviceGraph: {} answer ids for {} columns, expected one per column",
                 answers.size(), graph.num_cols);
}

std::int64_t DeviceGraph::HostTwin::bytes() const {
  return static_cast<std::int64_t>(
      graph.indptr.size() * sizeof(EdgeId) + graph.indices.size() * sizeof(LocalId) +
      row_keys.size() * sizeof(NodeId) + row_degrees.size() * sizeof(std::int64_t) +
      answers.size() * sizeof(NodeId));
}

void DeviceGraph::HostTwin::draw(int fanout, const rng::Key& key) {
  keys_.resize(rows_.size());
  for (std::size_t i = 0; i < rows_.size(); ++i)
    keys_[i] = row_keys[static_cast<std::size_t>(rows_[i])];
  sample_neighbors(graph, std::span<const LocalId>(rows_), keys_, fanout, key, sampled_);
}

void DeviceGraph::HostTwin::sample(std::span<const LocalId> rows, int fanout, const rng::Key& key,
                                   std::vector<EdgeId>& offsets, std::vector<NodeId>& out) {
  for (const LocalId r : rows)
    TESSEL_ASSERT(r >= 0 && r < graph.num_rows, "device sampling: row {} outside [0, {})", r,
                  graph.num_rows);
  rows_.assign(rows.begin(), rows.end());
  draw(fanout, key);
  offsets.assign(sampled_.offsets.begin(), sampled_.offsets.end());
  const auto total = static_cast<std::size_t>(sampled_.offsets.back());
  if (out.size() < total) out.resize(total);
  for (std::size_t d = 0; d < total; ++d)
    out[d] = answers[static_cast<std::size_t>(sampled_.neighbors[d])];
}

std::int64_t DeviceGraph::HostTwin::sample(const Tensor& frontier, NodeId first_row, int fanout,
                                           const rng::Key& key, Tensor& offsets, Tensor& draws) {
  TESSEL_EXPECTS(frontier.defined() && frontier.dim() == 1 && frontier.dtype() == DType::i64 &&
                     frontier.device().is_cpu(),
                 "device sampling: frontier is {}, expected i64 [n] on cpu", frontier.describe());
  TESSEL_EXPECTS(fanout >= kAllNeighbors, "device sampling: fanout {} is invalid", fanout);
  const std::int64_t n = frontier.numel();
  const NodeId* ids = frontier.data<NodeId>();
  rows_.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const NodeId r = ids[i] - first_row;
    TESSEL_EXPECTS(r >= 0 && r < graph.num_rows,
                   "device sampling: frontier node {} is not among this graph's rows [{}, {})",
                   ids[i], first_row, first_row + graph.num_rows);
    rows_[static_cast<std::size_t>(i)] = static_cast<LocalId>(r);
  }
  draw(fanout, key);
  offsets = Tensor::from_vector(sampled_.offsets, {n + 1});
  const std::int64_t total = sampled_.offsets.back();
  draws = Tensor::empty({total}, DType::i64);
  NodeId* out = draws.data<NodeId>();
  for (std::int64_t d = 0; d < total; ++d)
    out[d] = answers[static_cast<std::size_t>(sampled_.neighbors[static_cast<std::size_t>(d)])];
  return total;
}

void DeviceGraph::HostTwin::row_info(const Tensor& ids, NodeId first_row, Tensor& orig,
                                     Tensor& degree) const {
  TESSEL_EXPECTS(ids.defined() && ids.dim() == 1 && ids.dtype() == DType::i64 &&
                     ids.device().is_cpu(),
                 "device sampling: ids are {}, expected i64 [n] on cpu", ids.describe());
  const std::int64_t n = ids.numel();
  orig = Tensor::empty({n}, DType::i64);
  degree = Tensor::empty({n}, DType::i64);
  const NodeId* in = ids.data<NodeId>();
  NodeId* o = orig.data<NodeId>();
  std::int64_t* d = degree.data<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i) {
    const NodeId r = in[i] - first_row;
    const bool inside = r >= 0 && r < graph.num_rows;
    o[i] = inside ? row_keys[static_cast<std::size_t>(r)] : -1;
    d[i] = inside ? row_degrees[static_cast<std::size_t>(r)] : -1;
  }
}

Tensor DeviceGraph::HostTwin::upload(std::span<const NodeId> ids) const {
  Tensor out = Tensor::empty({static_cast<std::int64_t>(ids.size())}, DType::i64);
  std::copy(ids.begin(), ids.end(), out.data<NodeId>());
  return out;
}

} // namespace tessel::sampling
