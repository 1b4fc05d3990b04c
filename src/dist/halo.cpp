// Halo exchange: request lists built once, then one alltoallv of rows per layer and direction.
#include "tessel/dist/halo.hpp"

#include "tessel/core/error.hpp"
#include "tessel/kernels/dense.hpp"

#include <numeric>

namespace tessel::dist {

HaloRows halo_rows(const partition::Part& part) {
  return {.rank = part.part_id,
          .num_ranks = part.num_parts,
          .num_owned = part.num_owned,
          .owner = part.halo_owner,
          .owner_local = part.halo_owner_local,
          .orig_id = part.orig_id};
}

HaloExchange::HaloExchange(const HaloRows& part, comm::Communicator& comm,
                           comm::Communicator* data)
    : data_(data ? *data : comm), num_owned_(part.num_owned),
      num_halo_(static_cast<std::int64_t>(part.owner.size())) {
  const int num_ranks = comm.size();
  TESSEL_EXPECTS(part.num_ranks == num_ranks,
                 "part {} belongs to a partition into {} parts, but {} ranks are running",
                 part.rank, part.num_ranks, num_ranks);
  // Group halo nodes by owner, keeping halo order inside each group.
  std::vector<std::int64_t> requests_per_peer(num_ranks, 0);
  for (std::int64_t h = 0; h < num_halo_; ++h) {
    const int owner = part.owner[h];
    TESSEL_EXPECTS(owner >= 0 && owner < num_ranks && owner != part.rank,
                   "part {}: halo node {} has owner {}", part.rank, h, owner);
    ++requests_per_peer[owner];
  }
  std::vector<std::int64_t> cursor(num_ranks + 1, 0);
  std::partial_sum(requests_per_peer.begin(), requests_per_peer.end(), cursor.begin() + 1);
  std::vector<LocalId> requests(static_cast<std::size_t>(num_halo_));
  recv_slots_.resize(static_cast<std::size_t>(num_halo_));
  for (std::int64_t h = 0; h < num_halo_; ++h) {
    const int owner = part.owner[h];
    const auto at = cursor[owner]++;
    requests[at] = part.owner_local[h];
    recv_slots_[at] = static_cast<LocalId>(h);
  }
  recv_rows_per_peer_ = requests_per_peer;
  // Owners learn which of their rows each peer needs.
  send_rows_ = comm.alltoallv<LocalId>(requests, requests_per_peer, &send_rows_per_peer_);
  // The gradient sum adds one peer's rows in parallel: each peer must name a row at most once.
  std::vector<int> asked_by(static_cast<std::size_t>(num_owned_), -1);
  std::int64_t at = 0;
  for (int r = 0; r < num_ranks; ++r)
    for (std::int64_t k = 0; k < send_rows_per_peer_[r]; ++k, ++at) {
      const LocalId row = send_rows_[at];
      TESSEL_EXPECTS(row >= 0 && row < num_owned_,
                     "part {}: a peer asked for row {}, but only {} rows are owned here",
                     part.rank, row, num_owned_);
      TESSEL_EXPECTS(asked_by[row] != r, "part {}: part {} holds owned row {} twice as halo",
                     part.rank, r, row);
      asked_by[row] = r;
    }
  all_send_per_peer_ = send_rows_per_peer_;
  all_recv_per_peer_ = recv_rows_per_peer_;
  all_send_rows_ = send_rows_;
  all_recv_slots_ = recv_slots_;
  for (const LocalId row : send_rows_) all_send_orig_.push_back(part.orig_id[row]);
  for (const LocalId h : recv_slots_) all_recv_orig_.push_back(part.orig_id[num_owned_ + h]);
  build_indices();
}

void HaloExchange::build_indices() {
  const auto received = static_cast<std::int64_t>(recv_slots_.size());
  rows_sent_ = static_cast<std::int64_t>(send_rows_.size());
  rows_received_ = received;
  recv_in_halo_order_ = received == num_halo_;
  for (std::int64_t i = 0; i < received && recv_in_halo_order_; ++i)
    if (recv_slots_[i] != i) recv_in_halo_order_ = false;
  // A halo row not received reads the zero row past the received ones.
  std::vector<LocalId> halo_to_recv(static_cast<std::size_t>(num_halo_),
                                    static_cast<LocalId>(received));
  for (std::int64_t i = 0; i < received; ++i)
    halo_to_recv[recv_slots_[i]] = static_cast<LocalId>(i);
  send_index_ = Tensor::from_vector(send_rows_);
  recv_to_halo_ = Tensor::from_vector(recv_slots_);
  halo_to_recv_ = Tensor::from_vector(halo_to_recv);
}

void HaloExchange::keep_rows(const std::function<bool(NodeId)>& kept) {
  TESSEL_EXPECTS(!combined_, "halo exchange: keep_rows after set_combination");
  const auto num_ranks = static_cast<int>(all_send_per_peer_.size());
  send_rows_.clear();
  recv_slots_.clear();
  std::int64_t s = 0, r = 0;
  for (int peer = 0; peer < num_ranks; ++peer) {
    send_rows_per_peer_[peer] = 0;
    for (std::int64_t k = 0; k < all_send_per_peer_[peer]; ++k, ++s)
      if (kept(all_send_orig_[s])) {
        send_rows_.push_back(all_send_rows_[s]);
        ++send_rows_per_peer_[peer];
      }
    recv_rows_per_peer_[peer] = 0;
    for (std::int64_t k = 0; k < all_recv_per_peer_[peer]; ++k, ++r)
      if (kept(all_recv_orig_[r])) {
        recv_slots_.push_back(all_recv_slots_[r]);
        ++recv_rows_per_peer_[peer];
      }
  }
  build_indices();
}

void HaloExchange::keep_all() {
  send_rows_per_peer_ = all_send_per_peer_;
  recv_rows_per_peer_ = all_recv_per_peer_;
  send_rows_ = all_send_rows_;
  recv_slots_ = all_recv_slots_;
  build_indices();
}

void HaloExchange::set_combination(kernels::SparseMatrix combine,
                                   std::vector<std::int64_t> send_per_peer,
                                   std::vector<std::int64_t> recv_per_peer) {
  const auto num_ranks = all_send_per_peer_.size();
  TESSEL_EXPECTS(send_per_peer.size() == num_ranks && recv_per_peer.size() == num_ranks &&
                     combine.num_cols == num_owned_ &&
                     combine.num_rows == std::accumulate(send_per_peer.begin(),
                                                         send_per_peer.end(), std::int64_t{0}),
                 "halo exchange: a {}x{} combination for {} owned rows and {} ranks",
                 combine.num_rows, combine.num_cols, num_owned_, num_ranks);
  combine_t_ = combine.transpose();
  combine_ = std::move(combine);
  send_rows_per_peer_ = std::move(send_per_peer);
  recv_rows_per_peer_ = std::move(recv_per_peer);
  rows_sent_ = combine_.num_rows;
  rows_received_ =
      std::accumulate(recv_rows_per_peer_.begin(), recv_rows_per_peer_.end(), std::int64_t{0});
  combined_ = true;
}

namespace {
void ensure_rows(Tensor& t, std::int64_t rows, std::int64_t cols, Device device,
                 DType dtype = DType::f32) {
  if (!t.defined() || t.rows() != rows || t.cols() != cols || t.device() != device ||
      t.dtype() != dtype)
    t = Tensor::empty({rows, cols}, dtype, device);
}

// `rows` as they go on the wire: themselves for f32, else encoded into `wire`.
const Tensor& encoded(kernels::RowCodec codec, const Tensor& rows, Tensor& wire) {
  if (codec == kernels::RowCodec::f32) return rows;
  ensure_rows(wire, rows.rows(), kernels::row_codec_bytes(codec, rows.cols()), rows.device(),
              DType::u8);
  kernels::encode_rows(rows, codec, wire);
  return wire;
}

// Where rows of `rows`' shape arrive: `rows` itself for f32, else `wire` (decoded later).
Tensor& arrival(kernels::RowCodec codec, Tensor& rows, Tensor& wire) {
  if (codec == kernels::RowCodec::f32) return rows;
  ensure_rows(wire, rows.rows(), kernels::row_codec_bytes(codec, rows.cols()), rows.device(),
              DType::u8);
  return wire;
}
} // namespace

void HaloExchange::indices_on(Device device) {
  if (send_index_.device() != device) {
    send_index_ = send_index_.to(device);
    recv_to_halo_ = recv_to_halo_.to(device);
    halo_to_recv_ = halo_to_recv_.to(device);
  }
  if (combined_ && combine_.device() != device) {
    combine_ = combine_.to(device);
    combine_t_ = combine_t_.to(device);
  }
}

void HaloExchange::pack(const Tensor& x_owned, Tensor& out) {
  ensure_rows(out, rows_sent_, x_owned.cols(), x_owned.device());
  if (combined_)
    kernels::spmm(combine_, x_owned, out);
  else
    kernels::gather_rows(x_owned, send_index_, out);
}

void HaloExchange::add_back(const Tensor& back, Tensor& grad_owned) {
  if (!combined_) {
    // One segment per peer in rank order: the sum at each owned row has a fixed order.
    kernels::scatter_add_rows_segmented(back, send_index_, send_rows_per_peer_, grad_owned);
    return;
  }
  ensure_rows(back_sum_, num_owned_, back.cols(), back.device());
  kernels::spmm(combine_t_, back, back_sum_);
  kernels::axpy(1.0f, back_sum_, grad_owned);
}

void HaloExchange::exchange(const Tensor& send, std::span<const std::int64_t> send_rows,
                            Tensor& recv, std::span<const std::int64_t> recv_rows,
                            std::vector<StaleSlot>& slots, int& calls, const ExchangeArgs& args) {
  const kernels::RowCodec codec = args.codec;
  if (!stale_ || static_cast<std::size_t>(calls) >= slots.size()) {
    // Exact: encode, exchange, decode. Under --stale-halo this is the first epoch's call, whose
    // rows the next epoch reads. (Backward swaps the wires' roles, so they keep their sizes.)
    const bool back = &slots == &stale_backward_;
    Tensor& in = arrival(codec, recv, back ? send_wire_ : recv_wire_);
    data_.alltoallv(encoded(codec, send, back ? recv_wire_ : send_wire_), send_rows, in,
                    recv_rows, args.stream);
    if (codec != kernels::RowCodec::f32) kernels::decode_rows(in, codec, recv);
    if (!stale_) return;
    StaleSlot& slot = slots.emplace_back();
    slot.rows = Tensor::empty({recv.rows(), recv.cols()}, DType::f32, recv.device());
    slot.rows.copy_from(recv);
    ++calls;
    return;
  }
  StaleSlot& slot = slots[static_cast<std::size_t>(calls++)];
  TESSEL_EXPECTS(slot.rows.rows() == recv.rows() && slot.rows.cols() == recv.cols(),
                 "stale halo: call {} of the epoch exchanges [{}, {}], the previous epoch's "
                 "[{}, {}]",
                 calls - 1, recv.rows(), recv.cols(), slot.rows.rows(), slot.rows.cols());
  if (slot.pending) {
    // The previous epoch's exchange: complete it and fold it into the stale rows.
    slot.pending->wait();
    slot.pending.reset();
    if (codec != kernels::RowCodec::f32) kernels::decode_rows(slot.recv_wire, codec, slot.recv);
    if (smoothing_ > 0.0f) {
      kernels::axpy(-1.0f, slot.rows, slot.recv);  // arrived - stale
      kernels::axpy(1.0f - smoothing_, slot.recv, slot.rows);
    } else {
      slot.rows.copy_from(slot.recv);
    }
  }
  recv.copy_from(slot.rows);
  // This call's rows leave now and are read by the next epoch's call.
  ensure_rows(slot.send, send.rows(), send.cols(), send.device());
  slot.send.copy_from(send);
  ensure_rows(slot.recv, recv.rows(), recv.cols(), recv.device());
  slot.pending = data_.start_alltoallv(encoded(codec, slot.send, slot.send_wire), send_rows,
                                       arrival(codec, slot.recv, slot.recv_wire), recv_rows,
                                       args.stream);
}

void HaloExchange::forward(const Tensor& x_owned, Tensor& x_full, const ExchangeArgs& args) {
  TESSEL_EXPECTS(x_owned.dtype() == DType::f32 && x_owned.dim() == 2 &&
                     x_owned.rows() == num_owned_,
                 "halo forward: expected f32[{}, F], got {}", num_owned_, x_owned.describe());
  const std::int64_t f = x_owned.cols();
  const Device device = x_owned.device();
  // This call's kernels, copies and buffers on args.stream, as its exchange (see ExchangeArgs).
  const device_memory::StreamScope on_stream(device, device_memory::resolve(device, args.stream));
  indices_on(device);
  // Combined, the received rows follow the owned ones as they arrive; else they are the halo.
  const std::int64_t tail = combined_ ? rows_received_ : num_halo_;
  if (tail == 0) {
    x_full = x_owned; // nothing to append: share the rows instead of copying them
  } else {
    ensure_rows(x_full, num_owned_ + tail, f, device);
    x_full.rows_slice(0, num_owned_).copy_from(x_owned);
  }
  pack(x_owned, send_buffer_);
  if (args.bytes) args.bytes->rows += rows_sent_ * kernels::row_codec_bytes(args.codec, f);
  Tensor halo_rows = x_full.rows_slice(num_owned_, num_owned_ + tail);
  if (combined_ || recv_in_halo_order_) {
    exchange(send_buffer_, send_rows_per_peer_, halo_rows, recv_rows_per_peer_, stale_forward_,
             forward_calls_, args);
    return;
  }
  // The received rows, then one zero row for the halo rows not received (keep_rows).
  ensure_rows(recv_buffer_, rows_received_ + 1, f, device);
  Tensor arrived = recv_buffer_.rows_slice(0, rows_received_);
  exchange(send_buffer_, send_rows_per_peer_, arrived, recv_rows_per_peer_, stale_forward_,
           forward_calls_, args);
  Tensor zero_row = recv_buffer_.rows_slice(rows_received_, rows_received_ + 1);
  zero_row.fill_zero();
  kernels::gather_rows(recv_buffer_, halo_to_recv_, halo_rows);
}

void HaloExchange::forward_halo(const std::function<void(std::span<const LocalId>, Tensor&)>& pack,
                                std::int64_t f, std::int64_t chunk_rows, Tensor& halo) {
  ensure_rows(halo, num_halo_, f, Device::cpu());
  // Without the halo in arrival order the rows arrive whole first (as forward() does).
  Tensor arrived_all;
  if (!recv_in_halo_order_) arrived_all = Tensor::empty({rows_received_ + 1, f}, DType::f32);
  Tensor& landing = recv_in_halo_order_ ? halo : arrived_all;
  forward_halo_rounds(pack, f, chunk_rows, [&](std::int64_t at, const Tensor& rows) {
    landing.rows_slice(at, at + rows.rows()).copy_from(rows);
  });
  if (!recv_in_halo_order_) {
    arrived_all.rows_slice(rows_received_, rows_received_ + 1).fill_zero();
    kernels::gather_rows(arrived_all, halo_to_recv_, halo);
  }
}

void HaloExchange::forward_halo(const std::function<void(std::span<const LocalId>, Tensor&)>& pack,
                                std::int64_t f, std::int64_t chunk_rows,
                                const std::function<void(std::int64_t, const Tensor&)>& land) {
  TESSEL_EXPECTS(recv_in_halo_order_,
                 "halo forward into row blocks: the halo rows do not arrive in halo order (a "
                 "part not in the partitioner's layout)");
  forward_halo_rounds(pack, f, chunk_rows, land);
}

// Rounds of at most `chunk_rows` rows per peer, so what travels at once is bounded, not the
// halo: every rank makes the same number of rounds (the most any pair needs). land(at, rows)
// gets the rows of one peer in one round, `at` their place in arrival order.
void HaloExchange::forward_halo_rounds(
    const std::function<void(std::span<const LocalId>, Tensor&)>& pack, std::int64_t f,
    std::int64_t chunk_rows, const std::function<void(std::int64_t, const Tensor&)>& land) {
  TESSEL_EXPECTS(!combined_ && !stale_,
                 "halo forward over row blocks: needs the plain exchange (no --halo-aggregation, "
                 "no --stale-halo)");
  indices_on(Device::cpu());
  const auto peers = send_rows_per_peer_.size();
  const std::int64_t chunk = std::max<std::int64_t>(1, chunk_rows);
  std::int64_t most = 0;
  for (std::size_t p = 0; p < peers; ++p)
    most = std::max({most, send_rows_per_peer_[p], recv_rows_per_peer_[p]});
  const std::int64_t rounds =
      data_.allreduce_value<std::int64_t>((most + chunk - 1) / chunk, comm::ReduceOp::max);
  std::vector<std::int64_t> send_at(peers, 0), recv_at(peers, 0);
  for (std::size_t p = 1; p < peers; ++p) {
    send_at[p] = send_at[p - 1] + send_rows_per_peer_[p - 1];
    recv_at[p] = recv_at[p - 1] + recv_rows_per_peer_[p - 1];
  }
  std::vector<std::int64_t> send_count(peers), recv_count(peers);
  std::vector<LocalId> ids;
  for (std::int64_t r = 0; r < rounds; ++r) {
    ids.clear();
    std::int64_t receiving = 0;
    for (std::size_t p = 0; p < peers; ++p) {
      send_count[p] = std::clamp<std::int64_t>(send_rows_per_peer_[p] - r * chunk, 0, chunk);
      recv_count[p] = std::clamp<std::int64_t>(recv_rows_per_peer_[p] - r * chunk, 0, chunk);
      const auto from = send_rows_.begin() + send_at[p] + r * chunk;
      if (send_count[p] > 0) ids.insert(ids.end(), from, from + send_count[p]);
      receiving += recv_count[p];
    }
    Tensor send = Tensor::empty({static_cast<std::int64_t>(ids.size()), f}, DType::f32);
    if (!ids.empty()) pack(ids, send);
    Tensor recv = Tensor::empty({receiving, f}, DType::f32);
    data_.alltoallv(send, send_count, recv, recv_count, DeviceStream::main());  // host rows
    std::int64_t k = 0;
    for (std::size_t p = 0; p < peers; ++p) {
      if (recv_count[p] == 0) continue;
      land(recv_at[p] + r * chunk, recv.rows_slice(k, k + recv_count[p]));
      k += recv_count[p];
    }
  }
}

void HaloExchange::backward(const Tensor& grad_full, Tensor& grad_owned,
                            const ExchangeArgs& args) {
  const std::int64_t tail = combined_ ? rows_received_ : num_halo_;
  TESSEL_EXPECTS(grad_full.dtype() == DType::f32 && grad_full.dim() == 2 &&
                     grad_full.rows() == num_owned_ + tail,
                 "halo backward: expected f32[{}, F], got {}", num_owned_ + tail,
                 grad_full.describe());
  const std::int64_t f = grad_full.cols();
  const Device device = grad_full.device();
  const device_memory::StreamScope on_stream(device, device_memory::resolve(device, args.stream));
  indices_on(device);
  if (tail == 0) {
    grad_owned = grad_full; // the same rows: add the peers' gradients in place
  } else {
    ensure_rows(grad_owned, num_owned_, f, device);
    grad_owned.copy_from(grad_full.rows_slice(0, num_owned_));
  }

  // Halo gradients go back to their owners, in the order the owners sent the rows: straight from
  // the gradient when the halo is already in that order, else gathered into that order first.
  Tensor back_rows = grad_full.rows_slice(num_owned_, num_owned_ + tail);
  if (!combined_ && !recv_in_halo_order_) {
    ensure_rows(recv_buffer_, rows_received_ + 1, f, device);
    Tensor picked = recv_buffer_.rows_slice(0, rows_received_);
    kernels::gather_rows(back_rows, recv_to_halo_, picked);
    back_rows = picked;
  }
  if (args.bytes) args.bytes->grads += rows_received_ * kernels::row_codec_bytes(args.codec, f);
  ensure_rows(send_buffer_, rows_sent_, f, device);
  exchange(back_rows, recv_rows_per_peer_, send_buffer_, send_rows_per_peer_, stale_backward_,
           backward_calls_, args);
  add_back(send_buffer_, grad_owned);
}

}  // namespace tessel::dist
