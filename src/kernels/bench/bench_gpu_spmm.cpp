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
#include <functional>
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
  // The other ops of a 2-layer full-batch epoch at the benchmark's shapes (hidden = the last
  // --feat, 16 classes), one line each: where an epoch goes beside SpMM and the square GEMM.
  {
    const std::int64_t h = parse_list(feats).back(), c = 16;
    auto filled = [&](std::int64_t rows, std::int64_t cols, std::uint64_t stream) {
      Tensor t = Tensor::empty({rows, cols}, DType::f32);
      rng::Sequence fill(rng::Key{seed, rng::Stream::synthetic, 4}, stream);
      for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = fill.next_uniform() - 0.5f;
      return t.to(gpu);
    };
    const Tensor xh = filled(nodes, h, 1), gh = filled(nodes, h, 2), gc = filled(nodes, c, 3);
    Tensor yh = Tensor::empty({nodes, h}, DType::f32, gpu), yc = Tensor::empty({nodes, c}, DType::f32, gpu);
    Tensor whh = Tensor::zeros({h, h}, DType::f32, gpu), whc = Tensor::zeros({h, c}, DType::f32, gpu);
    Tensor bias = Tensor::zeros({h}, DType::f32, gpu), bias_grad = Tensor::zeros({h}, DType::f32, gpu);
    Tensor bits = Tensor::empty({nodes, (h + 7) / 8}, DType::u8, gpu), no_mask;
    std::vector<NodeId> ids_host(static_cast<std::size_t>(nodes));
    for (std::int64_t i = 0; i < nodes; ++i) ids_host[static_cast<std::size_t>(i)] = i;
    const Tensor ids = Tensor::from_vector(ids_host).to(gpu);
    const rng::Key key{seed, rng::Stream::dropout, 1, 0, 0};
    std::vector<LocalId> train_rows;
    std::vector<std::int64_t> labels;
    for (std::int64_t i = 0; i < nodes; i += 10) {
      train_rows.push_back(static_cast<LocalId>(i));
      labels.push_back(i % c);
    }
    const auto at = kernels::csr_transpose(a, &ctx);
    const std::int64_t chunk = std::min<std::int64_t>(nodes, (std::int64_t{1} << 24) / h);
    struct Op {
      std::string name;
      std::function<void()> run;
    };
    const std::vector<Op> ops = {
        {"gemm X W [N,h]x[h,c]", [&] { kernels::gemm(xh, false, whc, false, yc, 1, 0, &ctx); }},
        {"gemm X^T G [h,N]x[N,h]", [&] { kernels::gemm(xh, true, gh, false, whh, 1, 1, &ctx); }},
        {"gemm X^T G [h,N]x[N,c]", [&] { kernels::gemm(xh, true, gc, false, whc, 1, 1, &ctx); }},
        {"gemm G W^T [N,c]x[c,h]", [&] { kernels::gemm(gc, false, whc, true, yh, 1, 0, &ctx); }},
        {"gemm G W^T beta=1", [&] { kernels::gemm(gc, false, whc, true, yh, 1, 1, &ctx); }},
        {"gemm X W beta=1 [N,h]x[h,h]", [&] { kernels::gemm(xh, false, whh, false, yh, 1, 1, &ctx); }},
        {"gemm X W in 64 MiB chunks", [&] {
           for (std::int64_t b = 0; b < nodes; b += chunk) {
             const std::int64_t e = std::min(nodes, b + chunk);
             Tensor out = yh.rows_slice(b, e);
             kernels::gemm(xh.rows_slice(b, e), false, whh, false, out, 1, 1, &ctx);
           }
         }},
        {"gemm X^T G in 64 MiB chunks", [&] {
           for (std::int64_t b = 0; b < nodes; b += chunk) {
             const std::int64_t e = std::min(nodes, b + chunk);
             kernels::gemm(xh.rows_slice(b, e), true, gh.rows_slice(b, e), false, whh, 1, 1, &ctx);
           }
         }},
        {"dropout [N,h] no mask", [&] { kernels::dropout_forward(xh, ids, key, 0.5f, yh, no_mask, &ctx); }},
        {"relu_dropout [N,h] in place", [&] { kernels::relu_dropout_forward(yh, ids, key, 0.5f, yh, bits, &ctx); }},
        {"relu_dropout_backward", [&] { kernels::relu_dropout_backward(yh, bits, 0.5f, yh, &ctx); }},
        {"add_bias [N,h]", [&] { kernels::add_bias(yh, bias, &ctx); }},
        {"column_sums [N,h]", [&] { kernels::column_sums(gh, bias_grad, true, &ctx); }},
        {"spmm A [N,c]", [&] { kernels::spmm(a, gc, yc, &ctx); }},
        {"spmm A^T [N,c]", [&] { kernels::spmm(at, gc, yc, &ctx); }},
        {"softmax_xent N/10 rows", [&] { (void)kernels::softmax_cross_entropy(yc, train_rows, labels, 1e-5, yc, &ctx); }},
    };
    std::printf("epoch ops (h = %lld, c = %lld):\n", static_cast<long long>(h), static_cast<long long>(c));
    for (const Op& op : ops) {
      const Timing t = time_reps(ctx, reps, op.run);
      std::printf("  %-30s %10.3f %10.3f ms\n", op.name.c_str(), t.best * 1e3, t.median * 1e3);
      if (json.is_open())
        json << fmt::format("{{\"op\": \"{}\", \"best_s\": {:.6f}, \"median_s\": {:.6f}}}\n", op.name,
                            t.best, t.median);
    }
  }
  return 0;
}
