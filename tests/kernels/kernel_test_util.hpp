// Helpers for kernel tests: random tensors and graphs, naive references, tensor comparison.
#pragma once

#include "test_support.hpp"

#include "tessel/core/csr.hpp"
#include "tessel/core/tensor.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace tessel::test {

// Random in-neighbor CSR: each row gets 0..max_degree entries (some rows empty), optionally
// with random weights.
inline LocalCsr random_csr(std::int64_t rows, std::int64_t cols, int max_degree, bool weighted,
                           std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> degree(0, max_degree);
  std::uniform_int_distribution<std::int64_t> column(0, cols - 1);
  std::uniform_real_distribution<float> weight(-1.0f, 1.0f);
  LocalCsr csr;
  csr.num_rows = rows;
  csr.num_cols = cols;
  csr.indptr.assign(1, 0);
  for (std::int64_t v = 0; v < rows; ++v) {
    const int d = (v % 5 == 3 || cols == 0) ? 0 : degree(gen); // every fifth row is empty
    for (int i = 0; i < d; ++i) {
      csr.indices.push_back(static_cast<LocalId>(column(gen)));
      if (weighted) csr.values.push_back(weight(gen));
    }
    csr.indptr.push_back(static_cast<EdgeId>(csr.indices.size()));
  }
  return csr;
}

// y = A x in double, straight from the definition.
inline std::vector<double> naive_spmm(const LocalCsr& a, const Tensor& x) {
  const std::int64_t f = x.cols();
  std::vector<double> y(static_cast<std::size_t>(a.num_rows * f), 0.0);
  for (std::int64_t v = 0; v < a.num_rows; ++v)
    for (EdgeId e = a.indptr[v]; e < a.indptr[v + 1]; ++e) {
      const double w = a.values.empty() ? 1.0 : a.values[e];
      for (std::int64_t j = 0; j < f; ++j)
        y[v * f + j] += w * x.data<float>()[a.indices[e] * f + j];
    }
  return y;
}

// Element-wise |a - b| <= atol + rtol |b| for f32 tensors (any device; compared on the host).
inline ::testing::AssertionResult tensors_close(const Tensor& a, const Tensor& b, double rtol,
                                                double atol) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << a.describe() << " vs " << b.describe();
  const Tensor ha = a.to(Device::cpu()), hb = b.to(Device::cpu());
  for (std::int64_t i = 0; i < ha.numel(); ++i) {
    double x = 0, y = 0;
    switch (ha.dtype()) {
    case DType::f32:
      x = ha.data<float>()[i];
      y = hb.data<float>()[i];
      break;
    case DType::f64:
      x = ha.data<double>()[i];
      y = hb.data<double>()[i];
      break;
    case DType::i32:
      x = ha.data<std::int32_t>()[i];
      y = hb.data<std::int32_t>()[i];
      break;
    case DType::i64:
      x = static_cast<double>(ha.data<std::int64_t>()[i]);
      y = static_cast<double>(hb.data<std::int64_t>()[i]);
      break;
    case DType::u8:
      x = ha.data<std::uint8_t>()[i];
      y = hb.data<std::uint8_t>()[i];
      break;
    }
    if (!(std::fabs(x - y) <= atol + rtol * std::fabs(y)))
      return ::testing::AssertionFailure()
             << "element " << i << " (row " << i / ha.cols() << ", col " << i % ha.cols()
             << "): " << x << " vs " << y << " in " << a.describe();
  }
  return ::testing::AssertionSuccess();
}

} // namespace tessel::test
