// NCCL data plane: bootstrap over MPI, stream-ordered tensor transfers, an async-error watchdog.
#include "tessel/comm/nccl_communicator.hpp"

#include "tessel/core/cuda_check.cuh"
#include "tessel/core/log.hpp"
#include "tessel/core/mpi.hpp"
#include "tessel/core/stream.hpp"

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <thread>

#define TESSEL_CHECK_NCCL(call)                                                            \
  do {                                                                                     \
    const ncclResult_t tessel_nccl_rc_ = (call);                                           \
    if (tessel_nccl_rc_ != ncclSuccess) [[unlikely]]                                       \
      TESSEL_LIB_FAIL("NCCL call {} failed: {}", #call, ncclGetErrorString(tessel_nccl_rc_)); \
  } while (0)

namespace tessel::comm {

bool nccl_available() { return true; }

namespace {

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    case DType::u8: return ncclUint8;
  }
  TESSEL_FAIL("NCCL: no datatype for {}", dtype_name(dtype));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
  }
  return ncclSum;
}

double timeout_seconds() {
  if (const char* env = std::getenv("TESSEL_NCCL_TIMEOUT_S"); env && std::atof(env) > 0)
    return std::atof(env);
  return 600.0;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& control, Device device, ncclComm_t comm, int rank, int size)
      : control_(control), device_(device), comm_(comm), rank_(rank), size_(size) {
    // The control communicator has this one's ranks, so the same hosts.
    std::vector<std::uint8_t> other_host(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r)
      other_host[static_cast<std::size_t>(r)] = !control_.shares_host(r);
    set_peer_hosts(std::move(other_host));
    watchdog_ = std::thread([this] { watch(); });
  }

  ~NcclCommunicator() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
    if (comm_) ncclCommDestroy(comm_);
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }
  bool device_native() const override { return true; }

  // Host memory: the control plane.
  void allreduce(void* buffer, std::int64_t count, DType dtype, ReduceOp op) override {
    control_.allreduce(buffer, count, dtype, op);
  }
  void broadcast(void* buffer, std::int64_t count, DType dtype, int root) override {
    control_.broadcast(buffer, count, dtype, root);
  }
  void allgather(const void* send, std::int64_t count, void* recv, DType dtype) override {
    control_.allgather(send, count, recv, dtype);
  }
  void alltoallv(const void* send, std::span<const std::int64_t> send_counts, void* recv,
                 std::span<const std::int64_t> recv_counts, DType dtype) override {
    control_.alltoallv(send, send_counts, recv, recv_counts, dtype);
  }
  void barrier() override { control_.barrier(); }
  void send(const void* buffer, std::int64_t count, DType dtype, int peer, int tag) override {
    control_.send(buffer, count, dtype, peer, tag);
  }
  void recv(void* buffer, std::int64_t count, DType dtype, int peer, int tag) override {
    control_.recv(buffer, count, dtype, peer, tag);
  }
  void wait_sends() override { control_.wait_sends(); }

  std::unique_ptr<Communicator> split(int color, int key) override {
    // The control plane is split alongside; the result owns its control communicator.
    auto control = control_.split(color, key);
    ncclComm_t sub = nullptr;
    TESSEL_CHECK_NCCL(ncclCommSplit(comm_, color, key, &sub, nullptr));
    auto result = std::make_unique<NcclCommunicator>(*control, device_, sub, control->rank(),
                                                     control->size());
    result->owned_control_ = std::move(control);
    return result;
  }

  // Device tensors: enqueued on the stream the caller gives (see enqueue_on()), not waited for.
  void allreduce(Tensor& t, DeviceStream stream, ReduceOp op) override {
    if (!on_device(t)) return Communicator::allreduce(t, stream, op);
    if (t.numel() == 0) return;
    TESSEL_CHECK_NCCL(ncclAllReduce(t.raw(), t.raw(), static_cast<std::size_t>(t.numel()),
                                    nccl_type(t.dtype()), nccl_op(op), comm_,
                                    enqueue_on(stream)));
    if (size_ > 1)
      count_collective(2 * (size_ - 1) * static_cast<std::int64_t>(t.nbytes()) / size_);
  }

  void alltoallv(const Tensor& send, std::span<const std::int64_t> send_rows, Tensor& recv,
                 std::span<const std::int64_t> recv_rows, DeviceStream stream) override {
    if (!on_device(send) || !on_device(recv))
      return Communicator::alltoallv(send, send_rows, recv, recv_rows, stream);
    TESSEL_EXPECTS(send.dtype() == recv.dtype() && send.cols() == recv.cols(),
                   "alltoallv: send {} and receive {} differ in dtype or columns",
                   send.describe(), recv.describe());
    TESSEL_EXPECTS(static_cast<int>(send_rows.size()) == size_ &&
                       static_cast<int>(recv_rows.size()) == size_,
                   "alltoallv: {} send and {} receive counts for {} ranks", send_rows.size(),
                   recv_rows.size(), size_);
    const auto row_bytes = static_cast<std::int64_t>(dtype_size(send.dtype())) * send.cols();
    const auto row_elems = static_cast<std::size_t>(send.cols());
    const ncclDataType_t type = nccl_type(send.dtype());
    const char* out = static_cast<const char*>(send.raw());
    char* in = static_cast<char*>(recv.raw());
    std::int64_t send_at = 0, recv_at = 0;
    std::int64_t self_send = 0, self_recv = 0;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) self_send = send_at, self_recv = recv_at;
      send_at += send_rows[r];
      recv_at += recv_rows[r];
    }
    TESSEL_EXPECTS(send_at <= send.rows() && recv_at <= recv.rows(),
                   "alltoallv: {} rows to send from {}, {} to receive into {}", send_at,
                   send.describe(), recv_at, recv.describe());
    TESSEL_EXPECTS(send_rows[rank_] == recv_rows[rank_],
                   "alltoallv: rank {} sends itself {} rows but expects {}", rank_,
                   send_rows[rank_], recv_rows[rank_]);
    // One stream for the whole operation, settled before the group starts (see enqueue_on()).
    const cudaStream_t s = enqueue_on(stream);
    // Rows a rank sends itself are a device copy; the others one grouped send/recv per peer.
    if (send_rows[rank_] > 0)
      TESSEL_CHECK_CUDA(cudaMemcpyAsync(in + self_recv * row_bytes, out + self_send * row_bytes,
                                        static_cast<std::size_t>(send_rows[rank_] * row_bytes),
                                        cudaMemcpyDeviceToDevice, s));
    TESSEL_CHECK_NCCL(ncclGroupStart());
    send_at = recv_at = 0;
    for (int r = 0; r < size_; ++r) {
      if (r != rank_ && send_rows[r] > 0) {
        TESSEL_CHECK_NCCL(ncclSend(out + send_at * row_bytes,
                                   static_cast<std::size_t>(send_rows[r]) * row_elems, type, r,
                                   comm_, s));
        count_sent(r, send_rows[r] * row_bytes);
      }
      if (r != rank_ && recv_rows[r] > 0)
        TESSEL_CHECK_NCCL(ncclRecv(in + recv_at * row_bytes,
                                   static_cast<std::size_t>(recv_rows[r]) * row_elems, type, r,
                                   comm_, s));
      send_at += send_rows[r];
      recv_at += recv_rows[r];
    }
    TESSEL_CHECK_NCCL(ncclGroupEnd());
  }

  void send(const Tensor& t, int peer, DeviceStream stream, int tag) override {
    if (!on_device(t)) return Communicator::send(t, peer, stream, tag);
    TESSEL_CHECK_NCCL(ncclSend(t.raw(), static_cast<std::size_t>(t.numel()), nccl_type(t.dtype()),
                               peer, comm_, enqueue_on(stream)));
    count_sent(peer, static_cast<std::int64_t>(t.nbytes()));
  }

  void recv(Tensor& t, int peer, DeviceStream stream, int tag) override {
    if (!on_device(t)) return Communicator::recv(t, peer, stream, tag);
    TESSEL_CHECK_NCCL(ncclRecv(t.raw(), static_cast<std::size_t>(t.numel()), nccl_type(t.dtype()),
                               peer, comm_, enqueue_on(stream)));
  }

 private:
  bool on_device(const Tensor& t) const {
    if (t.device().is_cpu()) return false;
    TESSEL_EXPECTS(t.device() == device_, "NCCL communicator on {} got a tensor on {}",
                   device_.str(), t.device().str());
    return true;
  }
  // The stream to enqueue an operation on: the one the caller gives (its handle, or the
  // device's main stream when null), so the sampler's exchanges run on the sampler's stream
  // because the sampler passes it. NCCL operations of one communicator must never run
  // concurrently (each rank would have to run them in the same order): when the stream changes,
  // the new one first waits for the operations enqueued on the previous one.
  cudaStream_t enqueue_on(DeviceStream stream) {
    const auto current = static_cast<cudaStream_t>(device_memory::resolve(device_, stream));
    const cudaStream_t previous = last_stream_.load(std::memory_order_relaxed);
    if (previous != nullptr && previous != current) {
      // StreamEvent records and waits on the thread's current stream: name each for the call.
      {
        const device_memory::StreamScope on_previous(device_, previous);
        switch_event_.record(device_);
      }
      const device_memory::StreamScope on_current(device_, current);
      switch_event_.wait(device_);
    }
    last_stream_.store(current, std::memory_order_relaxed);
    return current;
  }

  // Polls NCCL's asynchronous error state (a peer that died, a network failure) and the age of
  // outstanding work; either aborts the job instead of letting it hang.
  void watch() {
    std::unique_lock lock(mutex_);
    const double limit = timeout_seconds();
    auto busy_since = std::chrono::steady_clock::now();
    while (!wake_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stop_; })) {
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(comm_, &async) != ncclSuccess || async != ncclSuccess) {
        fail(fmt::format("NCCL reported an asynchronous error: {}", ncclGetErrorString(async)));
      }
      // The stream the latest operation went to.
      const cudaStream_t s = last_stream_.load(std::memory_order_relaxed);
      if (s == nullptr || cudaStreamQuery(s) != cudaErrorNotReady) {
        busy_since = std::chrono::steady_clock::now();
        continue;
      }
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - busy_since).count();
      if (waited > limit)
        fail(fmt::format("NCCL work on {} made no progress for {:.0f} s (TESSEL_NCCL_TIMEOUT_S)",
                         device_.str(), waited));
    }
  }

  [[noreturn]] void fail(const std::string& why) {
    ncclCommAbort(comm_);
    comm_ = nullptr;
    mpi::abort_job(why, 1);
  }

  Communicator& control_;
  std::unique_ptr<Communicator> owned_control_;
  Device device_;
  ncclComm_t comm_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  std::atomic<cudaStream_t> last_stream_{nullptr};  // of the latest operation enqueued
  device_memory::StreamEvent switch_event_;        // orders operations across a stream change
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread watchdog_;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& control, Device device) {
  TESSEL_EXPECTS(device.is_cuda(), "the NCCL data plane needs a CUDA device, not {}",
                 device.str());
  TESSEL_CHECK_CUDA(cudaSetDevice(device.index));
  ncclUniqueId id{};
  if (control.rank() == 0) TESSEL_CHECK_NCCL(ncclGetUniqueId(&id));
  control.broadcast(&id, sizeof(id), DType::u8, 0);
  ncclComm_t comm = nullptr;
  TESSEL_CHECK_NCCL(ncclCommInitRank(&comm, control.size(), id, control.rank()));
  return std::make_unique<NcclCommunicator>(control, device, comm, control.rank(),
                                            control.size());
}

}  // namespace tessel::comm
