// CUDA SpMM twins: a warp-per-row kernel (pattern or weighted) and cusparseSpMM (CSR, ALG2).
#include "cuda_ops.hpp"
#include "resources.cuh"

#include <cstdint>
#include <limits>
#include <type_traits>

namespace tessel::kernels::cuda {

namespace {

constexpr int kWarp = 32;
constexpr int kColumnsPerLane = 4;
constexpr int kTileColumns = kWarp * kColumnsPerLane; // 128 columns per warp

// One warp per (row, 128-column tile). Lanes load 32 (index, weight) pairs of the row at a
// time and broadcast them with shuffles; for each edge the warp reads 128 contiguous floats
// of the X row (coalesced), accumulating in registers. Each output element is written once.
template <bool kWeighted>
__global__ void
spmm_warp_row_kernel(std::int64_t rows, std::int64_t tiles, const EdgeId* __restrict__ indptr,
                     const LocalId* __restrict__ indices, const float* __restrict__ values,
                     const float* __restrict__ x, std::int64_t f, float* __restrict__ y) {
  const std::int64_t warp =
      (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  if (warp >= rows * tiles) return; // uniform per warp: blockDim is a multiple of 32
  const std::int64_t v = warp / tiles;
  const std::int64_t first_col = (warp % tiles) * kTileColumns + lane;
  float acc[kColumnsPerLane] = {};
  const EdgeId begin = indptr[v], end = indptr[v + 1];
  for (EdgeId base = begin; base < end; base += kWarp) {
    const EdgeId e = base + lane;
    LocalId my_index = 0;
    float my_weight = 0.0f;
    if (e < end) {
      my_index = indices[e];
      my_weight = kWeighted ? values[e] : 1.0f;
    }
    const int count = static_cast<int>(end - base < kWarp ? end - base : kWarp);
    for (int k = 0; k < count; ++k) {
      const LocalId u = __shfl_sync(0xffffffffu, my_index, k);
      const float w = __shfl_sync(0xffffffffu, my_weight, k);
      const float* __restrict__ x_row = x + static_cast<std::int64_t>(u) * f;
#pragma unroll
      for (int j = 0; j < kColumnsPerLane; ++j) {
        const std::int64_t col = first_col + j * kWarp;
        if (col < f) acc[j] += w * __ldg(x_row + col);
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kColumnsPerLane; ++j) {
    const std::int64_t col = first_col + j * kWarp;
    if (col < f) y[v * f + col] = acc[j];
  }
}

// Narrow rows (F <= 32): a group of kLanes lanes per row, several rows per warp, so no lane
// idles on a column that does not exist. With kVector each lane owns 4 consecutive columns and
// reads them with one 16-byte load (F % 4 == 0, rows 16-byte aligned); otherwise one column.
// Every lane of a group loads the same (index, weight) pair (one broadcast transaction), four
// edges at a time so four X-row loads are in flight before the first use. Each output element
// is summed by one lane in CSR order: deterministic.
template <int kLanes, bool kVector, bool kWeighted>
__global__ void spmm_narrow_row_kernel(std::int64_t rows, const EdgeId* __restrict__ indptr,
                                       const LocalId* __restrict__ indices,
                                       const float* __restrict__ values,
                                       const float* __restrict__ x, std::int64_t f,
                                       float* __restrict__ y) {
  constexpr int kWidth = kVector ? 4 : 1;
  const std::int64_t thread = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t v = thread / kLanes;
  if (v >= rows) return;
  const std::int64_t col = (thread % kLanes) * kWidth;
  const bool active = col < f;
  using Vec = typename std::conditional<kVector, float4, float>::type;
  auto load = [&](LocalId u) -> Vec {
    if constexpr (kVector) {
      return active ? __ldg(reinterpret_cast<const float4*>(x + static_cast<std::int64_t>(u) * f +
                                                            col))
                    : make_float4(0.f, 0.f, 0.f, 0.f);
    } else {
      return active ? __ldg(x + static_cast<std::int64_t>(u) * f + col) : 0.0f;
    }
  };
  auto fma_into = [](Vec& acc, float w, const Vec& xv) {
    if constexpr (kVector) {
      acc.x += w * xv.x;
      acc.y += w * xv.y;
      acc.z += w * xv.z;
      acc.w += w * xv.w;
    } else {
      acc += w * xv;
    }
  };
  Vec acc{};
  const EdgeId begin = indptr[v], end = indptr[v + 1];
  EdgeId e = begin;
  for (; e + 4 <= end; e += 4) {
    const LocalId u0 = __ldg(indices + e), u1 = __ldg(indices + e + 1),
                  u2 = __ldg(indices + e + 2), u3 = __ldg(indices + e + 3);
    const float w0 = kWeighted ? __ldg(values + e) : 1.0f;
    const float w1 = kWeighted ? __ldg(values + e + 1) : 1.0f;
    const float w2 = kWeighted ? __ldg(values + e + 2) : 1.0f;
    const float w3 = kWeighted ? __ldg(values + e + 3) : 1.0f;
    const Vec x0 = load(u0), x1 = load(u1), x2 = load(u2), x3 = load(u3);
    fma_into(acc, w0, x0);
    fma_into(acc, w1, x1);
    fma_into(acc, w2, x2);
    fma_into(acc, w3, x3);
  }
  for (; e < end; ++e) fma_into(acc, kWeighted ? __ldg(values + e) : 1.0f, load(__ldg(indices + e)));
  if (!active) return;
  if constexpr (kVector)
    *reinterpret_cast<float4*>(y + v * f + col) = acc;
  else
    y[v * f + col] = acc;
}

template <int kLanes, bool kVector>
void launch_narrow(Resources& r, std::int64_t rows, const EdgeId* indptr, const LocalId* indices,
                   const float* values, const float* x, std::int64_t f, float* y) {
  const std::int64_t threads = rows * kLanes;
  const auto blocks = static_cast<unsigned int>((threads + kThreads - 1) / kThreads);
  if (values)
    spmm_narrow_row_kernel<kLanes, kVector, true>
        <<<blocks, kThreads, 0, r.stream>>>(rows, indptr, indices, values, x, f, y);
  else
    spmm_narrow_row_kernel<kLanes, kVector, false>
        <<<blocks, kThreads, 0, r.stream>>>(rows, indptr, indices, values, x, f, y);
  TESSEL_CHECK_LAUNCH();
}

__global__ void narrow_indptr_kernel(std::int64_t count, const EdgeId* __restrict__ wide,
                                     std::int32_t* __restrict__ narrow) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    narrow[i] = static_cast<std::int32_t>(wide[i]);
}

// Owns the cuSPARSE descriptors of one call.
struct SpmmDescriptors {
  cusparseSpMatDescr_t a = nullptr;
  cusparseDnMatDescr_t x = nullptr;
  cusparseDnMatDescr_t y = nullptr;
  SpmmDescriptors() = default;
  SpmmDescriptors(const SpmmDescriptors&) = delete;
  SpmmDescriptors& operator=(const SpmmDescriptors&) = delete;
  ~SpmmDescriptors() {
    if (a) cusparseDestroySpMat(a);
    if (x) cusparseDestroyDnMat(x);
    if (y) cusparseDestroyDnMat(y);
  }
};

} // namespace

void spmm_warp_row(Resources& r, std::int64_t rows, const EdgeId* indptr, const LocalId* indices,
                   const float* values, const float* x, std::int64_t f, float* y) {
  if (rows == 0 || f == 0) return;
  const std::int64_t tiles = (f + kTileColumns - 1) / kTileColumns;
  const std::int64_t threads = rows * tiles * kWarp;
  const auto blocks = static_cast<unsigned int>((threads + kThreads - 1) / kThreads);
  if (values) {
    spmm_warp_row_kernel<true>
        <<<blocks, kThreads, 0, r.stream>>>(rows, tiles, indptr, indices, values, x, f, y);
  } else {
    spmm_warp_row_kernel<false>
        <<<blocks, kThreads, 0, r.stream>>>(rows, tiles, indptr, indices, values, x, f, y);
  }
  TESSEL_CHECK_LAUNCH();
}

void spmm_narrow_row(Resources& r, std::int64_t rows, const EdgeId* indptr,
                     const LocalId* indices, const float* values, const float* x, std::int64_t f,
                     float* y) {
  if (rows == 0 || f == 0) return;
  TESSEL_EXPECTS(f <= kNarrowRowMaxColumns, "spmm (narrow rows): {} columns, at most {}", f,
                 kNarrowRowMaxColumns);
  const bool aligned = reinterpret_cast<std::uintptr_t>(x) % 16 == 0 &&
                       reinterpret_cast<std::uintptr_t>(y) % 16 == 0;
  if (f % 4 == 0 && aligned) {
    const std::int64_t chunks = f / 4;  // 1..8 lanes per row
    if (chunks <= 1) return launch_narrow<1, true>(r, rows, indptr, indices, values, x, f, y);
    if (chunks <= 2) return launch_narrow<2, true>(r, rows, indptr, indices, values, x, f, y);
    if (chunks <= 4) return launch_narrow<4, true>(r, rows, indptr, indices, values, x, f, y);
    return launch_narrow<8, true>(r, rows, indptr, indices, values, x, f, y);
  }
  if (f <= 1) return launch_narrow<1, false>(r, rows, indptr, indices, values, x, f, y);
  if (f <= 2) return launch_narrow<2, false>(r, rows, indptr, indices, values, x, f, y);
  if (f <= 4) return launch_narrow<4, false>(r, rows, indptr, indices, values, x, f, y);
  if (f <= 8) return launch_narrow<8, false>(r, rows, indptr, indices, values, x, f, y);
  if (f <= 16) return launch_narrow<16, false>(r, rows, indptr, indices, values, x, f, y);
  return launch_narrow<32, false>(r, rows, indptr, indices, values, x, f, y);
}

void spmm_cusparse(Resources& r, std::int64_t rows, std::int64_t cols, std::int64_t nnz,
                   const EdgeId* indptr, const LocalId* indices, const float* values,
                   const float* x, std::int64_t f, float* y) {
  if (rows == 0 || f == 0) return;
  TESSEL_EXPECTS(nnz <= std::numeric_limits<std::int32_t>::max(),
                 "spmm (cuSPARSE): {} entries do not fit 32-bit row offsets; use the warp kernel",
                 nnz);
  // 32-bit offsets and indices: the combination every cuSPARSE SpMM algorithm accepts.
  std::int32_t* indptr32 = static_cast<std::int32_t*>(
      r.scratch_at_least(static_cast<std::size_t>(rows + 1) * sizeof(std::int32_t)));
  narrow_indptr_kernel<<<blocks_for(rows + 1), kThreads, 0, r.stream>>>(rows + 1, indptr, indptr32);
  TESSEL_CHECK_LAUNCH();
  SpmmDescriptors d;
  TESSEL_CHECK_CUSPARSE(cusparseCreateCsr(
      &d.a, rows, cols, nnz, indptr32, const_cast<LocalId*>(indices), const_cast<float*>(values),
      CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
  TESSEL_CHECK_CUSPARSE(
      cusparseCreateDnMat(&d.x, cols, f, f, const_cast<float*>(x), CUDA_R_32F, CUSPARSE_ORDER_ROW));
  TESSEL_CHECK_CUSPARSE(cusparseCreateDnMat(&d.y, rows, f, f, y, CUDA_R_32F, CUSPARSE_ORDER_ROW));
  const float alpha = 1.0f, beta = 0.0f;
  std::size_t buffer_bytes = 0;
  // ALG2 (row-major, deterministic) first; shapes it declines fall back to the default.
  cusparseSpMMAlg_t algorithm = CUSPARSE_SPMM_CSR_ALG2;
  if (cusparseSpMM_bufferSize(r.cusparse, CUSPARSE_OPERATION_NON_TRANSPOSE,
                              CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, d.a, d.x, &beta, d.y,
                              CUDA_R_32F, algorithm, &buffer_bytes) != CUSPARSE_STATUS_SUCCESS) {
    algorithm = CUSPARSE_SPMM_ALG_DEFAULT;
    TESSEL_CHECK_CUSPARSE(cusparseSpMM_bufferSize(
        r.cusparse, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, d.a,
        d.x, &beta, d.y, CUDA_R_32F, algorithm, &buffer_bytes));
  }
  void* buffer = r.workspace_at_least(buffer_bytes);
  TESSEL_CHECK_CUSPARSE(cusparseSpMM(r.cusparse, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                     CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, d.a, d.x, &beta, d.y,
                                     CUDA_R_32F, algorithm, buffer));
}

} // namespace tessel::kernels::cuda
