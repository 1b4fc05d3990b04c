// Communicator: the typed collectives every distributed mode uses (MPI on host memory, NCCL
// on device memory).
#pragma once

#include "tessel/core/stream.hpp"
#include "tessel/core/tensor.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace tessel::comm {

enum class ReduceOp { sum, max, min };

// An all-to-all started by Communicator::start_alltoallv. wait() returns once the rows have
// arrived and the send buffer may be reused; the destructor waits too. Both buffers must stay
// alive and untouched until then.
class PendingExchange {
 public:
  virtual ~PendingExchange() = default;
  virtual void wait() {}
};

// Collectives over raw buffers tagged by dtype; the templates below give the typed forms.
// Every call is collective: all ranks call it in the same order. Counts are in elements.
// bytes_sent() counts the payload this rank sent to *other* ranks, for reporting, and
// bytes_sent_between_hosts() the part of it that went to ranks on other hosts (over the
// network rather than shared memory).
//
// The raw-pointer operations take host memory (MPI). The Tensor operations (the data plane)
// take host or device tensors and the stream their device work goes to (`stream`, a stream of
// the tensors' device; DeviceStream::main() for its main stream; host tensors ignore it): the
// MPI communicator stages device tensors through pinned host buffers (ranks sharing a GPU),
// copying on that stream and waiting for it; the NCCL communicator keeps them on the device and
// enqueues the transfer on that stream without waiting for it. None of them reads the calling
// thread's current stream (device_memory::stream).
class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;

  virtual void allreduce(void* buffer, std::int64_t count, DType dtype, ReduceOp op) = 0;
  virtual void broadcast(void* buffer, std::int64_t count, DType dtype, int root) = 0;
  // recv holds size() * count elements: rank r's contribution at r * count.
  virtual void allgather(const void* send, std::int64_t count, void* recv, DType dtype) = 0;
  // send_counts[r] elements go to rank r, taken consecutively from send; recv_counts[r]
  // elements arrive from rank r, stored consecutively in rank order.
  virtual void alltoallv(const void* send, std::span<const std::int64_t> send_counts, void* recv,
                         std::span<const std::int64_t> recv_counts, DType dtype) = 0;
  virtual void barrier() = 0;
  // Sub-communicator of the ranks with the same color, ordered by key.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
  // Point to point, not collective (pipeline stages). send copies the payload and returns at
  // once: the message leaves in the background, so two ranks that send to each other before
  // receiving cannot deadlock. recv blocks until the message with this peer and tag arrives
  // (messages between two ranks with one tag arrive in the order they were sent). 0 <= tag <
  // 32768. wait_sends() returns when every message this rank sent has left.
  virtual void send(const void* buffer, std::int64_t count, DType dtype, int peer, int tag) = 0;
  virtual void recv(void* buffer, std::int64_t count, DType dtype, int peer, int tag) = 0;
  virtual void wait_sends() = 0;

  // ---- data plane: tensors on the CPU or a CUDA device ----
  // In place over all ranks; t is contiguous (any shape), on any device.
  virtual void allreduce(Tensor& t, DeviceStream stream, ReduceOp op = ReduceOp::sum);
  // send_rows[r] rows of `send` go to rank r, taken consecutively; recv_rows[r] rows arrive
  // from rank r into `recv`, stored consecutively in rank order. send and recv have the same
  // dtype, column count and device; recv is allocated by the caller.
  virtual void alltoallv(const Tensor& send, std::span<const std::int64_t> send_rows,
                         Tensor& recv, std::span<const std::int64_t> recv_rows,
                         DeviceStream stream);
  // The same exchange, started without waiting for it: the rows travel while the caller
  // computes, and the returned handle completes it. Calls made meanwhile (other collectives
  // included) stay legal, in the same order on every rank. MPI on host tensors runs it as
  // MPI_Ialltoallv; NCCL enqueues it on `stream` as alltoallv does; MPI with device tensors
  // (staged through host memory) completes it before returning.
  virtual std::unique_ptr<PendingExchange> start_alltoallv(const Tensor& send,
                                                           std::span<const std::int64_t> send_rows,
                                                           Tensor& recv,
                                                           std::span<const std::int64_t> recv_rows,
                                                           DeviceStream stream);
  // Point to point with the semantics of the raw send/recv above; NCCL matches the messages
  // between two ranks in order and ignores the tag.
  virtual void send(const Tensor& t, int peer, DeviceStream stream, int tag = 0);
  virtual void recv(Tensor& t, int peer, DeviceStream stream, int tag = 0);
  // Whether device tensors travel without host staging (NCCL).
  virtual bool device_native() const { return false; }

  std::int64_t bytes_sent() const { return bytes_sent_; }
  // Of bytes_sent(), those to ranks on another host. Point-to-point and all-to-all payloads are
  // counted per peer; the volume of an allreduce, broadcast or allgather (an estimate: the
  // ring's, whatever algorithm the library picks) is split in proportion to this rank's peers
  // on other hosts.
  std::int64_t bytes_sent_between_hosts() const { return bytes_sent_between_hosts_; }
  void reset_bytes_sent() { bytes_sent_ = bytes_sent_between_hosts_ = 0; }
  // Whether rank `peer` of this communicator runs on this rank's host (shares its memory).
  // True for every peer until the implementation says otherwise (set_peer_hosts).
  bool shares_host(int peer) const {
    return peer_on_other_host_.empty() || !peer_on_other_host_[static_cast<std::size_t>(peer)];
  }
  // Ranks of this communicator on other hosts than this rank's.
  int peers_on_other_hosts() const { return peers_on_other_hosts_; }

  // ---- typed helpers ----
  template <class T>
  void allreduce(std::span<T> values, ReduceOp op = ReduceOp::sum) {
    allreduce(values.data(), static_cast<std::int64_t>(values.size()), dtype_of<T>(), op);
  }
  template <class T>
  T allreduce_value(T value, ReduceOp op = ReduceOp::sum) {
    allreduce(&value, 1, dtype_of<T>(), op);
    return value;
  }
  template <class T>
  void broadcast(std::span<T> values, int root) {
    broadcast(values.data(), static_cast<std::int64_t>(values.size()), dtype_of<T>(), root);
  }
  template <class T>
  std::vector<T> allgather_value(T value) {
    std::vector<T> out(static_cast<std::size_t>(size()));
    allgather(&value, 1, out.data(), dtype_of<T>());
    return out;
  }
  // Exchanges counts first, then the payload. recv_counts (optional) receives per-source counts.
  template <class T>
  std::vector<T> alltoallv(std::span<const T> send, std::span<const std::int64_t> send_counts,
                           std::vector<std::int64_t>* recv_counts_out = nullptr) {
    std::vector<std::int64_t> recv_counts = exchange_counts(send_counts);
    std::int64_t total = 0;
    for (auto c : recv_counts) total += c;
    std::vector<T> recv(static_cast<std::size_t>(total));
    alltoallv(send.data(), send_counts, recv.data(), recv_counts, dtype_of<T>());
    if (recv_counts_out) *recv_counts_out = std::move(recv_counts);
    return recv;
  }
  // Each rank tells every other how many elements it will send it.
  std::vector<std::int64_t> exchange_counts(std::span<const std::int64_t> send_counts);

 protected:
  // `other_host[r]` is 1 when rank r of this communicator runs on another host.
  void set_peer_hosts(std::vector<std::uint8_t> other_host);
  // `bytes` of payload went to `peer` (not counted when the peer is this rank).
  void count_sent(int peer, std::int64_t bytes);
  // A collective's estimated volume: split over the link kinds in proportion to the peers.
  void count_collective(std::int64_t bytes);
  // Checks a row exchange of Tensors (dtype, columns, device, counts, sizes) and returns the
  // element counts per peer, send then receive.
  std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> element_counts(
      const Tensor& send, std::span<const std::int64_t> send_rows, const Tensor& recv,
      std::span<const std::int64_t> recv_rows) const;

  std::int64_t bytes_sent_ = 0;
  std::int64_t bytes_sent_between_hosts_ = 0;

 private:
  std::vector<std::uint8_t> peer_on_other_host_;  // empty: every peer on this host
  int peers_on_other_hosts_ = 0;
};

}  // namespace tessel::comm
