// Communicator over MPI on host memory.
#include "tessel/comm/mpi_communicator.hpp"

#include "tessel/core/mpi.hpp"

#include <cstring>
#include <list>
#include <numeric>

namespace tessel::comm {

std::vector<std::int64_t> Communicator::exchange_counts(std::span<const std::int64_t> send_counts) {
  TESSEL_ASSERT(static_cast<int>(send_counts.size()) == size(),
                "exchange_counts: {} counts for {} ranks", send_counts.size(), size());
  std::vector<std::int64_t> ones(static_cast<std::size_t>(size()), 1);
  std::vector<std::int64_t> recv(static_cast<std::size_t>(size()));
  const std::int64_t before = bytes_sent_, before_between_hosts = bytes_sent_between_hosts_;
  alltoallv(send_counts.data(), ones, recv.data(), ones, DType::i64);
  // Control traffic is not payload.
  bytes_sent_ = before;
  bytes_sent_between_hosts_ = before_between_hosts;
  return recv;
}

void Communicator::set_peer_hosts(std::vector<std::uint8_t> other_host) {
  TESSEL_ASSERT(static_cast<int>(other_host.size()) == size(),
                "set_peer_hosts: {} flags for {} ranks", other_host.size(), size());
  peers_on_other_hosts_ = 0;
  for (const auto flag : other_host) peers_on_other_hosts_ += flag ? 1 : 0;
  peer_on_other_host_ = std::move(other_host);
}

void Communicator::count_sent(int peer, std::int64_t bytes) {
  if (peer == rank()) return;
  bytes_sent_ += bytes;
  if (!shares_host(peer)) bytes_sent_between_hosts_ += bytes;
}

void Communicator::count_collective(std::int64_t bytes) {
  bytes_sent_ += bytes;
  if (peers_on_other_hosts_ > 0)
    bytes_sent_between_hosts_ += bytes * peers_on_other_hosts_ / (size() - 1);
}

namespace {

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    case DType::u8: return MPI_UINT8_T;
  }
  TESSEL_ASSERT(false, "no MPI datatype for dtype {}", static_cast<int>(dtype));
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
  }
  return MPI_SUM;
}

// An alltoallv's per-peer counts and displacements as MPI's ints (checked to fit).
struct MpiCounts {
  std::vector<int> send, send_at, recv, recv_at;
};

// MPI_Ialltoallv's request and the arrays it reads until it completes.
class MpiPendingExchange final : public PendingExchange {
 public:
  explicit MpiPendingExchange(MpiCounts c) : counts(std::move(c)) {}
  ~MpiPendingExchange() override {
    if (request != MPI_REQUEST_NULL && mpi::initialized()) MPI_Wait(&request, MPI_STATUS_IGNORE);
  }
  void wait() override {
    if (request != MPI_REQUEST_NULL) TESSEL_CHECK_MPI(MPI_Wait(&request, MPI_STATUS_IGNORE));
  }
  MpiCounts counts;
  MPI_Request request = MPI_REQUEST_NULL;
};

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm parent) {
    TESSEL_CHECK_MPI(MPI_Comm_dup(parent, &comm_));
    TESSEL_CHECK_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    TESSEL_CHECK_MPI(MPI_Comm_rank(comm_, &rank_));
    TESSEL_CHECK_MPI(MPI_Comm_size(comm_, &size_));
    set_peer_hosts(mpi::ranks_on_other_hosts(comm_));
  }
  ~MpiCommunicator() override {
    if (!mpi::initialized()) return;
    // A send still in flight at teardown (an error path) is cancelled rather than waited for.
    for (auto& pending : pending_sends_) {
      MPI_Cancel(&pending.request);
      MPI_Request_free(&pending.request);
    }
    MPI_Comm_free(&comm_);
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  using Communicator::allreduce;
  using Communicator::alltoallv;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  void allreduce(void* buffer, std::int64_t count, DType dtype, ReduceOp op) override {
    if (count == 0) return;
    TESSEL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, buffer, mpi::as_count(count, "allreduce"),
                                   mpi_type(dtype), mpi_op(op), comm_));
    // Ring-allreduce volume: each rank sends about 2 (P-1)/P of the buffer.
    if (size_ > 1)
      count_collective(2 * (size_ - 1) * count * static_cast<std::int64_t>(dtype_size(dtype)) /
                       size_);
  }

  void broadcast(void* buffer, std::int64_t count, DType dtype, int root) override {
    if (count == 0) return;
    TESSEL_CHECK_MPI(
        MPI_Bcast(buffer, mpi::as_count(count, "broadcast"), mpi_type(dtype), root, comm_));
    if (rank_ == root && size_ > 1)
      count_collective((size_ - 1) * count * static_cast<std::int64_t>(dtype_size(dtype)));
  }

  void allgather(const void* send, std::int64_t count, void* recv, DType dtype) override {
    const int n = mpi::as_count(count, "allgather");
    TESSEL_CHECK_MPI(MPI_Allgather(send, n, mpi_type(dtype), recv, n, mpi_type(dtype), comm_));
    count_collective((size_ - 1) * count * static_cast<std::int64_t>(dtype_size(dtype)));
  }

  void alltoallv(const void* send, std::span<const std::int64_t> send_counts, void* recv,
                 std::span<const std::int64_t> recv_counts, DType dtype) override {
    const MpiCounts c = mpi_counts(send_counts, recv_counts, dtype);
    const MPI_Datatype type = mpi_type(dtype);
    TESSEL_CHECK_MPI(MPI_Alltoallv(send, c.send.data(), c.send_at.data(), type, recv,
                                   c.recv.data(), c.recv_at.data(), type, comm_));
  }

  std::unique_ptr<PendingExchange> start_alltoallv(
      const Tensor& send, std::span<const std::int64_t> send_rows, Tensor& recv,
      std::span<const std::int64_t> recv_rows, DeviceStream stream) override {
    if (!send.device().is_cpu())
      return Communicator::start_alltoallv(send, send_rows, recv, recv_rows, stream);
    const auto [send_counts, recv_counts] = element_counts(send, send_rows, recv, recv_rows);
    auto pending = std::make_unique<MpiPendingExchange>(
        mpi_counts(send_counts, recv_counts, send.dtype()));
    const MpiCounts& c = pending->counts;  // MPI reads the arrays until the exchange completes
    const MPI_Datatype type = mpi_type(send.dtype());
    TESSEL_CHECK_MPI(MPI_Ialltoallv(send.raw(), c.send.data(), c.send_at.data(), type,
                                    recv.raw(), c.recv.data(), c.recv_at.data(), type, comm_,
                                    &pending->request));
    return pending;
  }

  void barrier() override { TESSEL_CHECK_MPI(MPI_Barrier(comm_)); }

  void send(const void* buffer, std::int64_t count, DType dtype, int peer, int tag) override {
    TESSEL_ASSERT(peer >= 0 && peer < size_ && peer != rank_, "send: peer {} of {} (rank {})",
                  peer, size_, rank_);
    reap_sends(false);
    const auto bytes = static_cast<std::size_t>(count) * dtype_size(dtype);
    PendingSend& pending = pending_sends_.emplace_back();
    pending.payload.resize(bytes);
    if (bytes > 0) std::memcpy(pending.payload.data(), buffer, bytes);
    TESSEL_CHECK_MPI(MPI_Isend(pending.payload.data(), mpi::as_count(count, "send"),
                               mpi_type(dtype), peer, tag, comm_, &pending.request));
    count_sent(peer, static_cast<std::int64_t>(bytes));
  }

  void recv(void* buffer, std::int64_t count, DType dtype, int peer, int tag) override {
    TESSEL_ASSERT(peer >= 0 && peer < size_ && peer != rank_, "recv: peer {} of {} (rank {})",
                  peer, size_, rank_);
    MPI_Status status;
    TESSEL_CHECK_MPI(MPI_Recv(buffer, mpi::as_count(count, "recv"), mpi_type(dtype), peer, tag,
                              comm_, &status));
    int received = 0;
    TESSEL_CHECK_MPI(MPI_Get_count(&status, mpi_type(dtype), &received));
    TESSEL_EXPECTS(received == count, "recv: expected {} elements from rank {} (tag {}), got {}",
                   count, peer, tag, received);
    reap_sends(false);
  }

  void wait_sends() override { reap_sends(true); }
  using Communicator::recv;
  using Communicator::send;

  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm sub = MPI_COMM_NULL;
    TESSEL_CHECK_MPI(MPI_Comm_split(comm_, color, key, &sub));
    auto result = std::make_unique<MpiCommunicator>(sub);
    MPI_Comm_free(&sub);
    return result;
  }

 private:
  MpiCounts mpi_counts(std::span<const std::int64_t> send_counts,
                       std::span<const std::int64_t> recv_counts, DType dtype) {
    TESSEL_ASSERT(static_cast<int>(send_counts.size()) == size_ &&
                      static_cast<int>(recv_counts.size()) == size_,
                  "alltoallv: counts for {} / {} ranks, communicator has {}", send_counts.size(),
                  recv_counts.size(), size_);
    MpiCounts c;
    for (auto* v : {&c.send, &c.send_at, &c.recv, &c.recv_at})
      v->resize(static_cast<std::size_t>(size_));
    std::int64_t soff = 0, roff = 0;
    for (int r = 0; r < size_; ++r) {
      c.send[r] = mpi::as_count(send_counts[r], "alltoallv send block");
      c.recv[r] = mpi::as_count(recv_counts[r], "alltoallv receive block");
      c.send_at[r] = mpi::as_count(soff, "alltoallv send displacement");
      c.recv_at[r] = mpi::as_count(roff, "alltoallv receive displacement");
      soff += send_counts[r];
      roff += recv_counts[r];
      count_sent(r, send_counts[r] * static_cast<std::int64_t>(dtype_size(dtype)));
    }
    return c;
  }

  struct PendingSend {
    std::vector<char> payload;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  // Frees the copies of sends that have left (all of them, waiting, when `wait`).
  void reap_sends(bool wait) {
    for (auto it = pending_sends_.begin(); it != pending_sends_.end();) {
      int done = 0;
      if (wait) {
        TESSEL_CHECK_MPI(MPI_Wait(&it->request, MPI_STATUS_IGNORE));
        done = 1;
      } else {
        TESSEL_CHECK_MPI(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE));
      }
      it = done ? pending_sends_.erase(it) : std::next(it);
    }
  }

  std::list<PendingSend> pending_sends_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm) {
  TESSEL_EXPECTS(mpi::initialized(), "MPI is not initialized");
  return std::make_unique<MpiCommunicator>(comm);
}

}  // namespace tessel::comm
