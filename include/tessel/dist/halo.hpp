// Halo exchange for full-batch training: owners send boundary rows to the ranks that hold them
// as halo, and halo gradients travel back to be summed at their owners.
#pragma once

#include "tessel/comm/communicator.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/kernels/row_codec.hpp"
#include "tessel/kernels/sparse.hpp"
#include "tessel/partition/part.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace tessel::dist {

// What an exchange is built from: the rows a rank holds as halo and where their owners keep
// them (a part of a static partition, or one snapshot's halo in the dynamic mode's vertex
// layout). Views: they need to outlive the constructor only.
struct HaloRows {
  int rank = 0;
  int num_ranks = 0;  // of the partition (must be the communicator's size)
  std::int64_t num_owned = 0;
  std::span<const std::int32_t> owner;        // [n_halo] each halo row's owner rank
  std::span<const std::int32_t> owner_local;  // [n_halo] its row there
  std::span<const NodeId> orig_id;            // [n_owned + n_halo] source ids (for keep_rows)
};

// A part's halo rows.
HaloRows halo_rows(const partition::Part& part);

// Bytes put on the wire by exchanges that were given this count: halo rows (forward) and halo
// gradients (backward), as encoded.
struct HaloBytes {
  std::int64_t rows = 0;
  std::int64_t grads = 0;
};

// What one forward or backward call is given instead of finding it set on the exchange: how its
// rows travel (f32 as they are, or encoded before the exchange and decoded on arrival:
// kernels::encode_rows), where it adds the bytes it sends (null: not counted), and the stream of
// the tensors' device its device work goes to (the device's main stream by default; ignored on
// the CPU). The default is the exact exchange, uncounted, on the main stream. The stream goes
// to the communicator as an argument; the call's own kernels, copies and buffers (kernel fronts,
// Tensor and the caching allocator take no stream argument) reach it through a
// device_memory::StreamScope the call opens on it, so all of the call's device work is ordered
// on `stream` whatever stream the calling thread has current.
struct ExchangeArgs {
  kernels::RowCodec codec = kernels::RowCodec::f32;
  HaloBytes* bytes = nullptr;
  DeviceStream stream = DeviceStream::main();
};

// Built once per part (collective: every rank tells each owner which of its rows it needs).
// Rows travel in one alltoallv per call; a rank sends each needed row once per peer. Rows are
// packed, reordered and summed by kernel ops (gather_rows, scatter_add_rows_segmented), so the
// exchange touches no row with a host loop; the gradient sum at an owner adds its peers' rows
// in rank order, which keeps P ranks bit for bit deterministic. Tensors may live on the CPU or
// a GPU: rows then travel through the data communicator `data` (NCCL, or MPI staged through
// pinned host buffers), `comm` when null, and the index lists follow the tensors' device.
class HaloExchange {
 public:
  HaloExchange(const HaloRows& rows, comm::Communicator& comm, comm::Communicator* data = nullptr);
  HaloExchange(const partition::Part& part, comm::Communicator& comm,
               comm::Communicator* data = nullptr)
      : HaloExchange(halo_rows(part), comm, data) {}

  // x_owned: [n_owned, F] f32 -> x_full: [n_owned + n_halo, F] (resized if needed): owned rows
  // copied, halo rows received from their owners; x_full shares x_owned's storage instead when
  // this rank holds no halo rows. Collective (every rank with the same codec).
  void forward(const Tensor& x_owned, Tensor& x_full, const ExchangeArgs& args = {});
  // grad_full: [n_owned + n_halo, F] -> grad_owned: [n_owned, F] = owned rows of grad_full plus,
  // for every row another rank holds as halo, the gradient that rank computed for it; with no
  // halo rows here grad_owned is grad_full itself, updated in place. Collective (every rank
  // with the same codec).
  void backward(const Tensor& grad_full, Tensor& grad_owned, const ExchangeArgs& args = {});

  // forward() for owned rows that are never held whole (layer-wise inference out of core): the
  // rows this rank sends are the owned rows send_rows() lists, in its order (repeats possible),
  // which pack(ids, out) writes into out [ids.size(), F] a round of at most chunk_rows per peer
  // at a time (what travels at once is bounded); halo: [n_halo, F] on the CPU, exact f32. Needs
  // the plain exchange (not combined, not stale). Collective (the same chunk_rows everywhere).
  void forward_halo(const std::function<void(std::span<const LocalId>, Tensor&)>& pack,
                    std::int64_t f, std::int64_t chunk_rows, Tensor& halo);
  // forward_halo() without the halo held whole either: each round's rows from each peer go to
  // land(first, rows), rows [first, first + rows.rows()) of the halo (every halo row once, in
  // no particular order of rounds). Needs every halo row exchanged in halo order, which the
  // plain exchange of a part as the partitioner writes it is. Collective.
  void forward_halo(const std::function<void(std::span<const LocalId>, Tensor&)>& pack,
                    std::int64_t f, std::int64_t chunk_rows,
                    const std::function<void(std::int64_t, const Tensor&)>& land);
  // Whether forward_halo() can land the rows as they arrive (see above).
  bool lands_in_halo_order() const { return recv_in_halo_order_; }
  std::span<const LocalId> send_rows() const { return send_rows_; }

  // From now on only the rows of nodes `kept` accepts travel (its argument: the node's id in
  // the source dataset, so an owner and every rank holding the node as halo decide alike when
  // kept depends on the id alone). Halo rows not received are zero in x_full and send no
  // gradient back. keep_all() restores the whole exchange.
  void keep_rows(const std::function<bool(NodeId)>& kept);
  void keep_all();

  // --halo-aggregation (SuperGCN): from now on an owner sends combine x_owned instead of
  // selected rows. combine: [rows sent, n_owned] on the CPU, its rows grouped by peer
  // (send_per_peer), each an owned row (weight 1) or a weighted sum of owned rows that one node
  // of the peer aggregates; recv_per_peer: the rows each peer sends here. x_full is then
  // [x_owned; the received rows in arrival order] (n_owned + rows_received() rows), and the
  // gradient of each received row goes back to be spread by combine^T. Overrides keep_rows.
  void set_combination(kernels::SparseMatrix combine, std::vector<std::int64_t> send_per_peer,
                       std::vector<std::int64_t> recv_per_peer);
  bool combined() const { return combined_; }

  // --stale-halo (PipeGCN): while on, the k-th forward (backward) call of an epoch returns the
  // halo rows (adds the halo gradients) that the k-th call of the previous epoch exchanged, and
  // starts the exchange of this call's rows without waiting for it; the first epoch after
  // turning on exchanges exactly. With smoothing gamma > 0 the stale rows are the moving
  // average gamma * previous + (1 - gamma) * arrived. begin_epoch() restarts the call count
  // (the calls of every epoch must come in the same order with the same widths and codecs). Off, the
  // exchange is exact and the stale rows wait untouched.
  void set_stale(bool on, float smoothing = 0.0f) {
    stale_ = on;
    smoothing_ = smoothing;
  }
  bool stale() const { return stale_; }
  void begin_epoch() { forward_calls_ = backward_calls_ = 0; }

  // Rows this rank sends per forward call (the analytic halo volume is that times
  // kernels::row_codec_bytes(codec, F) bytes), and receives; with keep_rows, the kept ones.
  std::int64_t rows_sent() const { return rows_sent_; }
  std::int64_t rows_received() const { return rows_received_; }
  // The halo rows (0-based halo indices) the current plan receives, in the order they arrive.
  const std::vector<LocalId>& received_halo_rows() const { return recv_slots_; }

 private:
  void forward_halo_rounds(const std::function<void(std::span<const LocalId>, Tensor&)>& pack,
                           std::int64_t f, std::int64_t chunk_rows,
                           const std::function<void(std::int64_t, const Tensor&)>& land);
  // One call's stale exchange: its own buffers (they travel while the epoch goes on), the
  // rows the aggregation reads, and the exchange in flight.
  struct StaleSlot {
    Tensor send, recv, send_wire, recv_wire;
    Tensor rows;  // the arrived rows (smoothed) the next epoch's call reads
    std::unique_ptr<comm::PendingExchange> pending;
  };
  // The index tensors on `device` (moved there on first use).
  void indices_on(Device device);
  // Makes the index tensors of the current plan (on the CPU; indices_on moves them).
  void build_indices();
  // The rows to send of x_owned into `out` (selected, or combined): [rows sent, F].
  void pack(const Tensor& x_owned, Tensor& out);
  // Adds the gradients `back` (one per row sent) to their owned rows.
  void add_back(const Tensor& back, Tensor& grad_owned);
  // Moves `send` ([sum send_rows, F]) to the peers into `recv`, in args.codec on args.stream:
  // at once, or (stale) through the call's slot, leaving in `recv` what the previous epoch's
  // call exchanged.
  void exchange(const Tensor& send, std::span<const std::int64_t> send_rows, Tensor& recv,
                std::span<const std::int64_t> recv_rows, std::vector<StaleSlot>& slots,
                int& calls, const ExchangeArgs& args);

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
  Tensor send_wire_;                 // u8 [rows sent, row bytes]: encoded rows (not f32)
  Tensor recv_wire_;                 // u8 [n_halo, row bytes]
  std::int64_t rows_sent_ = 0, rows_received_ = 0;
  // set_combination's matrix (on the CPU, and where the tensors live) and its transpose.
  kernels::SparseMatrix combine_, combine_t_;
  bool combined_ = false;
  Tensor back_sum_;                  // f32 [n_owned, F]: combine^T of the returned gradients
  bool stale_ = false;
  float smoothing_ = 0.0f;
  int forward_calls_ = 0, backward_calls_ = 0;
  std::vector<StaleSlot> stale_forward_, stale_backward_;
};

}  // namespace tessel::dist
