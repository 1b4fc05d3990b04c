// Sparse matrices on a device, SpMM (Y = A X) and the edge weights of GCN and mean aggregation.
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
  // A^T (num_cols x num_rows) on the same device, computed on the host: backward of an
  // aggregation is SpMM with the transpose, which is built once and reused.
  SparseMatrix transpose() const;
  // The same pattern with new values (f32 [nnz] on the same device).
  SparseMatrix with_values(Tensor new_values) const;
};

// Adds the entry (v, v) to every row v < min(num_rows, num_cols) that lacks it. Rows are the
// first columns (dst nodes come first among src nodes), so (v, v) is v's self loop.
LocalCsr add_self_loops(const LocalCsr& csr);

enum class SpmmAlgorithm {
  automatic,       // the fastest measured choice for the device
  cpu_row_simple,  // CPU: one pass per row accumulating into the output row in memory
  cpu_row_blocked, // CPU: column blocks accumulated in registers, nonzero-balanced threads
  cuda_warp_row,   // CUDA: a warp per (row, 128-column tile), indices broadcast by shuffles
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

// GCN weights: values[e] = 1 / sqrt((row_degree[v] + 1) (col_degree[u] + 1)) for the entry
// (v, u) at e. row_degree: i64 [num_rows]; col_degree: i64 [num_cols]; values: f32 [nnz],
// allocated by the caller; all on a's device. With self loops added first this is
// D^-1/2 (A + I) D^-1/2 with D = degree + 1.
void gcn_edge_weights(const SparseMatrix& a, const Tensor& row_degree, const Tensor& col_degree,
                      Tensor& values, Context* ctx = nullptr);
// Mean weights: values[e] = 1 / (entries in row v) for every entry of row v.
void mean_edge_weights(const SparseMatrix& a, Tensor& values, Context* ctx = nullptr);

} // namespace tessel::kernels
