// CPU twins of row gather (halo packing) and row scatter-add (halo gradient sums).
#include "cpu_ops.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>

namespace tessel::kernels::cpu {

template <class Index>
void gather_rows(std::int64_t m, std::int64_t f, const float* src, const Index* index, float* out) {
#pragma omp parallel for schedule(static) if (parallel_worth(m * f))
  for (std::int64_t i = 0; i < m; ++i)
    std::memcpy(out + i * f, src + static_cast<std::int64_t>(index[i]) * f,
                static_cast<std::size_t>(f) * sizeof(float));
}

template <class Index>
void scatter_add_rows(std::int64_t m, std::int64_t f, const float* src, const Index* index,
                      float* out) {
  // Repeated indices make row-parallel adds race, so threads split the columns instead: each
  // owns a column range of every row, rows are visited in order, and no atomics are needed.
  constexpr std::int64_t kMinColumns = 16;
  const int threads = parallel_worth(m * f)
                          ? static_cast<int>(std::max<std::int64_t>(
                                1, std::min<std::int64_t>(omp_get_max_threads(), f / kMinColumns)))
                          : 1;
#pragma omp parallel num_threads(threads)
  {
    const int team = omp_get_num_threads();
    const int t = omp_get_thread_num();
    const std::int64_t begin = f * t / team, end = f * (t + 1) / team;
    for (std::int64_t i = 0; i < m; ++i) {
      const float* __restrict from = src + i * f;
      float* __restrict to = out + static_cast<std::int64_t>(index[i]) * f;
      for (std::int64_t j = begin; j < end; ++j)
        to[j] += from[j];
    }
  }
}

template <class Index>
void scatter_add_rows_segmented(std::int64_t segments, const std::int64_t* segment_rows,
                                std::int64_t f, const float* src, const Index* index, float* out) {
  // Indices are distinct inside a segment, so its rows are added in parallel without races;
  // segments go one after another, which fixes the order of the additions to any out row.
  std::int64_t at = 0;
  for (std::int64_t s = 0; s < segments; ++s) {
    const std::int64_t end = at + segment_rows[s];
#pragma omp parallel for schedule(static) if (parallel_worth((end - at) * f))
    for (std::int64_t i = at; i < end; ++i) {
      const float* __restrict from = src + i * f;
      float* __restrict to = out + static_cast<std::int64_t>(index[i]) * f;
      for (std::int64_t j = 0; j < f; ++j)
        to[j] += from[j];
    }
    at = end;
  }
}

template void gather_rows<std::int32_t>(std::int64_t, std::int64_t, const float*,
                                        const std::int32_t*, float*);
template void gather_rows<std::int64_t>(std::int64_t, std::int64_t, const float*,
                                        const std::int64_t*, float*);
template void scatter_add_rows<std::int32_t>(std::int64_t, std::int64_t, const float*,
                                             const std::int32_t*, float*);
template void scatter_add_rows<std::int64_t>(std::int64_t, std::int64_t, const float*,
                                             const std::int64_t*, float*);

template void scatter_add_rows_segmented<std::int32_t>(std::int64_t, const std::int64_t*,
                                                       std::int64_t, const float*,
                                                       const std::int32_t*, float*);
template void scatter_add_rows_segmented<std::int64_t>(std::int64_t, const std::int64_t*,
                                                       std::int64_t, const float*,
                                                       const std::int64_t*, float*);

} // namespace tessel::kernels::cpu
