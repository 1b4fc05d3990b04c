// Gate arithmetic of the GRU and LSTM cells, forward and backward (the GEMMs around it are
// gemm calls): element-wise ops with CPU and CUDA twins.
#pragma once

#include "tessel/core/tensor.hpp"
#include "tessel/kernels/context.hpp"

namespace tessel::kernels {

// GRU (PyTorch's equations), given gi = x W_i + b_i and gh = h W_h + b_h, f32 [n, 3H] with the
// gate columns in the order r, z, n, and h: f32 [n, H]:
//   r = s(gi_r + gh_r), z = s(gi_z + gh_z), hn = gh_n, n = tanh(gi_n + r hn),
//   h' = (1 - z) n + z h.
// Writes r, z, n, hn (what the backward needs) and h_next, all f32 [n, H] on gi's device,
// allocated by the caller.
void gru_cell_forward(const Tensor& gi, const Tensor& gh, const Tensor& h, Tensor& r, Tensor& z,
                      Tensor& n, Tensor& hn, Tensor& h_next, Context* ctx = nullptr);
// The backward of the gate arithmetic for d loss / d h' = grad_h_next [n, H]: grad_gi and
// grad_gh (f32 [n, 3H], d loss / d gi and d gh) and grad_h (f32 [n, H]: the direct term
// grad_h_next z only; the caller adds grad_gh W_h^T).
void gru_cell_backward(const Tensor& grad_h_next, const Tensor& h, const Tensor& r, const Tensor& z,
                       const Tensor& n, const Tensor& hn, Tensor& grad_gi, Tensor& grad_gh,
                       Tensor& grad_h, Context* ctx = nullptr);

// LSTM: gates = x W_i + h W_h + b, f32 [n, 4H] with the gate columns i, f, g, o, holds the
// pre-activations on entry and the activations (i f o sigmoid, g tanh) on return; c: f32
// [n, H]. Writes c_next = f c + i g and h_next = o tanh(c_next), f32 [n, H].
void lstm_cell_forward(Tensor& gates, const Tensor& c, Tensor& c_next, Tensor& h_next,
                       Context* ctx = nullptr);
// The backward for d loss / d h' = grad_h and d loss / d c' = grad_c (f32 [n, H]; undefined
// means zero), from the activated gates, c and c_next of the forward: grad_pre (f32 [n, 4H],
// d loss / d the pre-activations) and grad_c_prev (f32 [n, H], d loss / d c).
void lstm_cell_backward(const Tensor& grad_h, const Tensor& grad_c, const Tensor& gates,
                        const Tensor& c, const Tensor& c_next, Tensor& grad_pre,
                        Tensor& grad_c_prev, Context* ctx = nullptr);

} // namespace tessel::kernels
