// GEMM benchmark: OpenBLAS's cblas_sgemm against oneDNN's dnnl_sgemm and its matmul primitive
// (alone and with bias + ReLU fused), on the shapes of a GNN layer's forward and backward.
//
// tessel_bench_gemm [--rows N] [--feat F] [--classes C] [--threads 1,2] [--reps R]
// Shapes (row-major): forward X[N,F] W[F,F]; input gradient G[N,F] W^T; weight gradient
// X^T G (inner dimension N); the output layer X[N,F] W[F,C]. GFLOP/s of the median repetition;
// the forward shapes also time dnnl_sgemm followed by separate bias and ReLU passes, against the
// matmul primitive with both fused, counting the GEMM's flops only.
#include <CLI/CLI.hpp>
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

double median_seconds(int reps, const std::function<void()>& fn) {
  fn(); // warm-up: page faults, JIT code generation, caches
  std::vector<double> seconds;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

struct Shape {
  const char* name;
  bool transpose_a, transpose_b;
  std::int64_t m, n, k;
  const float* a;
  const float* b;
  float* c;
  std::int64_t lda, ldb, ldc;
};

dnnl::memory::desc matrix_desc(std::int64_t rows, std::int64_t cols, std::int64_t ld,
                               bool transposed) {
  // A transposed operand is the same buffer read with swapped strides.
  const dnnl::memory::dims strides =
      transposed ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1};
  return dnnl::memory::desc({rows, cols}, dnnl::memory::data_type::f32, strides);
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tessel GEMM benchmark: OpenBLAS against oneDNN on GNN layer shapes"};
  std::int64_t rows = 200000, feat = 128, classes = 16;
  std::string threads_list = "1,2";
  int reps = 5;
  app.add_option("--rows", rows, "rows N (nodes)")->check(CLI::PositiveNumber);
  app.add_option("--feat", feat, "feature / hidden width F")->check(CLI::PositiveNumber);
  app.add_option("--classes", classes, "output width C")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads_list, "comma-separated OpenMP thread counts");
  app.add_option("--reps", reps, "timed repetitions")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  std::vector<float> x(static_cast<std::size_t>(rows * feat), 0.5f), g(x.size(), 0.25f), y(x.size());
  std::vector<float> w(static_cast<std::size_t>(feat * feat), 0.01f), dw(w.size());
  std::vector<float> w_out(static_cast<std::size_t>(feat * classes), 0.01f);
  std::vector<float> y_out(static_cast<std::size_t>(rows * classes));
  std::vector<float> bias(static_cast<std::size_t>(std::max(feat, classes)), 0.1f);
  const Shape shapes[] = {
      {"forward X W", false, false, rows, feat, feat, x.data(), w.data(), y.data(), feat, feat,
       feat},
      {"input grad G W^T", false, true, rows, feat, feat, g.data(), w.data(), y.data(), feat, feat,
       feat},
      {"weight grad X^T G", true, false, feat, feat, rows, x.data(), g.data(), dw.data(), feat,
       feat, feat},
      {"output X W_out", false, false, rows, classes, feat, x.data(), w_out.data(), y_out.data(),
       feat, classes, classes},
  };

  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  std::printf("OpenBLAS core: %s\n", openblas_get_corename());
  std::printf("%-8s %-18s %10s %10s %10s %14s %14s   GFLOP/s\n", "threads", "shape", "openblas",
              "dnnl_sgemm", "matmul", "sgemm,b,relu", "matmul+b+relu");
  for (std::size_t pos = 0; pos < threads_list.size();) {
    const auto comma = threads_list.find(',', pos);
    const int threads = std::stoi(threads_list.substr(pos, comma - pos));
    pos = comma == std::string::npos ? threads_list.size() : comma + 1;
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    for (const Shape& s : shapes) {
      const double flops = 2.0 * static_cast<double>(s.m * s.n * s.k);
      const double t_blas = median_seconds(reps, [&] {
        cblas_sgemm(CblasRowMajor, s.transpose_a ? CblasTrans : CblasNoTrans,
                    s.transpose_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(s.m),
                    static_cast<blasint>(s.n), static_cast<blasint>(s.k), 1.0f, s.a,
                    static_cast<blasint>(s.lda), s.b, static_cast<blasint>(s.ldb), 0.0f, s.c,
                    static_cast<blasint>(s.ldc));
      });
      const double t_sgemm = median_seconds(reps, [&] {
        if (dnnl_sgemm(s.transpose_a ? 'T' : 'N', s.transpose_b ? 'T' : 'N', s.m, s.n, s.k, 1.0f,
                       s.a, s.lda, s.b, s.ldb, 0.0f, s.c, s.ldc) != dnnl_success)
          throw std::runtime_error("dnnl_sgemm failed");
      });
      const auto a_desc = matrix_desc(s.m, s.k, s.lda, s.transpose_a);
      const auto b_desc = matrix_desc(s.k, s.n, s.ldb, s.transpose_b);
      const auto c_desc = matrix_desc(s.m, s.n, s.ldc, false);
      dnnl::memory a_mem(a_desc, engine, const_cast<float*>(s.a));
      dnnl::memory b_mem(b_desc, engine, const_cast<float*>(s.b));
      dnnl::memory c_mem(c_desc, engine, s.c);
      dnnl::matmul plain(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_desc, b_desc, c_desc),
                                                      engine));
      const double t_matmul = median_seconds(reps, [&] {
        plain.execute(stream, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
        stream.wait();
      });
      // Bias and ReLU fuse only into a forward product (the backward products have neither).
      double t_fused = 0, t_separate = 0;
      if (!s.transpose_a && !s.transpose_b) {
        // What fusing saves: dnnl_sgemm followed by a bias pass and a ReLU pass over C.
        t_separate = median_seconds(reps, [&] {
          dnnl_sgemm('N', 'N', s.m, s.n, s.k, 1.0f, s.a, s.lda, s.b, s.ldb, 0.0f, s.c, s.ldc);
          float* c = s.c;
          const float* bias_row = bias.data();
          const std::int64_t m = s.m, n = s.n;
#pragma omp parallel for schedule(static)
          for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j)
              c[i * n + j] += bias_row[j];
#pragma omp parallel for schedule(static)
          for (std::int64_t i = 0; i < m * n; ++i)
            c[i] = std::max(c[i], 0.0f);
        });
        const dnnl::memory::desc bias_desc({1, s.n}, dnnl::memory::data_type::f32,
                                           dnnl::memory::dims{s.n, 1});
        dnnl::post_ops post;
        post.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
        dnnl::primitive_attr attr;
        attr.set_post_ops(post);
        dnnl::matmul fused(dnnl::matmul::primitive_desc(
            dnnl::matmul::desc(a_desc, b_desc, bias_desc, c_desc), attr, engine));
        dnnl::memory bias_mem(bias_desc, engine, bias.data());
        t_fused = median_seconds(reps, [&] {
          fused.execute(stream, {{DNNL_ARG_SRC, a_mem},
                                 {DNNL_ARG_WEIGHTS, b_mem},
                                 {DNNL_ARG_BIAS, bias_mem},
                                 {DNNL_ARG_DST, c_mem}});
          stream.wait();
        });
      }
      auto rate = [&](double t) {
        char text[32];
        if (t > 0) std::snprintf(text, sizeof text, "%.1f", flops / t / 1e9);
        else std::snprintf(text, sizeof text, "-");
        return std::string(text);
      };
      std::printf("%-8d %-18s %10s %10s %10s %14s %14s\n", threads, s.name, rate(t_blas).c_str(),
                  rate(t_sgemm).c_str(), rate(t_matmul).c_str(), rate(t_separate).c_str(),
                  rate(t_fused).c_str());
    }
  }
  return 0;
}
