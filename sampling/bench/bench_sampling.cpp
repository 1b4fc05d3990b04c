// Micro-benchmark: sampled edges per second of multi-layer block sampling on a power-law graph.
#include "tessel/core/csr.hpp"
#include "tessel/core/rng.hpp"
#include "tessel/core/timer.hpp"
#include "tessel/sampling/block.hpp"
#include "tessel/sampling/neighbor_sampler.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
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
  pairs.resize(static_cast<std::size_t>(num_edges));  // sorted, so this drops the largest pairs
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
  graph.sort_rows();  // canonical order for identity keys
  return graph;
}

struct Totals {
  double sample_s = 0, build_s = 0;
  std::int64_t edges = 0, batches = 0;
  std::vector<std::int64_t> src_per_layer;
  std::vector<double> batch_s;
};

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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tessel sampling micro-benchmark: multi-layer neighbor sampling throughput"};
  std::int64_t num_nodes = 200000, num_edges = 2000000;
  std::string fanouts_text = "15,10,5";
  std::int64_t batch_size = 1024, batches = 100, warmup = 5;
  std::vector<int> threads_list{1, 2};
  std::uint64_t seed = 1;
  app.add_option("--nodes", num_nodes, "nodes of the synthetic graph")->capture_default_str();
  app.add_option("--edges", num_edges, "undirected edges of the synthetic graph")
      ->capture_default_str();
  app.add_option("--fanouts", fanouts_text, "per-layer fanouts, input layer first (-1 = all)")
      ->capture_default_str();
  app.add_option("--batch-size", batch_size, "seeds per batch")->capture_default_str();
  app.add_option("--batches", batches, "timed batches per thread count")->capture_default_str();
  app.add_option("--warmup", warmup, "untimed batches first")->capture_default_str();
  app.add_option("--threads", threads_list, "OpenMP thread counts to run")->capture_default_str();
  app.add_option("--seed", seed, "graph and sampling seed")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  std::vector<int> fanouts;
  {
    std::stringstream in(fanouts_text);
    std::string item;
    while (std::getline(in, item, ',')) fanouts.push_back(std::stoi(item));
  }
  if (fanouts.empty() || num_nodes < batch_size || batch_size < 1) {
    std::fprintf(stderr, "bench_sampling: need fanouts and 1 <= batch-size <= nodes\n");
    return 2;
  }

  Stopwatch gen_watch;
  const Csr graph = make_power_law_graph(num_nodes, num_edges, seed);
  EdgeId max_degree = 0;
  for (std::int64_t v = 0; v < graph.num_rows; ++v) max_degree = std::max(max_degree, graph.degree(v));
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
  auto seeds_of = [&](std::int64_t b) {
    const auto start = (b % batches_per_pass) * batch_size;
    return std::span<const NodeId>(order.data() + start, static_cast<std::size_t>(batch_size));
  };

  std::printf("fanouts %s (input layer first), batch %lld, %lld batches\n", fanouts_text.c_str(),
              static_cast<long long>(batch_size), static_cast<long long>(batches));
  const auto num_layers = static_cast<std::int64_t>(fanouts.size());
  for (int threads : threads_list) {
    omp_set_num_threads(threads);
    // The loop of BlockSampler::sample spelled out with the public per-hop primitives, so the
    // two phases (draw neighbors, build the block) are timed separately. Its builder uses the
    // hash map, as a distributed sampler over a large id space would; BlockSampler below knows
    // the graph's size and uses the dense map.
    sampling::SampledGlobalNeighbors sampled;
    sampling::BlockBuilder builder;
    std::vector<sampling::Block> blocks(static_cast<std::size_t>(num_layers));
    Totals totals;
    totals.src_per_layer.assign(static_cast<std::size_t>(num_layers), 0);
    double cpu_start = 0;
    for (std::int64_t b = -warmup; b < batches; ++b) {
      if (b == 0) cpu_start = process_cpu_seconds();
      const rng::Key base{seed, rng::Stream::sampling, 0, static_cast<std::uint32_t>(b + warmup)};
      std::span<const NodeId> frontier = seeds_of(b + warmup);
      double sample_s = 0, build_s = 0;
      std::int64_t edges = 0;
      for (std::int64_t l = num_layers - 1; l >= 0; --l) {
        rng::Key key = base;
        key.layer = static_cast<std::uint32_t>(l);
        Stopwatch watch;
        sampling::sample_neighbors(graph, frontier, frontier, fanouts[l], key, sampled);
        sample_s += watch.seconds();
        watch.reset();
        builder.build(frontier, sampled.offsets, sampled.neighbors, blocks[l]);
        build_s += watch.seconds();
        edges += blocks[l].num_edges();
        frontier = blocks[l].src;
      }
      if (b < 0) continue;
      totals.sample_s += sample_s;
      totals.build_s += build_s;
      totals.edges += edges;
      totals.batch_s.push_back(sample_s + build_s);
      ++totals.batches;
      for (std::int64_t l = 0; l < num_layers; ++l) totals.src_per_layer[l] += blocks[l].num_src();
    }
    const double cpu_s = process_cpu_seconds() - cpu_start;
    // The packaged sampler must give the same blocks as the spelled-out loop.
    sampling::BlockSampler sampler(graph);
    std::vector<sampling::Block> check;
    Stopwatch packaged_watch;
    for (std::int64_t b = 0; b < batches; ++b) {
      const rng::Key base{seed, rng::Stream::sampling, 0, static_cast<std::uint32_t>(b + warmup)};
      sampler.sample(seeds_of(b + warmup), fanouts, base, check);
    }
    const double packaged_s = packaged_watch.seconds();
    for (std::int64_t l = 0; l < num_layers; ++l)
      if (check[l].src != blocks[l].src || check[l].adj.indices != blocks[l].adj.indices) {
        std::fprintf(stderr, "bench_sampling: BlockSampler disagrees with the per-hop loop\n");
        return 1;
      }
    const double total_s = totals.sample_s + totals.build_s;
    std::string srcs;
    for (std::int64_t l = 0; l < num_layers; ++l)
      srcs += fmt::format("{}{:.0f}", l ? "," : "",
                          static_cast<double>(totals.src_per_layer[l]) / totals.batches);
    const double edges_per_batch = static_cast<double>(totals.edges) / totals.batches;
    std::printf(
        "threads %d: %.2f M sampled edges/s wall (%.2f M at the median batch), %.2f M per "
        "CPU-second; %.0f edges/batch, %.3f ms/batch mean (draw %.3f + build %.3f), median "
        "%.3f ms; BlockSampler %.2f M edges/s; mean sources per layer [%s]\n",
        threads, totals.edges / total_s / 1e6, edges_per_batch / median(totals.batch_s) / 1e6,
        totals.edges / cpu_s / 1e6, edges_per_batch, 1e3 * total_s / totals.batches,
        1e3 * totals.sample_s / totals.batches, 1e3 * totals.build_s / totals.batches,
        1e3 * median(totals.batch_s), totals.edges / packaged_s / 1e6, srcs.c_str());
  }
  return 0;
}
