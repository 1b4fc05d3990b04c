// CPU twins of the kernels: raw-pointer loops (OpenMP, oneDNN or OpenBLAS) called by the dispatch
// layer.
#pragma once

#include "tessel/core/rng.hpp"
#include "tessel/core/types.hpp"
#include "tessel/kernels/dense.hpp"
#include "tessel/kernels/row_codec.hpp"

#include <cstdint>

namespace tessel::kernels::cpu {

// Below this many elements an op runs on one thread: waking a team costs more than it saves,
// and far more when the cores are shared with other processes (threads wait for a slice).
constexpr std::int64_t kParallelMinWork = std::int64_t{1} << 15;
inline bool parallel_worth(std::int64_t work) {
  return work >= kParallelMinWork;
}

// y[rows, f] = A x; values may be null (pattern: weight 1). Two variants, see sparse.hpp.
void spmm_simple(std::int64_t rows, const EdgeId* indptr, const LocalId* indices,
                 const float* values, const float* x, std::int64_t f, float* y);
// x has x_rows rows (the matrix's columns). The blocked variant can work on column tiles
// (spmm_tile_columns): every output element is summed in the same order either way, so the
// results are the same bit for bit.
void spmm_blocked(std::int64_t rows, const EdgeId* indptr, const LocalId* indices,
                  const float* values, const float* x, std::int64_t x_rows, std::int64_t f,
                  float* y);
// The blocked variant with `tile` columns per pass (tile <= 0 or >= f: one pass).
void spmm_blocked_tiled(std::int64_t rows, const EdgeId* indptr, const LocalId* indices,
                        const float* values, const float* x, std::int64_t f, std::int64_t tile,
                        float* y);
constexpr std::int64_t kSpmmTileCacheShare = 50;
// Bytes of the last-level cache cpu0 reports (sysfs, else sysconf; 8 MiB if neither says).
std::int64_t last_level_cache_bytes();
// Columns per tile for an x of [x_rows, f] and a cache of cache_bytes: f when x fits in
// kSpmmTileCacheShare percent of it, else a multiple of 16 (a cache line of floats) whose x tile
// does (at least 16).
std::int64_t spmm_tile_columns_for(std::int64_t x_rows, std::int64_t f, std::int64_t cache_bytes);
// The width spmm_blocked uses: f (one pass) by default; TESSEL_SPMM_TILE=auto picks
// spmm_tile_columns_for with the last-level cache, TESSEL_SPMM_TILE=N forces N columns.
std::int64_t spmm_tile_columns(std::int64_t x_rows, std::int64_t f);

// out_indptr [rows + 1], out_indices and out_values [indptr[rows] + rows]: see gcn_matrix.
void gcn_matrix(std::int64_t rows, const EdgeId* indptr, const LocalId* indices,
                const std::int64_t* degree, EdgeId* out_indptr, LocalId* out_indices,
                float* out_values);
void mean_edge_weights(std::int64_t rows, const EdgeId* indptr, float* values);
// A^T of a rows x cols CSR; values and out_values may be null (pattern only).
void csr_transpose(std::int64_t rows, std::int64_t cols, const EdgeId* indptr,
                   const LocalId* indices, const float* values, EdgeId* out_indptr,
                   LocalId* out_indices, float* out_values);

// The GEMM library this build uses ("onednn" or "openblas") and its thread count.
const char* gemm_backend();
void set_threads(int threads);

// Row-major sgemm: c[m, n] = alpha op(a) op(b) + beta c.
void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k,
          float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
          float beta, float* c, std::int64_t ldc);

void add_bias(std::int64_t n, std::int64_t f, const float* bias, float* y);
void column_sums(std::int64_t n, std::int64_t f, const float* x, float* out, bool accumulate);

template <class Index>
void gather_rows(std::int64_t m, std::int64_t f, const float* src, const Index* index, float* out);
template <class Index>
void scatter_add_rows(std::int64_t m, std::int64_t f, const float* src, const Index* index,
                      float* out);

template <class Index>
void scatter_add_rows_segmented(std::int64_t segments, const std::int64_t* segment_rows,
                                std::int64_t f, const float* src, const Index* index, float* out);

void relu_forward(std::int64_t count, const float* x, float* y);
void relu_backward(std::int64_t count, const float* grad_y, const float* y, float* grad_x);
// Dropout masks and ReLU-dropout bits: u8 [n, (f + 7) / 8], column j is bit j % 8 of byte
// j / 8. mask may be null in dropout_forward (not written); row_ids may be null when p == 0.
void dropout_forward(std::int64_t n, std::int64_t f, const float* x, const NodeId* row_ids,
                     const rng::Key& key, float p, float* y, std::uint8_t* mask);
// Row codecs (row_codec_format.hpp): x [n, f] <-> wire [n, codec_row_bytes(codec, f)].
void encode_rows(std::int64_t n, std::int64_t f, RowCodec codec, const float* x, std::uint8_t* wire);
void decode_rows(std::int64_t n, std::int64_t f, RowCodec codec, const std::uint8_t* wire, float* x);
// y[i] = dropout_forward's row i for the row at rows[i]; p == 0: a copy (row_ids unread).
// order (null: 0 .. n - 1), a permutation of [0, n): the rows are read in that order (the
// result is the same for every order).
void gather_dropout_rows(std::int64_t n, std::int64_t f, const float* const* rows,
                         const NodeId* row_ids, const rng::Key& key, float p, float* y,
                         const std::int64_t* order = nullptr);
void dropout_backward(std::int64_t n, std::int64_t f, const float* grad_y, const std::uint8_t* mask,
                      float p, float* grad_x);
void relu_dropout_forward(std::int64_t n, std::int64_t f, const float* x, const NodeId* row_ids,
                          const rng::Key& key, float p, float* y, std::uint8_t* bits);
void relu_dropout_backward(std::int64_t n, std::int64_t f, const float* grad_y,
                           const std::uint8_t* bits, float p, float* grad_x);
// The instruction set of the dropout kernels (see kernels::CpuIsa).
bool isa_supported(CpuIsa isa);
CpuIsa dropout_isa();
void set_dropout_isa(CpuIsa isa);
void normalize_rows(std::int64_t n, std::int64_t f, float* x);
void axpy(std::int64_t count, float alpha, const float* x, float* y);

double softmax_cross_entropy(std::int64_t n, std::int64_t c, const float* logits, std::int64_t k,
                             const LocalId* rows, const std::int64_t* labels, double scale,
                             float* grad);
std::int64_t count_correct(std::int64_t c, const float* logits, std::int64_t k, const LocalId* rows,
                           const std::int64_t* labels);

// grad may be null (not written).
double squared_error(std::int64_t n, const float* pred, const float* target, double scale,
                     float* grad);
double binary_cross_entropy(std::int64_t n, const float* scores, const float* labels, double scale,
                            float* grad);

// Gate arithmetic of the recurrent cells (see recurrent.hpp); h is H wide, gates 3H or 4H.
void gru_cell_forward(std::int64_t n, std::int64_t h, const float* gi, const float* gh,
                      const float* h_prev, float* r, float* z, float* n_gate, float* hn,
                      float* h_next);
void gru_cell_backward(std::int64_t n, std::int64_t h, const float* grad_h_next,
                       const float* h_prev, const float* r, const float* z, const float* n_gate,
                       const float* hn, float* grad_gi, float* grad_gh, float* grad_h);
void lstm_cell_forward(std::int64_t n, std::int64_t h, float* gates, const float* c, float* c_next,
                       float* h_next);
// grad_c may be null (zero).
void lstm_cell_backward(std::int64_t n, std::int64_t h, const float* grad_h, const float* grad_c,
                        const float* gates, const float* c, const float* c_next, float* grad_pre,
                        float* grad_c_prev);

// The Hadamard link head over `pairs` (src, dst) rows of z [., h].
void link_scores(std::int64_t pairs, std::int64_t h, const float* z, const LocalId* src,
                 const LocalId* dst, const float* w, const float* b, float* scores);
// z has `rows` rows; each thread adds into its own range of them, so the floats do not depend
// on the thread count.
void link_scores_backward(std::int64_t pairs, std::int64_t h, const float* z, const LocalId* src,
                          const LocalId* dst, const float* w, const float* grad_scores,
                          float* grad_z, float* grad_w, float* grad_b, std::int64_t rows);

// step_size = lr / (1 - b1^t); bias2_sqrt = sqrt(1 - b2^t).
void adam_update(std::int64_t count, float* param, const float* grad, float* m, float* v,
                 float beta1, float beta2, float eps, float weight_decay, float step_size,
                 float bias2_sqrt);
void sgd_update(std::int64_t count, float* param, const float* grad, float* momentum_buf, float lr,
                float momentum, float weight_decay);

} // namespace tessel::kernels::cpu
