// Dense ops: GEMM, bias, row gather/scatter, activations, dropout, row normalization, axpy.
#pragma once

#include "tessel/core/rng.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/core/types.hpp"
#include "tessel/kernels/context.hpp"

#include <span>
#include <vector>

namespace tessel::kernels {

// c = alpha op(a) op(b) + beta c, row-major f32 rank-2 tensors on one device; op(a) is
// [m, k], op(b) is [k, n], c is [m, n] (allocated by the caller; with beta == 0 its old
// contents are ignored, NaNs included). oneDNN (or OpenBLAS, see cpu_gemm_backend) on CPU,
// cuBLAS on CUDA.
void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& c,
          float alpha = 1.0f, float beta = 0.0f, Context* ctx = nullptr);

// The library CPU GEMM goes to, chosen when Tessel was configured: "onednn" (found) or
// "openblas" (the fallback).
const char* cpu_gemm_backend();
// Threads of the CPU kernels: the OpenMP pool (which oneDNN's GEMM shares) and OpenBLAS's.
void set_cpu_threads(int threads);

// y[i, :] += bias for every row. y: f32 [n, F]; bias: f32 [F].
void add_bias(Tensor& y, const Tensor& bias, Context* ctx = nullptr);
// out[j] = sum_i x[i, j] (+ out[j] when accumulate). x: f32 [n, F]; out: f32 [F].
void column_sums(const Tensor& x, Tensor& out, bool accumulate, Context* ctx = nullptr);

// out[i, :] = src[index[i], :]. src: f32 [n, F]; index: i32 or i64 [m], each in [0, n);
// out: f32 [m, F]. Packs rows for a halo send.
void gather_rows(const Tensor& src, const Tensor& index, Tensor& out, Context* ctx = nullptr);
// out[index[i], :] += src[i, :]. src: f32 [m, F]; index: i32 or i64 [m] (repeats allowed,
// they sum); out: f32 [n, F]. Unpacks halo gradients into their owners' rows.
void scatter_add_rows(const Tensor& src, const Tensor& index, Tensor& out, Context* ctx = nullptr);
// The same sum in a fixed order: src's rows form consecutive segments of segment_rows[s] rows
// (host span, summing to m), the indices inside one segment are distinct, and segments are
// added one after another. Every out row thus receives its additions in segment order on every
// backend (no atomics), so the result is bit for bit the same whatever the backend or thread
// count. Sums received halo gradients at their owner, one segment per peer in rank order.
void scatter_add_rows_segmented(const Tensor& src, const Tensor& index,
                                std::span<const std::int64_t> segment_rows, Tensor& out,
                                Context* ctx = nullptr);

// y = max(x, 0). x, y: f32, same shape (y may be x).
void relu_forward(const Tensor& x, Tensor& y, Context* ctx = nullptr);
// grad_x = grad_y where y > 0, else 0. y is the forward output. grad_x may be grad_y.
void relu_backward(const Tensor& grad_y, const Tensor& y, Tensor& grad_x, Context* ctx = nullptr);

// Inverted dropout: keep[i, j] = draw(row_ids[i], j) >= threshold(p), y = x * keep / (1 - p),
// +0 where dropped. The 16-bit draw of (row, column j) is stored bit-sliced in Philox blocks
// key.block(row_ids[i], 16 (j / 128) + level) (kernels/dropout_draw.hpp has the layout), a pure
// function of (key, node id, column): masks do not depend on row order, rank count or device.
// Only the levels down to the threshold's lowest set bit are drawn: p = 0.5 costs one Philox
// block per 128 columns, any p at most 16. x, y: f32 [n, F] (y may be x); row_ids: host span of
// n node ids; mask: u8 [n, ceil(F / 8)] on x's device (dropout_mask_shape), bit j % 8 of byte
// mask[i, j / 8] set iff (i, j) is kept, bits past column F clear — or undefined when no
// backward needs it (the input features' dropout, or a draw that is recomputed instead of
// kept). 0 <= p < 1.
void dropout_forward(const Tensor& x, std::span<const NodeId> row_ids, const rng::Key& key, float p,
                     Tensor& y, Tensor& mask, Context* ctx = nullptr);
// The same with the row ids as an i64 [n] tensor on x's device (no upload per call).
void dropout_forward(const Tensor& x, const Tensor& row_ids, const rng::Key& key, float p,
                     Tensor& y, Tensor& mask, Context* ctx = nullptr);
// grad_x = grad_y / (1 - p) where the mask's bit is set, else +0. grad_y, grad_x: f32 [n, F]
// (grad_x may be grad_y); mask: u8 [n, ceil(F / 8)] from dropout_forward.
void dropout_backward(const Tensor& grad_y, const Tensor& mask, float p, Tensor& grad_x,
                      Context* ctx = nullptr);
// A row gather with dropout_forward applied on the way (one pass instead of a copy and a
// dropout): y[i] = dropout_forward's row i for the row at rows[i] (F floats in host memory),
// keyed by row_ids[i], bit for bit. p = 0 copies the rows (row_ids unread). y: f32 [n, F] on the
// CPU; rows and row_ids: n entries. CPU only: the device feature store gathers on the GPU and
// the model applies the dropout there.
void gather_dropout_rows(std::span<const float* const> rows, std::span<const NodeId> row_ids,
                         const rng::Key& key, float p, Tensor& y);
// The same, the rows read in `order` (a permutation of [0, n), checked; see gather_read_order):
// y is the same for every order, bit for bit, only the order of the memory accesses changes.
void gather_dropout_rows(std::span<const float* const> rows, std::span<const NodeId> row_ids,
                         const rng::Key& key, float p, Tensor& y,
                         std::span<const std::int64_t> order);
// An order to read a gather's rows in, from where each row lies: keys[i] in [0, key_bound)
// ranks row i's address (a local row index, say). A counting sort of the keys by bucket (at
// most 2^16 buckets of key_bound / 2^16 keys or fewer, stable), so that the reads sweep the
// source once in ascending windows instead of jumping over it: the pages and DRAM rows a window
// touches are reused while they are open. Writes `order` (keys.size() entries).
void gather_read_order(std::span<const std::int64_t> keys, std::int64_t key_bound,
                       std::vector<std::int64_t>& order);
// The shape of the mask of dropout_forward and of the bits of relu_dropout_forward for an
// [n, F] input: [n, ceil(F / 8)], one bit per element.
std::vector<std::int64_t> dropout_mask_shape(const Tensor& x);
// y = dropout(relu(x)) with the draws of dropout_forward (p = 0: relu alone), and the bits the
// backward needs: bit j % 8 of bits[i, j / 8] is set iff y[i, j] > 0. Dropout scales by a
// non-negative factor, so y > 0 exactly where both the ReLU and the dropout let the gradient
// through: one bit per element replaces the kept [n, F] ReLU output and the dropout mask.
// x, y: f32 [n, F] (y may be x); bits: u8 [n, ceil(F / 8)] on x's device.
void relu_dropout_forward(const Tensor& x, std::span<const NodeId> row_ids, const rng::Key& key,
                          float p, Tensor& y, Tensor& bits, Context* ctx = nullptr);
// The same with the row ids as an i64 [n] tensor on x's device.
void relu_dropout_forward(const Tensor& x, const Tensor& row_ids, const rng::Key& key, float p,
                          Tensor& y, Tensor& bits, Context* ctx = nullptr);
// grad_x = grad_y / (1 - p) where relu_dropout_forward's bit is set, else 0 (the backward of
// dropout(relu(.))). grad_y, grad_x: f32 [n, F] (grad_x may be grad_y); bits as above.
void relu_dropout_backward(const Tensor& grad_y, const Tensor& bits, float p, Tensor& grad_x,
                           Context* ctx = nullptr);

// The instruction sets the CPU dropout kernels above are compiled for. Every one keeps the same
// elements and writes the same values, bit for bit; the widest this CPU has is used (AVX-512
// needs AVX512F and AVX512BW), lowered by TESSEL_CPU_ISA=avx2 or sse (portable) as the SpMM is.
enum class CpuIsa { portable, avx2, avx512 };
const char* cpu_isa_name(CpuIsa isa);
bool cpu_supports(CpuIsa isa);
CpuIsa cpu_dropout_isa();
// Makes the CPU dropout kernels use `isa` from now on, in the whole process (how the tests run
// every path on one machine); throws InputError when this CPU lacks it.
void set_cpu_dropout_isa(CpuIsa isa);

// Row (L1) normalization: divides each row of x (f32 [n, F]) by the sum of the absolute values
// of its entries; all-zero rows stay zero. For non-negative features (bag of words) this is
// the usual division by the row sum; with negative entries it never divides by a sum that
// cancels to almost zero. This is the one formula --normalize-features row applies.
void normalize_rows(Tensor& x, Context* ctx = nullptr);

// y += alpha x (f32, same shape).
void axpy(float alpha, const Tensor& x, Tensor& y, Context* ctx = nullptr);

} // namespace tessel::kernels
