// MPI Communicator: every collective checked exactly with integer-valued payloads.
#include "tessel/comm/mpi_communicator.hpp"

#include <gtest/gtest.h>

#include <numeric>

using namespace tessel;

TEST(MpiCommunicator, AllreduceSumMaxMin) {
  auto comm = comm::make_mpi_communicator();
  const int r = comm->rank(), p = comm->size();
  std::vector<float> v = {static_cast<float>(r), 1.0f};
  comm->allreduce(std::span<float>(v));
  EXPECT_EQ(v[0], static_cast<float>(p * (p - 1) / 2));
  EXPECT_EQ(v[1], static_cast<float>(p));
  EXPECT_EQ(comm->allreduce_value<std::int64_t>(r, comm::ReduceOp::max), p - 1);
  EXPECT_EQ(comm->allreduce_value<double>(r + 3.0, comm::ReduceOp::min), 3.0);
}

TEST(MpiCommunicator, BroadcastAndAllgather) {
  auto comm = comm::make_mpi_communicator();
  std::vector<std::int32_t> v(3, comm->rank() == 0 ? 9 : -1);
  comm->broadcast(std::span<std::int32_t>(v), 0);
  EXPECT_EQ(v, (std::vector<std::int32_t>{9, 9, 9}));
  auto all = comm->allgather_value<std::int64_t>(comm->rank() * 10);
  ASSERT_EQ(static_cast<int>(all.size()), comm->size());
  for (int q = 0; q < comm->size(); ++q) EXPECT_EQ(all[q], q * 10);
}

TEST(MpiCommunicator, AlltoallvDeliversRaggedBlocksAndCountsBytes) {
  auto comm = comm::make_mpi_communicator();
  const int r = comm->rank(), p = comm->size();
  // Rank r sends (q + 1) copies of the value 100 r + q to rank q.
  std::vector<std::int64_t> send_counts(p);
  std::vector<std::int64_t> send;
  for (int q = 0; q < p; ++q) {
    send_counts[q] = q + 1;
    for (int k = 0; k <= q; ++k) send.push_back(100 * r + q);
  }
  comm->reset_bytes_sent();
  std::vector<std::int64_t> recv_counts;
  auto recv = comm->alltoallv<std::int64_t>(send, send_counts, &recv_counts);
  ASSERT_EQ(static_cast<int>(recv_counts.size()), p);
  std::size_t at = 0;
  for (int q = 0; q < p; ++q) {
    EXPECT_EQ(recv_counts[q], r + 1);
    for (int k = 0; k <= r; ++k) EXPECT_EQ(recv[at++], 100 * q + r);
  }
  EXPECT_EQ(at, recv.size());
  std::int64_t expect_bytes = 0;
  for (int q = 0; q < p; ++q)
    if (q != r) expect_bytes += (q + 1) * 8;
  EXPECT_EQ(comm->bytes_sent(), expect_bytes);
}

TEST(MpiCommunicator, SplitMakesIndependentGroups) {
  auto comm = comm::make_mpi_communicator();
  auto sub = comm->split(comm->rank() % 2, comm->rank());
  EXPECT_EQ(sub->size(), (comm->size() + 1 - comm->rank() % 2) / 2);
  EXPECT_EQ(sub->rank(), comm->rank() / 2);
  const auto sum = sub->allreduce_value<std::int32_t>(1);
  EXPECT_EQ(sum, sub->size());
}

TEST(MpiCommunicator, SendNeverBlocksAndReceivesMatchByTag) {
  auto comm = comm::make_mpi_communicator();
  const int r = comm->rank(), p = comm->size();
  if (p < 2) return;  // point to point needs a peer (the np1 run checks the collectives only)
  // Every rank sends two large messages to both neighbours before receiving anything: with
  // blocking sends this ring would deadlock.
  const int next = (r + 1) % p, prev = (r + p - 1) % p;
  const std::int64_t n = 1 << 18;
  std::vector<float> a(n, static_cast<float>(r)), b(n, static_cast<float>(r + 100));
  comm->reset_bytes_sent();
  comm->send(a.data(), n, DType::f32, next, 1);
  comm->send(b.data(), n, DType::f32, next, 2);
  a.assign(n, -1.0f);  // the payload was copied: changing it now changes nothing
  std::vector<float> got2(n), got1(n);
  comm->recv(got2.data(), n, DType::f32, prev, 2);  // tags pick the message, not arrival order
  comm->recv(got1.data(), n, DType::f32, prev, 1);
  EXPECT_EQ(got1[0], static_cast<float>(prev));
  EXPECT_EQ(got1[n - 1], static_cast<float>(prev));
  EXPECT_EQ(got2[n / 2], static_cast<float>(prev + 100));
  comm->wait_sends();
  EXPECT_EQ(comm->bytes_sent(), 2 * n * 4);
  std::vector<float> wrong(3);
  if (r == 0) comm->send(wrong.data(), 2, DType::f32, 1, 5);
  if (r == 1) {
    EXPECT_ANY_THROW(comm->recv(wrong.data(), 3, DType::f32, 0, 5));
  }
  comm->wait_sends();
  comm->barrier();
}
