// Halo exchange: request lists built once, then one alltoallv of rows per layer and direction.
#include "tessel/train/halo.hpp"

#include "tessel/core/error.hpp"

#include <cstring>
#include <numeric>

namespace tessel::train {

HaloExchange::HaloExchange(const partition::Part& part, comm::Communicator& comm)
    : comm_(comm), num_owned_(part.num_owned), num_halo_(part.num_halo) {
  const int num_ranks = comm.size();
  TESSEL_EXPECTS(part.num_parts == num_ranks,
                 "part {} belongs to a partition into {} parts, but {} ranks are running",
                 part.part_id, part.num_parts, num_ranks);
  // Group halo nodes by owner, keeping halo order inside each group.
  std::vector<std::int64_t> requests_per_peer(num_ranks, 0);
  for (std::int64_t h = 0; h < num_halo_; ++h) {
    const int owner = part.halo_owner[h];
    TESSEL_EXPECTS(owner >= 0 && owner < num_ranks && owner != part.part_id,
                   "part {}: halo node {} has owner {}", part.part_id, h, owner);
    ++requests_per_peer[owner];
  }
  std::vector<std::int64_t> cursor(num_ranks + 1, 0);
  std::partial_sum(requests_per_peer.begin(), requests_per_peer.end(), cursor.begin() + 1);
  std::vector<LocalId> requests(static_cast<std::size_t>(num_halo_));
  recv_slots_.resize(static_cast<std::size_t>(num_halo_));
  for (std::int64_t h = 0; h < num_halo_; ++h) {
    const int owner = part.halo_owner[h];
    const auto at = cursor[owner]++;
    requests[at] = part.halo_owner_local[h];
    recv_slots_[at] = static_cast<LocalId>(h);
  }
  recv_in_halo_order_ = true;
  for (std::int64_t i = 0; i < num_halo_; ++i)
    if (recv_slots_[i] != i) recv_in_halo_order_ = false;
  recv_rows_per_peer_ = requests_per_peer;
  // Owners learn which of their rows each peer needs.
  send_rows_ = comm.alltoallv<LocalId>(requests, requests_per_peer, &send_rows_per_peer_);
  for (auto row : send_rows_)
    TESSEL_EXPECTS(row >= 0 && row < num_owned_,
                   "part {}: a peer asked for row {}, but only {} rows are owned here",
                   part.part_id, row, num_owned_);
}

void HaloExchange::forward(const Tensor& x_owned, Tensor& x_full) {
  TESSEL_EXPECTS(x_owned.dtype() == DType::f32 && x_owned.device().is_cpu() &&
                     x_owned.rows() == num_owned_,
                 "halo forward: expected f32[{}, F] on cpu, got {}", num_owned_,
                 x_owned.describe());
  const std::int64_t f = x_owned.cols();
  if (!x_full.defined() || x_full.rows() != num_owned_ + num_halo_ || x_full.cols() != f)
    x_full = Tensor::empty({num_owned_ + num_halo_, f}, DType::f32);
  const float* src = x_owned.data<float>();
  float* dst = x_full.data<float>();
  std::memcpy(dst, src, static_cast<std::size_t>(num_owned_ * f) * sizeof(float));

  // Pack the rows each peer needs.
  const auto num_send = static_cast<std::int64_t>(send_rows_.size());
  send_buffer_.resize(static_cast<std::size_t>(num_send * f));
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < num_send; ++i)
    std::memcpy(&send_buffer_[i * f], src + static_cast<std::int64_t>(send_rows_[i]) * f,
                static_cast<std::size_t>(f) * sizeof(float));

  const int num_ranks = comm_.size();
  std::vector<std::int64_t> send_counts(num_ranks), recv_counts(num_ranks);
  for (int r = 0; r < num_ranks; ++r) {
    send_counts[r] = send_rows_per_peer_[r] * f;
    recv_counts[r] = recv_rows_per_peer_[r] * f;
  }
  float* halo_rows = dst + num_owned_ * f;
  if (recv_in_halo_order_) {
    comm_.alltoallv(send_buffer_.data(), send_counts, halo_rows, recv_counts, DType::f32);
    return;
  }
  recv_buffer_.resize(static_cast<std::size_t>(num_halo_ * f));
  comm_.alltoallv(send_buffer_.data(), send_counts, recv_buffer_.data(), recv_counts, DType::f32);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < num_halo_; ++i)
    std::memcpy(halo_rows + static_cast<std::int64_t>(recv_slots_[i]) * f, &recv_buffer_[i * f],
                static_cast<std::size_t>(f) * sizeof(float));
}

void HaloExchange::backward(const Tensor& grad_full, Tensor& grad_owned) {
  TESSEL_EXPECTS(grad_full.dtype() == DType::f32 && grad_full.device().is_cpu() &&
                     grad_full.rows() == num_owned_ + num_halo_,
                 "halo backward: expected f32[{}, F] on cpu, got {}", num_owned_ + num_halo_,
                 grad_full.describe());
  const std::int64_t f = grad_full.cols();
  if (!grad_owned.defined() || grad_owned.rows() != num_owned_ || grad_owned.cols() != f)
    grad_owned = Tensor::empty({num_owned_, f}, DType::f32);
  const float* g = grad_full.data<float>();
  float* out = grad_owned.data<float>();
  std::memcpy(out, g, static_cast<std::size_t>(num_owned_ * f) * sizeof(float));

  // Halo gradients go back to their owners, in the order the owners sent the rows: straight from
  // the gradient when the halo is already in that order, else gathered into that order first.
  const float* back_rows = g + num_owned_ * f;
  if (!recv_in_halo_order_) {
    recv_buffer_.resize(static_cast<std::size_t>(num_halo_ * f));
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < num_halo_; ++i)
      std::memcpy(&recv_buffer_[i * f], back_rows + static_cast<std::int64_t>(recv_slots_[i]) * f,
                  static_cast<std::size_t>(f) * sizeof(float));
    back_rows = recv_buffer_.data();
  }
  const int num_ranks = comm_.size();
  std::vector<std::int64_t> send_counts(num_ranks), recv_counts(num_ranks);
  for (int r = 0; r < num_ranks; ++r) {
    send_counts[r] = recv_rows_per_peer_[r] * f;
    recv_counts[r] = send_rows_per_peer_[r] * f;
  }
  const auto num_back = static_cast<std::int64_t>(send_rows_.size());
  send_buffer_.resize(static_cast<std::size_t>(num_back * f));
  comm_.alltoallv(back_rows, send_counts, send_buffer_.data(), recv_counts, DType::f32);
  // Sum into the owned rows. One peer asks for a row at most once, so within one peer's block
  // rows are distinct and the block can be added in parallel; blocks go in rank order so the
  // summation order is fixed.
  std::int64_t at = 0;
  for (int r = 0; r < num_ranks; ++r) {
    const std::int64_t n = send_rows_per_peer_[r];
#pragma omp parallel for schedule(static)
    for (std::int64_t i = at; i < at + n; ++i) {
      float* row = out + static_cast<std::int64_t>(send_rows_[i]) * f;
      const float* add = &send_buffer_[i * f];
      for (std::int64_t j = 0; j < f; ++j) row[j] += add[j];
    }
    at += n;
  }
}

}  // namespace tessel::train
