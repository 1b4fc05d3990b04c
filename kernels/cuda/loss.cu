// CUDA twins of softmax cross-entropy (a warp per selected row) and argmax accuracy.
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

} // namespace tessel::kernels::cuda
