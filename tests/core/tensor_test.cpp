// Tensor: shapes, views, copies, dtype checks.
#include "tessel/core/tensor.hpp"

#include <gtest/gtest.h>

using namespace tessel;

TEST(Tensor, ZerosHasShapeAndZeroes) {
  Tensor t = Tensor::zeros({3, 4}, DType::f32);
  EXPECT_EQ(t.rows(), 3);
  EXPECT_EQ(t.cols(), 4);
  EXPECT_EQ(t.numel(), 12);
  EXPECT_EQ(t.nbytes(), 48u);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(t.data<float>()[i], 0.0f);
}

TEST(Tensor, RowSliceSharesStorage) {
  Tensor t = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor s = t.rows_slice(1, 3);
  EXPECT_EQ(s.rows(), 2);
  EXPECT_EQ(s.data<float>()[0], 2.0f);
  s.data<float>()[0] = 42.0f;
  EXPECT_EQ(t.data<float>()[2], 42.0f);
  EXPECT_THROW(t.rows_slice(2, 4), InputError);
}

TEST(Tensor, CloneIsDeep) {
  Tensor t = Tensor::from_vector<std::int64_t>({7, 8, 9});
  Tensor c = t.clone();
  c.data<std::int64_t>()[0] = 1;
  EXPECT_EQ(t.data<std::int64_t>()[0], 7);
  EXPECT_EQ(c.data<std::int64_t>()[1], 8);
}

TEST(Tensor, WrongDtypeAccessThrows) {
  Tensor t = Tensor::zeros({2}, DType::i32);
  EXPECT_THROW(t.data<float>(), InternalError);
  EXPECT_NO_THROW(t.data<std::int32_t>());
}

TEST(Tensor, RejectsBadShapes) {
  EXPECT_THROW(Tensor::empty({1, 2, 3}, DType::f32), InputError);
  EXPECT_THROW(Tensor::empty({-1}, DType::f32), InputError);
  Tensor t = Tensor::zeros({2, 3}, DType::f32);
  EXPECT_EQ(t.reshape({6}).numel(), 6);
  EXPECT_THROW(t.reshape({5}), InputError);
}

TEST(Tensor, CudaDeviceRefusedWithoutGpu) {
  if (device_memory::cuda_available()) {
    Tensor t = Tensor::from_vector<float>({1, 2, 3});
    Tensor back = t.to(Device::cuda()).to(Device::cpu());
    EXPECT_EQ(back.data<float>()[2], 3.0f);
  } else {
#ifndef TESSEL_WITH_CUDA
    EXPECT_THROW(Tensor::empty({4}, DType::f32, Device::cuda()), InputError);
#else
    EXPECT_THROW(Tensor::empty({4}, DType::f32, Device::cuda()), LibraryError);
#endif
  }
}

TEST(TensorDevice, HostAccessToDeviceTensorIsAClearError) {
  if (!device_memory::cuda_available()) GTEST_SKIP() << "no GPU visible";
  const Tensor t = Tensor::zeros({4, 3}, DType::f32, Device::cuda(0));
  try {
    (void)t.data<float>();
    FAIL() << "data<float>() on a device tensor did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("to(Device::cpu())"), std::string::npos) << e.what();
  }
  EXPECT_NE(t.ptr<float>(), nullptr);  // kernels still get the device address
  const Tensor host = t.to(Device::cpu());
  EXPECT_EQ(host.data<float>()[11], 0.0f);
}

TEST(TensorDevice, CachingAllocatorReusesBlocks) {
  if (!device_memory::cuda_available()) GTEST_SKIP() << "no GPU visible";
  const Device gpu = Device::cuda(0);
  auto epoch = [&] {
    for (int i = 0; i < 4; ++i) {
      Tensor a = Tensor::empty({1000 + i, 300}, DType::f32, gpu);
      Tensor b = Tensor::zeros({5000, 17}, DType::f32, gpu);
      a.rows_slice(0, 10).fill_zero();
    }
  };
  epoch();
  const auto after_first = device_memory::stats(gpu);
  epoch();
  epoch();
  const auto after_third = device_memory::stats(gpu);
  EXPECT_EQ(after_third.device_allocations, after_first.device_allocations)
      << "repeated work allocated new device memory";
  EXPECT_GT(after_third.cache_hits, after_first.cache_hits);
  EXPECT_EQ(after_third.requests - after_first.requests, 2 * 8);
  EXPECT_EQ(after_third.bytes_in_use, after_first.bytes_in_use);
}

// An iteration that holds more host memory than the block cache's cap: without a keeper every
// iteration takes its large blocks from the system again; once a HostBlockKeeper has raised the
// cap to what an iteration held, the blocks freed from then on stay, and later iterations take none.
TEST(TensorHost, KeeperKeepsWhatAnIterationHeld) {
  const std::size_t cap = device_memory::host_cache_limit();
  device_memory::host_cache_set_limit(1);
  auto iteration = [] {
    Tensor a = Tensor::empty({1 << 20}, DType::f32);  // 4 MiB
    Tensor b = Tensor::zeros({3 << 20}, DType::f32);  // 12 MiB
    a.data<float>()[0] = b.data<float>()[1];
  };
  auto system_blocks = [] { return device_memory::host_stats().device_allocations; };
  iteration();
  std::int64_t before = system_blocks();
  iteration();
  EXPECT_EQ(system_blocks() - before, 2) << "the capped cache kept blocks it should have freed";

  const device_memory::HostBlockKeeper keeper;
  iteration();
  keeper.keep();
  EXPECT_GE(device_memory::host_cache_limit(), std::size_t{16} << 20);
  iteration();  // its blocks were freed before keep(); this one's stay
  before = system_blocks();
  iteration();
  iteration();
  EXPECT_EQ(system_blocks(), before) << "an iteration after keep() took blocks from the system";
  device_memory::host_cache_set_limit(cap);
}

TEST(TensorStreams, ScopesAndEventsDoNothingOnTheCpu) {
  int marker = 0;
  {
    const device_memory::StreamScope scope(Device::cpu(), &marker);
    EXPECT_EQ(device_memory::stream(Device::cpu()), nullptr);
    device_memory::StreamEvent event;
    event.record(Device::cpu());
    event.wait(Device::cpu());
  }
  EXPECT_EQ(device_memory::side_stream(Device::cpu()), nullptr);
  EXPECT_EQ(device_memory::main_stream(Device::cpu()), nullptr);
}

TEST(TensorDevice, StreamScopeRedirectsTheDevicesWork) {
  if (!device_memory::cuda_available()) GTEST_SKIP() << "no GPU visible";
  const Device gpu = Device::cuda(0);
  void* main = device_memory::main_stream(gpu);
  void* side = device_memory::side_stream(gpu);
  ASSERT_NE(main, nullptr);
  ASSERT_NE(side, nullptr);
  EXPECT_NE(main, side);
  EXPECT_EQ(device_memory::side_stream(gpu), side) << "one side stream per device";
  EXPECT_EQ(device_memory::stream(gpu), main);
  {
    const device_memory::StreamScope on_side(gpu, side);
    EXPECT_EQ(device_memory::stream(gpu), side);
    {
      const device_memory::StreamScope back(gpu, main);
      EXPECT_EQ(device_memory::stream(gpu), main);
    }
    EXPECT_EQ(device_memory::stream(gpu), side);
    const device_memory::StreamScope nothing(gpu, nullptr);
    EXPECT_EQ(device_memory::stream(gpu), side);
  }
  EXPECT_EQ(device_memory::stream(gpu), main);
}

TEST(TensorDevice, BlocksCrossingStreamsAreReusedOnlyWhenBothAreDone) {
  if (!device_memory::cuda_available()) GTEST_SKIP() << "no GPU visible";
  const Device gpu = Device::cuda(0);
  void* side = device_memory::side_stream(gpu);
  // Sizes no other test uses, so every request below meets only this test's blocks.
  const std::int64_t n = 3 * 1048576 + 77;
  // A block the main stream allocated and released: its own to reuse, never the side stream's.
  Tensor main_block = Tensor::empty({2 * n}, DType::f32, gpu);
  main_block = Tensor();
  Tensor values = Tensor::empty({n}, DType::f32);
  for (std::int64_t i = 0; i < n; ++i) values.data<float>()[i] = static_cast<float>(i % 1000);
  device_memory::StreamEvent written;
  Tensor on_side;
  {
    const device_memory::StreamScope scope(gpu, side);
    on_side = values.to(gpu);  // allocated and written on the side stream
    written.record(gpu);
  }
  written.wait(gpu);  // the main stream reads it after the side stream's event
  const Tensor back = on_side.to(Device::cpu());
  EXPECT_EQ(back.data<float>()[n - 1], static_cast<float>((n - 1) % 1000));
  on_side = Tensor();  // released on the main stream: pending until both streams pass it
  device_memory::synchronize_streams(gpu);
  const auto before = device_memory::stats(gpu);
  {
    const device_memory::StreamScope scope(gpu, side);
    Tensor big = Tensor::empty({2 * n}, DType::f32, gpu);
    const auto after_big = device_memory::stats(gpu);
    EXPECT_EQ(after_big.device_allocations, before.device_allocations + 1)
        << "the side stream took the main stream's block";
    // Both streams are past the crossed block: it is idle, and the side stream takes it.
    Tensor again = Tensor::empty({n}, DType::f32, gpu);
    const auto after = device_memory::stats(gpu);
    EXPECT_EQ(after.device_allocations, after_big.device_allocations)
        << "the crossed block was not reused";
    EXPECT_EQ(after.cache_hits, after_big.cache_hits + 1);
    // Released on the stream it was allocated on: the next request there takes it at once.
    again = Tensor();
    Tensor once_more = Tensor::empty({n}, DType::f32, gpu);
    EXPECT_EQ(device_memory::stats(gpu).device_allocations, after.device_allocations);
  }
  device_memory::synchronize_streams(gpu);
}
