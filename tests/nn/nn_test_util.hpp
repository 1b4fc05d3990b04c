// Helpers for nn tests: tiny graphs as LocalCsr, random tensors, central-difference gradients.
#pragma once

#include "test_support.hpp"

#include "tessel/core/csr.hpp"
#include "tessel/core/tensor.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace tessel::test {

inline LocalCsr local_graph(NodeId n, const std::vector<std::pair<NodeId, NodeId>>& edges) {
  const Csr csr = symmetric_csr(n, edges);
  LocalCsr local;
  local.num_rows = csr.num_rows;
  local.num_cols = csr.num_cols;
  local.indptr = csr.indptr;
  local.indices.assign(csr.indices.begin(), csr.indices.end());
  return local;
}

// sum_i weights[i] * out[i] in double: a scalar loss whose gradient with respect to out is
// `weights`, so a backward pass can be seeded with it.
inline double weighted_sum(const Tensor& out, const Tensor& weights) {
  double s = 0;
  for (std::int64_t i = 0; i < out.numel(); ++i)
    s += static_cast<double>(out.data<float>()[i]) * weights.data<float>()[i];
  return s;
}

// Compares `analytic` (same shape as `param`, host f32) with central differences of `loss`
// over every element of `param`, perturbing it in place by +-step and restoring it. The loss
// is evaluated from f32 forward passes, so the tolerance allows float round-off divided by
// 2 step on top of the relative bound.
inline void expect_gradient(const std::string& what, Tensor& param, const Tensor& analytic,
                            const std::function<double()>& loss, double step = 1e-2,
                            double rtol = 1e-2, double atol = 2e-3) {
  ASSERT_EQ(param.shape(), analytic.shape()) << what;
  float* values = param.data<float>();
  for (std::int64_t i = 0; i < param.numel(); ++i) {
    const float saved = values[i];
    values[i] = saved + static_cast<float>(step);
    const double up = loss();
    values[i] = saved - static_cast<float>(step);
    const double down = loss();
    values[i] = saved;
    // Divide by the step actually taken (float rounding of saved +- step).
    const double taken = (static_cast<double>(saved + static_cast<float>(step)) -
                          static_cast<double>(saved - static_cast<float>(step)));
    const double numeric = (up - down) / taken;
    const double exact = analytic.data<float>()[i];
    EXPECT_NEAR(exact, numeric, atol + rtol * std::max(std::fabs(numeric), std::fabs(exact)))
        << what << " element " << i;
  }
}

} // namespace tessel::test
