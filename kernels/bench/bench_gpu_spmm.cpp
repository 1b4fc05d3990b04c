// GPU SpMM benchmark: effective TB/s of each CUDA SpMM algorithm on a uniform-degree graph,
// against a device-to-device copy, plus GEMM TFLOP/s (CUDA builds, needs a GPU).
//
// tessel_bench_gpu_spmm [--nodes N] [--degree K] [--feat 32,128] [--reps R] [--json FILE]
// Every node gets exactly K uniformly drawn in-neighbors (row-sorted). Effective bytes count
// indptr + indices + values + the gathered X rows (nnz F 4) + Y written (N F 4), as the CPU
// benchmark does; a copy counts bytes read plus written.
#include "tessel/kernels/kernels.hpp"

#include "tessel/core/rng.hpp"
#include "tessel/core/timer.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

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

template <class Fn> Timing time_reps(kernels::Context& ctx, int reps, Fn&& fn) {
  fn();  // warm-up
  ctx.synchronize();
  std::vector<double> seconds;
  for (int r = 0; r < reps; ++r) {
    Stopwatch watch;
    fn();
    ctx.synchronize();
    seconds.push_back(watch.seconds());
  }
  std::sort(seconds.begin(), seconds.end());
  return {seconds.front(), seconds[seconds.size() / 2]};
}

std::vector<std::int64_t> parse_list(const std::string& text) {
  std::vector<std::int64_t> out;
  for (std::size_t pos = 0; pos < text.size();) {
    const auto comma = text.find(',', pos);
    out.push_back(std::stoll(text.substr(pos, comma - pos)));
    pos = comma == std::string::npos ? text.size() : comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tessel GPU SpMM benchmark: effective TB/s per algorithm, copy, GEMM"};
  std::int64_t nodes = 2000000, degree = 25;
  std::string feats = "32,128", json_path;
  int reps = 10;
  std::uint64_t seed = 1;
  app.add_option("--nodes", nodes, "nodes")->check(CLI::PositiveNumber);
  app.add_option("--degree", degree, "in-neighbors per node")->check(CLI::PositiveNumber);
  app.add_option("--feat", feats, "comma-separated feature widths F");
  app.add_option("--reps", reps, "timed repetitions")->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "graph seed");
  app.add_option("--json", json_path, "also write one JSON object per measurement here");
  CLI11_PARSE(app, argc, argv);
  if (!device_memory::cuda_available()) {
    std::fprintf(stderr, "tessel_bench_gpu_spmm: no GPU visible\n");
    return 2;
  }
  const Device gpu = Device::cuda(0);
  kernels::Context& ctx = kernels::default_context(gpu);

  LocalCsr csr;
  csr.num_rows = csr.num_cols = nodes;
  csr.indptr.resize(static_cast<std::size_t>(nodes) + 1);
  csr.indices.resize(static_cast<std::size_t>(nodes * degree));
#pragma omp parallel for schedule(static)
  for (std::int64_t v = 0; v < nodes; ++v) {
    rng::Sequence draw(rng::Key{seed, rng::Stream::synthetic, 2}, static_cast<std::uint64_t>(v));
    for (std::int64_t i = 0; i < degree; ++i)
      csr.indices[static_cast<std::size_t>(v * degree + i)] =
          static_cast<LocalId>(draw.next_below(static_cast<std::uint64_t>(nodes)));
    std::sort(csr.indices.begin() + v * degree, csr.indices.begin() + (v + 1) * degree);
  }
  for (std::int64_t v = 0; v <= nodes; ++v) csr.indptr[static_cast<std::size_t>(v)] = v * degree;
  csr.values.assign(csr.indices.size(), 1.0f / static_cast<float>(degree));
  const auto a = kernels::SparseMatrix::from_csr(csr, gpu);
  const std::int64_t nnz = a.nnz();

  std::ofstream json;
  if (!json_path.empty()) json.open(json_path);
  std::printf("graph: %lld nodes, %lld in-neighbors each, %lld nonzeros\n",
              static_cast<long long>(nodes), static_cast<long long>(degree),
              static_cast<long long>(nnz));
  std::printf("%-6s %-22s %10s %10s %9s\n", "F", "kernel", "best_ms", "median_ms", "TB/s");
  {
    const std::int64_t elements = std::int64_t{1} << 30;  // 4 GiB each way
    Tensor src = Tensor::zeros({elements}, DType::f32, gpu), dst = Tensor::empty({elements}, DType::f32, gpu);
    const Timing t = time_reps(ctx, reps, [&] { dst.copy_from(src); });
    const double tbps = 2.0 * static_cast<double>(src.nbytes()) / t.best / 1e12;
    std::printf("%-6s %-22s %10.3f %10.3f %9.2f\n", "-", "copy d2d", t.best * 1e3, t.median * 1e3,
                tbps);
    if (json.is_open())
      json << fmt::format("{{\"kernel\": \"copy\", \"best_s\": {:.6f}, \"tbps\": {:.4f}}}\n", t.best,
                          tbps);
  }
  for (const std::int64_t f : parse_list(feats)) {
    Tensor x = Tensor::empty({nodes, f}, DType::f32);
    rng::Sequence fill(rng::Key{seed, rng::Stream::synthetic, 3}, 0);
    for (std::int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = fill.next_uniform() - 0.5f;
    const Tensor xd = x.to(gpu);
    Tensor y = Tensor::empty({nodes, f}, DType::f32, gpu);
    struct Variant {
      const char* name;
      kernels::SpmmAlgorithm algorithm;
    };
    std::vector<Variant> variants = {{"spmm.automatic", kernels::SpmmAlgorithm::automatic},
                                     {"spmm.warp_row", kernels::SpmmAlgorithm::cuda_warp_row},
                                     {"spmm.cusparse", kernels::SpmmAlgorithm::cuda_cusparse}};
    if (f <= 32) variants.push_back({"spmm.narrow_row", kernels::SpmmAlgorithm::cuda_narrow_row});
    const double bytes = static_cast<double>(nodes + 1) * 8 + static_cast<double>(nnz) * 8 +
                         static_cast<double>(nnz) * static_cast<double>(f) * 4 +
                         static_cast<double>(nodes) * static_cast<double>(f) * 4;
    for (const auto& variant : variants) {
      const Timing t =
          time_reps(ctx, reps, [&] { kernels::spmm(a, xd, y, &ctx, variant.algorithm); });
      const double tbps = bytes / t.best / 1e12;
      std::printf("%-6lld %-22s %10.3f %10.3f %9.2f\n", static_cast<long long>(f), variant.name,
                  t.best * 1e3, t.median * 1e3, tbps);
      if (json.is_open())
        json << fmt::format(
            "{{\"F\": {}, \"kernel\": \"{}\", \"best_s\": {:.6f}, \"median_s\": {:.6f}, "
            "\"tbps\": {:.4f}}}\n",
            f, variant.name, t.best, t.median, tbps);
    }
    const Tensor w = Tensor::zeros({f, f}, DType::f32, gpu);
    const Timing g = time_reps(ctx, reps, [&] { kernels::gemm(xd, false, w, false, y, 1.0f, 0.0f, &ctx); });
    const double tflops = 2.0 * static_cast<double>(nodes) * static_cast<double>(f) *
                          static_cast<double>(f) / g.best / 1e12;
    std::printf("%-6lld %-22s %10.3f %10.3f %9s  %.1f TFLOP/s\n", static_cast<long long>(f),
                "gemm [N,F]x[F,F]", g.best * 1e3, g.median * 1e3, "-", tflops);
    if (json.is_open())
      json << fmt::format("{{\"F\": {}, \"kernel\": \"gemm\", \"best_s\": {:.6f}, \"tflops\": {:.3f}}}\n",
                          f, g.best, tflops);
  }
  return 0;
}
