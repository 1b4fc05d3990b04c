// CUDA twins of the kernels as host functions (declared for g++, defined in the .cu files).
#pragma once

#include "tessel/core/rng.hpp"
#include "tessel/core/types.hpp"
#include "tessel/kernels/context.hpp"
#include "tessel/kernels/row_codec.hpp"

#include <cstdint>

namespace tessel::kernels::cuda {

// shared_stream: the device's stream (device_memory::stream) for the default context, which
// then does not own it; nullptr gives the context a non-blocking stream of its own.
Resources* create_resources(int device, void* shared_stream);
void destroy_resources(Resources* resources) noexcept;
void synchronize(Resources& resources);

// Device pointers unless named host_*. All enqueue on the context's stream.
void spmm_warp_row(Resources& r, std::int64_t rows, const EdgeId* indptr, const LocalId* indices,
                   const float* values, const float* x, std::int64_t f, float* y);
// Rows of at most kNarrowRowMaxColumns columns: several rows per warp.
inline constexpr std::int64_t kNarrowRowMaxColumns = 32;
void spmm_narrow_row(Resources& r, std::int64_t rows, const EdgeId* indptr, const LocalId* indices,
                     const float* values, const float* x, std::int64_t f, float* y);
void spmm_cusparse(Resources& r, std::int64_t rows, std::int64_t cols, std::int64_t nnz,
                   const EdgeId* indptr, const LocalId* indices, const float* values,
                   const float* x, std::int64_t f, float* y);

void gcn_matrix(Resources& r, std::int64_t rows, const EdgeId* indptr, const LocalId* indices,
                const std::int64_t* degree, EdgeId* out_indptr, LocalId* out_indices,
                float* out_values);
void mean_edge_weights(Resources& r, std::int64_t rows, const EdgeId* indptr, float* values);
void csr_transpose(Resources& r, std::int64_t rows, std::int64_t cols, std::int64_t nnz,
                   const EdgeId* indptr, const LocalId* indices, const float* values,
                   EdgeId* out_indptr, LocalId* out_indices, float* out_values);

void encode_rows(Resources& r, std::int64_t n, std::int64_t f, RowCodec codec, const float* x,
                 std::uint8_t* wire);
void decode_rows(Resources& r, std::int64_t n, std::int64_t f, RowCodec codec,
                 const std::uint8_t* wire, float* x);

void gemm(Resources& r, bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n,
          std::int64_t k, float alpha, const float* a, std::int64_t lda, const float* b,
          std::int64_t ldb, float beta, float* c, std::int64_t ldc);

void add_bias(Resources& r, std::int64_t n, std::int64_t f, const float* bias, float* y);
void column_sums(Resources& r, std::int64_t n, std::int64_t f, const float* x, float* out,
                 bool accumulate);

void gather_rows(Resources& r, std::int64_t m, std::int64_t f, const float* src,
                 const std::int32_t* index, float* out);
void gather_rows(Resources& r, std::int64_t m, std::int64_t f, const float* src,
                 const std::int64_t* index, float* out);
void scatter_add_rows(Resources& r, std::int64_t m, std::int64_t f, const float* src,
                      const std::int32_t* index, float* out);
void scatter_add_rows(Resources& r, std::int64_t m, std::int64_t f, const float* src,
                      const std::int64_t* index, float* out);
// host_segment_rows: host array of `segments` row counts.
void scatter_add_rows_segmented(Resources& r, std::int64_t segments,
                                const std::int64_t* host_segment_rows, std::int64_t f,
                                const float* src, const std::int32_t* index, float* out);
void scatter_add_rows_segmented(Resources& r, std::int64_t segments,
                                const std::int64_t* host_segment_rows, std::int64_t f,
                                const float* src, const std::int64_t* index, float* out);

void relu_forward(Resources& r, std::int64_t count, const float* x, float* y);
void relu_backward(Resources& r, std::int64_t count, const float* grad_y, const float* y,
                   float* grad_x);
void dropout_forward(Resources& r, std::int64_t n, std::int64_t f, const float* x,
                     const NodeId* host_row_ids, const rng::Key& key, float p, float* y,
                     std::uint8_t* mask);
// The same with the row ids already on the device.
void dropout_forward_device_ids(Resources& r, std::int64_t n, std::int64_t f, const float* x,
                                const NodeId* row_ids, const rng::Key& key, float p, float* y,
                                std::uint8_t* mask);
void dropout_backward(Resources& r, std::int64_t n, std::int64_t f, const float* grad_y,
                      const std::uint8_t* mask, float p, float* grad_x);
// Masks and bits: u8 [n, (f + 7) / 8], column j is bit j % 8 of byte j / 8; mask may be null
// in dropout_forward*. row_ids: on the device.
void relu_dropout_forward(Resources& r, std::int64_t n, std::int64_t f, const float* x,
                          const NodeId* row_ids, const rng::Key& key, float p, float* y,
                          std::uint8_t* bits);
void relu_dropout_backward(Resources& r, std::int64_t n, std::int64_t f, const float* grad_y,
                           const std::uint8_t* bits, float p, float* grad_x);
// Uploads n host node ids into the scratch buffer (for the host-span forms).
const NodeId* upload_row_ids(Resources& r, std::int64_t n, const NodeId* host_row_ids);
void normalize_rows(Resources& r, std::int64_t n, std::int64_t f, float* x);
void axpy(Resources& r, std::int64_t count, float alpha, const float* x, float* y);

double softmax_cross_entropy(Resources& r, std::int64_t n, std::int64_t c, const float* logits,
                             std::int64_t k, const LocalId* host_rows,
                             const std::int64_t* host_labels, double scale, float* grad);
std::int64_t count_correct(Resources& r, std::int64_t c, const float* logits, std::int64_t k,
                           const LocalId* host_rows, const std::int64_t* host_labels);

// The sum is taken on the host in element order (synchronizes). grad may be null.
double squared_error(Resources& r, std::int64_t n, const float* pred, const float* target,
                     double scale, float* grad);
double binary_cross_entropy(Resources& r, std::int64_t n, const float* scores, const float* labels,
                            double scale, float* grad);

void gru_cell_forward(Resources& r, std::int64_t n, std::int64_t h, const float* gi,
                      const float* gh, const float* h_prev, float* rg, float* z, float* n_gate,
                      float* hn, float* h_next);
void gru_cell_backward(Resources& r, std::int64_t n, std::int64_t h, const float* grad_h_next,
                       const float* h_prev, const float* rg, const float* z, const float* n_gate,
                       const float* hn, float* grad_gi, float* grad_gh, float* grad_h);
void lstm_cell_forward(Resources& r, std::int64_t n, std::int64_t h, float* gates, const float* c,
                       float* c_next, float* h_next);
void lstm_cell_backward(Resources& r, std::int64_t n, std::int64_t h, const float* grad_h,
                        const float* grad_c, const float* gates, const float* c,
                        const float* c_next, float* grad_pre, float* grad_c_prev);

void link_scores(Resources& r, std::int64_t pairs, std::int64_t h, const float* z,
                 const LocalId* src, const LocalId* dst, const float* w, const float* b,
                 float* scores);
void link_scores_backward(Resources& r, std::int64_t pairs, std::int64_t h, const float* z,
                          const LocalId* src, const LocalId* dst, const float* w,
                          const float* grad_scores, float* grad_z, float* grad_w, float* grad_b);

void adam_update(Resources& r, std::int64_t count, float* param, const float* grad, float* m,
                 float* v, float beta1, float beta2, float eps, float weight_decay, float step_size,
                 float bias2_sqrt);
void sgd_update(Resources& r, std::int64_t count, float* param, const float* grad,
                float* momentum_buf, float lr, float momentum, float weight_decay);

} // namespace tessel::kernels::cuda
