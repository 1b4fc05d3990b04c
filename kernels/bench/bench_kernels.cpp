// Kernel benchmark: CPU SpMM GB/s against a STREAM-like triad, and GEMM GFLOP/s.
//
// tessel_bench_kernels [--nodes N] [--edges E] [--feat F] [--threads 1,2] [--reps R]
// A random undirected graph with E edges (2E directed entries) over N nodes is built here;
// SpMM bytes count indptr + indices (+ values) + the X rows read (nnz F 4) + Y written.
#include "tessel/kernels/kernels.hpp"

#include "tessel/core/rng.hpp"
#include "tessel/core/timer.hpp"

#include <CLI/CLI.hpp>
#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace {

using namespace tessel;

struct Timing {
  double best = 0, median = 0;
};

template <class Fn> Timing time_reps(int reps, Fn&& fn) {
  fn(); // warm-up: page faults, first-touch, caches
  std::vector<double> seconds;
  for (int r = 0; r < reps; ++r) {
    Stopwatch watch;
    fn();
    seconds.push_back(watch.seconds());
  }
  std::sort(seconds.begin(), seconds.end());
  return {seconds.front(), seconds[seconds.size() / 2]};
}

// STREAM triad a = b + s c over arrays far larger than the last-level cache; returns GB/s
// counting 3 arrays per pass (as STREAM does; write-allocate traffic is not counted).
double triad_gbps(std::int64_t elements, int reps) {
  std::vector<float> a(static_cast<std::size_t>(elements)), b(a.size()), c(a.size());
  float* __restrict pa = a.data();
  const float* __restrict pb = b.data();
  const float* __restrict pc = c.data();
  // First touch by the threads that will use each page.
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < elements; ++i) {
    a[i] = 0.0f;
    b[i] = 1.0f;
    c[i] = 2.0f;
  }
  const float s = 3.0f;
  const Timing t = time_reps(reps, [&] {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < elements; ++i)
      pa[i] = pb[i] + s * pc[i];
  });
  return 3.0 * static_cast<double>(elements) * sizeof(float) / t.best / 1e9;
}

LocalCsr random_graph(std::int64_t nodes, std::int64_t edges, std::uint64_t seed) {
  std::vector<LocalId> src, dst;
  src.reserve(static_cast<std::size_t>(2 * edges));
  dst.reserve(src.capacity());
  rng::Sequence draws(rng::Key{seed, rng::Stream::synthetic}, 0);
  for (std::int64_t e = 0; e < edges; ++e) {
    const auto u = static_cast<LocalId>(draws.next_below(static_cast<std::uint64_t>(nodes)));
    auto v = static_cast<LocalId>(draws.next_below(static_cast<std::uint64_t>(nodes - 1)));
    if (v >= u) ++v; // no self loops
    src.push_back(u);
    dst.push_back(v);
    src.push_back(v);
    dst.push_back(u);
  }
  LocalCsr csr = LocalCsr::from_edges(nodes, nodes, src, dst);
  csr.sort_rows();
  return csr;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tessel kernel benchmark: SpMM bandwidth vs a triad, GEMM throughput"};
  std::int64_t nodes = 200000, edges = 2000000, feat = 128, triad_mib = 512;
  std::string threads_list = "1,2", json_path;
  int reps = 5;
  std::uint64_t seed = 1;
  app.add_option("--nodes", nodes, "nodes of the random graph")->check(CLI::PositiveNumber);
  app.add_option("--edges", edges, "undirected edges (stored twice)")->check(CLI::PositiveNumber);
  app.add_option("--feat", feat, "feature columns F")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads_list, "comma-separated OpenMP thread counts");
  app.add_option("--reps", reps, "timed repetitions (best and median reported)")
      ->check(CLI::PositiveNumber);
  app.add_option("--triad-mib", triad_mib, "MiB per triad array")->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "graph seed");
  app.add_option("--json", json_path, "also write one JSON object per measurement to this file");
  CLI11_PARSE(app, argc, argv);

  std::vector<int> thread_counts;
  for (std::size_t pos = 0; pos < threads_list.size();) {
    const auto comma = threads_list.find(',', pos);
    thread_counts.push_back(std::stoi(threads_list.substr(pos, comma - pos)));
    pos = comma == std::string::npos ? threads_list.size() : comma + 1;
  }

  std::fprintf(stderr, "building random graph: %lld nodes, %lld undirected edges...\n",
               static_cast<long long>(nodes), static_cast<long long>(edges));
  const LocalCsr graph = random_graph(nodes, edges, seed);
  const auto pattern = kernels::SparseMatrix::from_csr(graph);
  std::vector<std::int64_t> degree(static_cast<std::size_t>(nodes));
  for (std::int64_t v = 0; v < nodes; ++v)
    degree[v] = graph.degree(v);
  const Tensor degree_tensor = Tensor::from_vector(degree);
  const auto weighted = kernels::gcn_matrix(pattern, degree_tensor);

  Tensor x = Tensor::empty({nodes, feat}, DType::f32);
  rng::Sequence fill(rng::Key{seed, rng::Stream::synthetic, 1}, 0);
  for (std::int64_t i = 0; i < x.numel(); ++i)
    x.data<float>()[i] = fill.next_uniform() - 0.5f;
  Tensor y = Tensor::zeros({nodes, feat}, DType::f32);
  const Tensor w = Tensor::zeros({feat, feat}, DType::f32);

  std::ofstream json;
  if (!json_path.empty()) json.open(json_path);
  const std::int64_t nnz = pattern.nnz();
  std::printf("graph: %lld nodes, %lld nonzeros, F = %lld; X = %.1f MB\n",
              static_cast<long long>(nodes), static_cast<long long>(nnz),
              static_cast<long long>(feat), static_cast<double>(x.nbytes()) / 1e6);
  std::printf("%-8s %-22s %10s %10s %9s %9s\n", "threads", "kernel", "best_ms", "median_ms", "GB/s",
              "vs_triad");
  for (int threads : thread_counts) {
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    const double triad =
        triad_gbps(triad_mib * 1024 * 1024 / static_cast<std::int64_t>(sizeof(float)), reps);
    std::printf("%-8d %-22s %10s %10s %9.2f %9s\n", threads, "triad", "-", "-", triad, "1.00");
    if (json.is_open())
      json << fmt::format("{{\"threads\": {}, \"kernel\": \"triad\", \"gbps\": {:.3f}}}\n", threads,
                          triad);
    struct Variant {
      const char* name;
      const kernels::SparseMatrix* matrix;
      kernels::SpmmAlgorithm algorithm;
    };
    const Variant variants[] = {
        {"spmm.simple.weighted", &weighted, kernels::SpmmAlgorithm::cpu_row_simple},
        {"spmm.blocked.weighted", &weighted, kernels::SpmmAlgorithm::cpu_row_blocked},
        {"spmm.simple.pattern", &pattern, kernels::SpmmAlgorithm::cpu_row_simple},
        {"spmm.blocked.pattern", &pattern, kernels::SpmmAlgorithm::cpu_row_blocked},
    };
    // Rounds interleave the variants, so load from other processes on a shared machine hits
    // them alike; best-of-rounds is the figure compared (medians are shown for spread).
    constexpr int kVariants = sizeof(variants) / sizeof(variants[0]);
    std::vector<std::vector<double>> seconds(kVariants);
    for (const auto& variant : variants)
      kernels::spmm(*variant.matrix, x, y, nullptr, variant.algorithm); // warm-up
    for (int round = 0; round < reps; ++round)
      for (int v = 0; v < kVariants; ++v) {
        Stopwatch watch;
        kernels::spmm(*variants[v].matrix, x, y, nullptr, variants[v].algorithm);
        seconds[v].push_back(watch.seconds());
      }
    for (int v = 0; v < kVariants; ++v) {
      const auto& variant = variants[v];
      std::sort(seconds[v].begin(), seconds[v].end());
      const Timing t{seconds[v].front(), seconds[v][seconds[v].size() / 2]};
      const double bytes = static_cast<double>(nodes + 1) * 8 + static_cast<double>(nnz) * 4 +
                           (variant.matrix->weighted() ? static_cast<double>(nnz) * 4 : 0.0) +
                           static_cast<double>(nnz) * static_cast<double>(feat) * 4 +
                           static_cast<double>(nodes) * static_cast<double>(feat) * 4;
      const double gbps = bytes / t.best / 1e9;
      std::printf("%-8d %-22s %10.2f %10.2f %9.2f %9.2f\n", threads, variant.name, t.best * 1e3,
                  t.median * 1e3, gbps, gbps / triad);
      if (json.is_open())
        json << fmt::format(
            "{{\"threads\": {}, \"kernel\": \"{}\", \"best_s\": {:.6f}, \"median_s\": {:.6f}, "
            "\"gbps\": {:.3f}, \"triad_gbps\": {:.3f}}}\n",
            threads, variant.name, t.best, t.median, gbps, triad);
    }
    const Timing g = time_reps(reps, [&] { kernels::gemm(x, false, w, false, y); });
    const double gflops = 2.0 * static_cast<double>(nodes) * static_cast<double>(feat) *
                          static_cast<double>(feat) / g.best / 1e9;
    std::printf("%-8d %-22s %10.2f %10.2f %9s %9s  %.1f GFLOP/s\n", threads, "gemm [N,F]x[F,F]",
                g.best * 1e3, g.median * 1e3, "-", "-", gflops);
    if (json.is_open())
      json << fmt::format(
          "{{\"threads\": {}, \"kernel\": \"gemm\", \"best_s\": {:.6f}, \"gflops\": {:.3f}}}\n",
          threads, g.best, gflops);
  }
  return 0;
}
