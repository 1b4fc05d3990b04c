// CPU twin of the Hadamard link head: scores of node pairs and their backward pass.
#include "cpu_ops.hpp"

#include <omp.h>

#include <algorithm>
#include <vector>

namespace tessel::kernels::cpu {

void link_scores(std::int64_t pairs, std::int64_t h, const float* z, const LocalId* src,
                 const LocalId* dst, const float* w, const float* b, float* scores) {
  const float bias = b[0];
#pragma omp parallel for schedule(static) if (parallel_worth(pairs * h))
  for (std::int64_t j = 0; j < pairs; ++j) {
    const float* a = z + static_cast<std::int64_t>(src[j]) * h;
    const float* c = z + static_cast<std::int64_t>(dst[j]) * h;
    float s = 0;
    for (std::int64_t k = 0; k < h; ++k)
      s += w[k] * a[k] * c[k];
    scores[j] = s + bias;
  }
}

void link_scores_backward(std::int64_t pairs, std::int64_t h, const float* z, const LocalId* src,
                          const LocalId* dst, const float* w, const float* grad_scores,
                          float* grad_z, float* grad_w, float* grad_b, std::int64_t rows) {
  const bool parallel = pairs > 4096 && rows > 1;
  // grad_z: pairs share rows in any pattern, so each thread owns a range of rows and walks every
  // pair, adding only into its own rows. A row thus receives its terms in pair order (within a
  // pair the source's before the destination's), as one thread adding pair after pair would:
  // the same floats at any thread count.
#pragma omp parallel if (parallel)
  {
    const std::int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const std::int64_t row_begin = rows * t / threads, row_end = rows * (t + 1) / threads;
    for (std::int64_t j = 0; j < pairs; ++j) {
      const float gj = grad_scores[j];
      if (gj == 0.0f) continue;
      const std::int64_t u = src[j], v = dst[j];
      const bool mine_u = u >= row_begin && u < row_end, mine_v = v >= row_begin && v < row_end;
      if (!mine_u && !mine_v) continue;
      const float* a = z + u * h;
      const float* c = z + v * h;
      if (mine_u) {
        float* ga = grad_z + u * h;
        for (std::int64_t k = 0; k < h; ++k)
          ga[k] += gj * w[k] * c[k];
      }
      if (mine_v) {
        float* gc = grad_z + v * h;
        for (std::int64_t k = 0; k < h; ++k)
          gc[k] += gj * w[k] * a[k];
      }
    }
  }
  // grad_w and grad_b: double sums over fixed blocks of pairs, then over the blocks in order, so
  // the rounding does not depend on the thread count either.
  constexpr std::int64_t kBlock = 4096;
  const std::int64_t blocks = (pairs + kBlock - 1) / kBlock;
  std::vector<double> partial(static_cast<std::size_t>(blocks * (h + 1)), 0.0);
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t b = 0; b < blocks; ++b) {
    double* gw = partial.data() + b * (h + 1);
    for (std::int64_t j = b * kBlock; j < std::min(pairs, (b + 1) * kBlock); ++j) {
      const float gj = grad_scores[j];
      if (gj == 0.0f) continue;
      const float* a = z + static_cast<std::int64_t>(src[j]) * h;
      const float* c = z + static_cast<std::int64_t>(dst[j]) * h;
      for (std::int64_t k = 0; k < h; ++k)
        gw[k] += static_cast<double>(gj) * a[k] * c[k];
      gw[h] += gj;
    }
  }
  std::vector<double> sum(static_cast<std::size_t>(h + 1), 0.0);
  for (std::int64_t b = 0; b < blocks; ++b)
    for (std::int64_t k = 0; k <= h; ++k)
      sum[static_cast<std::size_t>(k)] += partial[static_cast<std::size_t>(b * (h + 1) + k)];
  for (std::int64_t k = 0; k < h; ++k)
    grad_w[k] += static_cast<float>(sum[static_cast<std::size_t>(k)]);
  grad_b[0] += static_cast<float>(sum[static_cast<std::size_t>(h)]);
}

} // namespace tessel::kernels::cpu
