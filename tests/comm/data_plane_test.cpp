// Data plane: every Tensor operation of every available communicator against a host reference
// (MPI with host tensors always; MPI staging device tensors and NCCL where a GPU is visible).
#include "tessel/comm/mpi_communicator.hpp"
#include "tessel/comm/nccl_communicator.hpp"

#include <gtest/gtest.h>

#include <numeric>

using namespace tessel;

namespace {

Tensor host_copy(const Tensor& t) { return t.device().is_cpu() ? t.clone() : t.to(Device::cpu()); }

void check_plane(comm::Communicator& comm, Device device, const std::string& name) {
  SCOPED_TRACE(name);
  const int r = comm.rank(), p = comm.size();
  // allreduce: element i of rank r is r * 10 + i; sums are exact in f32.
  {
    Tensor h = Tensor::empty({3, 2}, DType::f32);
    for (int i = 0; i < 6; ++i) h.data<float>()[i] = static_cast<float>(r * 10 + i);
    Tensor t = h.to(device);
    comm.allreduce(t, DeviceStream::main());
    const Tensor back = host_copy(t);
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(back.data<float>()[i], static_cast<float>(10 * p * (p - 1) / 2 + p * i));
    Tensor m = Tensor::from_vector<std::int64_t>({r, -r}).to(device);
    comm.allreduce(m, DeviceStream::main(), comm::ReduceOp::max);
    EXPECT_EQ(host_copy(m).data<std::int64_t>()[0], p - 1);
    EXPECT_EQ(host_copy(m).data<std::int64_t>()[1], 0);
  }
  // alltoallv of rows: rank r sends q + 1 rows to rank q, each row (100 r + q, k).
  {
    const std::int64_t cols = 2;
    std::vector<std::int64_t> send_rows(p), recv_rows(p);
    std::vector<float> values;
    for (int q = 0; q < p; ++q) {
      send_rows[q] = q + 1;
      recv_rows[q] = r + 1;
      for (int k = 0; k <= q; ++k) {
        values.push_back(static_cast<float>(100 * r + q));
        values.push_back(static_cast<float>(k));
      }
    }
    const auto total_send = std::accumulate(send_rows.begin(), send_rows.end(), std::int64_t{0});
    Tensor send = Tensor::from_vector(values, {total_send, cols}).to(device);
    Tensor recv = Tensor::zeros({p * (r + 1), cols}, DType::f32, device);
    comm.reset_bytes_sent();
    comm.alltoallv(send, send_rows, recv, recv_rows, DeviceStream::main());
    const Tensor got = host_copy(recv);
    std::int64_t row = 0;
    for (int q = 0; q < p; ++q)
      for (int k = 0; k <= r; ++k, ++row) {
        EXPECT_EQ(got.data<float>()[row * cols], static_cast<float>(100 * q + r));
        EXPECT_EQ(got.data<float>()[row * cols + 1], static_cast<float>(k));
      }
    std::int64_t expect_bytes = 0;
    for (int q = 0; q < p; ++q)
      if (q != r) expect_bytes += (q + 1) * cols * 4;
    EXPECT_EQ(comm.bytes_sent(), expect_bytes);
  }
  // send/recv around a ring.
  if (p > 1) {
    Tensor out = Tensor::from_vector<std::int32_t>({r, r * r}).to(device);
    Tensor in = Tensor::zeros({2}, DType::i32, device);
    const int next = (r + 1) % p, prev = (r + p - 1) % p;
    if (r % 2 == 0) {
      comm.send(out, next, DeviceStream::main());
      comm.recv(in, prev, DeviceStream::main());
    } else {
      comm.recv(in, prev, DeviceStream::main());
      comm.send(out, next, DeviceStream::main());
    }
    const Tensor got = host_copy(in);
    EXPECT_EQ(got.data<std::int32_t>()[0], prev);
    EXPECT_EQ(got.data<std::int32_t>()[1], prev * prev);
  }
  // split into even and odd ranks; an allreduce inside each group.
  {
    auto sub = comm.split(r % 2, r);
    Tensor one = Tensor::from_vector<float>({1.0f, static_cast<float>(r)}).to(device);
    sub->allreduce(one, DeviceStream::main());
    const Tensor got = host_copy(one);
    EXPECT_EQ(got.data<float>()[0], static_cast<float>(sub->size()));
    float ranks = 0;
    for (int q = r % 2; q < p; q += 2) ranks += static_cast<float>(q);
    EXPECT_EQ(got.data<float>()[1], ranks);
  }
}

}  // namespace

TEST(DataPlane, MpiHostTensors) {
  auto comm = comm::make_mpi_communicator();
  check_plane(*comm, Device::cpu(), "mpi/host");
}

TEST(DataPlane, MpiStagesDeviceTensors) {
  auto comm = comm::make_mpi_communicator();
  if (!device_memory::cuda_available()) GTEST_SKIP() << "no GPU visible";
  check_plane(*comm, Device::cuda(0), "mpi/staged-device");
  const auto stats = device_memory::stats(Device::cuda(0));
  EXPECT_GT(stats.pinned_bytes, 0) << "staging went through pinned host buffers";
}

TEST(DataPlane, NcclDeviceTensors) {
  auto control = comm::make_mpi_communicator();
  if (!comm::nccl_available() || !device_memory::cuda_available())
    GTEST_SKIP() << "no NCCL or no GPU visible";
  const int gpus = device_memory::device_count();
  if (gpus < control->size())
    GTEST_SKIP() << control->size() << " ranks but " << gpus
                 << " GPU(s): NCCL needs one GPU per rank";
  const Device device = Device::cuda(control->rank() % gpus);
  auto nccl = comm::make_nccl_communicator(*control, device);
  EXPECT_EQ(nccl->backend(), "nccl");
  EXPECT_TRUE(nccl->device_native());
  check_plane(*nccl, device, "nccl");
}
