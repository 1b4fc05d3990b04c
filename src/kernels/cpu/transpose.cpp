// CPU twin of the CSR transpose: a stable counting sort split over threads by nonzeros.
#include "cpu_ops.hpp"

#include <omp.h>

#include <algorithm>
#include <vector>

namespace tessel::kernels::cpu {

void csr_transpose(std::int64_t rows, std::int64_t cols, const EdgeId* indptr,
                   const LocalId* indices, const float* values, EdgeId* out_indptr,
                   LocalId* out_indices, float* out_values) {
  const EdgeId nnz = indptr[rows];
  // Each thread takes a contiguous range of rows holding about nnz / T entries and counts its
  // columns; a thread's cursor for column c starts after every earlier thread's entries of c.
  // Entries therefore land in row order within each column whatever T is: the result is the
  // serial counting sort's, and threads never write the same slot.
  const int threads = parallel_worth(nnz + cols)
                          ? static_cast<int>(std::clamp<std::int64_t>(
                                omp_get_max_threads(), 1, std::max<std::int64_t>(1, rows)))
                          : 1;
  std::vector<std::int64_t> row_begin(static_cast<std::size_t>(threads) + 1, rows);
  row_begin[0] = 0;
  for (int t = 1; t < threads; ++t)
    row_begin[t] = std::upper_bound(indptr, indptr + rows + 1, nnz * t / threads) - indptr - 1;
  for (int t = 1; t <= threads; ++t)
    row_begin[t] = std::max(row_begin[t], row_begin[t - 1]);
  const auto stride = static_cast<std::size_t>(cols);
  std::vector<EdgeId> cursor(static_cast<std::size_t>(threads) * stride, 0);

#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    EdgeId* mine = cursor.data() + static_cast<std::size_t>(t) * stride;
    for (EdgeId e = indptr[row_begin[t]]; e < indptr[row_begin[t + 1]]; ++e)
      ++mine[indices[e]];
#pragma omp barrier
#pragma omp single
    {
      EdgeId total = 0;
      for (std::int64_t c = 0; c < cols; ++c) {
        out_indptr[c] = total;
        for (int k = 0; k < threads; ++k) {
          EdgeId& slot = cursor[static_cast<std::size_t>(k) * stride + static_cast<std::size_t>(c)];
          const EdgeId count = slot;
          slot = total;
          total += count;
        }
      }
      out_indptr[cols] = total;
    }
    for (std::int64_t v = row_begin[t]; v < row_begin[t + 1]; ++v)
      for (EdgeId e = indptr[v]; e < indptr[v + 1]; ++e) {
        const EdgeId at = mine[indices[e]]++;
        out_indices[at] = static_cast<LocalId>(v);
        if (values) out_values[at] = values[e];
      }
  }
}

} // namespace tessel::kernels::cpu
