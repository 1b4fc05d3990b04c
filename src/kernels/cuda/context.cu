// CUDA context resources: a non-blocking stream with cuBLAS and cuSPARSE handles bound to it.
#include "cuda_ops.hpp"
#include "resources.cuh"

namespace tessel::kernels::cuda {

Resources::Resources(int device_index, cudaStream_t shared_stream) : device(device_index) {
  TESSEL_CHECK_CUDA(cudaSetDevice(device));
  // The default context shares the device's stream, on which tensor copies, fills and the
  // caching allocator's reuse are ordered. Either way the stream is non-blocking: nothing in
  // Tessel enqueues on the legacy default stream, so there is nothing to wait for there.
  if (shared_stream) {
    stream = shared_stream;
  } else {
    TESSEL_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    owns_stream = true;
  }
  try {
    TESSEL_CHECK_CUBLAS(cublasCreate(&cublas));
    TESSEL_CHECK_CUBLAS(cublasSetStream(cublas, stream));
    TESSEL_CHECK_CUSPARSE(cusparseCreate(&cusparse));
    TESSEL_CHECK_CUSPARSE(cusparseSetStream(cusparse, stream));
  } catch (...) {
    if (cublas) cublasDestroy(cublas);
    if (owns_stream) cudaStreamDestroy(stream);
    throw;
  }
}

Resources::~Resources() {
  // Destructors do not throw: teardown errors are not actionable.
  cudaSetDevice(device);
  if (stream) cudaStreamSynchronize(stream);
  device_memory::release(scratch, Device::cuda(device), scratch_bytes);
  device_memory::release(workspace, Device::cuda(device), workspace_bytes);
  if (cusparse) cusparseDestroy(cusparse);
  if (cublas) cublasDestroy(cublas);
  if (stream && owns_stream) cudaStreamDestroy(stream);
}

namespace {
void* grow(int device, cudaStream_t stream, void*& buffer, std::size_t& capacity,
           std::size_t bytes) {
  if (bytes <= capacity && buffer) return buffer;
  const std::size_t grown = bytes > 2 * capacity ? bytes : 2 * capacity;
  if (buffer) {
    // The cache hands blocks out in the order of the device's own stream; this context's
    // stream may be another one, so the old block's work must be done before it goes back.
    TESSEL_CHECK_CUDA(cudaStreamSynchronize(stream));
    device_memory::release(buffer, Device::cuda(device), capacity);
    buffer = nullptr;
    capacity = 0;
  }
  buffer = device_memory::allocate(grown > 0 ? grown : 256, Device::cuda(device));
  capacity = grown > 0 ? grown : 256;
  return buffer;
}
} // namespace

void* Resources::scratch_at_least(std::size_t bytes) {
  return grow(device, stream, scratch, scratch_bytes, bytes);
}

void* Resources::workspace_at_least(std::size_t bytes) {
  return grow(device, stream, workspace, workspace_bytes, bytes);
}

Resources* create_resources(int device, void* shared_stream) {
  return new Resources(device, static_cast<cudaStream_t>(shared_stream));
}

void destroy_resources(Resources* resources) noexcept {
  delete resources;
}

void synchronize(Resources& r) {
  TESSEL_CHECK_CUDA(cudaStreamSynchronize(r.stream));
}

} // namespace tessel::kernels::cuda
