// Assigning nodes to parts: METIS k-way with multi-constraint vertex weights, or seeded random.
#include "steps.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/progress.hpp"
#include "tessel/core/rng.hpp"
#include "tessel/core/usable_memory.hpp"

#include <metis.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <type_traits>

namespace tessel::partition::detail {

static_assert(
    std::is_same_v<idx_t, std::int32_t>,
    "Tessel passes its 32-bit node ids to METIS directly; build METIS with IDXTYPEWIDTH 32");

namespace {

const char* metis_status_name(int status) {
  switch (status) {
  case METIS_ERROR_INPUT:
    return "METIS_ERROR_INPUT (erroneous inputs or options)";
  case METIS_ERROR_MEMORY:
    return "METIS_ERROR_MEMORY (insufficient memory)";
  case METIS_ERROR:
    return "METIS_ERROR";
  default:
    return "an unknown status";
  }
}

} // namespace

std::vector<std::int32_t> assign_random(std::int64_t num_nodes, int num_parts, std::uint64_t seed) {
  TESSEL_ASSERT(num_parts >= 1 && num_parts <= num_nodes, "assign_random: {} parts for {} nodes",
                num_parts, num_nodes);
  std::vector<std::int32_t> order(static_cast<std::size_t>(num_nodes));
  std::iota(order.begin(), order.end(), 0);
  // Fisher-Yates driven by the counter-based generator: the same on every platform.
  rng::Sequence draws(rng::Key{seed, rng::Stream::partition}, 0);
  for (std::int64_t i = num_nodes - 1; i > 0; --i)
    std::swap(order[i], order[draws.next_below(static_cast<std::uint64_t>(i) + 1)]);
  std::vector<std::int32_t> part(static_cast<std::size_t>(num_nodes));
  for (std::int64_t i = 0; i < num_nodes; ++i)
    part[order[i]] = static_cast<std::int32_t>(i * num_parts / num_nodes);
  return part;
}

VertexWeights vertex_weights(const GraphCsr& training, const std::vector<std::uint8_t>& is_train,
                             const Balance& balance) {
  const std::int64_t n = training.num_rows;
  TESSEL_ASSERT(static_cast<std::int64_t>(is_train.size()) == n, "vertex_weights: sizes disagree");
  // One weight column per constraint with a non-zero total (METIS divides by the totals).
  std::vector<std::vector<std::int32_t>> columns;
  VertexWeights w;
  if (balance.nodes) {
    columns.emplace_back(static_cast<std::size_t>(n), 1);
    w.names.emplace_back("nodes");
  }
  if (balance.train) {
    if (std::find(is_train.begin(), is_train.end(), 1) != is_train.end()) {
      columns.emplace_back(is_train.begin(), is_train.end());
      w.names.emplace_back("train");
    } else {
      log::info("partition: no training nodes; not balancing them");
    }
  }
  if (balance.edges) {
    if (training.num_edges() > 0) {
      std::vector<std::int32_t> degree(static_cast<std::size_t>(n));
      for (std::int64_t v = 0; v < n; ++v)
        degree[v] = static_cast<std::int32_t>(training.degree(v));
      columns.push_back(std::move(degree));
      w.names.emplace_back("edges");
    } else {
      log::info("partition: graph has no edges; not balancing them");
    }
  }
  if (columns.empty()) {
    columns.emplace_back(static_cast<std::size_t>(n), 1);
    w.names.emplace_back("nodes");
  }
  w.ncon = static_cast<int>(columns.size());
  w.values.resize(static_cast<std::size_t>(n) * columns.size());
  for (std::int64_t v = 0; v < n; ++v)
    for (std::size_t c = 0; c < columns.size(); ++c)
      w.values[v * columns.size() + c] = columns[c][v];
  return w;
}

std::vector<std::int32_t> run_metis(std::int64_t n, const EdgeId* xadj64,
                                    const std::int32_t* adjncy, const std::int32_t* adjwgt,
                                    const std::int32_t* vwgt, int ncon, int num_parts,
                                    std::uint64_t seed, double imbalance,
                                    std::int64_t* objval_out) {
  const std::int64_t m = xadj64[n];
  std::vector<idx_t> xadj(static_cast<std::size_t>(n) + 1);
  for (std::int64_t v = 0; v <= n; ++v)
    xadj[v] = static_cast<idx_t>(xadj64[v]);

  idx_t options[METIS_NOPTIONS];
  int status = METIS_SetDefaultOptions(options);
  if (status != METIS_OK)
    TESSEL_LIB_FAIL("METIS_SetDefaultOptions returned {}", metis_status_name(status));
  options[METIS_OPTION_SEED] = static_cast<idx_t>(seed & 0x7fffffffu);
  options[METIS_OPTION_NUMBERING] = 0;
  std::vector<real_t> ubvec(static_cast<std::size_t>(ncon), static_cast<real_t>(1.0 + imbalance));

  idx_t nvtxs = static_cast<idx_t>(n);
  idx_t nc = ncon;
  idx_t nparts = num_parts;
  idx_t objval = 0;
  std::vector<idx_t> part(static_cast<std::size_t>(n));
  // METIS reads these arrays without writing them; they are passed as they are, no copy.
  idx_t empty = 0;
  auto* adj = m == 0 ? &empty : const_cast<idx_t*>(adjncy);
  auto* ewgt = adjwgt == nullptr || m == 0 ? nullptr : const_cast<idx_t*>(adjwgt);
  {
    ProgressLine progress("partition: METIS", 0); // one blocking call: elapsed time only
    status = METIS_PartGraphKway(&nvtxs, &nc, xadj.data(), adj, const_cast<idx_t*>(vwgt), nullptr,
                                 ewgt, &nparts, nullptr, ubvec.data(), options, &objval,
                                 part.data());
  }
  if (status != METIS_OK)
    TESSEL_LIB_FAIL(
        "METIS_PartGraphKway ({} nodes, {} edges, {} parts, {} constraints) returned {}", n, m,
        num_parts, ncon, metis_status_name(status));
  for (std::int64_t v = 0; v < n; ++v)
    if (part[v] < 0 || part[v] >= num_parts)
      TESSEL_LIB_FAIL("METIS_PartGraphKway put node {} in part {} of {}", v, part[v], num_parts);
  *objval_out = objval;
  return part;
}

MetisResult assign_metis(const GraphCsr& symmetric, const GraphCsr& training,
                         const std::vector<std::uint8_t>& is_train, const Balance& balance,
                         int num_parts, std::uint64_t seed, double imbalance,
                         std::int64_t max_index, std::int64_t metis_max_edges) {
  const std::int64_t n = symmetric.num_rows;
  const std::int64_t m = symmetric.num_edges();
  // Refuse before any METIS array exists: adjncy holds node ids as idx_t. A graph with more
  // edges than idx_t can count goes through Tessel's coarsening, which brings it under.
  TESSEL_EXPECTS(n <= max_index,
                 "graph has {} nodes; METIS (32-bit idx_t) takes at most {} (use --method random)",
                 n, max_index);
  TESSEL_ASSERT(training.num_rows == n && static_cast<std::int64_t>(is_train.size()) == n,
                "assign_metis: sizes disagree");
  TESSEL_ASSERT(num_parts >= 2 && num_parts <= n, "assign_metis: {} parts for {} nodes", num_parts,
                n);

  const VertexWeights weights = vertex_weights(training, is_train, balance);
  MetisResult result;
  const std::int64_t budget = std::min(metis_max_edges, max_index);
  if (m > budget) {
    log::info("partition: {} directed edges is more than METIS is given ({}); coarsening first", m,
              budget);
    // Coarse levels are built (faster to visit than through the fine graph) within half the
    // memory this process may still take; the partition is the same either way.
    const MemoryHeadroom room = memory_headroom();
    const double fine_bytes = static_cast<double>(n) * sizeof(EdgeId) +
                              static_cast<double>(m) * sizeof(std::int32_t);
    const double share = room.bytes < 0 ? 0.5 : 0.5 * static_cast<double>(room.bytes) / fine_bytes;
    log::info("partition: coarse levels built within {:.0f} MiB ({})", share * fine_bytes / 1048576.0,
              room.bytes < 0 ? std::string("free memory unknown: half the graph's size")
                             : fmt::format("half the {:.0f} MiB of {}",
                                           static_cast<double>(room.bytes) / 1048576.0,
                                           room.source));
    result = partition_multilevel(symmetric, weights, num_parts, seed, imbalance, budget,
                                  max_index, share);
  } else {
    result.part =
        run_metis(n, symmetric.indptr.data(), symmetric.indices.data(), nullptr,
                  weights.values.data(), weights.ncon, num_parts, seed, imbalance, &result.objval);
  }
  result.constraints = weights.names;
  return result;
}

int fill_empty_parts(std::vector<std::int32_t>& part, int num_parts) {
  std::vector<std::int64_t> size(static_cast<std::size_t>(num_parts), 0);
  for (auto p : part)
    ++size[p];
  int moved = 0;
  for (int q = 0; q < num_parts; ++q) {
    if (size[q] > 0) continue;
    const auto largest =
        static_cast<std::int32_t>(std::max_element(size.begin(), size.end()) - size.begin());
    TESSEL_ASSERT(size[largest] > 1, "fill_empty_parts: more parts than nodes");
    // The largest part's highest-numbered node: deterministic.
    for (std::int64_t v = static_cast<std::int64_t>(part.size()) - 1; v >= 0; --v) {
      if (part[v] == largest) {
        part[v] = q;
        break;
      }
    }
    --size[largest];
    ++size[q];
    ++moved;
  }
  return moved;
}

Relabeling relabel(std::vector<std::int32_t> part, int num_parts) {
  Relabeling r;
  r.num_parts = num_parts;
  const auto n = static_cast<std::int64_t>(part.size());
  r.offsets.assign(static_cast<std::size_t>(num_parts) + 1, 0);
  for (auto p : part) {
    TESSEL_ASSERT(p >= 0 && p < num_parts, "relabel: part {} out of [0, {})", p, num_parts);
    ++r.offsets[static_cast<std::size_t>(p) + 1];
  }
  for (int p = 0; p < num_parts; ++p)
    r.offsets[p + 1] += r.offsets[p];
  std::vector<NodeId> cursor(r.offsets.begin(), r.offsets.end() - 1);
  r.new_id.resize(static_cast<std::size_t>(n));
  r.orig_of.resize(static_cast<std::size_t>(n));
  for (std::int64_t v = 0; v < n; ++v) {
    const auto g = static_cast<std::int32_t>(cursor[part[v]]++);
    r.new_id[v] = g;
    r.orig_of[g] = static_cast<std::int32_t>(v);
  }
  r.part = std::move(part);
  return r;
}

void relabel_columns(GraphCsr& graph, const Relabeling& relabeling) {
  const std::int64_t m = graph.num_edges();
  const auto& new_id = relabeling.new_id;
#pragma omp parallel for schedule(static)
  for (std::int64_t e = 0; e < m; ++e)
    graph.indices[e] = new_id[graph.indices[e]];
}

} // namespace tessel::partition::detail
