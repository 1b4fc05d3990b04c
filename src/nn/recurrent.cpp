// GRU and LSTM cells with hand-written backward passes (dense GEMMs through the kernels layer,
// gate arithmetic on the host).
#include "tessel/nn/recurrent.hpp"

#include "tessel/core/error.hpp"
#include "tessel/kernels/dense.hpp"
#include "tessel/nn/layers.hpp"

#include <cmath>

namespace tessel::nn {

namespace {

Parameter param(const std::string& name, Tensor value) {
  Tensor grad = Tensor::zeros(value.shape(), DType::f32);
  return Parameter{name, std::move(value), std::move(grad)};
}

// y = a b (+ bias rows). a: [n, k], b: [k, m].
Tensor matmul(const Tensor& a, const Tensor& b) {
  Tensor y = Tensor::empty({a.rows(), b.cols()}, DType::f32);
  kernels::gemm(a, false, b, false, y);
  return y;
}

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

void check_input(const char* what, const Tensor& x, std::int64_t rows, std::int64_t cols) {
  TESSEL_ASSERT(x.dtype() == DType::f32 && x.device().is_cpu() && x.dim() == 2 &&
                    x.rows() == rows && x.cols() == cols,
                "{}: input {} is not f32 [{}, {}] on the CPU", what, x.describe(), rows, cols);
}

}  // namespace

// ---- GRU ----

GruCell::GruCell(const std::string& prefix, std::int64_t in_dim, std::int64_t hidden,
                 const rng::Key& key)
    : w_input_(param(prefix + ".w_input", glorot_uniform(in_dim, 3 * hidden, key, 0))),
      w_hidden_(param(prefix + ".w_hidden", glorot_uniform(hidden, 3 * hidden, key, 1))),
      b_input_(param(prefix + ".b_input", Tensor::zeros({3 * hidden}, DType::f32))),
      b_hidden_(param(prefix + ".b_hidden", Tensor::zeros({3 * hidden}, DType::f32))) {}

Tensor GruCell::forward(const Tensor& x, const Tensor& h) {
  const std::int64_t n = x.rows(), H = hidden();
  check_input("GruCell x", x, n, in_dim());
  check_input("GruCell h", h, n, H);
  Tensor gi = matmul(x, w_input_.value);
  Tensor gh = matmul(h, w_hidden_.value);
  kernels::add_bias(gi, b_input_.value);
  kernels::add_bias(gh, b_hidden_.value);
  Saved s{x, h, Tensor::empty({n, H}, DType::f32), Tensor::empty({n, H}, DType::f32),
          Tensor::empty({n, H}, DType::f32), Tensor::empty({n, H}, DType::f32)};
  Tensor out = Tensor::empty({n, H}, DType::f32);
  const float *pi = gi.data<float>(), *ph = gh.data<float>(), *hp = h.data<float>();
  float *r = s.r.data<float>(), *z = s.z.data<float>(), *nn_ = s.n.data<float>(),
        *hn = s.hn.data<float>(), *o = out.data<float>();
#pragma omp parallel for schedule(static)
  for (std::int64_t v = 0; v < n; ++v) {
    const float* a = pi + v * 3 * H;
    const float* b = ph + v * 3 * H;
    for (std::int64_t j = 0; j < H; ++j) {
      const std::int64_t k = v * H + j;
      r[k] = sigmoid(a[j] + b[j]);
      z[k] = sigmoid(a[H + j] + b[H + j]);
      hn[k] = b[2 * H + j];
      nn_[k] = std::tanh(a[2 * H + j] + r[k] * hn[k]);
      o[k] = (1.0f - z[k]) * nn_[k] + z[k] * hp[k];
    }
  }
  saved_.push_back(std::move(s));
  return out;
}

std::pair<Tensor, Tensor> GruCell::backward(const Tensor& grad_h_next, bool need_input_grad) {
  TESSEL_ASSERT(!saved_.empty(), "GruCell::backward without a matching forward");
  Saved s = std::move(saved_.back());
  saved_.pop_back();
  const std::int64_t n = s.x.rows(), H = hidden();
  check_input("GruCell grad", grad_h_next, n, H);
  Tensor dgi = Tensor::empty({n, 3 * H}, DType::f32);
  Tensor dgh = Tensor::empty({n, 3 * H}, DType::f32);
  Tensor dh = Tensor::empty({n, H}, DType::f32);
  const float *g = grad_h_next.data<float>(), *hp = s.h.data<float>(), *r = s.r.data<float>(),
              *z = s.z.data<float>(), *nn_ = s.n.data<float>(), *hn = s.hn.data<float>();
  float *di = dgi.data<float>(), *dhh = dgh.data<float>(), *dhp = dh.data<float>();
#pragma omp parallel for schedule(static)
  for (std::int64_t v = 0; v < n; ++v) {
    for (std::int64_t j = 0; j < H; ++j) {
      const std::int64_t k = v * H + j;
      const float dn = g[k] * (1.0f - z[k]);
      const float dz = g[k] * (hp[k] - nn_[k]);
      dhp[k] = g[k] * z[k];
      const float dn_pre = dn * (1.0f - nn_[k] * nn_[k]);
      const float dr_pre = dn_pre * hn[k] * r[k] * (1.0f - r[k]);
      const float dz_pre = dz * z[k] * (1.0f - z[k]);
      float* a = di + v * 3 * H;
      float* b = dhh + v * 3 * H;
      a[j] = b[j] = dr_pre;
      a[H + j] = b[H + j] = dz_pre;
      a[2 * H + j] = dn_pre;
      b[2 * H + j] = dn_pre * r[k];
    }
  }
  kernels::gemm(s.x, true, dgi, false, w_input_.grad, 1.0f, 1.0f);
  kernels::gemm(s.h, true, dgh, false, w_hidden_.grad, 1.0f, 1.0f);
  kernels::column_sums(dgi, b_input_.grad, true);
  kernels::column_sums(dgh, b_hidden_.grad, true);
  kernels::gemm(dgh, false, w_hidden_.value, true, dh, 1.0f, 1.0f);
  Tensor dx;
  if (need_input_grad) {
    dx = Tensor::empty({n, in_dim()}, DType::f32);
    kernels::gemm(dgi, false, w_input_.value, true, dx);
  }
  return {dx, dh};
}

// ---- LSTM ----

LstmCell::LstmCell(const std::string& prefix, std::int64_t in_dim, std::int64_t hidden,
                   const rng::Key& key)
    : w_input_(param(prefix + ".w_input", glorot_uniform(in_dim, 4 * hidden, key, 0))),
      w_hidden_(param(prefix + ".w_hidden", glorot_uniform(hidden, 4 * hidden, key, 1))),
      bias_(param(prefix + ".bias", Tensor::zeros({4 * hidden}, DType::f32))) {
  // Forget gate bias 1 (Jozefowicz et al.): the cell remembers by default.
  float* b = bias_.value.data<float>();
  for (std::int64_t j = 0; j < hidden; ++j) b[hidden + j] = 1.0f;
}

LstmCell::State LstmCell::forward(const Tensor& x, const State& state) {
  const std::int64_t n = x.rows(), H = hidden();
  check_input("LstmCell x", x, n, in_dim());
  check_input("LstmCell h", state.h, n, H);
  check_input("LstmCell c", state.c, n, H);
  Tensor gates = matmul(x, w_input_.value);
  kernels::gemm(state.h, false, w_hidden_.value, false, gates, 1.0f, 1.0f);
  kernels::add_bias(gates, bias_.value);
  State out{Tensor::empty({n, H}, DType::f32), Tensor::empty({n, H}, DType::f32)};
  float* a = gates.data<float>();
  const float* c = state.c.data<float>();
  float *h2 = out.h.data<float>(), *c2 = out.c.data<float>();
#pragma omp parallel for schedule(static)
  for (std::int64_t v = 0; v < n; ++v) {
    float* row = a + v * 4 * H;
    for (std::int64_t j = 0; j < H; ++j) {
      const float i = sigmoid(row[j]), f = sigmoid(row[H + j]), g = std::tanh(row[2 * H + j]),
                  o = sigmoid(row[3 * H + j]);
      row[j] = i;
      row[H + j] = f;
      row[2 * H + j] = g;
      row[3 * H + j] = o;
      const std::int64_t k = v * H + j;
      c2[k] = f * c[k] + i * g;
      h2[k] = o * std::tanh(c2[k]);
    }
  }
  saved_.push_back(Saved{x, state.h, state.c, gates, out.c});
  return out;
}

std::pair<Tensor, LstmCell::State> LstmCell::backward(const State& grad, bool need_input_grad) {
  TESSEL_ASSERT(!saved_.empty(), "LstmCell::backward without a matching forward");
  Saved s = std::move(saved_.back());
  saved_.pop_back();
  const std::int64_t n = s.x.rows(), H = hidden();
  check_input("LstmCell grad h", grad.h, n, H);
  Tensor dpre = Tensor::empty({n, 4 * H}, DType::f32);
  State dprev{Tensor::empty({n, H}, DType::f32), Tensor::empty({n, H}, DType::f32)};
  const float *gh = grad.h.data<float>(), *gc = grad.c.defined() ? grad.c.data<float>() : nullptr,
              *gates = s.gates.data<float>(), *c = s.c.data<float>(), *c2 = s.c_next.data<float>();
  float *d = dpre.data<float>(), *dc_prev = dprev.c.data<float>();
#pragma omp parallel for schedule(static)
  for (std::int64_t v = 0; v < n; ++v) {
    const float* row = gates + v * 4 * H;
    float* drow = d + v * 4 * H;
    for (std::int64_t j = 0; j < H; ++j) {
      const std::int64_t k = v * H + j;
      const float i = row[j], f = row[H + j], g = row[2 * H + j], o = row[3 * H + j];
      const float tc = std::tanh(c2[k]);
      const float dc = (gc ? gc[k] : 0.0f) + gh[k] * o * (1.0f - tc * tc);
      drow[j] = dc * g * i * (1.0f - i);
      drow[H + j] = dc * c[k] * f * (1.0f - f);
      drow[2 * H + j] = dc * i * (1.0f - g * g);
      drow[3 * H + j] = gh[k] * tc * o * (1.0f - o);
      dc_prev[k] = dc * f;
    }
  }
  kernels::gemm(s.x, true, dpre, false, w_input_.grad, 1.0f, 1.0f);
  kernels::gemm(s.h, true, dpre, false, w_hidden_.grad, 1.0f, 1.0f);
  kernels::column_sums(dpre, bias_.grad, true);
  kernels::gemm(dpre, false, w_hidden_.value, true, dprev.h);
  Tensor dx;
  if (need_input_grad) {
    dx = Tensor::empty({n, in_dim()}, DType::f32);
    kernels::gemm(dpre, false, w_input_.value, true, dx);
  }
  return {dx, dprev};
}

}  // namespace tessel::nn
