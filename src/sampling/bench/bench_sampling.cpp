// Micro-benchmark: sampled edges per second of multi-layer block sampling on a power-law graph.
#include "tessel/core/csr.hpp"
#include "tessel/core/rng.hpp"
#include "tessel/core/timer.hpp"
#include "tessel/sampling/block.hpp"
#include "tessel/sampling/neighbor_sampler.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <functional>
#include <numeric>
#include <sstream>
#include <vector>

using namespace tessel;

namespace {

// Undirected graph with a power-law-ish degree tail: endpoint = floor(n * u^2) puts density
// ~ x^-1/2 on node x (degree tail exponent ~3, like preferential attachment); ids are then
// shuffled so hubs are scattered in memory as in real datasets. No self loops or duplicates.
Csr make_power_law_graph(std::int64_t num_nodes, std::int64_t num_edges, std::uint64_t seed) {
  rng::Sequence draw(rng::Key{seed, rng::Stream::synthetic}, 0);
  std::vector<NodeId> relabel(static_cast<std::size_t>(num_nodes));
  std::iota(relabel.begin(), relabel.end(), 0);
  for (std::int64_t i = num_nodes - 1; i > 0; --i)
    std::swap(relabel[i], relabel[draw.next_below(static_cast<std::uint64_t>(i) + 1)]);
  std::vector<std::uint64_t> pairs;
  pairs.reserve(static_cast<std::size_t>(num_edges * 11 / 10));
  while (static_cast<std::int64_t>(pairs.size()) < num_edges) {
    const auto missing = num_edges - static_cast<std::int64_t>(pairs.size());
    for (std::int64_t k = 0; k < missing + missing / 10 + 16; ++k) {
      const double a = draw.next_double(), b = draw.next_double();
      auto u = relabel[static_cast<std::size_t>(static_cast<double>(num_nodes) * a * a)];
      auto v = relabel[static_cast<std::size_t>(static_cast<double>(num_nodes) * b * b)];
      if (u == v) continue;
      if (u > v) std::swap(u, v);
      pairs.push_back(static_cast<std::uint64_t>(u) * static_cast<std::uint64_t>(num_nodes) +
                      static_cast<std::uint64_t>(v));
    }
    std::sort(pairs.begin(), pairs.end());
    pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  }
  pairs.resize(static_cast<std::size_t>(num_edges)); // sorted, so this drops the largest pairs
  std::vector<NodeId> src, dst;
  src.reserve(pairs.size() * 2);
  dst.reserve(pairs.size() * 2);
  for (auto p : pairs) {
    const auto u = static_cast<NodeId>(p / static_cast<std::uint64_t>(num_nodes));
    const auto v = static_cast<NodeId>(p % static_cast<std::uint64_t>(num_nodes));
    src.push_back(u);
    dst.push_back(v);
    src.push_back(v);
    dst.push_back(u);
  }
  Csr graph = Csr::from_edges(num_nodes, num_nodes, src, dst);
  graph.sort_rows(); // canonical order for identity keys
  return graph;
}

// CPU seconds of the whole process: unlike wall time, not inflated when other processes share
// the cores, so edges per CPU-second is the steadier figure on a busy machine.
double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// How a batch is sampled.
enum class Variant {
  block_sampler, // BlockSampler on the whole graph: the P = 1 reference (dense id map)
  per_hop,       // sample_neighbors on the int64 graph + BlockBuilder with the hash map
  owner_local,   // what owners + requester do: int32 LocalCsr, map_ids to global, hash map
};
const char* variant_name(Variant v) {
  switch (v) {
  case Variant::block_sampler:
    return "block_sampler";
  case Variant::per_hop:
    return "per_hop";
  case Variant::owner_local:
    return "owner_local";
  }
  return "?";
}

struct Result {
  std::int64_t edges = 0, batches = 0;
  double wall_s = 0, cpu_s = 0, draw_s = 0, map_s = 0, build_s = 0;
  std::vector<double> batch_s;
  std::vector<std::int64_t> src_per_layer;
  std::vector<std::vector<NodeId>> last_src; // of the last batch, to cross-check variants
};

struct Setup {
  const Csr& graph;
  const LocalCsr& local_graph;    // the same graph with 32-bit ids
  const std::vector<NodeId>& ids; // local id -> global id (identity here)
  std::vector<int> fanouts;
  std::function<std::span<const NodeId>(std::int64_t)> seeds_of;
  std::uint64_t seed;
  std::int64_t batches, warmup;
};

Result run(const Setup& setup, Variant variant) {
  const auto num_layers = static_cast<std::int64_t>(setup.fanouts.size());
  Result r;
  r.src_per_layer.assign(static_cast<std::size_t>(num_layers), 0);
  sampling::BlockSampler sampler(setup.graph);
  sampling::BlockBuilder builder;
  sampling::SampledGlobalNeighbors sampled;
  sampling::SampledNeighbors sampled_local;
  std::vector<LocalId> rows_local;
  std::vector<NodeId> mapped;
  std::vector<sampling::Block> blocks(static_cast<std::size_t>(num_layers));
  double cpu_start = 0;
  for (std::int64_t b = -setup.warmup; b < setup.batches; ++b) {
    if (b == 0) cpu_start = process_cpu_seconds();
    const std::int64_t step = b + setup.warmup;
    const rng::Key base{setup.seed, rng::Stream::sampling, 0, static_cast<std::uint32_t>(step)};
    double draw_s = 0, map_s = 0, build_s = 0;
    Stopwatch batch_watch;
    if (variant == Variant::block_sampler) {
      sampler.sample(setup.seeds_of(step), setup.fanouts, base, blocks);
    } else {
      std::span<const NodeId> frontier = setup.seeds_of(step);
      for (std::int64_t l = num_layers - 1; l >= 0; --l) {
        rng::Key key = base;
        key.layer = static_cast<std::uint32_t>(l);
        Stopwatch watch;
        std::span<const EdgeId> offsets;
        std::span<const NodeId> neighbors;
        if (variant == Variant::per_hop) {
          sampling::sample_neighbors(setup.graph, frontier, frontier, setup.fanouts[l], key,
                                     sampled);
          offsets = sampled.offsets;
          neighbors = sampled.neighbors;
          draw_s += watch.seconds();
        } else {
          rows_local.assign(frontier.begin(), frontier.end()); // global -> local (identity)
          sampling::sample_neighbors(setup.local_graph, rows_local, frontier, setup.fanouts[l], key,
                                     sampled_local);
          draw_s += watch.seconds();
          watch.reset();
          sampling::map_ids(sampled_local.neighbors, setup.ids, mapped);
          offsets = sampled_local.offsets;
          neighbors = mapped;
          map_s += watch.seconds();
        }
        watch.reset();
        builder.build(frontier, offsets, neighbors, blocks[l]);
        build_s += watch.seconds();
        frontier = blocks[l].src;
      }
    }
    const double batch_s = batch_watch.seconds();
    if (b < 0) continue;
    for (std::int64_t l = 0; l < num_layers; ++l) {
      r.edges += blocks[l].num_edges();
      r.src_per_layer[l] += blocks[l].num_src();
    }
    r.wall_s += batch_s;
    r.draw_s += draw_s;
    r.map_s += map_s;
    r.build_s += build_s;
    r.batch_s.push_back(batch_s);
    ++r.batches;
  }
  r.cpu_s = process_cpu_seconds() - cpu_start;
  for (const auto& block : blocks)
    r.last_src.push_back(block.src);
  return r;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tessel sampling micro-benchmark: multi-layer neighbor sampling throughput"};
  std::int64_t num_nodes = 200000, num_edges = 2000000;
  std::string fanouts_text = "15,10,5";
  std::int64_t batch_size = 1024, batches = 100, warmup = 5;
  std::vector<int> threads_list{1, 2};
  std::vector<std::string> variant_names{"block_sampler", "per_hop", "owner_local"};
  std::uint64_t seed = 1;
  bool json = false;
  app.add_option("--nodes", num_nodes, "nodes of the synthetic graph")->capture_default_str();
  app.add_option("--edges", num_edges, "undirected edges of the synthetic graph")
      ->capture_default_str();
  app.add_option("--fanouts", fanouts_text, "per-layer fanouts, input layer first (-1 = all)")
      ->capture_default_str();
  app.add_option("--batch-size", batch_size, "seeds per batch")->capture_default_str();
  app.add_option("--batches", batches, "timed batches per run")->capture_default_str();
  app.add_option("--warmup", warmup, "untimed batches first")->capture_default_str();
  app.add_option("--threads", threads_list, "OpenMP thread counts to run")->capture_default_str();
  app.add_option("--variants", variant_names,
                 "block_sampler (whole graph, dense id map), per_hop (sample_neighbors + hash-map "
                 "BlockBuilder), owner_local (int32 LocalCsr + map_ids + hash map)")
      ->capture_default_str();
  app.add_option("--seed", seed, "graph and sampling seed")->capture_default_str();
  app.add_flag("--json", json, "also print one JSON line per run");
  CLI11_PARSE(app, argc, argv);

  std::vector<int> fanouts;
  try {
    std::stringstream in(fanouts_text);
    std::string item;
    while (std::getline(in, item, ','))
      fanouts.push_back(std::stoi(item));
  } catch (const std::exception&) {
    fanouts.clear();
  }
  if (fanouts.empty() || num_nodes < batch_size || batch_size < 1 || batches < 1) {
    std::fprintf(stderr, "bench_sampling: expected --fanouts like 15,10,5, 1 <= --batch-size <= "
                         "--nodes and --batches >= 1\n");
    return 2;
  }
  std::vector<Variant> variants;
  for (const auto& name : variant_names) {
    if (name == "block_sampler")
      variants.push_back(Variant::block_sampler);
    else if (name == "per_hop")
      variants.push_back(Variant::per_hop);
    else if (name == "owner_local")
      variants.push_back(Variant::owner_local);
    else {
      std::fprintf(stderr,
                   "bench_sampling: --variants: unknown '%s', expected block_sampler, "
                   "per_hop or owner_local\n",
                   name.c_str());
      return 2;
    }
  }

  Stopwatch gen_watch;
  const Csr graph = make_power_law_graph(num_nodes, num_edges, seed);
  LocalCsr local_graph;
  local_graph.num_rows = graph.num_rows;
  local_graph.num_cols = graph.num_cols;
  local_graph.indptr = graph.indptr;
  local_graph.indices.assign(graph.indices.begin(), graph.indices.end());
  std::vector<NodeId> ids(static_cast<std::size_t>(num_nodes));
  std::iota(ids.begin(), ids.end(), 0);
  EdgeId max_degree = 0;
  for (std::int64_t v = 0; v < graph.num_rows; ++v)
    max_degree = std::max(max_degree, graph.degree(v));
  std::printf("graph: %lld nodes, %lld directed edges (%lld undirected), max in-degree %lld, "
              "built in %.2f s\n",
              static_cast<long long>(graph.num_rows), static_cast<long long>(graph.num_edges()),
              static_cast<long long>(num_edges), static_cast<long long>(max_degree),
              gen_watch.seconds());

  // Seeds: consecutive slices of one shuffled permutation (distinct within a batch).
  std::vector<NodeId> order(static_cast<std::size_t>(num_nodes));
  std::iota(order.begin(), order.end(), 0);
  rng::Sequence shuffle(rng::Key{seed, rng::Stream::shuffle}, 0);
  for (std::int64_t i = num_nodes - 1; i > 0; --i)
    std::swap(order[i], order[shuffle.next_below(static_cast<std::uint64_t>(i) + 1)]);
  const std::int64_t batches_per_pass = num_nodes / batch_size;
  Setup setup{graph,
              local_graph,
              ids,
              fanouts,
              [&](std::int64_t b) {
                const auto start = (b % batches_per_pass) * batch_size;
                return std::span<const NodeId>(order.data() + start,
                                               static_cast<std::size_t>(batch_size));
              },
              seed,
              batches,
              warmup};

  std::printf("fanouts %s (input layer first), batch %lld, %lld timed batches per run\n",
              fanouts_text.c_str(), static_cast<long long>(batch_size),
              static_cast<long long>(batches));
  const auto num_layers = static_cast<std::int64_t>(fanouts.size());
  std::vector<std::vector<NodeId>> reference_src;
  for (int threads : threads_list) {
    omp_set_num_threads(threads);
    for (Variant variant : variants) {
      const Result r = run(setup, variant);
      // Every variant and thread count must produce the same blocks.
      if (reference_src.empty()) reference_src = r.last_src;
      if (r.last_src != reference_src) {
        std::fprintf(stderr, "bench_sampling: %s with %d threads gave other blocks\n",
                     variant_name(variant), threads);
        return 1;
      }
      std::string srcs;
      for (std::int64_t l = 0; l < num_layers; ++l)
        srcs += fmt::format("{}{:.0f}", l ? "," : "",
                            static_cast<double>(r.src_per_layer[l]) / r.batches);
      const double per_batch_ms = 1e3 / static_cast<double>(r.batches);
      const double edges_per_s = static_cast<double>(r.edges) / r.wall_s;
      const double edges_per_cpu_s = static_cast<double>(r.edges) / r.cpu_s;
      const double median_edges_per_s =
          static_cast<double>(r.edges) / static_cast<double>(r.batches) / median(r.batch_s);
      std::printf("%-13s threads %d: %6.2f M edges/s wall (median batch %6.2f M), %6.2f M per "
                  "CPU-s; %.0f edges/batch; ms/batch %.2f",
                  variant_name(variant), threads, edges_per_s / 1e6, median_edges_per_s / 1e6,
                  edges_per_cpu_s / 1e6, static_cast<double>(r.edges) / r.batches,
                  r.wall_s * per_batch_ms);
      if (variant != Variant::block_sampler)
        std::printf(" (draw %.2f, map %.2f, build %.2f)", r.draw_s * per_batch_ms,
                    r.map_s * per_batch_ms, r.build_s * per_batch_ms);
      std::printf("; sources per layer [%s]\n", srcs.c_str());
      if (json) {
        const nlohmann::json line{{"bench", "sampling"},
                                  {"variant", variant_name(variant)},
                                  {"threads", threads},
                                  {"nodes", num_nodes},
                                  {"undirected_edges", num_edges},
                                  {"fanouts", fanouts},
                                  {"batch_size", batch_size},
                                  {"batches", r.batches},
                                  {"sampled_edges", r.edges},
                                  {"wall_s", r.wall_s},
                                  {"cpu_s", r.cpu_s},
                                  {"edges_per_s", edges_per_s},
                                  {"median_batch_edges_per_s", median_edges_per_s},
                                  {"edges_per_cpu_s", edges_per_cpu_s},
                                  {"draw_s", r.draw_s},
                                  {"map_s", r.map_s},
                                  {"build_s", r.build_s}};
        std::printf("%s\n", line.dump().c_str());
      }
    }
  }
  return 0;
}
