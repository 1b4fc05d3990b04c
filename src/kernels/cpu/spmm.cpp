// CPU SpMM (Y = A X over a CSR): the engine's hot loop, OpenMP over nonzero-balanced row ranges.
#include "cpu_ops.hpp"

#include <omp.h>

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

// On x86-64 with GCC the row loop is compiled three times, for AVX-512, AVX2 and SSE, and the
// widest one the CPU supports is picked at run time: a portable build still uses the wide
// registers where they exist.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TESSEL_SPMM_X86_DISPATCH 1
#define TESSEL_TARGET(arch) __attribute__((target(arch)))
#else
#define TESSEL_SPMM_X86_DISPATCH 0
#define TESSEL_TARGET(arch)
#endif

namespace tessel::kernels::cpu {

namespace {

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
      if (indptr[mid] + mid < target)
        lo = mid + 1;
      else
        hi = mid;
    }
    bounds[t] = lo;
  }
  bounds[threads] = rows;
}

// Vectors of floats as values (GCC/Clang vector extensions), one type per register width: a
// 64-byte vector lowered to AVX2 or SSE goes through the stack (measured), so every ISA
// uses its native width.
typedef float Vec16 __attribute__((vector_size(64)));
typedef float Vec8 __attribute__((vector_size(32)));
typedef float Vec4 __attribute__((vector_size(16)));

// Unaligned loads and stores through memcpy (compiled to vmovups / FMA memory operands). A
// reduced-alignment typedef would not survive being a template argument: GCC drops its
// attributes and emitted aligned stores, which fault on rows at odd offsets.
// (References, not values: passing a wide vector by value outside its ISA changes the ABI.)
template <class Vec>
inline __attribute__((always_inline)) void load_unaligned(Vec& v, const float* p) {
  std::memcpy(&v, p, sizeof(Vec));
}
template <class Vec>
inline __attribute__((always_inline)) void store_unaligned(float* p, const Vec& v) {
  std::memcpy(p, &v, sizeof(Vec));
}

constexpr int kPrefetchEdges = 4;
constexpr int kCacheLineFloats = 16;

// One block of kVectors * lanes output columns of a row, accumulated in kVectors registers:
// the output segment is written once, and each edge streams a contiguous piece of its X row
// with one FMA per register. (A plain float array here is not kept in registers by GCC: it
// vectorizes across edges and spills every accumulator, measured 5x slower.)
template <class Vec, int kVectors, bool kWeighted>
inline __attribute__((always_inline)) void
row_block(EdgeId begin, EdgeId end, const LocalId* __restrict indices,
          const float* __restrict values, const float* __restrict x, std::int64_t f,
          std::int64_t col, float* __restrict y_row) {
  constexpr int kLanes = static_cast<int>(sizeof(Vec) / sizeof(float));
  Vec acc[kVectors];
#pragma GCC unroll 16
  for (int k = 0; k < kVectors; ++k)
    acc[k] = Vec{};
  for (EdgeId e = begin; e < end; ++e) {
    const float* x_row = x + static_cast<std::int64_t>(indices[e]) * f + col;
    // X rows are scattered, so the hardware prefetchers cannot know the next one; asking for
    // the row kPrefetchEdges entries ahead cut CPU time by ~10% on a random graph (measured
    // distances 1, 2, 4, 8: 1 was worse, 4 and 8 best).
    if (e + kPrefetchEdges < end) {
      const float* ahead = x + static_cast<std::int64_t>(indices[e + kPrefetchEdges]) * f + col;
#pragma GCC unroll 16
      for (int k = 0; k < kVectors * kLanes; k += kCacheLineFloats)
        __builtin_prefetch(ahead + k);
    }
    if constexpr (kWeighted) {
      const float w = values[e];
#pragma GCC unroll 16
      for (int k = 0; k < kVectors; ++k) {
        Vec x_part;
        load_unaligned(x_part, x_row + k * kLanes);
        acc[k] += w * x_part;
      }
    } else {
#pragma GCC unroll 16
      for (int k = 0; k < kVectors; ++k) {
        Vec x_part;
        load_unaligned(x_part, x_row + k * kLanes);
        acc[k] += x_part;
      }
    }
  }
#pragma GCC unroll 16
  for (int k = 0; k < kVectors; ++k)
    store_unaligned(y_row + col + k * kLanes, acc[k]);
}

// Columns [col, col_end) past the last full vector.
template <bool kWeighted>
inline __attribute__((always_inline)) void
row_tail(EdgeId begin, EdgeId end, const LocalId* __restrict indices,
         const float* __restrict values, const float* __restrict x, std::int64_t f,
         std::int64_t col, std::int64_t col_end, float* __restrict y_row) {
  for (std::int64_t j = col; j < col_end; ++j)
    y_row[j] = 0.0f;
  for (EdgeId e = begin; e < end; ++e) {
    const float w = kWeighted ? values[e] : 1.0f;
    const float* __restrict x_row = x + static_cast<std::int64_t>(indices[e]) * f;
    for (std::int64_t j = col; j < col_end; ++j)
      y_row[j] += w * x_row[j];
  }
}

// Rows [row_begin, row_end), columns [col_begin, col_end) of rows f floats wide: 8
// accumulator registers per pass (8 zmm = 128 columns on AVX-512, 8 ymm = 64 on AVX2, 8 xmm =
// 32 on SSE), leaving registers for the weight broadcast; narrower passes then a scalar tail
// cover any width. Each output element sums its row's entries in CSR order whatever the
// column range, so a column tile computes exactly the values of the whole row.
template <class Vec, bool kWeighted>
inline __attribute__((always_inline)) void
blocked_rows(std::int64_t row_begin, std::int64_t row_end, const EdgeId* __restrict indptr,
             const LocalId* __restrict indices, const float* __restrict values,
             const float* __restrict x, std::int64_t f, std::int64_t col_begin,
             std::int64_t col_end, float* __restrict y) {
  constexpr int kLanes = static_cast<int>(sizeof(Vec) / sizeof(float));
  for (std::int64_t v = row_begin; v < row_end; ++v) {
    const EdgeId begin = indptr[v], end = indptr[v + 1];
    float* __restrict y_row = y + v * f;
    std::int64_t col = col_begin;
    for (; col + 8 * kLanes <= col_end; col += 8 * kLanes)
      row_block<Vec, 8, kWeighted>(begin, end, indices, values, x, f, col, y_row);
    if (col + 4 * kLanes <= col_end) {
      row_block<Vec, 4, kWeighted>(begin, end, indices, values, x, f, col, y_row);
      col += 4 * kLanes;
    }
    if (col + 2 * kLanes <= col_end) {
      row_block<Vec, 2, kWeighted>(begin, end, indices, values, x, f, col, y_row);
      col += 2 * kLanes;
    }
    if (col + kLanes <= col_end) {
      row_block<Vec, 1, kWeighted>(begin, end, indices, values, x, f, col, y_row);
      col += kLanes;
    }
    if (col < col_end)
      row_tail<kWeighted>(begin, end, indices, values, x, f, col, col_end, y_row);
  }
}

template <class Vec>
inline __attribute__((always_inline)) void
blocked_range(std::int64_t row_begin, std::int64_t row_end, const EdgeId* indptr,
              const LocalId* indices, const float* values, const float* x, std::int64_t f,
              std::int64_t col_begin, std::int64_t col_end, float* y) {
  if (values)
    blocked_rows<Vec, true>(row_begin, row_end, indptr, indices, values, x, f, col_begin, col_end,
                            y);
  else
    blocked_rows<Vec, false>(row_begin, row_end, indptr, indices, values, x, f, col_begin,
                             col_end, y);
}

using RangeFn = void (*)(std::int64_t, std::int64_t, const EdgeId*, const LocalId*, const float*,
                         const float*, std::int64_t, std::int64_t, std::int64_t, float*);

void blocked_range_128bit(std::int64_t row_begin, std::int64_t row_end, const EdgeId* indptr,
                          const LocalId* indices, const float* values, const float* x,
                          std::int64_t f, std::int64_t col_begin, std::int64_t col_end, float* y) {
  blocked_range<Vec4>(row_begin, row_end, indptr, indices, values, x, f, col_begin, col_end, y);
}

#if TESSEL_SPMM_X86_DISPATCH
TESSEL_TARGET("arch=x86-64-v3")
void blocked_range_avx2(std::int64_t row_begin, std::int64_t row_end, const EdgeId* indptr,
                        const LocalId* indices, const float* values, const float* x, std::int64_t f,
                        std::int64_t col_begin, std::int64_t col_end, float* y) {
  blocked_range<Vec8>(row_begin, row_end, indptr, indices, values, x, f, col_begin, col_end, y);
}

TESSEL_TARGET("arch=x86-64-v4")
void blocked_range_avx512(std::int64_t row_begin, std::int64_t row_end, const EdgeId* indptr,
                          const LocalId* indices, const float* values, const float* x,
                          std::int64_t f, std::int64_t col_begin, std::int64_t col_end, float* y) {
  blocked_range<Vec16>(row_begin, row_end, indptr, indices, values, x, f, col_begin, col_end, y);
}
#endif

enum class Isa { sse, avx2, avx512 };

// The widest instruction set the CPU has, lowered by TESSEL_CPU_ISA=sse|avx2 (tests run the
// narrower paths this way on wide machines).
Isa cpu_isa() {
  static const Isa isa = [] {
    Isa best = Isa::sse;
#if TESSEL_SPMM_X86_DISPATCH
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) best = Isa::avx2;
    if (best == Isa::avx2 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq"))
      best = Isa::avx512;
#endif
    const char* requested = std::getenv("TESSEL_CPU_ISA");
    if (requested && std::strcmp(requested, "sse") == 0) return Isa::sse;
    if (requested && std::strcmp(requested, "avx2") == 0 && best != Isa::sse) return Isa::avx2;
    return best;
  }();
  return isa;
}

RangeFn pick_blocked_range() {
#if TESSEL_SPMM_X86_DISPATCH
  if (cpu_isa() == Isa::avx512) return blocked_range_avx512;
  if (cpu_isa() == Isa::avx2) return blocked_range_avx2;
#endif
  return blocked_range_128bit;
}

// The first-cut kernel, kept as the reference variant: accumulate into the output row in
// memory (L1-resident), one auto-vectorized pass over F per edge. The body is inlined into an
// x86-64-v3 entry and a portable one.
[[gnu::always_inline]] inline void simple_row_body(EdgeId begin, EdgeId end,
                                                   const LocalId* __restrict indices,
                                                   const float* __restrict values,
                                                   const float* __restrict x, std::int64_t f,
                                                   float* __restrict y_row) {
  std::memset(y_row, 0, static_cast<std::size_t>(f) * sizeof(float));
  for (EdgeId e = begin; e < end; ++e) {
    const float w = values ? values[e] : 1.0f;
    const float* __restrict x_row = x + static_cast<std::int64_t>(indices[e]) * f;
    for (std::int64_t j = 0; j < f; ++j)
      y_row[j] += w * x_row[j];
  }
}

TESSEL_TARGET("arch=x86-64-v3")
void simple_row(EdgeId begin, EdgeId end, const LocalId* __restrict indices,
                const float* __restrict values, const float* __restrict x, std::int64_t f,
                float* __restrict y_row) {
  simple_row_body(begin, end, indices, values, x, f, y_row);
}

void simple_row_portable(EdgeId begin, EdgeId end, const LocalId* __restrict indices,
                         const float* __restrict values, const float* __restrict x, std::int64_t f,
                         float* __restrict y_row) {
  simple_row_body(begin, end, indices, values, x, f, y_row);
}

} // namespace

void spmm_simple(std::int64_t rows, const EdgeId* indptr, const LocalId* indices,
                 const float* values, const float* x, std::int64_t f, float* y) {
  const bool has_avx2 = TESSEL_SPMM_X86_DISPATCH && cpu_isa() != Isa::sse;
#pragma omp parallel for schedule(dynamic, 256) if (parallel_worth((indptr[rows] + rows) * f))
  for (std::int64_t v = 0; v < rows; ++v) {
    if (has_avx2)
      simple_row(indptr[v], indptr[v + 1], indices, values, x, f, y + v * f);
    else
      simple_row_portable(indptr[v], indptr[v + 1], indices, values, x, f, y + v * f);
  }
}

std::int64_t last_level_cache_bytes() {
  static const std::int64_t bytes = [] {
    // The sysfs entries of cpu0 first: they give the cache one core shares. sysconf's figure
    // comes from CPUID and, on a virtual machine, can be the whole socket's (320 MiB where the
    // guest's cores share one 32 MiB L3), which would never tile.
    std::int64_t best_level = 0, best_size = 0;
    for (int index = 0; index < 16; ++index) {
      const std::string dir = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", index);
      std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size");
      if (!level_file || !size_file) break;
      std::int64_t level = 0;
      std::string type, size;
      level_file >> level;
      type_file >> type;
      size_file >> size;
      if (type == "Instruction" || size.empty()) continue;
      std::int64_t value = std::strtoll(size.c_str(), nullptr, 10);
      const char unit = size.back();
      if (unit == 'K') value <<= 10;
      if (unit == 'M') value <<= 20;
      if (unit == 'G') value <<= 30;
      if (level > best_level && value > 0) {
        best_level = level;
        best_size = value;
      }
    }
    if (best_size > 0) return best_size;
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE); l3 > 0) return std::int64_t{l3};
#endif
#ifdef _SC_LEVEL2_CACHE_SIZE
    if (const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE); l2 > 0) return std::int64_t{l2};
#endif
    return std::int64_t{8} << 20;
  }();
  return bytes;
}

std::int64_t spmm_tile_columns_for(std::int64_t x_rows, std::int64_t f, std::int64_t cache_bytes) {
  const std::int64_t budget = cache_bytes * kSpmmTileCacheShare / 100;
  const std::int64_t row_bytes = std::max<std::int64_t>(x_rows, 1) * std::int64_t{sizeof(float)};
  if (row_bytes * f <= budget) return f;
  // Whole cache lines of every X row, so that no line is fetched by two tiles.
  std::int64_t columns = budget / row_bytes / kCacheLineFloats * kCacheLineFloats;
  columns = std::max<std::int64_t>(columns, kCacheLineFloats);
  return columns >= f ? f : columns;
}

std::int64_t spmm_tile_columns(std::int64_t x_rows, std::int64_t f) {
  // Untiled unless TESSEL_SPMM_TILE asks: "auto" sizes tiles from the last-level cache, N
  // forces N columns. On the 2-core EPYC guest measured (docs/performance.md) no width beat
  // one pass on a 200k-node random graph: a 16-column tile (the cache-sized one) took 1.7x as
  // long, each nonzero then costing a cache access per tile instead of one DRAM burst per row.
  static const std::int64_t forced = [] {
    const char* env = std::getenv("TESSEL_SPMM_TILE");
    if (!env || !*env || std::strcmp(env, "off") == 0) return std::int64_t{0};
    if (std::strcmp(env, "auto") == 0) return std::int64_t{-1};
    return std::max<std::int64_t>(std::strtoll(env, nullptr, 10), 0);
  }();
  if (forced == 0) return f;
  if (forced > 0) return std::min(forced, std::max<std::int64_t>(f, 1));
  return spmm_tile_columns_for(x_rows, f, last_level_cache_bytes());
}

void spmm_blocked_tiled(std::int64_t rows, const EdgeId* indptr, const LocalId* indices,
                        const float* values, const float* x, std::int64_t f, std::int64_t tile,
                        float* y) {
  static const RangeFn range_fn = pick_blocked_range();
  const std::int64_t work = (indptr[rows] + rows) * f;
  const int threads = static_cast<int>(std::clamp<std::int64_t>(
      std::min<std::int64_t>(omp_get_max_threads(), work / kParallelMinWork), 1,
      std::max<std::int64_t>(rows, 1)));
  tile = tile <= 0 ? f : std::min(tile, f);
  std::vector<std::int64_t> bounds(static_cast<std::size_t>(threads) + 1);
  balanced_row_bounds(rows, indptr, threads, bounds.data());
#pragma omp parallel num_threads(threads)
  {
    // A team smaller than requested (nested regions, OMP_DYNAMIC) still covers every range.
    // Every thread works on the same column tile at a time (the barrier), so the tile the
    // threads share stays in the last-level cache while the CSR streams past it once per tile.
    const int team = omp_get_num_threads();
    for (std::int64_t col = 0; col < f; col += tile) {
      const std::int64_t col_end = std::min(col + tile, f);
      for (int part = omp_get_thread_num(); part < threads; part += team)
        range_fn(bounds[part], bounds[part + 1], indptr, indices, values, x, f, col, col_end, y);
      if (col_end < f) {
#pragma omp barrier
      }
    }
  }
}

void spmm_blocked(std::int64_t rows, const EdgeId* indptr, const LocalId* indices,
                  const float* values, const float* x, std::int64_t x_rows, std::int64_t f,
                  float* y) {
  spmm_blocked_tiled(rows, indptr, indices, values, x, f, spmm_tile_columns(x_rows, f), y);
}

} // namespace tessel::kernels::cpu
