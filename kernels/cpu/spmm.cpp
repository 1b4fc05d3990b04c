// CPU SpMM (Y = A X over a CSR): the engine's hot loop, OpenMP over nonzero-balanced row ranges.
#include "cpu_ops.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

// x86-64 builds carry AVX-512 / AVX2 clones of the row loop, picked at load time, so a
// portable binary still uses the wide registers where the CPU has them.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define TESSEL_SIMD_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TESSEL_SIMD_CLONES
#endif

namespace tessel::kernels::cpu {

namespace {

#ifndef TESSEL_SPMM_BLOCK
#define TESSEL_SPMM_BLOCK 128
#endif
constexpr int kSpmmBlock = TESSEL_SPMM_BLOCK;

// First row of each thread's range, so that every thread gets about the same number of
// nonzeros plus rows (a row costs a store of F floats even when empty). Static and
// contiguous: neighboring rows share X rows in a locality-ordered graph.
void balanced_row_bounds(std::int64_t rows, const EdgeId* indptr, int threads,
                         std::int64_t* bounds) {
  const std::int64_t total = indptr[rows] + rows;
  bounds[0] = 0;
  for (int t = 1; t < threads; ++t) {
    const std::int64_t target = total * t / threads;
    // First row v with indptr[v] + v >= target (monotone in v).
    std::int64_t lo = bounds[t - 1], hi = rows;
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (indptr[mid] + mid < target) lo = mid + 1;
      else hi = mid;
    }
    bounds[t] = lo;
  }
  bounds[threads] = rows;
}

// 16 floats as one value: GCC/Clang lower it to one zmm, two ymm or four xmm operations
// depending on the clone, so the same source serves every ISA. The unaligned, may_alias twin
// loads X rows at any float offset.
typedef float Vec16 __attribute__((vector_size(64)));
typedef float Vec16Unaligned __attribute__((vector_size(64), aligned(4), may_alias));
constexpr int kVecFloats = 16;

// One block of kWidth output columns of a row, accumulated in kWidth / 16 vector registers:
// the output segment is written once, and each edge streams kWidth contiguous floats of an
// X row. (Plain arrays here are not kept in registers by GCC: it vectorizes across edges
// instead and spills every accumulator, measured 5x slower.)
template <int kWidth, bool kWeighted>
inline __attribute__((always_inline)) void row_block(EdgeId begin, EdgeId end,
                                                     const LocalId* __restrict indices,
                                                     const float* __restrict values,
                                                     const float* __restrict x, std::int64_t f,
                                                     std::int64_t col, float* __restrict y_row) {
  constexpr int kVectors = kWidth / kVecFloats;
  Vec16 acc[kVectors];
#pragma GCC unroll 16
  for (int k = 0; k < kVectors; ++k) acc[k] = Vec16{};
  for (EdgeId e = begin; e < end; ++e) {
    const float* x_row = x + static_cast<std::int64_t>(indices[e]) * f + col;
    if constexpr (kWeighted) {
      const float w = values[e];
#pragma GCC unroll 16
      for (int k = 0; k < kVectors; ++k)
        acc[k] += w * *reinterpret_cast<const Vec16Unaligned*>(x_row + k * kVecFloats);
    } else {
#pragma GCC unroll 16
      for (int k = 0; k < kVectors; ++k)
        acc[k] += *reinterpret_cast<const Vec16Unaligned*>(x_row + k * kVecFloats);
    }
  }
#pragma GCC unroll 16
  for (int k = 0; k < kVectors; ++k)
    *reinterpret_cast<Vec16Unaligned*>(y_row + col + k * kVecFloats) = acc[k];
}

template <bool kWeighted>
inline __attribute__((always_inline)) void row_tail(EdgeId begin, EdgeId end,
                                                    const LocalId* __restrict indices,
                                                    const float* __restrict values,
                                                    const float* __restrict x, std::int64_t f,
                                                    std::int64_t col, float* __restrict y_row) {
  for (std::int64_t j = col; j < f; ++j) y_row[j] = 0.0f;
  for (EdgeId e = begin; e < end; ++e) {
    const float w = kWeighted ? values[e] : 1.0f;
    const float* __restrict x_row = x + static_cast<std::int64_t>(indices[e]) * f;
    for (std::int64_t j = col; j < f; ++j) y_row[j] += w * x_row[j];
  }
}

template <bool kWeighted>
inline __attribute__((always_inline)) void blocked_rows(std::int64_t row_begin,
                                                        std::int64_t row_end,
                                                        const EdgeId* __restrict indptr,
                                                        const LocalId* __restrict indices,
                                                        const float* __restrict values,
                                                        const float* __restrict x, std::int64_t f,
                                                        float* __restrict y) {
  for (std::int64_t v = row_begin; v < row_end; ++v) {
    const EdgeId begin = indptr[v], end = indptr[v + 1];
    float* __restrict y_row = y + v * f;
    std::int64_t col = 0;
    for (; col + kSpmmBlock <= f; col += kSpmmBlock)
      row_block<kSpmmBlock, kWeighted>(begin, end, indices, values, x, f, col, y_row);
    if constexpr (kSpmmBlock > 64) {
      if (col + 64 <= f) {
        row_block<64, kWeighted>(begin, end, indices, values, x, f, col, y_row);
        col += 64;
      }
    }
    if (col + 32 <= f) {
      row_block<32, kWeighted>(begin, end, indices, values, x, f, col, y_row);
      col += 32;
    }
    if (col + 16 <= f) {
      row_block<16, kWeighted>(begin, end, indices, values, x, f, col, y_row);
      col += 16;
    }
    if (col < f) row_tail<kWeighted>(begin, end, indices, values, x, f, col, y_row);
  }
}

TESSEL_SIMD_CLONES
void blocked_range(std::int64_t row_begin, std::int64_t row_end, const EdgeId* indptr,
                   const LocalId* indices, const float* values, const float* x, std::int64_t f,
                   float* y) {
  if (values) blocked_rows<true>(row_begin, row_end, indptr, indices, values, x, f, y);
  else blocked_rows<false>(row_begin, row_end, indptr, indices, values, x, f, y);
}

TESSEL_SIMD_CLONES
void simple_row(EdgeId begin, EdgeId end, const LocalId* __restrict indices,
                const float* __restrict values, const float* __restrict x, std::int64_t f,
                float* __restrict y_row) {
  std::memset(y_row, 0, static_cast<std::size_t>(f) * sizeof(float));
  for (EdgeId e = begin; e < end; ++e) {
    const float w = values ? values[e] : 1.0f;
    const float* __restrict x_row = x + static_cast<std::int64_t>(indices[e]) * f;
    for (std::int64_t j = 0; j < f; ++j) y_row[j] += w * x_row[j];
  }
}

}  // namespace

void spmm_simple(std::int64_t rows, const EdgeId* indptr, const LocalId* indices,
                 const float* values, const float* x, std::int64_t f, float* y) {
#pragma omp parallel for schedule(dynamic, 256)
  for (std::int64_t v = 0; v < rows; ++v)
    simple_row(indptr[v], indptr[v + 1], indices, values, x, f, y + v * f);
}

void spmm_blocked(std::int64_t rows, const EdgeId* indptr, const LocalId* indices,
                  const float* values, const float* x, std::int64_t f, float* y) {
  const int threads = static_cast<int>(std::min<std::int64_t>(omp_get_max_threads(),
                                                               std::max<std::int64_t>(rows, 1)));
  std::int64_t bounds_storage[257];
  std::vector<std::int64_t> bounds_heap;
  std::int64_t* bounds = bounds_storage;
  if (threads > 256) {
    bounds_heap.resize(static_cast<std::size_t>(threads) + 1);
    bounds = bounds_heap.data();
  }
  balanced_row_bounds(rows, indptr, threads, bounds);
#pragma omp parallel num_threads(threads)
  {
    // A team smaller than requested (nested regions, OMP_DYNAMIC) still covers every range.
    const int team = omp_get_num_threads();
    for (int part = omp_get_thread_num(); part < threads; part += team)
      blocked_range(bounds[part], bounds[part + 1], indptr, indices, values, x, f, y);
  }
}

}  // namespace tessel::kernels::cpu
