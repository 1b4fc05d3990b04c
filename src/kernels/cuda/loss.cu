// CUDA twins of softmax cross-entropy (a warp per selected row), argmax accuracy, squared error and
// binary cross-entropy with logits (a thread per element; the terms are summed on the host in
// order, like the CPU twin).
#include "cuda_ops.hpp"
#include "resources.cuh"

#include <vector>

namespace tessel::kernels::cuda {

namespace {

__device__ double warp_max(double value) {
  for (int offset = 16; offset > 0; offset /= 2)
    value = fmax(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

__device__ double warp_sum(double value) {
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// Per selected row: loss into row_loss[i] (summed on the host in order, like the CPU twin),
// and the scaled gradient into the (already zeroed) grad row.
__global__ void softmax_xent_kernel(std::int64_t c, const float* __restrict__ logits,
                                    std::int64_t k, const LocalId* __restrict__ rows,
                                    const std::int64_t* __restrict__ labels, double scale,
                                    float* __restrict__ grad, double* __restrict__ row_loss) {
  const std::int64_t i = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (i >= k) return; // uniform per warp
  const float* z = logits + static_cast<std::int64_t>(rows[i]) * c;
  float* g = grad + static_cast<std::int64_t>(rows[i]) * c;
  double max_z = -INFINITY;
  for (std::int64_t j = lane; j < c; j += 32)
    max_z = fmax(max_z, static_cast<double>(z[j]));
  max_z = warp_max(max_z);
  double sum = 0.0;
  for (std::int64_t j = lane; j < c; j += 32)
    sum += exp(static_cast<double>(z[j]) - max_z);
  sum = warp_sum(sum);
  const double log_sum = log(sum) + max_z;
  const std::int64_t label = labels[i];
  for (std::int64_t j = lane; j < c; j += 32) {
    const double prob = exp(static_cast<double>(z[j]) - log_sum);
    g[j] = static_cast<float>(scale * (prob - (j == label ? 1.0 : 0.0)));
  }
  if (lane == 0) row_loss[i] = log_sum - static_cast<double>(z[label]);
}

__global__ void correct_kernel(std::int64_t c, const float* __restrict__ logits, std::int64_t k,
                               const LocalId* __restrict__ rows,
                               const std::int64_t* __restrict__ labels,
                               std::int32_t* __restrict__ correct) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < k;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float* z = logits + static_cast<std::int64_t>(rows[i]) * c;
    std::int64_t best = 0;
    for (std::int64_t j = 1; j < c; ++j)
      if (z[j] > z[best]) best = j;
    correct[i] = best == labels[i] ? 1 : 0;
  }
}

__global__ void squared_error_kernel(std::int64_t n, const float* __restrict__ pred,
                                     const float* __restrict__ target, double scale,
                                     float* __restrict__ grad, double* __restrict__ term) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const double diff = static_cast<double>(pred[i]) - static_cast<double>(target[i]);
    term[i] = diff * diff;
    if (grad) grad[i] = static_cast<float>(2.0 * scale * diff);
  }
}

__global__ void bce_kernel(std::int64_t n, const float* __restrict__ scores,
                           const float* __restrict__ labels, double scale, float* __restrict__ grad,
                           double* __restrict__ term) {
  for (std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < n;
       j += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const double x = scores[j], y = labels[j];
    term[j] = fmax(x, 0.0) + log1p(exp(-fabs(x))) - y * x;
    if (grad) {
      const double sigmoid = x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
      grad[j] = static_cast<float>(scale * (sigmoid - y));
    }
  }
}

// Copies n per-element terms to the host (synchronizing) and sums them in order.
double sum_terms_on_host(Resources& r, const double* term, std::int64_t n) {
  std::vector<double> host(static_cast<std::size_t>(n));
  TESSEL_CHECK_CUDA(cudaMemcpyAsync(host.data(), term, static_cast<std::size_t>(n) * sizeof(double),
                                    cudaMemcpyDeviceToHost, r.stream));
  TESSEL_CHECK_CUDA(cudaStreamSynchronize(r.stream));
  double total = 0.0;
  for (double t : host)
    total += t;
  return total;
}

} // namespace

double softmax_cross_entropy(Resources& r, std::int64_t n, std::int64_t c, const float* logits,
                             std::int64_t k, const LocalId* host_rows,
                             const std::int64_t* host_labels, double scale, float* grad) {
  if (n * c > 0)
    TESSEL_CHECK_CUDA(
        cudaMemsetAsync(grad, 0, static_cast<std::size_t>(n * c) * sizeof(float), r.stream));
  if (k == 0) return 0.0;
  ScratchCarver carve(r, ScratchCarver::bytes<LocalId>(k) + ScratchCarver::bytes<std::int64_t>(k) +
                             ScratchCarver::bytes<double>(k));
  auto* rows = carve.take<LocalId>(k);
  auto* labels = carve.take<std::int64_t>(k);
  auto* row_loss = carve.take<double>(k);
  TESSEL_CHECK_CUDA(cudaMemcpyAsync(rows, host_rows, static_cast<std::size_t>(k) * sizeof(LocalId),
                                    cudaMemcpyHostToDevice, r.stream));
  TESSEL_CHECK_CUDA(cudaMemcpyAsync(labels, host_labels,
                                    static_cast<std::size_t>(k) * sizeof(std::int64_t),
                                    cudaMemcpyHostToDevice, r.stream));
  const auto blocks = static_cast<unsigned int>((k * 32 + kThreads - 1) / kThreads);
  softmax_xent_kernel<<<blocks, kThreads, 0, r.stream>>>(c, logits, k, rows, labels, scale, grad,
                                                         row_loss);
  TESSEL_CHECK_LAUNCH();
  std::vector<double> host_loss(static_cast<std::size_t>(k));
  TESSEL_CHECK_CUDA(cudaMemcpyAsync(host_loss.data(), row_loss,
                                    static_cast<std::size_t>(k) * sizeof(double),
                                    cudaMemcpyDeviceToHost, r.stream));
  TESSEL_CHECK_CUDA(cudaStreamSynchronize(r.stream));
  double total = 0.0;
  for (double l : host_loss)
    total += l;
  return total;
}

std::int64_t count_correct(Resources& r, std::int64_t c, const float* logits, std::int64_t k,
                           const LocalId* host_rows, const std::int64_t* host_labels) {
  if (k == 0 || c == 0) return 0;
  ScratchCarver carve(r, ScratchCarver::bytes<LocalId>(k) + ScratchCarver::bytes<std::int64_t>(k) +
                             ScratchCarver::bytes<std::int32_t>(k));
  auto* rows = carve.take<LocalId>(k);
  auto* labels = carve.take<std::int64_t>(k);
  auto* correct = carve.take<std::int32_t>(k);
  TESSEL_CHECK_CUDA(cudaMemcpyAsync(rows, host_rows, static_cast<std::size_t>(k) * sizeof(LocalId),
                                    cudaMemcpyHostToDevice, r.stream));
  TESSEL_CHECK_CUDA(cudaMemcpyAsync(labels, host_labels,
                                    static_cast<std::size_t>(k) * sizeof(std::int64_t),
                                    cudaMemcpyHostToDevice, r.stream));
  correct_kernel<<<blocks_for(k), kThreads, 0, r.stream>>>(c, logits, k, rows, labels, correct);
  TESSEL_CHECK_LAUNCH();
  std::vector<std::int32_t> host_correct(static_cast<std::size_t>(k));
  TESSEL_CHECK_CUDA(cudaMemcpyAsync(host_correct.data(), correct,
                                    static_cast<std::size_t>(k) * sizeof(std::int32_t),
                                    cudaMemcpyDeviceToHost, r.stream));
  TESSEL_CHECK_CUDA(cudaStreamSynchronize(r.stream));
  std::int64_t total = 0;
  for (auto flag : host_correct)
    total += flag;
  return total;
}

double squared_error(Resources& r, std::int64_t n, const float* pred, const float* target,
                     double scale, float* grad) {
  if (n == 0) return 0.0;
  DeviceBuffer terms(r, static_cast<std::size_t>(n) * sizeof(double));
  auto* term = static_cast<double*>(terms.get());
  squared_error_kernel<<<blocks_for(n), kThreads, 0, r.stream>>>(n, pred, target, scale, grad,
                                                                 term);
  TESSEL_CHECK_LAUNCH();
  return sum_terms_on_host(r, term, n);
}

double binary_cross_entropy(Resources& r, std::int64_t n, const float* scores, const float* labels,
                            double scale, float* grad) {
  if (n == 0) return 0.0;
  DeviceBuffer terms(r, static_cast<std::size_t>(n) * sizeof(double));
  auto* term = static_cast<double*>(terms.get());
  bce_kernel<<<blocks_for(n), kThreads, 0, r.stream>>>(n, scores, labels, scale, grad, term);
  TESSEL_CHECK_LAUNCH();
  return sum_terms_on_host(r, term, n);
}

} // namespace tessel::kernels::cuda
