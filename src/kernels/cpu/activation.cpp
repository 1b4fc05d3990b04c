// CPU twins of ReLU (dropout, with or without a ReLU in front, has a file of its own).
#include "cpu_ops.hpp"

namespace tessel::kernels::cpu {

void relu_forward(std::int64_t count, const float* x, float* y) {
#pragma omp parallel for schedule(static) if (parallel_worth(count))
  for (std::int64_t i = 0; i < count; ++i)
    y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

// The backward loop loads grad_y unconditionally and selects: a load under the condition
// compiles to a branch, which mispredicts on half of the elements (measured: 6x slower than
// relu_forward over the same rows).
void relu_backward(std::int64_t count, const float* grad_y, const float* y, float* grad_x) {
#pragma omp parallel for schedule(static) if (parallel_worth(count))
  for (std::int64_t i = 0; i < count; ++i) {
    const float g = grad_y[i];
    grad_x[i] = y[i] > 0.0f ? g : 0.0f;
  }
}

} // namespace tessel::kernels::cpu
