// Graph attention (GAT) as fused ops: per-edge scores, the softmax over each destination's
// in-edges and the weighted aggregation, forward and backward, without an [E, heads, F] tensor
// (the softmax coefficients, [E, heads], are the only per-edge array).
#pragma once

#include "tessel/core/rng.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/kernels/context.hpp"
#include "tessel/kernels/sparse.hpp"

#include <cstdint>

namespace tessel::kernels {

// The slope of the LeakyReLU on the attention logits (the GAT paper's 0.2).
inline constexpr float kAttentionSlope = 0.2f;

// Dropout on the attention coefficients: coefficient (v, u, head) is dropped with probability
// p, decided by (key, ids[v], ids[u], head) alone, so every rank count and both twins drop the
// same ones. ids: i64 [graph.num_cols] on the graph's device (the ids of the columns; row v
// is column v). Inactive when p == 0.
struct AttentionDropout {
  rng::Key key;
  float p = 0.0f;
  Tensor ids;
};

// The layout the attention ops share. H heads of F columns each:
//  - packed: f32 [num_src, H F + H]: row u is u's projected row z_u (head h in columns
//    [h F, (h + 1) F)) followed by its H source terms s_u[h] = a_src[h] . z_u[h];
//  - dst_term: f32 [num_dst, H]: t_v[h] = a_dst[h] . z_v[h] of the destinations (the first
//    num_dst sources).
// The rows of `graph` (num_dst x num_src pattern, values ignored) list each destination's
// in-neighbours, its self loop included (add_self_loops).

// packed and dst_term from the projected rows wh (f32 [num_src, H F]) and the attention vectors
// att_src, att_dst (f32 [H F]). packed: [num_src, H F + H]; dst_term: [num_dst, H] (num_dst <=
// num_src); both allocated by the caller.
void attention_project(const Tensor& wh, const Tensor& att_src, const Tensor& att_dst, int heads,
                       Tensor& packed, Tensor& dst_term, Context* ctx = nullptr);
// The backward of attention_project: grad_wh (f32 [num_src, H F], overwritten) from the packed
// rows' and destination terms' gradients; grad_att_src and grad_att_dst (f32 [H F]) are added
// to. packed: the forward's (its first num_src rows are read: the projected rows).
void attention_project_backward(const Tensor& packed, const Tensor& grad_packed,
                                const Tensor& grad_dst_term, const Tensor& att_src,
                                const Tensor& att_dst, int heads, Tensor& grad_wh,
                                Tensor& grad_att_src, Tensor& grad_att_dst,
                                Context* ctx = nullptr);

// out[v] = sum over edges (v, u) of alpha'_vu[h] z_u[h], per head, where
//   e_vu[h] = LeakyReLU(s_u[h] + t_v[h]),  alpha_vu[h] = softmax over v's row of e_v.[h],
//   alpha' = alpha, or 0 / alpha / (1 - p) under the dropout;
// concatenated over heads (out: f32 [num_dst, H F]) or averaged (`average`: [num_dst, F]).
// alpha (f32 [E, H], edge-major) receives the coefficients before the dropout, negated where it
// dropped them: the backward reads both from it. A row without entries gives 0.
// Deterministic: each row is summed in CSR order by one thread (CPU) or warp (CUDA).
void attention_forward(const SparseMatrix& graph, const Tensor& packed, const Tensor& dst_term,
                       int heads, bool average, const AttentionDropout& dropout, Tensor& out,
                       Tensor& alpha, Context* ctx = nullptr);
// Gradients of attention_forward: grad_packed (f32 [num_src, H F + H], overwritten) and
// grad_dst_term (f32 [num_dst, H], overwritten) from grad_out (out's shape). alpha: the
// forward's. The dropout scale comes from dropout.p (the draws are in alpha's signs). The CPU
// twin sums every source's gradient in a fixed order (deterministic); the CUDA twin adds with
// atomics (the order of the additions may vary between runs).
void attention_backward(const SparseMatrix& graph, const Tensor& packed, const Tensor& dst_term,
                        int heads, bool average, float dropout_p, const Tensor& alpha,
                        const Tensor& grad_out, Tensor& grad_packed, Tensor& grad_dst_term,
                        Context* ctx = nullptr);

// The pattern with a self loop in front of every row (column v in row v; an existing self edge
// stays), values dropped. Rows must not outnumber columns.
SparseMatrix add_self_loops(const SparseMatrix& pattern, Context* ctx = nullptr);

} // namespace tessel::kernels
