// Halo exchange for full-batch training: owners send boundary rows to the ranks that hold them
// as halo, and halo gradients travel back to be summed at their owners.
#pragma once

#include "tessel/comm/communicator.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/kernels/row_codec.hpp"
#include "tessel/partition/part.hpp"

#include <cstdint>
#include <functional>
#include <vector>

namespace tessel::train {

// Built once per part (collective: every rank tells each owner which of its rows it needs).
// Rows travel in one alltoallv per call; a rank sends each needed row once per peer. Rows are
// packed, reordered and summed by kernel ops (gather_rows, scatter_add_rows_segmented), so the
// exchange touches no row with a host loop; the gradient sum at an owner adds its peers' rows
// in rank order, which keeps P ranks bit for bit deterministic. Tensors may live on the CPU or
// a GPU: rows then travel through the data communicator `data` (NCCL, or MPI staged through
// pinned host buffers), `comm` when null, and the index lists follow the tensors' device.
class HaloExchange {
 public:
  HaloExchange(const partition::Part& part, comm::Communicator& comm,
               comm::Communicator* data = nullptr);

  // x_owned: [n_owned, F] f32 -> x_full: [n_owned + n_halo, F] (resized if needed): owned rows
  // copied, halo rows received from their owners; x_full shares x_owned's storage instead when
  // this rank holds no halo rows. Collective.
  void forward(const Tensor& x_owned, Tensor& x_full);
  // grad_full: [n_owned + n_halo, F] -> grad_owned: [n_owned, F] = owned rows of grad_full plus,
  // for every row another rank holds as halo, the gradient that rank computed for it; with no
  // halo rows here grad_owned is grad_full itself, updated in place. Collective.
  void backward(const Tensor& grad_full, Tensor& grad_owned);

  // From now on only the rows of nodes `kept` accepts travel (its argument: the node's id in
  // the source dataset, so an owner and every rank holding the node as halo decide alike when
  // kept depends on the id alone). Halo rows not received are zero in x_full and send no
  // gradient back. keep_all() restores the whole exchange.
  void keep_rows(const std::function<bool(NodeId)>& kept);
  void keep_all();

  // How rows and gradients travel from now on: f32 as they are, or encoded (bf16, f16, int8 with
  // a scale per row) before the exchange and decoded on arrival (kernels::encode_rows).
  void set_codec(kernels::RowCodec codec) { codec_ = codec; }
  kernels::RowCodec codec() const { return codec_; }

  // Rows this rank sends per forward call (the analytic halo volume is that times
  // kernels::row_codec_bytes(codec(), F) bytes), and receives; with keep_rows, the kept ones.
  std::int64_t rows_sent() const { return static_cast<std::int64_t>(send_rows_.size()); }
  std::int64_t rows_received() const { return static_cast<std::int64_t>(recv_slots_.size()); }
  // The halo rows (0-based halo indices) the current plan receives, in the order they arrive.
  const std::vector<LocalId>& received_halo_rows() const { return recv_slots_; }
  // Bytes this rank put on the wire for halo rows (forward) and halo gradients (backward) since
  // the last reset, as encoded.
  std::int64_t row_bytes_sent() const { return row_bytes_sent_; }
  std::int64_t grad_bytes_sent() const { return grad_bytes_sent_; }
  void reset_bytes_sent() { row_bytes_sent_ = grad_bytes_sent_ = 0; }
  void add_bytes_sent(std::int64_t rows, std::int64_t grads) {
    row_bytes_sent_ += rows;
    grad_bytes_sent_ += grads;
  }

 private:
  // The index tensors on `device` (moved there on first use).
  void indices_on(Device device);
  // Makes the index tensors of the current plan (on the CPU; indices_on moves them).
  void build_indices();

  comm::Communicator& data_;  // moves the rows (the control communicator sets up the plan only)
  std::int64_t num_owned_ = 0;
  std::int64_t num_halo_ = 0;
  std::vector<std::int64_t> send_rows_per_peer_;  // [P] rows this rank sends to each peer
  std::vector<std::int64_t> recv_rows_per_peer_;  // [P] rows this rank receives from each peer
  std::vector<LocalId> send_rows_;   // owned local ids to send, grouped by peer
  std::vector<LocalId> recv_slots_;  // halo index (0-based) of each received row, grouped by peer
  bool recv_in_halo_order_ = false;  // received rows are exactly halo 0, 1, 2, ...: no permutation
  // The whole exchange, and the source-dataset ids of what it sends and receives (keep_rows).
  std::vector<std::int64_t> all_send_per_peer_, all_recv_per_peer_;
  std::vector<LocalId> all_send_rows_, all_recv_slots_;
  std::vector<NodeId> all_send_orig_, all_recv_orig_;
  Tensor send_index_;                // i32 [rows sent]: send_rows_
  Tensor recv_to_halo_;              // i32 [n_halo]: recv_slots_ (received position -> halo row)
  Tensor halo_to_recv_;              // i32 [n_halo]: its inverse (halo row -> received position,
                                     // or the zero row past the received ones)
  Tensor send_buffer_;               // f32 [rows sent, F]
  Tensor recv_buffer_;               // f32 [rows received (+ 1 zero row), F]
  kernels::RowCodec codec_ = kernels::RowCodec::f32;
  Tensor send_wire_;                 // u8 [rows sent, row bytes]: encoded rows (not f32)
  Tensor recv_wire_;                 // u8 [n_halo, row bytes]
  std::int64_t row_bytes_sent_ = 0;
  std::int64_t grad_bytes_sent_ = 0;
};

}  // namespace tessel::train
