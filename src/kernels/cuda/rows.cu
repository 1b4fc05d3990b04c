// CUDA twins of row gather (halo packing), row scatter-add (float atomics for repeats) and the
// segmented scatter-add (no atomics: one launch per segment of distinct rows).
#include "cuda_ops.hpp"
#include "resources.cuh"

namespace tessel::kernels::cuda {

namespace {

template <class Index>
__global__ void gather_rows_kernel(std::int64_t m, std::int64_t f, const float* __restrict__ src,
                                   const Index* __restrict__ index, float* __restrict__ out) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < m * f;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / f, col = i % f;
    out[i] = src[static_cast<std::int64_t>(index[row]) * f + col];
  }
}

// Repeated indices sum through atomics; the order of those adds is not fixed, so results may
// differ from the CPU twin in the last bits where an index repeats.
template <class Index>
__global__ void scatter_add_rows_kernel(std::int64_t m, std::int64_t f,
                                        const float* __restrict__ src,
                                        const Index* __restrict__ index, float* __restrict__ out) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < m * f;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / f, col = i % f;
    atomicAdd(out + static_cast<std::int64_t>(index[row]) * f + col, src[i]);
  }
}

// Rows of one segment have distinct indices: a plain read-modify-write per element is race free.
template <class Index>
__global__ void
scatter_add_distinct_rows_kernel(std::int64_t m, std::int64_t f, const float* __restrict__ src,
                                 const Index* __restrict__ index, float* __restrict__ out) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < m * f;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / f, col = i % f;
    out[static_cast<std::int64_t>(index[row]) * f + col] += src[i];
  }
}

template <class Index>
void launch_scatter_add_segmented(Resources& r, std::int64_t segments,
                                  const std::int64_t* host_segment_rows, std::int64_t f,
                                  const float* src, const Index* index, float* out) {
  // Launches on one stream run in order, so segment s + 1 sees segment s's sums: the order of
  // the additions to each row is the segment order, as on the CPU.
  std::int64_t at = 0;
  for (std::int64_t s = 0; s < segments; ++s) {
    const std::int64_t m = host_segment_rows[s];
    if (m * f > 0) {
      scatter_add_distinct_rows_kernel<Index>
          <<<blocks_for(m * f), kThreads, 0, r.stream>>>(m, f, src + at * f, index + at, out);
      TESSEL_CHECK_LAUNCH();
    }
    at += m;
  }
}

template <class Index>
void launch_gather(Resources& r, std::int64_t m, std::int64_t f, const float* src,
                   const Index* index, float* out) {
  if (m * f == 0) return;
  gather_rows_kernel<Index><<<blocks_for(m * f), kThreads, 0, r.stream>>>(m, f, src, index, out);
  TESSEL_CHECK_LAUNCH();
}

template <class Index>
void launch_scatter_add(Resources& r, std::int64_t m, std::int64_t f, const float* src,
                        const Index* index, float* out) {
  if (m * f == 0) return;
  scatter_add_rows_kernel<Index>
      <<<blocks_for(m * f), kThreads, 0, r.stream>>>(m, f, src, index, out);
  TESSEL_CHECK_LAUNCH();
}

} // namespace

void gather_rows(Resources& r, std::int64_t m, std::int64_t f, const float* src,
                 const std::int32_t* index, float* out) {
  launch_gather(r, m, f, src, index, out);
}
void gather_rows(Resources& r, std::int64_t m, std::int64_t f, const float* src,
                 const std::int64_t* index, float* out) {
  launch_gather(r, m, f, src, index, out);
}
void scatter_add_rows(Resources& r, std::int64_t m, std::int64_t f, const float* src,
                      const std::int32_t* index, float* out) {
  launch_scatter_add(r, m, f, src, index, out);
}
void scatter_add_rows(Resources& r, std::int64_t m, std::int64_t f, const float* src,
                      const std::int64_t* index, float* out) {
  launch_scatter_add(r, m, f, src, index, out);
}

void scatter_add_rows_segmented(Resources& r, std::int64_t segments,
                                const std::int64_t* host_segment_rows, std::int64_t f,
                                const float* src, const std::int32_t* index, float* out) {
  launch_scatter_add_segmented(r, segments, host_segment_rows, f, src, index, out);
}
void scatter_add_rows_segmented(Resources& r, std::int64_t segments,
                                const std::int64_t* host_segment_rows, std::int64_t f,
                                const float* src, const std::int64_t* index, float* out) {
  launch_scatter_add_segmented(r, segments, host_segment_rows, f, src, index, out);
}

} // namespace tessel::kernels::cuda
