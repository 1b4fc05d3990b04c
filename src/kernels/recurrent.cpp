// Dispatch of the GRU and LSTM gate arithmetic.
#include "tessel/kernels/recurrent.hpp"

#include "check.hpp"
#include "cpu/cpu_ops.hpp"
#ifdef TESSEL_WITH_CUDA
#include "cuda/cuda_ops.hpp"
#endif

#include <utility>

namespace tessel::kernels {

namespace {
// t is f32 [n, cols] on `device`.
void expect_block(const char* op, const char* name, const Tensor& t, std::int64_t n,
                  std::int64_t cols, Device device) {
  detail::expect_tensor(op, name, t, DType::f32, 2);
  detail::expect_shape(op, name, t, {n, cols});
  detail::expect_device(op, name, t, device);
}

// The hidden width of a gate block of `gates` gates: its columns / gates.
std::int64_t hidden_of(const char* op, const Tensor& block, std::int64_t gates) {
  detail::expect_tensor(op, "gates", block, DType::f32, 2);
  TESSEL_EXPECTS(block.cols() % gates == 0, "{}: the gate block {} is not {} gates wide", op,
                 block.describe(), gates);
  return block.cols() / gates;
}
} // namespace

// (The dispatch macro names the CUDA resources `r`: the reset gate is `r_gate` here.)
void gru_cell_forward(const Tensor& gi, const Tensor& gh, const Tensor& h, Tensor& r_gate,
                      Tensor& z, Tensor& n, Tensor& hn, Tensor& h_next, Context* ctx) {
  constexpr const char* kOp = "gru_cell_forward";
  const std::int64_t H = hidden_of(kOp, gi, 3), rows = gi.rows();
  const Device device = gi.device();
  expect_block(kOp, "gh", gh, rows, 3 * H, device);
  expect_block(kOp, "h", h, rows, H, device);
  expect_block(kOp, "r", r_gate, rows, H, device);
  expect_block(kOp, "z", z, rows, H, device);
  expect_block(kOp, "n", n, rows, H, device);
  expect_block(kOp, "hn", hn, rows, H, device);
  expect_block(kOp, "h_next", h_next, rows, H, device);
  Context& context = resolve_context(ctx, device, kOp);
  if (rows * H == 0) return;
  TESSEL_KERNEL_DISPATCH(
      kOp, device, context,
      cpu::gru_cell_forward(rows, H, gi.ptr<float>(), gh.ptr<float>(), h.ptr<float>(),
                            r_gate.ptr<float>(), z.ptr<float>(), n.ptr<float>(), hn.ptr<float>(),
                            h_next.ptr<float>()),
      cuda::gru_cell_forward(r, rows, H, gi.ptr<float>(), gh.ptr<float>(), h.ptr<float>(),
                             r_gate.ptr<float>(), z.ptr<float>(), n.ptr<float>(), hn.ptr<float>(),
                             h_next.ptr<float>()));
}

void gru_cell_backward(const Tensor& grad_h_next, const Tensor& h, const Tensor& r_gate,
                       const Tensor& z, const Tensor& n, const Tensor& hn, Tensor& grad_gi,
                       Tensor& grad_gh, Tensor& grad_h, Context* ctx) {
  constexpr const char* kOp = "gru_cell_backward";
  detail::expect_tensor(kOp, "grad_h_next", grad_h_next, DType::f32, 2);
  const std::int64_t rows = grad_h_next.rows(), H = grad_h_next.cols();
  const Device device = grad_h_next.device();
  expect_block(kOp, "h", h, rows, H, device);
  expect_block(kOp, "r", r_gate, rows, H, device);
  expect_block(kOp, "z", z, rows, H, device);
  expect_block(kOp, "n", n, rows, H, device);
  expect_block(kOp, "hn", hn, rows, H, device);
  expect_block(kOp, "grad_gi", grad_gi, rows, 3 * H, device);
  expect_block(kOp, "grad_gh", grad_gh, rows, 3 * H, device);
  expect_block(kOp, "grad_h", grad_h, rows, H, device);
  Context& context = resolve_context(ctx, device, kOp);
  if (rows * H == 0) return;
  TESSEL_KERNEL_DISPATCH(
      kOp, device, context,
      cpu::gru_cell_backward(rows, H, grad_h_next.ptr<float>(), h.ptr<float>(), r_gate.ptr<float>(),
                             z.ptr<float>(), n.ptr<float>(), hn.ptr<float>(), grad_gi.ptr<float>(),
                             grad_gh.ptr<float>(), grad_h.ptr<float>()),
      cuda::gru_cell_backward(r, rows, H, grad_h_next.ptr<float>(), h.ptr<float>(),
                              r_gate.ptr<float>(), z.ptr<float>(), n.ptr<float>(), hn.ptr<float>(),
                              grad_gi.ptr<float>(), grad_gh.ptr<float>(), grad_h.ptr<float>()));
}

void lstm_cell_forward(Tensor& gates, const Tensor& c, Tensor& c_next, Tensor& h_next,
                       Context* ctx) {
  constexpr const char* kOp = "lstm_cell_forward";
  const std::int64_t H = hidden_of(kOp, gates, 4), rows = gates.rows();
  const Device device = gates.device();
  expect_block(kOp, "c", c, rows, H, device);
  expect_block(kOp, "c_next", c_next, rows, H, device);
  expect_block(kOp, "h_next", h_next, rows, H, device);
  Context& context = resolve_context(ctx, device, kOp);
  if (rows * H == 0) return;
  TESSEL_KERNEL_DISPATCH(kOp, device, context,
                         cpu::lstm_cell_forward(rows, H, gates.ptr<float>(), c.ptr<float>(),
                                                c_next.ptr<float>(), h_next.ptr<float>()),
                         cuda::lstm_cell_forward(r, rows, H, gates.ptr<float>(), c.ptr<float>(),
                                                 c_next.ptr<float>(), h_next.ptr<float>()));
}

void lstm_cell_backward(const Tensor& grad_h, const Tensor& grad_c, const Tensor& gates,
                        const Tensor& c, const Tensor& c_next, Tensor& grad_pre,
                        Tensor& grad_c_prev, Context* ctx) {
  constexpr const char* kOp = "lstm_cell_backward";
  const std::int64_t H = hidden_of(kOp, gates, 4), rows = gates.rows();
  const Device device = gates.device();
  expect_block(kOp, "grad_h", grad_h, rows, H, device);
  if (grad_c.defined()) expect_block(kOp, "grad_c", grad_c, rows, H, device);
  expect_block(kOp, "c", c, rows, H, device);
  expect_block(kOp, "c_next", c_next, rows, H, device);
  expect_block(kOp, "grad_pre", grad_pre, rows, 4 * H, device);
  expect_block(kOp, "grad_c_prev", grad_c_prev, rows, H, device);
  Context& context = resolve_context(ctx, device, kOp);
  if (rows * H == 0) return;
  const float* gc = grad_c.defined() ? grad_c.ptr<float>() : nullptr;
  TESSEL_KERNEL_DISPATCH(
      kOp, device, context,
      cpu::lstm_cell_backward(rows, H, grad_h.ptr<float>(), gc, gates.ptr<float>(), c.ptr<float>(),
                              c_next.ptr<float>(), grad_pre.ptr<float>(), grad_c_prev.ptr<float>()),
      cuda::lstm_cell_backward(r, rows, H, grad_h.ptr<float>(), gc, gates.ptr<float>(),
                               c.ptr<float>(), c_next.ptr<float>(), grad_pre.ptr<float>(),
                               grad_c_prev.ptr<float>()));
}

} // namespace tessel::kernels
