// CPU twins of the attention ops (attention.hpp): raw-pointer loops, OpenMP over rows.
#pragma once

#include "tessel/core/rng.hpp"
#include "tessel/core/types.hpp"
#include "../attention_math.hpp"

#include <cstdint>

namespace tessel::kernels::cpu {

void attention_project(std::int64_t n_src, std::int64_t n_dst, int heads, std::int64_t f,
                       const float* wh, const float* att_src, const float* att_dst,
                       float* packed, float* dst_term);
void attention_project_backward(std::int64_t n_src, std::int64_t n_dst, int heads, std::int64_t f,
                                const float* packed, const float* grad_packed,
                                const float* grad_dst_term, const float* att_src,
                                const float* att_dst, float* grad_wh, float* grad_att_src,
                                float* grad_att_dst);
// ids: null when p == 0.
void attention_forward(const detail::AttentionArgs& a, const float* packed, const float* dst_term,
                       const rng::Key& key, float p, const std::int64_t* ids, float* out,
                       float* alpha);
void attention_backward(const detail::AttentionArgs& a, const float* packed, const float* dst_term,
                        float p, const float* alpha, const float* grad_out, float* grad_packed,
                        float* grad_dst_term);
void add_self_loops(std::int64_t rows, const EdgeId* indptr, const LocalId* indices,
                    EdgeId* out_indptr, LocalId* out_indices);

} // namespace tessel::kernels::cpu
