// Link prediction pieces: the Hadamard scoring head, binary cross-entropy on its scores, and the
// ranking metrics AUC and MRR.
#pragma once

#include "tessel/core/tensor.hpp"
#include "tessel/core/types.hpp"

#include <cstdint>
#include <span>

namespace tessel::nn {

// Scores of node pairs from their embeddings: score_j = sum_k w[k] z[src_j, k] z[dst_j, k] + b,
// a diagonal bilinear form (symmetric in the two endpoints). z: f32 [rows, H] on any device;
// src, dst: rows of z, one pair each (host spans, uploaded); w: f32 [H, 1] (or [H]) and b: f32 [1]
// on z's device. Returns f32 [pairs] on z's device (the kernels::link_scores op).
Tensor link_scores(const Tensor& z, std::span<const LocalId> src, std::span<const LocalId> dst,
                   const Tensor& w, const Tensor& b);

// The backward pass of link_scores for d(loss)/d score = grad_scores [pairs]: adds into
// grad_z [rows, H], grad_w (w's shape) and grad_b [1].
void link_scores_backward(const Tensor& z, std::span<const LocalId> src,
                          std::span<const LocalId> dst, const Tensor& w, const Tensor& grad_scores,
                          Tensor& grad_z, Tensor& grad_w, Tensor& grad_b);

// Binary cross-entropy with logits, summed: sum_j softplus(s_j) - y_j s_j (y_j in {0, 1}),
// computed without overflow for any finite score (the kernels::binary_cross_entropy op, on the
// scores' device). With grad (f32 [pairs] on that device; null to skip), writes
// scale * (sigmoid(s_j) - y_j).
double binary_cross_entropy_sum(const Tensor& scores, std::span<const float> labels, double scale,
                                Tensor* grad);

// Area under the ROC curve of scores of positives against scores of negatives: the fraction of
// (positive, negative) pairs where the positive scores higher, a tie counting 1/2
// (Mann-Whitney with mid-ranks). A perfect ranking gives 1, a reversed one 0, all ties 0.5.
// Either list empty: 0.5 (nothing to rank).
double roc_auc(std::span<const float> positive, std::span<const float> negative);

// The reciprocal rank of a positive among its negatives: 1 / (1 + #{negatives scoring higher}
// + #{negatives scoring equal} / 2) (the mean of the optimistic and pessimistic ranks, OGB's
// convention). MRR is its mean over positives.
double reciprocal_rank(float positive, std::span<const float> negatives);

// Average precision of positives against negatives, as scikit-learn's average_precision_score
// computes it: sum over the distinct scores s, highest first, of (recall(s) - recall(previous))
// * precision(s), where recall and precision count every pair scoring >= s (ties form one step).
// No positives: 0.
double average_precision(std::span<const float> positive, std::span<const float> negative);

// OGB's Hits@K (ogbl-collab, -ppa, -ddi): the fraction of positives scoring strictly above the
// K-th highest negative score; 1 when there are fewer than K negatives. No positives: 0.
double hits_at_k(std::span<const float> positive, std::span<const float> negative, std::int64_t k);

// OGB's MRR (ogbl-citation2): the mean over positives i of reciprocal_rank(positive[i],
// negatives[i * K, (i + 1) * K)). No positives: 0.
double mean_reciprocal_rank(std::span<const float> positive, std::span<const float> negatives,
                            std::int64_t k);

} // namespace tessel::nn
