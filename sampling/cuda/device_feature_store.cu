// CUDA side of the tiered feature store: the device cache, the owned rows in mapped pinned host
// memory, and the kernel that gathers a step's rows from all three tiers.
#include "cuda/device_graph_cuda.hpp"

#include "tessel/core/cuda_check.cuh"
#include "tessel/sampling/device_feature_store.hpp"

#include <algorithm>
#include <cstring>

namespace tessel::sampling {
namespace {

constexpr int kThreads = 256;
constexpr int kWarp = 32;

// One warp per output row: its lanes copy consecutive columns, so each tier is read in whole
// 128-byte lines (over PCIe for the host tier).
__global__ void gather_tiers_kernel(std::int64_t n, std::int64_t f,
                                    const std::int64_t* __restrict__ codes,
                                    const float* __restrict__ cache, const float* __restrict__ host,
                                    const float* __restrict__ network, float* __restrict__ out) {
  const std::int64_t row =
      (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  if (row >= n) return;
  const std::int64_t code = codes[row];
  const std::int64_t index = code >> 2;
  const int tier = static_cast<int>(code & 3);
  const float* src = (tier == 0 ? cache : tier == 1 ? host : network) + index * f;
  float* dst = out + row * f;
  for (std::int64_t c = lane; c < f; c += kWarp)
    dst[c] = src[c];
}

// One warp per admitted row: network row pairs[2 i] into cache row pairs[2 i + 1]. Every cache
// row appears at most once per launch (ClockSlots fills a slot once per round).
__global__ void admit_rows_kernel(std::int64_t n, std::int64_t f,
                                  const std::int64_t* __restrict__ pairs,
                                  const float* __restrict__ network, float* __restrict__ cache) {
  const std::int64_t i =
      (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  if (i >= n) return;
  const float* src = network + pairs[2 * i] * f;
  float* dst = cache + pairs[2 * i + 1] * f;
  for (std::int64_t c = lane; c < f; c += kWarp)
    dst[c] = src[c];
}

unsigned int warp_blocks(std::int64_t rows) {
  return static_cast<unsigned int>((rows * kWarp + kThreads - 1) / kThreads);
}

} // namespace

struct DeviceFeatureStore::Impl {
  Device device;
  void* host_rows = nullptr;          // mapped pinned: the owned rows
  const float* host_device = nullptr; // the same rows' address for kernels
  Tensor cache;                       // f32 [cache rows, F] on the device
  // Pinned staging for each gather's uploads (tier codes, then network rows), so the copies are
  // truly asynchronous and the host goes on preparing while the GPU computes. A slot is reused
  // only kStagingSlots gathers later, when its copies are long done: at most --prefetch (<= 16)
  // steps plus the one computing are gathered but not yet trained, and training a step waits for
  // the device's stream.
  static constexpr int kStagingSlots = 20;
  struct Staging {
    void* ptr = nullptr;
    std::size_t bytes = 0;
  };
  Staging staging[kStagingSlots];
  int next_slot = 0;

  ~Impl() {
    // Gathers and admissions enqueued on the device's stream may still read the pinned rows
    // and staging slots over UVA: wait for them before the memory goes back to the driver.
    if (device.is_cuda()) {
      try {
        cudaStreamSynchronize(static_cast<cudaStream_t>(device_memory::stream(device)));
      } catch (...) { // no stream could be made: nothing was ever enqueued on it
      }
    }
    if (host_rows) cudaFreeHost(host_rows);
    for (Staging& slot : staging)
      if (slot.ptr) cudaFreeHost(slot.ptr);
  }
  void* staging_at_least(std::size_t bytes) {
    Staging& slot = staging[next_slot];
    next_slot = (next_slot + 1) % kStagingSlots;
    if (bytes > slot.bytes || slot.ptr == nullptr) {
      if (slot.ptr) TESSEL_CHECK_CUDA(cudaFreeHost(slot.ptr));
      slot.ptr = nullptr;
      const std::size_t grown = std::max<std::size_t>(bytes + bytes / 2, 4096);
      TESSEL_CHECK_CUDA(cudaHostAlloc(&slot.ptr, grown, cudaHostAllocPortable));
      slot.bytes = grown;
    }
    return slot.ptr;
  }
  cudaStream_t stream() const { return static_cast<cudaStream_t>(device_memory::stream(device)); }
};

void DeviceFeatureStore::init_device(std::span<const float> owned,
                                     std::span<const float> cached_rows) {
  TESSEL_EXPECTS(device_.is_cuda(), "GPU feature store needs a CUDA device, got {}", device_.str());
  impl_.reset(new Impl());
  Impl& g = *impl_;
  g.device = device_;
  TESSEL_CHECK_CUDA(cudaSetDevice(device_.index));
  const std::size_t host_bytes = std::max<std::size_t>(owned.size() * sizeof(float), 64);
  TESSEL_CHECK_CUDA(
      cudaHostAlloc(&g.host_rows, host_bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  if (!owned.empty()) std::memcpy(g.host_rows, owned.data(), owned.size() * sizeof(float));
  g.host_device = static_cast<const float*>(cuda::mapped_device_pointer(g.host_rows));
  // Hot rows first, then the admission slots (zero until a row is admitted).
  const std::int64_t rows = std::max<std::int64_t>(cache_rows() + admit_slots(), 1);
  g.cache = Tensor::zeros({rows, feature_dim_}, DType::f32, device_);
  if (!cached_rows.empty())
    TESSEL_CHECK_CUDA(cudaMemcpyAsync(g.cache.raw(), cached_rows.data(),
                                      cached_rows.size() * sizeof(float), cudaMemcpyHostToDevice,
                                      g.stream()));
  TESSEL_CHECK_CUDA(cudaStreamSynchronize(g.stream()));
}

void DeviceFeatureStore::ImplDeleter::operator()(Impl* impl) const noexcept { delete impl; }
DeviceFeatureStore::~DeviceFeatureStore() = default;

Tensor DeviceFeatureStore::gather_device(std::span<const float> network_rows) {
  Impl& g = *impl_;
  TESSEL_CHECK_CUDA(cudaSetDevice(g.device.index));
  const auto n = static_cast<std::int64_t>(codes_.size());
  Tensor out = Tensor::empty({n, feature_dim_}, DType::f32, g.device);
  if (n == 0) return out;
  const cudaStream_t stream = g.stream();
  // Codes, network rows and admission pairs go up together from one pinned block.
  const std::size_t code_bytes =
      (static_cast<std::size_t>(n) * sizeof(std::int64_t) + 255) / 256 * 256;
  const std::size_t row_bytes = (network_rows.size() * sizeof(float) + 255) / 256 * 256;
  const std::size_t pair_bytes = admit_pairs_.size() * sizeof(std::int64_t);
  const std::size_t total_bytes = code_bytes + row_bytes + pair_bytes;
  char* staged = static_cast<char*>(g.staging_at_least(total_bytes));
  std::memcpy(staged, codes_.data(), static_cast<std::size_t>(n) * sizeof(std::int64_t));
  if (!network_rows.empty())
    std::memcpy(staged + code_bytes, network_rows.data(), network_rows.size() * sizeof(float));
  if (pair_bytes > 0)
    std::memcpy(staged + code_bytes + row_bytes, admit_pairs_.data(), pair_bytes);
  Tensor upload = Tensor::empty({static_cast<std::int64_t>(total_bytes)}, DType::u8, g.device);
  TESSEL_CHECK_CUDA(
      cudaMemcpyAsync(upload.raw(), staged, total_bytes, cudaMemcpyHostToDevice, stream));
  const auto* base = static_cast<const char*>(upload.raw());
  const auto* codes = reinterpret_cast<const std::int64_t*>(base);
  const auto* network = reinterpret_cast<const float*>(base + code_bytes);
  gather_tiers_kernel<<<warp_blocks(n), kThreads, 0, stream>>>(
      n, feature_dim_, codes, g.cache.ptr<float>(), g.host_device, network, out.ptr<float>());
  TESSEL_CHECK_LAUNCH();
  // After the gather on the same stream: this step's hits have read their rows before an
  // admitted row replaces one of them.
  const auto admitted = static_cast<std::int64_t>(admit_pairs_.size() / 2);
  if (admitted > 0) {
    const auto* pairs = reinterpret_cast<const std::int64_t*>(base + code_bytes + row_bytes);
    admit_rows_kernel<<<warp_blocks(admitted), kThreads, 0, stream>>>(
        admitted, feature_dim_, pairs, network, g.cache.ptr<float>());
    TESSEL_CHECK_LAUNCH();
  }
  return out;
}

} // namespace tessel::sampling
