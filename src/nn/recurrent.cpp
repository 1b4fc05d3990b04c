// GRU and LSTM cells with hand-written backward passes: GEMMs and the gate arithmetic are kernel
// ops, so a cell runs on the device its parameters and inputs are on.
#include "tessel/nn/recurrent.hpp"

#include "tessel/core/error.hpp"
#include "tessel/kernels/dense.hpp"
#include "tessel/kernels/recurrent.hpp"
#include "tessel/nn/layers.hpp"

namespace tessel::nn {

namespace {

Parameter param(const std::string& name, Tensor value) {
  Tensor grad = Tensor::zeros(value.shape(), DType::f32);
  return Parameter{name, std::move(value), std::move(grad)};
}

// y = a b. a: [n, k], b: [k, m], on one device.
Tensor matmul(const Tensor& a, const Tensor& b) {
  Tensor y = Tensor::empty({a.rows(), b.cols()}, DType::f32, a.device());
  kernels::gemm(a, false, b, false, y);
  return y;
}

void check_input(const char* what, const Tensor& x, std::int64_t rows, std::int64_t cols,
                 Device device) {
  TESSEL_ASSERT(x.dtype() == DType::f32 && x.device() == device && x.dim() == 2 &&
                    x.rows() == rows && x.cols() == cols,
                "{}: input {} is not f32 [{}, {}] on {}", what, x.describe(), rows, cols,
                device.str());
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
  const Device d = w_input_.value.device();
  check_input("GruCell x", x, n, in_dim(), d);
  check_input("GruCell h", h, n, H, d);
  Tensor gi = matmul(x, w_input_.value);
  Tensor gh = matmul(h, w_hidden_.value);
  kernels::add_bias(gi, b_input_.value);
  kernels::add_bias(gh, b_hidden_.value);
  Saved s{x,
          h,
          Tensor::empty({n, H}, DType::f32, d),
          Tensor::empty({n, H}, DType::f32, d),
          Tensor::empty({n, H}, DType::f32, d),
          Tensor::empty({n, H}, DType::f32, d)};
  Tensor out = Tensor::empty({n, H}, DType::f32, d);
  kernels::gru_cell_forward(gi, gh, h, s.r, s.z, s.n, s.hn, out);
  saved_.push_back(std::move(s));
  return out;
}

std::pair<Tensor, Tensor> GruCell::backward(const Tensor& grad_h_next, bool need_input_grad) {
  TESSEL_ASSERT(!saved_.empty(), "GruCell::backward without a matching forward");
  Saved s = std::move(saved_.back());
  saved_.pop_back();
  const std::int64_t n = s.x.rows(), H = hidden();
  const Device d = w_input_.value.device();
  check_input("GruCell grad", grad_h_next, n, H, d);
  Tensor dgi = Tensor::empty({n, 3 * H}, DType::f32, d);
  Tensor dgh = Tensor::empty({n, 3 * H}, DType::f32, d);
  Tensor dh = Tensor::empty({n, H}, DType::f32, d);
  kernels::gru_cell_backward(grad_h_next, s.h, s.r, s.z, s.n, s.hn, dgi, dgh, dh);
  kernels::gemm(s.x, true, dgi, false, w_input_.grad, 1.0f, 1.0f);
  kernels::gemm(s.h, true, dgh, false, w_hidden_.grad, 1.0f, 1.0f);
  kernels::column_sums(dgi, b_input_.grad, true);
  kernels::column_sums(dgh, b_hidden_.grad, true);
  kernels::gemm(dgh, false, w_hidden_.value, true, dh, 1.0f, 1.0f);
  Tensor dx;
  if (need_input_grad) {
    dx = Tensor::empty({n, in_dim()}, DType::f32, d);
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
  const Device d = w_input_.value.device();
  check_input("LstmCell x", x, n, in_dim(), d);
  check_input("LstmCell h", state.h, n, H, d);
  check_input("LstmCell c", state.c, n, H, d);
  Tensor gates = matmul(x, w_input_.value);
  kernels::gemm(state.h, false, w_hidden_.value, false, gates, 1.0f, 1.0f);
  kernels::add_bias(gates, bias_.value);
  State out{Tensor::empty({n, H}, DType::f32, d), Tensor::empty({n, H}, DType::f32, d)};
  kernels::lstm_cell_forward(gates, state.c, out.c, out.h);
  saved_.push_back(Saved{x, state.h, state.c, gates, out.c});
  return out;
}

std::pair<Tensor, LstmCell::State> LstmCell::backward(const State& grad, bool need_input_grad) {
  TESSEL_ASSERT(!saved_.empty(), "LstmCell::backward without a matching forward");
  Saved s = std::move(saved_.back());
  saved_.pop_back();
  const std::int64_t n = s.x.rows(), H = hidden();
  const Device d = w_input_.value.device();
  check_input("LstmCell grad h", grad.h, n, H, d);
  if (grad.c.defined()) check_input("LstmCell grad c", grad.c, n, H, d);
  Tensor dpre = Tensor::empty({n, 4 * H}, DType::f32, d);
  State dprev{Tensor::empty({n, H}, DType::f32, d), Tensor::empty({n, H}, DType::f32, d)};
  kernels::lstm_cell_backward(grad.h, grad.c, s.gates, s.c, s.c_next, dpre, dprev.c);
  kernels::gemm(s.x, true, dpre, false, w_input_.grad, 1.0f, 1.0f);
  kernels::gemm(s.h, true, dpre, false, w_hidden_.grad, 1.0f, 1.0f);
  kernels::column_sums(dpre, bias_.grad, true);
  kernels::gemm(dpre, false, w_hidden_.value, true, dprev.h);
  Tensor dx;
  if (need_input_grad) {
    dx = Tensor::empty({n, in_dim()}, DType::f32, d);
    kernels::gemm(dpre, false, w_input_.value, true, dx);
  }
  return {dx, dprev};
}

}  // namespace tessel::nn
