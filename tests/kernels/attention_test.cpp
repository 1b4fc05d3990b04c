// The attention ops: the CPU twin against a double-precision reference written from the
// definitions, finite-difference gradients, the self-loop pattern, and the CPU and CUDA twins
// against each other where a GPU is visible.
#include "kernel_test_util.hpp"

#include "attention_math.hpp"
#include "tessel/kernels/kernels.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>

#include <omp.h>

namespace tessel {
namespace {

struct Case {
  int heads;
  std::int64_t f;
  bool average;
  float p;
};

// A graph with self loops, its packed rows and destination terms.
struct Inputs {
  LocalCsr csr;  // with self loops
  Tensor packed, dst_term, ids;
};

Inputs make_inputs(const Case& c, std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  Inputs in;
  const auto base = kernels::SparseMatrix::from_csr(test::random_csr(rows, cols, 6, false, seed));
  in.csr = kernels::add_self_loops(base).to_csr();
  in.packed = test::random_tensor({cols, c.heads * c.f + c.heads}, seed + 1, -1.5f, 1.5f);
  in.dst_term = test::random_tensor({rows, c.heads}, seed + 2, -1.5f, 1.5f);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(cols));
  for (std::int64_t i = 0; i < cols; ++i) ids[static_cast<std::size_t>(i)] = 1000 + 7 * i;
  in.ids = Tensor::from_vector(ids);
  return in;
}

kernels::AttentionDropout dropout_of(const Case& c, const Tensor& ids) {
  kernels::AttentionDropout d;
  d.key = rng::Key{42, rng::Stream::dropout, 3, 5, 256};
  d.p = c.p;
  d.ids = ids;
  return d;
}

// The forward in double, straight from the definitions: out [rows, out_cols], alpha [E, H]
// (negated where dropped, like the op).
void reference_forward(const Case& c, const Inputs& in, std::vector<double>& out,
                       std::vector<double>& alpha) {
  const auto& g = in.csr;
  const int H = c.heads;
  const std::int64_t F = c.f, ld = H * F + H, out_cols = c.average ? F : H * F;
  const float* z = in.packed.data<float>();
  const float* t = in.dst_term.data<float>();
  const auto drop = dropout_of(c, in.ids);
  const std::int64_t* ids = in.ids.data<std::int64_t>();
  out.assign(static_cast<std::size_t>(g.num_rows * out_cols), 0.0);
  alpha.assign(g.indices.size() * static_cast<std::size_t>(H), 0.0);
  for (std::int64_t v = 0; v < g.num_rows; ++v)
    for (int h = 0; h < H; ++h) {
      double denom = 0;
      std::vector<double> ex;
      for (EdgeId e = g.indptr[v]; e < g.indptr[v + 1]; ++e) {
        const double x = double(z[g.indices[e] * ld + H * F + h]) + t[v * H + h];
        ex.push_back(std::exp(x > 0 ? x : 0.2 * x));
      }
      for (double x : ex) denom += x;
      for (EdgeId e = g.indptr[v]; e < g.indptr[v + 1]; ++e) {
        const LocalId u = g.indices[e];
        const double a = ex[static_cast<std::size_t>(e - g.indptr[v])] / denom;
        const bool keep = c.p == 0 || kernels::detail::attention_keep(drop.key, ids[v], ids[u], h, c.p);
        alpha[static_cast<std::size_t>(e * H + h)] = keep ? a : -a;
        const double w = keep ? a / (1.0 - c.p) : 0.0;
        for (std::int64_t k = 0; k < F; ++k) {
          const std::int64_t o = c.average ? k : h * F + k;
          out[static_cast<std::size_t>(v * out_cols + o)] +=
              w * z[u * ld + h * F + k] / (c.average ? H : 1);
        }
      }
    }
}

std::vector<Case> cases() {
  return {{1, 7, false, 0.0f}, {3, 5, false, 0.0f}, {4, 8, true, 0.0f},
          {2, 33, false, 0.4f}, {5, 3, true, 0.5f}, {8, 8, false, 0.6f},
          // The head widths the CPU twin has fixed-length loops for (8 above, 16, 32, 64).
          {8, 16, false, 0.5f}, {2, 32, true, 0.3f}, {1, 64, false, 0.0f}};
}

TEST(Attention, ForwardMatchesReference) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(testing::Message() << c.heads << " heads, F " << c.f << ", p " << c.p);
    const Inputs in = make_inputs(c, 40, 55, 11);
    const auto graph = kernels::SparseMatrix::from_csr(in.csr);
    const std::int64_t out_cols = c.average ? c.f : c.heads * c.f;
    Tensor out = Tensor::empty({40, out_cols}, DType::f32);
    Tensor alpha = Tensor::empty({graph.nnz(), c.heads}, DType::f32);
    kernels::attention_forward(graph, in.packed, in.dst_term, c.heads, c.average,
                               dropout_of(c, in.ids), out, alpha);
    std::vector<double> ref_out, ref_alpha;
    reference_forward(c, in, ref_out, ref_alpha);
    std::int64_t dropped = 0;
    for (std::int64_t i = 0; i < alpha.numel(); ++i) {
      ASSERT_NEAR(alpha.data<float>()[i], ref_alpha[static_cast<std::size_t>(i)], 1e-5) << i;
      ASSERT_EQ(std::signbit(alpha.data<float>()[i]), ref_alpha[static_cast<std::size_t>(i)] < 0);
      dropped += ref_alpha[static_cast<std::size_t>(i)] < 0;
    }
    for (std::int64_t i = 0; i < out.numel(); ++i)
      ASSERT_NEAR(out.data<float>()[i], ref_out[static_cast<std::size_t>(i)], 1e-4) << i;
    // The dropout draws drop about p of the coefficients.
    const double fraction = double(dropped) / double(alpha.numel());
    EXPECT_NEAR(fraction, c.p, 0.08);
  }
}

// L = sum(out * r): its gradient with respect to packed and dst_term from the backward op,
// against central differences of the forward (the dropout draws are fixed by the key).
TEST(Attention, BackwardMatchesFiniteDifferences) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(testing::Message() << c.heads << " heads, F " << c.f << ", p " << c.p);
    Inputs in = make_inputs(c, 12, 16, 23);
    const auto graph = kernels::SparseMatrix::from_csr(in.csr);
    const std::int64_t out_cols = c.average ? c.f : c.heads * c.f;
    const Tensor r = test::random_tensor({12, out_cols}, 29);
    const auto drop = dropout_of(c, in.ids);
    auto loss = [&]() {
      Tensor out = Tensor::empty({12, out_cols}, DType::f32);
      Tensor alpha = Tensor::empty({graph.nnz(), c.heads}, DType::f32);
      kernels::attention_forward(graph, in.packed, in.dst_term, c.heads, c.average, drop, out,
                                 alpha);
      double l = 0;
      for (std::int64_t i = 0; i < out.numel(); ++i)
        l += double(out.data<float>()[i]) * r.data<float>()[i];
      return l;
    };
    Tensor out = Tensor::empty({12, out_cols}, DType::f32);
    Tensor alpha = Tensor::empty({graph.nnz(), c.heads}, DType::f32);
    kernels::attention_forward(graph, in.packed, in.dst_term, c.heads, c.average, drop, out, alpha);
    Tensor grad_packed = Tensor::empty(in.packed.shape(), DType::f32);
    Tensor grad_dst = Tensor::empty(in.dst_term.shape(), DType::f32);
    kernels::attention_backward(graph, in.packed, in.dst_term, c.heads, c.average, c.p, alpha, r,
                                grad_packed, grad_dst);
    const double eps = 1e-2;
    // Coordinates whose step moves a logit across the LeakyReLU's kink have no derivative there:
    // those are skipped (a source term (u, h) or a destination term (v, h) within 2 eps of it).
    const int H = c.heads;
    const std::int64_t ld = H * c.f + H;
    auto near_kink = [&](bool is_dst, std::int64_t i) {
      const std::int64_t row = i / (is_dst ? H : ld), col = i % (is_dst ? H : ld);
      if (!is_dst && col < H * c.f) return false;
      const int h = static_cast<int>(is_dst ? col : col - H * c.f);
      for (std::int64_t v = 0; v < in.csr.num_rows; ++v)
        for (EdgeId e = in.csr.indptr[v]; e < in.csr.indptr[v + 1]; ++e) {
          const LocalId u = in.csr.indices[e];
          if ((is_dst ? v : u) != row) continue;
          const float x = in.packed.data<float>()[u * ld + H * c.f + h] +
                          in.dst_term.data<float>()[v * H + h];
          if (std::fabs(x) < 2 * eps) return true;
        }
      return false;
    };
    std::int64_t checked = 0;
    auto check = [&](Tensor& x, const Tensor& grad, const char* name) {
      for (std::int64_t i = 0; i < x.numel(); ++i) {
        if (near_kink(&x == &in.dst_term, i)) continue;
        ++checked;
        float& xi = x.data<float>()[i];
        const float saved = xi;
        xi = static_cast<float>(saved + eps);
        const double up = loss();
        xi = static_cast<float>(saved - eps);
        const double down = loss();
        xi = saved;
        const double fd = (up - down) / (2 * eps);
        ASSERT_NEAR(grad.data<float>()[i], fd, 2e-3 + 2e-2 * std::fabs(fd)) << name << " " << i;
      }
    };
    check(in.packed, grad_packed, "packed");
    check(in.dst_term, grad_dst, "dst_term");
    EXPECT_GT(checked, (in.packed.numel() + in.dst_term.numel()) * 3 / 4);
  }
}

TEST(Attention, ProjectAndItsBackward) {
  const int heads = 3;
  const std::int64_t f = 4, n_src = 9, n_dst = 5, hf = heads * f;
  Tensor wh = test::random_tensor({n_src, hf}, 3);
  Tensor att_src = test::random_tensor({hf}, 4), att_dst = test::random_tensor({hf}, 5);
  Tensor packed = Tensor::empty({n_src, hf + heads}, DType::f32);
  Tensor dst_term = Tensor::empty({n_dst, heads}, DType::f32);
  kernels::attention_project(wh, att_src, att_dst, heads, packed, dst_term);
  for (std::int64_t u = 0; u < n_src; ++u)
    for (int h = 0; h < heads; ++h) {
      double s = 0, t = 0;
      for (std::int64_t c = 0; c < f; ++c) {
        s += double(wh.data<float>()[u * hf + h * f + c]) * att_src.data<float>()[h * f + c];
        t += double(wh.data<float>()[u * hf + h * f + c]) * att_dst.data<float>()[h * f + c];
      }
      EXPECT_NEAR(packed.data<float>()[u * (hf + heads) + hf + h], s, 1e-5);
      if (u < n_dst) {
        EXPECT_NEAR(dst_term.data<float>()[u * heads + h], t, 1e-5);
      }
      for (std::int64_t c = 0; c < f; ++c)
        EXPECT_EQ(packed.data<float>()[u * (hf + heads) + h * f + c],
                  wh.data<float>()[u * hf + h * f + c]);
    }
  // L = sum(packed * rp) + sum(dst_term * rd): gradients against central differences.
  const Tensor rp = test::random_tensor(packed.shape(), 6), rd = test::random_tensor(dst_term.shape(), 7);
  auto loss = [&]() {
    Tensor p2 = Tensor::empty(packed.shape(), DType::f32), d2 = Tensor::empty(dst_term.shape(), DType::f32);
    kernels::attention_project(wh, att_src, att_dst, heads, p2, d2);
    double l = 0;
    for (std::int64_t i = 0; i < p2.numel(); ++i) l += double(p2.data<float>()[i]) * rp.data<float>()[i];
    for (std::int64_t i = 0; i < d2.numel(); ++i) l += double(d2.data<float>()[i]) * rd.data<float>()[i];
    return l;
  };
  Tensor grad_wh = Tensor::empty(wh.shape(), DType::f32);
  Tensor grad_src = Tensor::zeros({hf}, DType::f32), grad_dst = Tensor::zeros({hf}, DType::f32);
  kernels::attention_project_backward(packed, rp, rd, att_src, att_dst, heads, grad_wh, grad_src,
                                      grad_dst);
  const double eps = 1e-2;
  for (auto [x, g] : {std::pair{&wh, &grad_wh}, std::pair{&att_src, &grad_src},
                      std::pair{&att_dst, &grad_dst}})
    for (std::int64_t i = 0; i < x->numel(); ++i) {
      float& xi = x->data<float>()[i];
      const float saved = xi;
      xi = static_cast<float>(saved + eps);
      const double up = loss();
      xi = static_cast<float>(saved - eps);
      const double down = loss();
      xi = saved;
      EXPECT_NEAR(g->data<float>()[i], (up - down) / (2 * eps), 1e-3) << i;
    }
}

TEST(Attention, SelfLoopsComeFirst) {
  const LocalCsr base = test::random_csr(30, 45, 5, true, 3);
  const LocalCsr looped = kernels::add_self_loops(kernels::SparseMatrix::from_csr(base)).to_csr();
  ASSERT_EQ(looped.num_rows, 30);
  ASSERT_EQ(looped.num_cols, 45);
  EXPECT_TRUE(looped.values.empty());
  for (std::int64_t v = 0; v < 30; ++v) {
    ASSERT_EQ(looped.indptr[v + 1] - looped.indptr[v], base.indptr[v + 1] - base.indptr[v] + 1);
    EXPECT_EQ(looped.indices[looped.indptr[v]], v);
    for (EdgeId e = base.indptr[v]; e < base.indptr[v + 1]; ++e)
      EXPECT_EQ(looped.indices[looped.indptr[v] + 1 + (e - base.indptr[v])], base.indices[e]);
  }
  EXPECT_THROW(kernels::add_self_loops(kernels::SparseMatrix::from_csr(test::random_csr(5, 3, 2, false, 1))),
               InputError);
}

// The forward and backward on one device, outputs on the host.
std::vector<Tensor> run_on(Device d, const Case& c) {
  const Inputs in = make_inputs(c, 300, 420, 5);
  const auto graph = kernels::add_self_loops(
      kernels::SparseMatrix::from_csr(test::random_csr(300, 420, 40, false, 8), d));
  const std::int64_t out_cols = c.average ? c.f : c.heads * c.f;
  const Tensor packed = in.packed.to(d), dst = in.dst_term.to(d);
  auto drop = dropout_of(c, in.ids);
  drop.ids = in.ids.to(d);
  Tensor out = Tensor::empty({300, out_cols}, DType::f32, d);
  Tensor alpha = Tensor::empty({graph.nnz(), c.heads}, DType::f32, d);
  kernels::attention_forward(graph, packed, dst, c.heads, c.average, drop, out, alpha);
  const Tensor r = test::random_tensor({300, out_cols}, 9).to(d);
  Tensor grad_packed = Tensor::empty(packed.shape(), DType::f32, d);
  Tensor grad_dst = Tensor::empty(dst.shape(), DType::f32, d);
  kernels::attention_backward(graph, packed, dst, c.heads, c.average, c.p, alpha, r, grad_packed,
                              grad_dst);
  const std::int64_t hf = c.heads * c.f;
  const Tensor wh = test::random_tensor({420, hf}, 10).to(d);
  const Tensor att_src = test::random_tensor({hf}, 11).to(d), att_dst = test::random_tensor({hf}, 12).to(d);
  Tensor p2 = Tensor::empty({420, hf + c.heads}, DType::f32, d);
  Tensor d2 = Tensor::empty({300, c.heads}, DType::f32, d);
  kernels::attention_project(wh, att_src, att_dst, c.heads, p2, d2);
  Tensor grad_wh = Tensor::empty(wh.shape(), DType::f32, d);
  Tensor gs = Tensor::zeros({hf}, DType::f32, d), gd = Tensor::zeros({hf}, DType::f32, d);
  kernels::attention_project_backward(p2, grad_packed, grad_dst, att_src, att_dst, c.heads, grad_wh,
                                      gs, gd);
  std::vector<Tensor> outputs = {out, alpha, grad_packed, grad_dst, p2, d2, grad_wh, gs, gd};
  for (auto& t : outputs) t = t.to(Device::cpu());
  return outputs;
}

// The CPU backward splits the sources among the threads; every sum runs in the same order
// whatever their number, so 1, 2 and 3 threads give the same gradients bit for bit.
TEST(Attention, CpuBackwardIsTheSameForAnyThreadCount) {
  const int saved_threads = omp_get_max_threads();
  for (const Case& c : cases()) {
    SCOPED_TRACE(testing::Message() << c.heads << " heads, F " << c.f << ", p " << c.p);
    omp_set_num_threads(1);
    const auto one = run_on(Device::cpu(), c);
    for (int threads : {2, 3}) {
      omp_set_num_threads(threads);
      const auto many = run_on(Device::cpu(), c);
      for (std::size_t i = 0; i < one.size(); ++i)
        EXPECT_TRUE(many[i].shape() == one[i].shape() &&
                    std::memcmp(many[i].raw(), one[i].raw(), one[i].nbytes()) == 0)
            << "output " << i << ", " << threads << " threads";
    }
  }
  omp_set_num_threads(saved_threads);
}

TEST(Attention, CpuAndCudaTwinsAgree) {
  const bool has_cuda = device_memory::cuda_available();
  if (!has_cuda)
    std::fprintf(stderr, "[attention test] no CUDA device visible: the CPU vs CUDA comparison of "
                         "the attention ops was NOT run\n");
  for (const Case& c : cases()) {
    SCOPED_TRACE(testing::Message() << c.heads << " heads, F " << c.f << ", p " << c.p);
    const auto cpu = run_on(Device::cpu(), c);
    ASSERT_EQ(cpu.size(), 9u);
    if (!has_cuda) continue;
    const auto gpu = run_on(Device::cuda(0), c);
    for (std::size_t i = 0; i < cpu.size(); ++i)
      EXPECT_TRUE(test::tensors_close(gpu[i], cpu[i], 1e-4, 1e-5)) << "output " << i;
  }
}

} // namespace
} // namespace tessel
