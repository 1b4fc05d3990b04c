// CUDA side of GPU sampling: the graph in device or mapped pinned memory, and the kernels that
// draw neighbors and write the owners' answers (the CPU sampler's draws).
#include "cpu/device_graph_host.hpp"
#include "cuda/device_graph_cuda.hpp"

#include "tessel/core/cuda_check.cuh"
#include "tessel/sampling/device_graph.hpp"
#include "tessel/sampling/draw.hpp"

#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cstring>

namespace tessel::sampling {
namespace cuda {

std::int64_t free_device_bytes(Device device) {
  TESSEL_CHECK_CUDA(cudaSetDevice(device.index));
  std::size_t free_bytes = 0, total_bytes = 0;
  TESSEL_CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  return static_cast<std::int64_t>(free_bytes);
}

void* mapped_device_pointer(void* host) {
  void* mapped = nullptr;
  if (cudaHostGetDevicePointer(&mapped, host, 0) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: clear it so the next launch check does not see it
    mapped = host;
  }
  return mapped;
}

namespace {

constexpr int kThreads = 256;

unsigned int blocks_for(std::int64_t n) {
  return static_cast<unsigned int>((n + kThreads - 1) / kThreads);
}

// Page-locked host memory mapped into the device's address space: kernels read it over PCIe
// through `device_ptr` (the same address as `host` under UVA, asked for anyway).
class MappedHostBuffer {
public:
  explicit MappedHostBuffer(std::size_t bytes) : bytes_(std::max<std::size_t>(bytes, 64)) {
    TESSEL_CHECK_CUDA(cudaHostAlloc(&host_, bytes_, cudaHostAllocMapped | cudaHostAllocPortable));
    device_ptr_ = mapped_device_pointer(host_);
  }
  ~MappedHostBuffer() {
    if (host_) cudaFreeHost(host_);
  }
  MappedHostBuffer(const MappedHostBuffer&) = delete;
  MappedHostBuffer& operator=(const MappedHostBuffer&) = delete;
  void* host() const { return host_; }
  void* device_ptr() const { return device_ptr_; }

private:
  std::size_t bytes_;
  void* host_ = nullptr;
  void* device_ptr_ = nullptr;
};

// Device memory private to the sampler's stream, grown on demand and kept: the caching allocator
// orders its blocks by the device's main stream, which the sampler does not wait for.
class StreamBuffer {
public:
  StreamBuffer() = default;
  ~StreamBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  StreamBuffer(const StreamBuffer&) = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;
  // At least `bytes`; the old contents are dropped when it grows (by half again, so a run grows
  // it a few times at most). Callers synchronize the sampler's stream after each use.
  void* at_least(std::size_t bytes) {
    if (bytes > bytes_ || ptr_ == nullptr) {
      if (ptr_) TESSEL_CHECK_CUDA(cudaFree(ptr_));
      ptr_ = nullptr;
      const std::size_t grown = std::max<std::size_t>({bytes + bytes / 2, bytes_, 256});
      TESSEL_CHECK_CUDA(cudaMalloc(&ptr_, grown));
      bytes_ = grown;
    }
    return ptr_;
  }

private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// counts[i] = draws of request i (offsets[i + 1] before the scan).
__global__ void count_kernel(const EdgeId* __restrict__ indptr, const LocalId* __restrict__ rows,
                             std::int64_t n, int fanout, EdgeId* __restrict__ counts) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const LocalId r = rows[i];
  counts[i] = sample_count(indptr[r + 1] - indptr[r], fanout);
}

// One thread per request: Floyd's positions (the CPU twin's draws) land in `positions`, then each
// drawn neighbor u is answered with answer_table[u] (its global id). A whole row is answered in
// row order.
__global__ void answer_kernel(const EdgeId* __restrict__ indptr,
                              const LocalId* __restrict__ indices,
                              const NodeId* __restrict__ row_keys,
                              const NodeId* __restrict__ answer_table,
                              const LocalId* __restrict__ rows, std::int64_t n, rng::Key key,
                              const EdgeId* __restrict__ offsets,
                              std::uint32_t* __restrict__ positions, NodeId* __restrict__ out) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const LocalId r = rows[i];
  const EdgeId begin = indptr[r];
  const EdgeId degree = indptr[r + 1] - begin;
  const EdgeId first = offsets[i];
  const EdgeId count = offsets[i + 1] - first;
  const LocalId* row = indices + begin;
  NodeId* answer = out + first;
  if (count == degree) {
    for (EdgeId k = 0; k < count; ++k)
      answer[k] = answer_table[row[k]];
    return;
  }
  std::uint32_t* pos = positions + first;
  floyd_positions(key, static_cast<std::uint64_t>(row_keys[r]), degree, count, pos);
  for (EdgeId k = 0; k < count; ++k)
    answer[k] = answer_table[row[pos[k]]];
}

// The device-resident form's first pass: rows[i] = frontier[i] - first_row and counts[i] =
// its draws; an id outside the rows sets *bad (the host checks it before drawing).
__global__ void frontier_rows_kernel(const NodeId* __restrict__ frontier, std::int64_t n,
                                     NodeId first_row, std::int64_t num_rows,
                                     const EdgeId* __restrict__ indptr, int fanout,
                                     LocalId* __restrict__ rows, EdgeId* __restrict__ counts,
                                     int* __restrict__ bad) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const NodeId r = frontier[i] - first_row;
  if (r < 0 || r >= num_rows) {
    *bad = 1;
    rows[i] = 0;
    counts[i] = 0;
    return;
  }
  rows[i] = static_cast<LocalId>(r);
  counts[i] = sample_count(indptr[r + 1] - indptr[r], fanout);
}

// orig[i], degree[i] of row ids[i] - first_row; -1 for an id outside the rows.
__global__ void row_info_kernel(const NodeId* __restrict__ ids, std::int64_t n, NodeId first_row,
                                std::int64_t num_rows, const NodeId* __restrict__ row_keys,
                                const std::int64_t* __restrict__ row_degrees,
                                NodeId* __restrict__ orig, std::int64_t* __restrict__ degree) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const NodeId r = ids[i] - first_row;
  const bool inside = r >= 0 && r < num_rows;
  orig[i] = inside ? row_keys[r] : -1;
  degree[i] = inside ? row_degrees[r] : -1;
}

} // namespace
} // namespace cuda

struct DeviceGraph::Impl {
  Device device;
  GraphPlacement placement = GraphPlacement::device;
  std::int64_t num_rows = 0;
  std::int64_t bytes = 0;
  // Device placement: tensors from the caching allocator; pinned: one mapped host block each.
  Tensor indptr_t, indices_t, row_keys_t, row_degrees_t, answers_t;
  std::unique_ptr<cuda::MappedHostBuffer> indptr_h, indices_h, row_keys_h, row_degrees_h, answers_h;
  const EdgeId* indptr = nullptr;
  const LocalId* indices = nullptr;
  const NodeId* row_keys = nullptr;
  const std::int64_t* row_degrees = nullptr;
  const NodeId* answers = nullptr;
  // Sampling runs on a stream of its own with its own buffers, so a step's draws can proceed
  // while the main stream still computes the previous step.
  cudaStream_t own_stream = nullptr;
  cuda::StreamBuffer rows_d, offsets_d, positions_d, answers_d, temp_d;

  ~Impl() {
    // Draws enqueued on any stream (its own, the device's main one, the trainer's side one) may
    // still read the pinned graph over UVA: wait for them before the members give that memory
    // back to the driver.
    if (own_stream) {
      cudaStreamSynchronize(own_stream);
      cudaStreamDestroy(own_stream);
    }
    if (!device.is_cuda()) return;
    try {
      device_memory::synchronize_streams(device);
    } catch (...) { // no stream could be made, or it failed: nothing more to wait for
    }
  }
  // The calling thread's current stream of the device: the main stream, or the side stream
  // inside the trainer's StreamScope (the device-resident sampler's work follows it).
  cudaStream_t stream() const { return static_cast<cudaStream_t>(device_memory::stream(device)); }

  // Copies `values` to where the placement puts them and returns the address kernels read.
  template <class T>
  const T* place(std::span<const T> values, Tensor& tensor,
                 std::unique_ptr<cuda::MappedHostBuffer>& mapped) {
    const std::size_t n = std::max<std::size_t>(values.size(), 1);
    bytes += static_cast<std::int64_t>(values.size() * sizeof(T));
    if (placement == GraphPlacement::device) {
      tensor = Tensor::zeros({static_cast<std::int64_t>(n)}, dtype_of<T>(), device);
      if (!values.empty())
        TESSEL_CHECK_CUDA(cudaMemcpyAsync(tensor.raw(), values.data(), values.size() * sizeof(T),
                                          cudaMemcpyHostToDevice, stream()));
      return tensor.ptr<T>();
    }
    mapped = std::make_unique<cuda::MappedHostBuffer>(n * sizeof(T));
    if (!values.empty()) std::memcpy(mapped->host(), values.data(), values.size() * sizeof(T));
    return static_cast<const T*>(mapped->device_ptr());
  }
};

DeviceGraph::DeviceGraph(const LocalCsr& graph, std::span<const NodeId> row_keys,
                         std::span<const std::int64_t> row_degrees, std::span<const NodeId> answers,
                         Device device, GraphPlacement placement)
    : impl_(std::make_unique<Impl>()) {
  if (device.is_cpu()) { // the CPU twin: host memory, the CPU sampler's code
    host_ = std::make_unique<HostTwin>(graph, row_keys, row_degrees, answers);
    return;
  }
  TESSEL_EXPECTS(device.is_cuda(), "GPU sampling needs a CUDA device, got {}", device.str());
  TESSEL_EXPECTS(static_cast<std::int64_t>(row_keys.size()) == graph.num_rows,
                 "DeviceGraph: {} row keys for {} rows", row_keys.size(), graph.num_rows);
  TESSEL_EXPECTS(static_cast<std::int64_t>(row_degrees.size()) == graph.num_rows,
                 "DeviceGraph: {} row degrees for {} rows", row_degrees.size(), graph.num_rows);
  TESSEL_EXPECTS(static_cast<std::int64_t>(answers.size()) == graph.num_cols,
                 "DeviceGraph: {} answer ids for {} columns, expected one per column",
                 answers.size(), graph.num_cols);
  for (std::int64_t v = 0; v < graph.num_rows; ++v)
    TESSEL_EXPECTS(graph.degree(v) < (EdgeId{1} << 32),
                   "GPU sampling: row {} has {} neighbors, expected fewer than 2^32", v,
                   graph.degree(v));
  TESSEL_CHECK_CUDA(cudaSetDevice(device.index));
  Impl& g = *impl_;
  g.device = device;
  g.placement = placement;
  g.num_rows = graph.num_rows;
  g.indptr = g.place(std::span<const EdgeId>(graph.indptr), g.indptr_t, g.indptr_h);
  g.indices = g.place(std::span<const LocalId>(graph.indices), g.indices_t, g.indices_h);
  g.row_keys = g.place(row_keys, g.row_keys_t, g.row_keys_h);
  g.row_degrees = g.place(row_degrees, g.row_degrees_t, g.row_degrees_h);
  g.answers = g.place(answers, g.answers_t, g.answers_h);
  TESSEL_CHECK_CUDA(cudaStreamSynchronize(g.stream()));
  TESSEL_CHECK_CUDA(cudaStreamCreateWithFlags(&g.own_stream, cudaStreamNonBlocking));
}

DeviceGraph::~DeviceGraph() = default;

GraphPlacement DeviceGraph::placement() const {
  if (host_) return GraphPlacement::device;
  return impl_->placement;
}
std::int64_t DeviceGraph::bytes() const {
  if (host_) return host_->bytes();
  return impl_->bytes;
}

void DeviceGraph::sample(std::span<const LocalId> rows, int fanout, const rng::Key& key,
                         std::vector<EdgeId>& offsets, std::vector<NodeId>& answers) {
  if (host_) return host_->sample(rows, fanout, key, offsets, answers);
  Impl& g = *impl_;
  TESSEL_CHECK_CUDA(cudaSetDevice(g.device.index));
  const cudaStream_t stream = g.own_stream;
  const auto n = static_cast<std::int64_t>(rows.size());
  offsets.assign(static_cast<std::size_t>(n) + 1, 0);
  if (n == 0) return;
  for (const LocalId r : rows)
    TESSEL_ASSERT(r >= 0 && r < g.num_rows, "GPU sampling: row {} outside [0, {})", r, g.num_rows);
  auto* d_rows = static_cast<LocalId*>(g.rows_d.at_least(rows.size() * sizeof(LocalId)));
  auto* d_offsets =
      static_cast<EdgeId*>(g.offsets_d.at_least(static_cast<std::size_t>(n + 1) * sizeof(EdgeId)));
  TESSEL_CHECK_CUDA(cudaMemcpyAsync(d_rows, rows.data(), rows.size() * sizeof(LocalId),
                                    cudaMemcpyHostToDevice, stream));
  TESSEL_CHECK_CUDA(cudaMemsetAsync(d_offsets, 0, sizeof(EdgeId), stream));
  cuda::count_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(g.indptr, d_rows, n,
                                                                         fanout, d_offsets + 1);
  TESSEL_CHECK_LAUNCH();
  std::size_t temp_bytes = 0;
  TESSEL_CHECK_CUDA(
      cub::DeviceScan::InclusiveSum(nullptr, temp_bytes, d_offsets + 1, d_offsets + 1, n, stream));
  void* temp = g.temp_d.at_least(temp_bytes + 1);
  TESSEL_CHECK_CUDA(
      cub::DeviceScan::InclusiveSum(temp, temp_bytes, d_offsets + 1, d_offsets + 1, n, stream));
  EdgeId total = 0;
  TESSEL_CHECK_CUDA(
      cudaMemcpyAsync(&total, d_offsets + n, sizeof(EdgeId), cudaMemcpyDeviceToHost, stream));
  TESSEL_CHECK_CUDA(cudaStreamSynchronize(stream));
  if (answers.size() < static_cast<std::size_t>(total))
    answers.resize(static_cast<std::size_t>(total));
  if (total > 0) {
    auto* d_positions = static_cast<std::uint32_t*>(
        g.positions_d.at_least(static_cast<std::size_t>(total) * sizeof(std::uint32_t)));
    auto* d_answers = static_cast<NodeId*>(
        g.answers_d.at_least(static_cast<std::size_t>(total) * sizeof(NodeId)));
    cuda::answer_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(
        g.indptr, g.indices, g.row_keys, g.answers, d_rows, n, key, d_offsets, d_positions,
        d_answers);
    TESSEL_CHECK_LAUNCH();
    TESSEL_CHECK_CUDA(cudaMemcpyAsync(answers.data(), d_answers,
                                      static_cast<std::size_t>(total) * sizeof(NodeId),
                                      cudaMemcpyDeviceToHost, stream));
  }
  TESSEL_CHECK_CUDA(cudaMemcpyAsync(offsets.data(), d_offsets,
                                    static_cast<std::size_t>(n + 1) * sizeof(EdgeId),
                                    cudaMemcpyDeviceToHost, stream));
  TESSEL_CHECK_CUDA(cudaStreamSynchronize(stream));
}

Tensor DeviceGraph::upload(std::span<const NodeId> ids) {
  if (host_) return host_->upload(ids);
  Impl& g = *impl_;
  TESSEL_CHECK_CUDA(cudaSetDevice(g.device.index));
  Tensor out = Tensor::empty({static_cast<std::int64_t>(ids.size())}, DType::i64, g.device);
  // From pageable memory the call returns once the ids are staged, so `ids` may go right after.
  if (!ids.empty())
    TESSEL_CHECK_CUDA(cudaMemcpyAsync(out.raw(), ids.data(), ids.size() * sizeof(NodeId),
                                      cudaMemcpyHostToDevice, g.stream()));
  return out;
}

std::int64_t DeviceGraph::sample(const Tensor& frontier, NodeId first_row, int fanout,
                                 const rng::Key& key, Tensor& offsets, Tensor& draws) {
  if (host_) return host_->sample(frontier, first_row, fanout, key, offsets, draws);
  Impl& g = *impl_;
  TESSEL_EXPECTS(frontier.defined() && frontier.dim() == 1 && frontier.dtype() == DType::i64 &&
                     frontier.device() == g.device,
                 "GPU sampling: frontier is {}, expected i64 [n] on {}", frontier.describe(),
                 g.device.str());
  TESSEL_EXPECTS(fanout >= kAllNeighbors, "GPU sampling: fanout {} is invalid", fanout);
  TESSEL_CHECK_CUDA(cudaSetDevice(g.device.index));
  // The current stream (the main one, or the trainer's side stream for a prefetched step): the
  // outputs come from the caching allocator, which orders its blocks by the stream they are
  // allocated on; a reader on another stream waits for the trainer's event first.
  const cudaStream_t stream = g.stream();
  const std::int64_t n = frontier.numel();
  offsets = Tensor::empty({n + 1}, DType::i64, g.device);
  EdgeId* d_offsets = offsets.ptr<EdgeId>();
  TESSEL_CHECK_CUDA(cudaMemsetAsync(d_offsets, 0, sizeof(EdgeId), stream));
  if (n == 0) {
    draws = Tensor::empty({0}, DType::i64, g.device);
    return 0;
  }
  Tensor rows = Tensor::empty({n}, DType::i32, g.device);
  // What the host waits for, read back in one copy: slot 0 the draw total (copied from the
  // scan's last entry), slot 1 the flag of a row outside the graph (an int the kernel sets in the
  // zeroed slot: non-zero when set).
  Tensor readback = Tensor::zeros({2}, DType::i64, g.device);
  std::int64_t* d_readback = readback.ptr<std::int64_t>();
  cuda::frontier_rows_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(
      frontier.ptr<NodeId>(), n, first_row, g.num_rows, g.indptr, fanout, rows.ptr<LocalId>(),
      d_offsets + 1, reinterpret_cast<int*>(d_readback + 1));
  TESSEL_CHECK_LAUNCH();
  std::size_t temp_bytes = 0;
  TESSEL_CHECK_CUDA(
      cub::DeviceScan::InclusiveSum(nullptr, temp_bytes, d_offsets + 1, d_offsets + 1, n, stream));
  Tensor temp = Tensor::empty({static_cast<std::int64_t>(temp_bytes) + 1}, DType::u8, g.device);
  TESSEL_CHECK_CUDA(cub::DeviceScan::InclusiveSum(temp.raw(), temp_bytes, d_offsets + 1,
                                                  d_offsets + 1, n, stream));
  TESSEL_CHECK_CUDA(cudaMemcpyAsync(d_readback, d_offsets + n, sizeof(EdgeId),
                                    cudaMemcpyDeviceToDevice, stream));
  std::int64_t host[2] = {0, 0};
  TESSEL_CHECK_CUDA(
      cudaMemcpyAsync(host, d_readback, sizeof(host), cudaMemcpyDeviceToHost, stream));
  TESSEL_CHECK_CUDA(cudaStreamSynchronize(stream));
  const EdgeId total = host[0];
  TESSEL_EXPECTS(host[1] == 0,
                 "GPU sampling: a frontier node is not among this graph's rows [{}, {})", first_row,
                 first_row + g.num_rows);
  draws = Tensor::empty({total}, DType::i64, g.device);
  if (total > 0) {
    Tensor positions = Tensor::empty({total}, DType::i32, g.device);
    cuda::answer_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(
        g.indptr, g.indices, g.row_keys, g.answers, rows.ptr<LocalId>(), n, key, d_offsets,
        static_cast<std::uint32_t*>(positions.raw()), draws.ptr<NodeId>());
    TESSEL_CHECK_LAUNCH();
  }
  return total;
}

void DeviceGraph::row_info(const Tensor& ids, NodeId first_row, Tensor& orig, Tensor& degree) {
  if (host_) return host_->row_info(ids, first_row, orig, degree);
  Impl& g = *impl_;
  TESSEL_EXPECTS(
      ids.defined() && ids.dim() == 1 && ids.dtype() == DType::i64 && ids.device() == g.device,
      "GPU sampling: ids are {}, expected i64 [n] on {}", ids.describe(), g.device.str());
  TESSEL_CHECK_CUDA(cudaSetDevice(g.device.index));
  const std::int64_t n = ids.numel();
  orig = Tensor::empty({n}, DType::i64, g.device);
  degree = Tensor::empty({n}, DType::i64, g.device);
  if (n == 0) return;
  cuda::row_info_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, g.stream()>>>(
      ids.ptr<NodeId>(), n, first_row, g.num_rows, g.row_keys, g.row_degrees, orig.ptr<NodeId>(),
      degree.ptr<std::int64_t>());
  TESSEL_CHECK_LAUNCH();
}

} // namespace tessel::sampling
