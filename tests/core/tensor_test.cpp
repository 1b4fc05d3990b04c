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
