// Kernel benchmark: CPU SpMM and dropout GB/s against STREAM-like copy and triad, GEMM GFLOP/s.
//
// tessel_bench_kernels [--nodes N] [--edges E] [--feat F] [--threads 1,2] [--reps R]
//                      [--dropout-only]
// A random undirected graph with E edges (2E directed entries) over N nodes is built here;
// SpMM bytes count indptr + indices (+ values) + the X rows read (nnz F 4) + Y written. The
// dropout kernels run on [N, F] f32 with p = 0.5; their bytes are the tensors read and written
// (features, gradients, the mask), as a copy's are its two arrays. The gathers read every row
// of X once in a shuffled order (as a mini-batch reads its input rows), copied (p = 0) or
// dropped while copied; then a quarter of the rows (a step's share) in that order and in the
// read order of kernels::gather_read_order (the sort timed with the gather). The column-tile table times the blocked weighted SpMM with each
// --tiles width (0: one pass over all columns; the chosen width is marked) against its
// streaming bound: the CSR read once per tile, X read once and Y written once, at the triad's
// GB/s.
#include "tessel/kernels/kernels.hpp"

#include "../cpu/cpu_ops.hpp"

#include "tessel/core/rng.hpp"
#include "tessel/core/timer.hpp"

#include <CLI/CLI.hpp>
#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

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

// The references of the dropout kernels, compiled for the widest vectors as those kernels are:
// at cache bandwidth a baseline x86-64 build's 16-byte loads and stores would not keep up.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TESSEL_BENCH_WIDE __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TESSEL_BENCH_WIDE
#endif
TESSEL_BENCH_WIDE void copy_range(std::int64_t begin, std::int64_t end, const float* __restrict src,
                                  float* __restrict dst) {
  for (std::int64_t i = begin; i < end; ++i)
    dst[i] = src[i];
}
TESSEL_BENCH_WIDE void scale_range(std::int64_t begin, std::int64_t end, float s, float* a) {
  for (std::int64_t i = begin; i < end; ++i)
    a[i] = s * a[i];
}

// [0, count) split into one contiguous range per thread, as the kernels split their rows.
template <class Fn> void parallel_ranges(std::int64_t count, Fn&& fn) {
#pragma omp parallel
  {
    const std::int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
    fn(count * t / threads, count * (t + 1) / threads);
  }
}

// The dropout kernels on [nodes, feat] at p = 0.5, the shapes of a hidden layer of the
// benchmark graph, each compared with a STREAM-like copy between two tensors of that size (in
// place: a scale by a factor of one): on a machine whose last-level cache holds such tensors,
// the triad over larger arrays is not the same reference. Rounds interleave the kernels and
// their references, so load from other processes hits them alike.
void bench_dropout(int threads, std::int64_t nodes, std::int64_t feat, int reps,
                   std::ofstream& json) {
  const float p = 0.5f;
  const rng::Key key{1, rng::Stream::dropout, 1, 0, 1};
  std::vector<NodeId> ids(static_cast<std::size_t>(nodes));
  for (std::int64_t i = 0; i < nodes; ++i)
    ids[static_cast<std::size_t>(i)] = i;
  Tensor x = Tensor::empty({nodes, feat}, DType::f32);
  rng::Sequence fill(rng::Key{1, rng::Stream::synthetic, 2}, 0);
  for (std::int64_t i = 0; i < x.numel(); ++i)
    x.data<float>()[i] = fill.next_uniform() - 0.5f;
  Tensor y = Tensor::zeros({nodes, feat}, DType::f32), h = x.clone(), g = x.clone();
  Tensor gx = Tensor::zeros({nodes, feat}, DType::f32), none;
  Tensor mask = Tensor::zeros(kernels::dropout_mask_shape(x), DType::u8);
  Tensor bits = Tensor::zeros({nodes, (feat + 7) / 8}, DType::u8);
  const double f32 = static_cast<double>(x.nbytes());
  const std::int64_t elements = x.numel();
  // The halo codecs on the same rows: encode reads f32 and writes the wire, decode the reverse.
  const kernels::RowCodec codecs[] = {kernels::RowCodec::bf16, kernels::RowCodec::f16,
                                      kernels::RowCodec::int8};
  std::vector<Tensor> wires;
  for (const auto codec : codecs)
    wires.push_back(Tensor::zeros({nodes, kernels::row_codec_bytes(codec, feat)}, DType::u8));
  const float one = 1.0f; // the scale leaves the values as they are over the repetitions
  // The sampled step's input gather: every row of x once, in a random order (as a mini-batch
  // reads the feature rows of its input nodes), copied (p = 0) or dropped while copied.
  std::vector<const float*> shuffled(static_cast<std::size_t>(nodes));
  std::vector<NodeId> shuffled_ids(ids);
  for (std::int64_t i = nodes - 1; i > 0; --i) {
    const auto j = static_cast<std::int64_t>(fill.next_uniform() * static_cast<float>(i + 1));
    std::swap(shuffled_ids[static_cast<std::size_t>(i)],
              shuffled_ids[static_cast<std::size_t>(std::min(j, i))]);
  }
  for (std::int64_t i = 0; i < nodes; ++i)
    shuffled[static_cast<std::size_t>(i)] =
        x.data<float>() + shuffled_ids[static_cast<std::size_t>(i)] * feat;
  // A step's share: a quarter of the rows, distinct, in a random order (a sampled step's input
  // nodes), read in that order or in the order gather_read_order gives (its cost timed too).
  const std::int64_t part = std::max<std::int64_t>(1, nodes / 4);
  const std::span<const float* const> part_rows(shuffled.data(), static_cast<std::size_t>(part));
  const std::span<const NodeId> part_ids(shuffled_ids.data(), static_cast<std::size_t>(part));
  const std::vector<std::int64_t> part_keys(shuffled_ids.begin(), shuffled_ids.begin() + part);
  Tensor y_part = Tensor::zeros({part, feat}, DType::f32);
  std::vector<std::int64_t> part_order;
  const double part_bytes = 2.0 * static_cast<double>(y_part.nbytes());
  struct Op {
    const char* name;
    std::function<void()> run;
    double bytes;
    bool in_place;
  };
  std::vector<Op> ops = {
      {"copy [N,F]",
       [&] {
         parallel_ranges(elements, [&](std::int64_t begin, std::int64_t end) {
           copy_range(begin, end, x.data<float>(), y.data<float>());
         });
       },
       2 * f32, false},
      {"scale [N,F] in place",
       [&] {
         parallel_ranges(elements, [&](std::int64_t begin, std::int64_t end) {
           scale_range(begin, end, one, h.data<float>());
         });
       },
       2 * f32, true},
      {"dropout_forward", [&] { kernels::dropout_forward(x, ids, key, p, y, mask); },
       2 * f32 + static_cast<double>(mask.nbytes()), false},
      {"dropout_forward.nomask", [&] { kernels::dropout_forward(x, ids, key, p, y, none); },
       2 * f32, false},
      {"dropout_backward", [&] { kernels::dropout_backward(g, mask, p, gx); },
       2 * f32 + static_cast<double>(mask.nbytes()), false},
      {"relu_dropout_fwd.inpl", [&] { kernels::relu_dropout_forward(h, ids, key, p, h, bits); },
       2 * f32 + static_cast<double>(bits.nbytes()), true},
      {"relu_dropout_bwd.inpl", [&] { kernels::relu_dropout_backward(g, bits, p, g); },
       2 * f32 + static_cast<double>(bits.nbytes()), true},
      {"gather_rows (p = 0)",
       [&] { kernels::gather_dropout_rows(shuffled, shuffled_ids, key, 0.0f, y); }, 2 * f32,
       false},
      {"gather_dropout_rows", [&] { kernels::gather_dropout_rows(shuffled, shuffled_ids, key, p, y); },
       2 * f32, false},
      {"gather N/4 step order",
       [&] { kernels::gather_dropout_rows(part_rows, part_ids, key, p, y_part); }, part_bytes,
       false},
      {"gather N/4 read order",
       [&] {
         kernels::gather_read_order(part_keys, nodes, part_order);
         kernels::gather_dropout_rows(part_rows, part_ids, key, p, y_part, part_order);
       },
       part_bytes, false},
  };
  static std::vector<std::string> codec_names;
  codec_names.clear();
  for (std::size_t c = 0; c < std::size(codecs); ++c) {
    codec_names.push_back(std::string("encode_rows ") + kernels::row_codec_name(codecs[c]));
    codec_names.push_back(std::string("decode_rows ") + kernels::row_codec_name(codecs[c]));
  }
  for (std::size_t c = 0; c < std::size(codecs); ++c) {
    const double wire = static_cast<double>(wires[c].nbytes());
    ops.push_back({codec_names[2 * c].c_str(),
                   [&, c] { kernels::encode_rows(x, codecs[c], wires[c]); }, f32 + wire, false});
    ops.push_back({codec_names[2 * c + 1].c_str(),
                   [&, c] { kernels::decode_rows(wires[c], codecs[c], y); }, f32 + wire, false});
  }
  const int kOps = static_cast<int>(ops.size());
  constexpr int kCopy = 0, kScale = 1;
  std::vector<std::vector<double>> seconds(kOps);
  for (const auto& op : ops)
    op.run(); // warm-up
  for (int round = 0; round < reps; ++round)
    for (int o = 0; o < kOps; ++o) {
      Stopwatch watch;
      ops[o].run();
      seconds[o].push_back(watch.seconds());
    }
  for (auto& s : seconds)
    std::sort(s.begin(), s.end());
  const double copy = ops[kCopy].bytes / seconds[kCopy].front() / 1e9;
  const double scale = ops[kScale].bytes / seconds[kScale].front() / 1e9;
  for (int o = 0; o < kOps; ++o) {
    const Timing t{seconds[o].front(), seconds[o][seconds[o].size() / 2]};
    const double gbps = ops[o].bytes / t.best / 1e9;
    const double reference = ops[o].in_place ? scale : copy;
    std::printf("%-8d %-22s %10.2f %10.2f %9.2f %9.2f\n", threads, ops[o].name, t.best * 1e3,
                t.median * 1e3, gbps, gbps / reference);
    if (json.is_open())
      json << fmt::format(
          "{{\"threads\": {}, \"kernel\": \"{}\", \"best_s\": {:.6f}, \"median_s\": {:.6f}, "
          "\"gbps\": {:.3f}, \"reference_gbps\": {:.3f}}}\n",
          threads, ops[o].name, t.best, t.median, gbps, reference);
  }
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
  std::string threads_list = "1,2", json_path, tiles_list = "0,16,32,64";
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
  app.add_option("--tiles", tiles_list,
                 "comma-separated SpMM column-tile widths to time (0: untiled)");
  app.add_option("--json", json_path, "also write one JSON object per measurement to this file");
  bool dropout_only = false;
  app.add_flag("--dropout-only", dropout_only,
               "only the copy and triad references and the dropout kernels (no graph)");
  CLI11_PARSE(app, argc, argv);

  std::vector<int> thread_counts;
  for (std::size_t pos = 0; pos < threads_list.size();) {
    const auto comma = threads_list.find(',', pos);
    thread_counts.push_back(std::stoi(threads_list.substr(pos, comma - pos)));
    pos = comma == std::string::npos ? threads_list.size() : comma + 1;
  }

  std::ofstream json;
  if (!json_path.empty()) json.open(json_path);
  std::printf("dropout: [%lld, %lld] f32 = %.1f MB, CPU path %s\n", static_cast<long long>(nodes),
              static_cast<long long>(feat),
              static_cast<double>(nodes) * static_cast<double>(feat) * 4 / 1e6,
              kernels::cpu_isa_name(kernels::cpu_dropout_isa()));
  // vs_ref: the SpMM against the triad, the dropout kernels against a copy of their size.
  const auto header = [] {
    std::printf("%-8s %-22s %10s %10s %9s %9s\n", "threads", "kernel", "best_ms", "median_ms",
                "GB/s", "vs_ref");
  };
  if (dropout_only) {
    header();
    for (int threads : thread_counts) {
      omp_set_num_threads(threads);
      bench_dropout(threads, nodes, feat, reps, json);
    }
    return 0;
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

  const std::int64_t nnz = pattern.nnz();
  std::printf("graph: %lld nodes, %lld nonzeros, F = %lld; X = %.1f MB\n",
              static_cast<long long>(nodes), static_cast<long long>(nnz),
              static_cast<long long>(feat), static_cast<double>(x.nbytes()) / 1e6);
  header();
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
    // Column tiles: the blocked weighted SpMM at each width, interleaved over rounds.
    std::vector<std::int64_t> tiles;
    for (std::size_t pos = 0; pos < tiles_list.size();) {
      const auto comma = tiles_list.find(',', pos);
      tiles.push_back(std::stoll(tiles_list.substr(pos, comma - pos)));
      pos = comma == std::string::npos ? tiles_list.size() : comma + 1;
    }
    const std::int64_t chosen = kernels::cpu::spmm_tile_columns_for(
        nodes, feat, kernels::cpu::last_level_cache_bytes());
    if (std::find(tiles.begin(), tiles.end(), chosen) == tiles.end() &&
        !(chosen == feat && std::find(tiles.begin(), tiles.end(), 0) != tiles.end()))
      tiles.push_back(chosen);
    std::vector<std::vector<double>> tile_seconds(tiles.size());
    const auto run_tile = [&](std::int64_t tile) {
      kernels::cpu::spmm_blocked_tiled(nodes, weighted.indptr.ptr<EdgeId>(),
                                       weighted.indices.ptr<LocalId>(),
                                       weighted.values.ptr<float>(), x.ptr<float>(), feat, tile,
                                       y.ptr<float>());
    };
    for (const auto tile : tiles)
      run_tile(tile); // warm-up
    for (int round = 0; round < reps; ++round)
      for (std::size_t t = 0; t < tiles.size(); ++t) {
        Stopwatch watch;
        run_tile(tiles[t]);
        tile_seconds[t].push_back(watch.seconds());
      }
    std::printf("column tiles (LLC %.1f MiB, cache-sized width %lld; bound = CSR once per tile + X "
                "+ Y at the triad's GB/s):\n",
                static_cast<double>(kernels::cpu::last_level_cache_bytes()) / (1 << 20),
                static_cast<long long>(chosen));
    for (std::size_t t = 0; t < tiles.size(); ++t) {
      std::sort(tile_seconds[t].begin(), tile_seconds[t].end());
      const Timing timing{tile_seconds[t].front(), tile_seconds[t][tile_seconds[t].size() / 2]};
      const std::int64_t width = tiles[t] <= 0 ? feat : std::min(tiles[t], feat);
      const std::int64_t passes = (feat + width - 1) / width;
      const double csr = static_cast<double>(nodes + 1) * 8 + static_cast<double>(nnz) * 8;
      const double dense = 2.0 * static_cast<double>(nodes) * static_cast<double>(feat) * 4;
      const double bound_s = (static_cast<double>(passes) * csr + dense) / (triad * 1e9);
      const std::string name = fmt::format("spmm.tile.{}{}", width, width == chosen ? "*" : "");
      std::printf("%-8d %-22s %10.2f %10.2f %9s %9s  bound %.2f ms = %.2fx of best\n", threads,
                  name.c_str(), timing.best * 1e3, timing.median * 1e3, "-", "-", bound_s * 1e3,
                  bound_s / timing.best);
      if (json.is_open())
        json << fmt::format("{{\"threads\": {}, \"kernel\": \"{}\", \"best_s\": {:.6f}, "
                            "\"median_s\": {:.6f}, \"bound_s\": {:.6f}}}\n",
                            threads, name, timing.best, timing.median, bound_s);
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
    bench_dropout(threads, nodes, feat, reps, json);
  }
  return 0;
}
