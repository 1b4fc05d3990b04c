// The Tensor operations of a Communicator whose transfers take host memory: device tensors are
// staged through pinned host buffers (MPI between ranks that share a GPU, or without NCCL).
#include "tessel/comm/communicator.hpp"

#include "tessel/core/error.hpp"

#include <numeric>

namespace tessel::comm {

namespace {

// A pinned host block of a tensor's size that holds a host copy of a device tensor; host
// tensors are used in place.
class Staging {
 public:
  Staging(const Tensor& t, DeviceStream stream) : tensor_(t), stream_(stream) {
    if (t.device().is_cpu()) {
      host_ = t.raw();
      return;
    }
    bytes_ = t.nbytes();
    pinned_ = device_memory::pinned_allocate(bytes_);
    host_ = pinned_;
  }
  ~Staging() { device_memory::pinned_release(pinned_, bytes_); }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  void* host() const { return host_; }
  // Device -> host on the exchange's stream (waits for it, so the host copy is complete).
  void download() {
    if (pinned_ && bytes_ > 0)
      device_memory::copy(pinned_, Device::cpu(), tensor_.raw(), tensor_.device(), bytes_,
                          stream_);
  }
  // Host -> device, on the exchange's stream.
  void upload() {
    if (pinned_ && bytes_ > 0)
      device_memory::copy(tensor_.raw(), tensor_.device(), pinned_, Device::cpu(), bytes_,
                          stream_);
  }

 private:
  Tensor tensor_;
  DeviceStream stream_;
  void* host_ = nullptr;
  void* pinned_ = nullptr;
  std::size_t bytes_ = 0;
};

std::int64_t row_elements(const Tensor& t) { return t.dim() == 2 ? t.cols() : 1; }

}  // namespace

void Communicator::allreduce(Tensor& t, DeviceStream stream, ReduceOp op) {
  TESSEL_EXPECTS(t.defined(), "allreduce: undefined tensor");
  Staging staging(t, stream);
  staging.download();
  allreduce(staging.host(), t.numel(), t.dtype(), op);
  staging.upload();
}

std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> Communicator::element_counts(
    const Tensor& send, std::span<const std::int64_t> send_rows, const Tensor& recv,
    std::span<const std::int64_t> recv_rows) const {
  TESSEL_EXPECTS(send.dtype() == recv.dtype() && send.device() == recv.device() &&
                     row_elements(send) == row_elements(recv),
                 "alltoallv: send {} and receive {} differ in dtype, columns or device",
                 send.describe(), recv.describe());
  TESSEL_EXPECTS(static_cast<int>(send_rows.size()) == size() &&
                     static_cast<int>(recv_rows.size()) == size(),
                 "alltoallv: {} send and {} receive counts for {} ranks", send_rows.size(),
                 recv_rows.size(), size());
  const std::int64_t width = row_elements(send);
  const std::int64_t sent = std::accumulate(send_rows.begin(), send_rows.end(), std::int64_t{0});
  const std::int64_t received =
      std::accumulate(recv_rows.begin(), recv_rows.end(), std::int64_t{0});
  TESSEL_EXPECTS(sent <= send.rows() && received <= recv.rows(),
                 "alltoallv: {} rows to send from {}, {} to receive into {}", sent,
                 send.describe(), received, recv.describe());
  std::vector<std::int64_t> send_counts(send_rows.size()), recv_counts(recv_rows.size());
  for (std::size_t r = 0; r < send_rows.size(); ++r) {
    send_counts[r] = send_rows[r] * width;
    recv_counts[r] = recv_rows[r] * width;
  }
  return {std::move(send_counts), std::move(recv_counts)};
}

void Communicator::alltoallv(const Tensor& send, std::span<const std::int64_t> send_rows,
                             Tensor& recv, std::span<const std::int64_t> recv_rows,
                             DeviceStream stream) {
  const auto [send_counts, recv_counts] = element_counts(send, send_rows, recv, recv_rows);
  const std::int64_t sent = std::accumulate(send_rows.begin(), send_rows.end(), std::int64_t{0});
  const std::int64_t received =
      std::accumulate(recv_rows.begin(), recv_rows.end(), std::int64_t{0});
  Staging out(send.rows_slice(0, sent), stream), in(recv.rows_slice(0, received), stream);
  out.download();
  alltoallv(out.host(), send_counts, in.host(), recv_counts, send.dtype());
  in.upload();
}

std::unique_ptr<PendingExchange> Communicator::start_alltoallv(
    const Tensor& send, std::span<const std::int64_t> send_rows, Tensor& recv,
    std::span<const std::int64_t> recv_rows, DeviceStream stream) {
  alltoallv(send, send_rows, recv, recv_rows, stream);
  return std::make_unique<PendingExchange>();
}

void Communicator::send(const Tensor& t, int peer, DeviceStream stream, int tag) {
  Staging staging(t, stream);
  staging.download();
  send(staging.host(), t.numel(), t.dtype(), peer, tag);  // copies the payload
}

void Communicator::recv(Tensor& t, int peer, DeviceStream stream, int tag) {
  Staging staging(t, stream);
  recv(staging.host(), t.numel(), t.dtype(), peer, tag);
  staging.upload();
}

}  // namespace tessel::comm
