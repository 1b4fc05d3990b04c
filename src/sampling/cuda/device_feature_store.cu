// CUDA side of the tiered feature store: the device cache, the owned rows in mapped pinned host
// memory, the kernels that sort ids into tiers on the device (a plan from device ids, an owner
// serving its rows) and the kernel that gathers a step's rows from all three tiers.
#include "cuda/device_graph_cuda.hpp"

#include "tessel/core/cuda_check.cuh"
#include "tessel/sampling/device_feature_store.hpp"
#include "tessel/sampling/frontier_ops.hpp"

#include <cub/device/device_scan.cuh>

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
  float* dst = out + row * f;
  if (code < 0) { // an id serve() was asked for that is neither owned nor hot: no row to read
    for (std::int64_t c = lane; c < f; c += kWarp)
      dst[c] = 0.0f;
    return;
  }
  const std::int64_t index = code >> 2;
  const int tier = static_cast<int>(code & 3);
  const float* src = (tier == 0 ? cache : tier == 1 ? host : network) + index * f;
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

// One thread per id: its tier code (hot slot, owned row, or -1 for the rest, which the host sorts
// into admitted hits and network ids), a 1 where the code is -1 (the compaction's flags), and
// the owned ids outside and inside the hot rows counted with one atomic per warp and count.
// Every thread of a launched warp reaches the ballots (none returns early).
__global__ void tier_codes_kernel(std::int64_t n, const std::int64_t* __restrict__ ids,
                                  const std::int64_t* __restrict__ hot_pos,
                                  const std::int64_t* __restrict__ hot_slots,
                                  std::int64_t owned_begin, std::int64_t num_owned,
                                  std::int64_t* __restrict__ codes,
                                  std::int64_t* __restrict__ pending_flags,
                                  unsigned long long* __restrict__ owned_counts) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  bool owned_uncached = false, owned_cached = false;
  if (i < n) {
    const std::int64_t id = ids[i];
    const std::int64_t pos = hot_pos[i];
    const bool owned = id >= owned_begin && id - owned_begin < num_owned;
    std::int64_t code = -1;
    if (pos >= 0) {
      code = hot_slots[pos] << 2;
      owned_cached = owned;
    } else if (owned) {
      code = ((id - owned_begin) << 2) | 1;
      owned_uncached = true;
    }
    codes[i] = code;
    pending_flags[i] = code < 0 ? 1 : 0;
  }
  const unsigned uncached_lanes = __ballot_sync(0xffffffffu, owned_uncached);
  const unsigned cached_lanes = __ballot_sync(0xffffffffu, owned_cached);
  if (threadIdx.x % kWarp == 0) {
    if (uncached_lanes != 0)
      atomicAdd(owned_counts, static_cast<unsigned long long>(__popc(uncached_lanes)));
    if (cached_lanes != 0)
      atomicAdd(owned_counts + 1, static_cast<unsigned long long>(__popc(cached_lanes)));
  }
}

// The positions of the flagged ids, ascending: position i goes to its flag's exclusive prefix
// sum. The last thread writes the flagged total.
__global__ void compact_pending_kernel(std::int64_t n, const std::int64_t* __restrict__ flags,
                                       const std::int64_t* __restrict__ prefix,
                                       std::int64_t* __restrict__ pending,
                                       std::int64_t* __restrict__ total) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  if (flags[i] != 0) pending[prefix[i]] = i;
  if (i == n - 1) *total = prefix[i] + flags[i];
}

unsigned int warp_blocks(std::int64_t rows) {
  return static_cast<unsigned int>((rows * kWarp + kThreads - 1) / kThreads);
}

unsigned int thread_blocks(std::int64_t n) {
  return static_cast<unsigned int>((n + kThreads - 1) / kThreads);
}

} // namespace

struct DeviceFeatureStore::Impl {
  Device device;
  void* host_rows = nullptr;          // mapped pinned: the owned rows
  const float* host_device = nullptr; // the same rows' address for kernels
  Tensor cache;                       // f32 [cache rows, F] on the device
  // Pinned staging for the store's uploads (tier codes and admission pairs, request ids), so the
  // copies are truly asynchronous and the host goes on preparing while the GPU computes. Each
  // slot's last copy is followed by an event, which the host waits for before it writes the slot
  // again. A step makes two uploads, so a slot comes back 20 steps later: with at most --prefetch
  // (<= 16) steps prepared ahead of the one computing, the wait finds the copy long done.
  static constexpr int kStagingSlots = 40;
  struct Staging {
    void* ptr = nullptr;
    std::size_t bytes = 0;
    cudaEvent_t copied = nullptr; // recorded after the slot's last copy
    bool in_flight = false;
  };
  Staging staging[kStagingSlots];
  int next_slot = 0;

  ~Impl() {
    // Gathers and admissions enqueued on the device's main or side stream may still read the
    // pinned rows and staging slots over UVA: wait for them before the memory goes back to the
    // driver.
    if (device.is_cuda()) {
      try {
        device_memory::synchronize_streams(device);
      } catch (...) { // no stream could be made, or it failed: nothing more to wait for
      }
    }
    if (host_rows) cudaFreeHost(host_rows);
    for (Staging& slot : staging) {
      if (slot.copied) cudaEventSynchronize(slot.copied);
      if (slot.ptr) cudaFreeHost(slot.ptr);
      if (slot.copied) cudaEventDestroy(slot.copied);
    }
  }
  // The next slot, at least `bytes` long, once its previous copy is done.
  Staging& staging_at_least(std::size_t bytes) {
    Staging& slot = staging[next_slot];
    next_slot = (next_slot + 1) % kStagingSlots;
    if (slot.in_flight) TESSEL_CHECK_CUDA(cudaEventSynchronize(slot.copied));
    slot.in_flight = false;
    if (bytes > slot.bytes || slot.ptr == nullptr) {
      if (slot.ptr) TESSEL_CHECK_CUDA(cudaFreeHost(slot.ptr));
      slot.ptr = nullptr;
      const std::size_t grown = std::max<std::size_t>(bytes + bytes / 2, 4096);
      TESSEL_CHECK_CUDA(cudaHostAlloc(&slot.ptr, grown, cudaHostAllocPortable));
      slot.bytes = grown;
    }
    return slot;
  }
  // After the copy out of `slot` was enqueued on `s`.
  void copy_enqueued(Staging& slot, cudaStream_t s) {
    if (slot.copied == nullptr)
      TESSEL_CHECK_CUDA(cudaEventCreateWithFlags(&slot.copied, cudaEventDisableTiming));
    TESSEL_CHECK_CUDA(cudaEventRecord(slot.copied, s));
    slot.in_flight = true;
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

Tensor DeviceFeatureStore::upload_device(std::span<const std::int64_t> values) {
  Impl& g = *impl_;
  TESSEL_CHECK_CUDA(cudaSetDevice(g.device.index));
  Tensor out = Tensor::empty({static_cast<std::int64_t>(values.size())}, DType::i64, g.device);
  if (values.empty()) return out;
  const cudaStream_t stream = g.stream();
  const std::size_t bytes = values.size() * sizeof(std::int64_t);
  Impl::Staging& slot = g.staging_at_least(bytes);
  std::memcpy(slot.ptr, values.data(), bytes);
  TESSEL_CHECK_CUDA(cudaMemcpyAsync(out.raw(), slot.ptr, bytes, cudaMemcpyHostToDevice, stream));
  g.copy_enqueued(slot, stream);
  return out;
}

DeviceFeatureStore::Classified DeviceFeatureStore::classify_device(const Tensor& ids,
                                                                   bool codes_only) const {
  const Impl& g = *impl_;
  TESSEL_CHECK_CUDA(cudaSetDevice(g.device.index));
  const std::int64_t n = ids.numel();
  TESSEL_EXPECTS(n < (std::int64_t{1} << 31),
                 "GPU feature store: {} ids to sort into tiers, expected fewer than 2^31", n);
  Classified c;
  c.codes = Tensor::empty({n}, DType::i64, g.device);
  if (n == 0) {
    c.pending = Tensor::empty({0}, DType::i64, g.device);
    return c;
  }
  const cudaStream_t stream = g.stream();
  const Tensor hot_pos = find_sorted(hot_sorted_ids_, ids);
  Tensor flags = Tensor::empty({n}, DType::i64, g.device);
  Tensor prefix = Tensor::empty({n}, DType::i64, g.device);
  Tensor pending = Tensor::empty({n}, DType::i64, g.device);
  // [owned outside the hot rows, owned inside them, pending]
  Tensor counts = Tensor::empty({3}, DType::i64, g.device);
  TESSEL_CHECK_CUDA(cudaMemsetAsync(counts.raw(), 0, 3 * sizeof(std::int64_t), stream));
  tier_codes_kernel<<<thread_blocks(n), kThreads, 0, stream>>>(
      n, ids.ptr<std::int64_t>(), hot_pos.ptr<std::int64_t>(),
      hot_sorted_slots_.ptr<std::int64_t>(), owned_begin_, num_owned_, c.codes.ptr<std::int64_t>(),
      flags.ptr<std::int64_t>(), static_cast<unsigned long long*>(counts.raw()));
  TESSEL_CHECK_LAUNCH();
  if (codes_only) return c;
  std::size_t temp_bytes = 0;
  TESSEL_CHECK_CUDA(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, flags.ptr<std::int64_t>(),
                                                  prefix.ptr<std::int64_t>(), n, stream));
  Tensor temp = Tensor::empty({static_cast<std::int64_t>(temp_bytes) + 1}, DType::u8, g.device);
  TESSEL_CHECK_CUDA(cub::DeviceScan::ExclusiveSum(temp.raw(), temp_bytes, flags.ptr<std::int64_t>(),
                                                  prefix.ptr<std::int64_t>(), n, stream));
  compact_pending_kernel<<<thread_blocks(n), kThreads, 0, stream>>>(
      n, flags.ptr<std::int64_t>(), prefix.ptr<std::int64_t>(), pending.ptr<std::int64_t>(),
      counts.ptr<std::int64_t>() + 2);
  TESSEL_CHECK_LAUNCH();
  std::int64_t host_counts[3] = {0, 0, 0};
  TESSEL_CHECK_CUDA(cudaMemcpyAsync(host_counts, counts.raw(), sizeof(host_counts),
                                    cudaMemcpyDeviceToHost, stream));
  TESSEL_CHECK_CUDA(cudaStreamSynchronize(stream));
  c.owned_uncached = host_counts[0];
  c.owned_cached = host_counts[1];
  c.pending = pending.rows_slice(0, host_counts[2]);
  return c;
}

Tensor DeviceFeatureStore::gather_rows_device(const Tensor& codes, const Tensor& network_rows,
                                              const Tensor& pairs) {
  Impl& g = *impl_;
  TESSEL_CHECK_CUDA(cudaSetDevice(g.device.index));
  const std::int64_t n = codes.numel();
  Tensor out = Tensor::empty({n, feature_dim_}, DType::f32, g.device);
  const cudaStream_t stream = g.stream();
  const auto* network = network_rows.numel() > 0 ? network_rows.ptr<float>() : nullptr;
  if (n > 0) {
    gather_tiers_kernel<<<warp_blocks(n), kThreads, 0, stream>>>(
        n, feature_dim_, codes.ptr<std::int64_t>(), g.cache.ptr<float>(), g.host_device, network,
        out.ptr<float>());
    TESSEL_CHECK_LAUNCH();
  }
  // After the gather on the same stream: this step's hits have read their rows before an
  // admitted row replaces one of them.
  const std::int64_t admitted = pairs.numel() / 2;
  if (admitted > 0) {
    admit_rows_kernel<<<warp_blocks(admitted), kThreads, 0, stream>>>(
        admitted, feature_dim_, pairs.ptr<std::int64_t>(), network, g.cache.ptr<float>());
    TESSEL_CHECK_LAUNCH();
  }
  return out;
}

} // namespace tessel::sampling
