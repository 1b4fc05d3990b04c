// Sparse matrices on a device, SpMM (Y = A X), CSR transpose and the GCN and mean aggregation
// matrices.
#pragma once

#include "tessel/core/csr.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/kernels/context.hpp"

#include <cstdint>
#include <span>

namespace tessel::kernels {

// A CSR matrix whose arrays are Tensors on one device: indptr i64 [num_rows + 1], indices
// i32 [nnz] (column ids < num_cols), values f32 [nnz] or undefined (every entry is 1).
// Row v lists the in-neighbors of v, so (A X)[v] aggregates v's in-neighbors. Copies share
// the arrays (like Tensor).
struct SparseMatrix {
  std::int64_t num_rows = 0;
  std::int64_t num_cols = 0;
  Tensor indptr;
  Tensor indices;
  Tensor values;

  std::int64_t nnz() const { return indices.defined() ? indices.numel() : 0; }
  bool weighted() const { return values.defined(); }
  Device device() const { return indptr.defined() ? indptr.device() : Device::cpu(); }

  // Validates `csr` (monotone indptr, indices in range) and copies it to `device`.
  static SparseMatrix from_csr(const LocalCsr& csr, Device device = Device::cpu());
  // Host copy as a LocalCsr (values empty when the matrix is pattern-only).
  LocalCsr to_csr() const;
  SparseMatrix to(Device device) const;
  // A^T (num_cols x num_rows) on the same device: the csr_transpose op below.
  SparseMatrix transpose(Context* ctx = nullptr) const;
  // The same pattern with new values (f32 [nnz] on the same device).
  SparseMatrix with_values(Tensor new_values) const;
};

enum class SpmmAlgorithm {
  automatic,       // CPU: cpu_row_blocked; CUDA: cuda_narrow_row for F <= 32, else cuda_warp_row
  cpu_row_simple,  // CPU: one pass per row accumulating into the output row in memory
  cpu_row_blocked, // CPU: column blocks accumulated in registers, nonzero-balanced threads
  cuda_warp_row,   // CUDA: a warp per (row, 128-column tile), indices broadcast by shuffles
  cuda_narrow_row, // CUDA, F <= 32: a group of lanes per row, several rows per warp, 16-byte loads
  cuda_cusparse,   // CUDA: cusparseSpMM (CSR, ALG2); weighted matrices only
};

// y = A x (y is overwritten). a: num_rows x num_cols; x: f32 [num_cols, F]; y: f32
// [num_rows, F], allocated by the caller; all on one device. Pattern-only matrices use
// weight 1. No atomics: each output row is written by one thread (CPU) or warp (CUDA), and
// rows are summed in CSR order, so results are deterministic.
void spmm(const SparseMatrix& a, const Tensor& x, Tensor& y, Context* ctx = nullptr,
          SpmmAlgorithm algorithm = SpmmAlgorithm::automatic);
// Allocating form: returns A x on x's device.
Tensor spmm(const SparseMatrix& a, const Tensor& x, Context* ctx = nullptr);

// A^T of a (num_cols x num_rows), with a's values if it has any, on a's device. Within each row
// of A^T the entries keep a's row order (a stable counting sort), so the result does not depend
// on the backend or the thread count. The backward pass of an aggregation is SpMM with it.
SparseMatrix csr_transpose(const SparseMatrix& a, Context* ctx = nullptr);

// The GCN aggregation matrix of a pattern. adj: num_rows x num_cols pattern (values ignored),
// the rows being the first columns (destinations come first among sources); degree: i64
// [num_cols], each column's in-degree in the whole graph. Row v of the result is a self loop
// (column v) followed by adj's row v, with the weights
//   self loop 1 / (d_v + 1),   neighbor u: (d_v / s_v) / sqrt((d_u + 1) (d_v + 1)),
// where s_v is adj's row length. With every neighbor present (s_v = d_v) this is exactly
// D^-1/2 (A + I) D^-1/2 with D = degree + 1; with a sample of the neighbors it is the unbiased
// estimate of that row (sampled mode). A row without neighbors keeps only its self loop.
SparseMatrix gcn_matrix(const SparseMatrix& adj, const Tensor& degree, Context* ctx = nullptr);
// Mean weights: values[e] = 1 / (entries in row v) for every entry of row v (GraphSAGE mean;
// with a sample of the neighbors, the mean over the sample).
void mean_edge_weights(const SparseMatrix& a, Tensor& values, Context* ctx = nullptr);

} // namespace tessel::kernels
