// CUDA twin of the CSR transpose: a stable radix sort of the entries by column (CUB).
#include "cuda_ops.hpp"
#include "resources.cuh"

#include <cub/device/device_radix_sort.cuh>

#include <climits>

namespace tessel::kernels::cuda {

namespace {

// row_of[e] = the row of entry e; edge_id[e] = e (the payload the sort carries).
__global__ void expand_rows_kernel(std::int64_t rows, const EdgeId* __restrict__ indptr,
                                   LocalId* __restrict__ row_of,
                                   std::int32_t* __restrict__ edge_id) {
  for (std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < rows;
       v += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    for (EdgeId e = indptr[v]; e < indptr[v + 1]; ++e) {
      row_of[e] = static_cast<LocalId>(v);
      edge_id[e] = static_cast<std::int32_t>(e);
    }
}

// Entry k of the transpose is the k-th entry in (column, row) order.
__global__ void place_entries_kernel(std::int64_t nnz, const std::int32_t* __restrict__ order,
                                     const LocalId* __restrict__ row_of,
                                     const float* __restrict__ values,
                                     LocalId* __restrict__ out_indices,
                                     float* __restrict__ out_values) {
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < nnz;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int32_t e = order[k];
    out_indices[k] = row_of[e];
    if (values) out_values[k] = values[e];
  }
}

// out_indptr[c] = number of entries with a column below c (a binary search in the sorted keys).
__global__ void column_offsets_kernel(std::int64_t cols, std::int64_t nnz,
                                      const LocalId* __restrict__ sorted_cols,
                                      EdgeId* __restrict__ out_indptr) {
  for (std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c <= cols;
       c += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t lo = 0, hi = nnz;
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (sorted_cols[mid] < c)
        lo = mid + 1;
      else
        hi = mid;
    }
    out_indptr[c] = lo;
  }
}

int bits_for(std::int64_t cols) {
  int bits = 1;
  while (bits < 31 && (std::int64_t{1} << bits) < cols)
    ++bits;
  return bits;
}

} // namespace

void csr_transpose(Resources& r, std::int64_t rows, std::int64_t cols, std::int64_t nnz,
                   const EdgeId* indptr, const LocalId* indices, const float* values,
                   EdgeId* out_indptr, LocalId* out_indices, float* out_values) {
  TESSEL_EXPECTS(nnz < INT_MAX, "csr_transpose: {} entries exceed the CUDA twin's 32-bit sort",
                 nnz);
  if (nnz == 0) {
    TESSEL_CHECK_CUDA(cudaMemsetAsync(
        out_indptr, 0, static_cast<std::size_t>(cols + 1) * sizeof(EdgeId), r.stream));
    return;
  }
  const auto items = static_cast<int>(nnz);
  // The radix sort is stable: entries of one column keep their CSR (row) order, as on the CPU.
  std::size_t sort_bytes = 0;
  TESSEL_CHECK_CUDA(cub::DeviceRadixSort::SortPairs(
      nullptr, sort_bytes, static_cast<const LocalId*>(nullptr), static_cast<LocalId*>(nullptr),
      static_cast<const std::int32_t*>(nullptr), static_cast<std::int32_t*>(nullptr), items, 0,
      bits_for(cols), r.stream));
  // Temporaries of 16 bytes per entry: from the caching allocator for this call only, not the
  // grow-only scratch, which would keep them for the rest of the run.
  const DeviceBuffer temporaries(r, ScratchCarver::bytes<LocalId>(nnz) * 2 +
                                               ScratchCarver::bytes<std::int32_t>(nnz) * 2);
  ScratchCarver carver(temporaries);
  auto* row_of = carver.take<LocalId>(nnz);
  auto* sorted_cols = carver.take<LocalId>(nnz);
  auto* edge_id = carver.take<std::int32_t>(nnz);
  auto* order = carver.take<std::int32_t>(nnz);
  const DeviceBuffer sort_buffer(r, sort_bytes > 0 ? sort_bytes : 256);
  void* sort_space = sort_buffer.get();

  if (rows > 0) {
    expand_rows_kernel<<<blocks_for(rows), kThreads, 0, r.stream>>>(rows, indptr, row_of, edge_id);
    TESSEL_CHECK_LAUNCH();
  }
  TESSEL_CHECK_CUDA(cub::DeviceRadixSort::SortPairs(sort_space, sort_bytes, indices, sorted_cols,
                                                    edge_id, order, items, 0, bits_for(cols),
                                                    r.stream));
  place_entries_kernel<<<blocks_for(nnz), kThreads, 0, r.stream>>>(nnz, order, row_of, values,
                                                                   out_indices, out_values);
  TESSEL_CHECK_LAUNCH();
  column_offsets_kernel<<<blocks_for(cols + 1), kThreads, 0, r.stream>>>(cols, nnz, sorted_cols,
                                                                         out_indptr);
  TESSEL_CHECK_LAUNCH();
}

} // namespace tessel::kernels::cuda
