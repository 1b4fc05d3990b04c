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

DeviceFeatureStore::DeviceFeatureStore(std::span<const float> owned, std::int64_t num_owned,
                                       std::int64_t feature_dim, NodeId owned_begin,
                                       std::span<const NodeId> cached_ids,
                                       std::span<const float> cached_rows, Device device)
    : num_owned_(num_owned), feature_dim_(feature_dim), owned_begin_(owned_begin),
      cached_(cached_ids.begin(), cached_ids.end()), impl_(std::make_unique<Impl>()) {
  TESSEL_EXPECTS(device.is_cuda(), "GPU feature store needs a CUDA device, got {}", device.str());
  TESSEL_EXPECTS(feature_dim > 0, "GPU feature store: feature dimension {}, expected > 0",
                 feature_dim);
  TESSEL_EXPECTS(static_cast<std::int64_t>(owned.size()) == num_owned * feature_dim,
                 "GPU feature store: {} owned values, expected {} rows x {}", owned.size(),
                 num_owned, feature_dim);
  TESSEL_EXPECTS(cached_rows.size() == cached_ids.size() * static_cast<std::size_t>(feature_dim),
                 "GPU feature store: {} cached values, expected {} rows x {}", cached_rows.size(),
                 cached_ids.size(), feature_dim);
  index_.reset(static_cast<std::int64_t>(cached_.size()));
  for (std::size_t s = 0; s < cached_.size(); ++s) {
    bool inserted = false;
    index_.insert(cached_[s], static_cast<std::int32_t>(s), inserted);
    TESSEL_EXPECTS(inserted, "GPU feature store: node {} is cached twice", cached_[s]);
  }
  Impl& g = *impl_;
  g.device = device;
  TESSEL_CHECK_CUDA(cudaSetDevice(device.index));
  const std::size_t host_bytes = std::max<std::size_t>(owned.size() * sizeof(float), 64);
  TESSEL_CHECK_CUDA(
      cudaHostAlloc(&g.host_rows, host_bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  if (!owned.empty()) std::memcpy(g.host_rows, owned.data(), owned.size() * sizeof(float));
  g.host_device = static_cast<const float*>(cuda::mapped_device_pointer(g.host_rows));
  const std::int64_t rows = std::max<std::int64_t>(cache_rows(), 1);
  g.cache = Tensor::zeros({rows, feature_dim}, DType::f32, device);
  if (!cached_rows.empty())
    TESSEL_CHECK_CUDA(cudaMemcpyAsync(g.cache.raw(), cached_rows.data(),
                                      cached_rows.size() * sizeof(float), cudaMemcpyHostToDevice,
                                      g.stream()));
  TESSEL_CHECK_CUDA(cudaStreamSynchronize(g.stream()));
}

DeviceFeatureStore::~DeviceFeatureStore() = default;

Tensor DeviceFeatureStore::gather(std::span<const float> network_rows) {
  TESSEL_EXPECTS(static_cast<std::int64_t>(network_rows.size()) == planned_network_ * feature_dim_,
                 "DeviceFeatureStore::gather: {} network values, expected {} rows x {}",
                 network_rows.size(), planned_network_, feature_dim_);
  Impl& g = *impl_;
  TESSEL_CHECK_CUDA(cudaSetDevice(g.device.index));
  const auto n = static_cast<std::int64_t>(codes_.size());
  Tensor out = Tensor::empty({n, feature_dim_}, DType::f32, g.device);
  if (n == 0) return out;
  const cudaStream_t stream = g.stream();
  // Codes and network rows go up together from one pinned block.
  const std::size_t code_bytes =
      (static_cast<std::size_t>(n) * sizeof(std::int64_t) + 255) / 256 * 256;
  const std::size_t row_bytes = network_rows.size() * sizeof(float);
  char* staged = static_cast<char*>(g.staging_at_least(code_bytes + row_bytes));
  std::memcpy(staged, codes_.data(), static_cast<std::size_t>(n) * sizeof(std::int64_t));
  if (row_bytes > 0) std::memcpy(staged + code_bytes, network_rows.data(), row_bytes);
  Tensor upload =
      Tensor::empty({static_cast<std::int64_t>(code_bytes + row_bytes)}, DType::u8, g.device);
  TESSEL_CHECK_CUDA(cudaMemcpyAsync(upload.raw(), staged, code_bytes + row_bytes,
                                    cudaMemcpyHostToDevice, stream));
  const auto* codes = static_cast<const std::int64_t*>(upload.raw());
  const auto* network =
      reinterpret_cast<const float*>(static_cast<const char*>(upload.raw()) + code_bytes);
  const std::int64_t threads = n * kWarp;
  const auto blocks = static_cast<unsigned int>((threads + kThreads - 1) / kThreads);
  gather_tiers_kernel<<<blocks, kThreads, 0, stream>>>(n, feature_dim_, codes, g.cache.ptr<float>(),
                                                       g.host_device, network, out.ptr<float>());
  TESSEL_CHECK_LAUNCH();
  return out;
}

} // namespace tessel::sampling
