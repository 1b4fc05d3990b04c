// Tensor storage, views and host-side copies.
#include "tessel/core/tensor.hpp"

#include <fmt/ranges.h>

#include <cstdlib>
#include <cstring>
#include <numeric>

namespace tessel {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
  }
  return "?";
}

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", index);
}

Storage::Storage(std::size_t bytes, Device device) : bytes_(bytes), device_(device) {
  data_ = device_memory::allocate(bytes, device);
}

Storage::~Storage() { device_memory::release(data_, device_, bytes_); }

std::int64_t Tensor::numel() const {
  if (shape_.empty()) return 0;
  return std::accumulate(shape_.begin(), shape_.end(), std::int64_t{1}, std::multiplies<>());
}

Tensor Tensor::empty(std::vector<std::int64_t> shape, DType dtype, Device device) {
  TESSEL_EXPECTS(shape.size() == 1 || shape.size() == 2, "Tensor: rank must be 1 or 2, got {}",
                 shape.size());
  for (auto d : shape) TESSEL_EXPECTS(d >= 0, "Tensor: negative dimension {}", d);
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  t.storage_ = std::make_shared<Storage>(t.nbytes(), device);
  return t;
}

Tensor Tensor::zeros(std::vector<std::int64_t> shape, DType dtype, Device device) {
  Tensor t = empty(std::move(shape), dtype, device);
  t.fill_zero();
  return t;
}

void Tensor::fill_zero() {
  if (numel() > 0) device_memory::zero(raw(), device_, nbytes());
}

Tensor Tensor::rows_slice(std::int64_t begin, std::int64_t end) const {
  TESSEL_EXPECTS(begin >= 0 && begin <= end && end <= rows(),
                 "Tensor::rows_slice: [{}, {}) out of {} rows", begin, end, rows());
  Tensor t = *this;
  t.offset_ += static_cast<std::size_t>(begin * cols()) * dtype_size(dtype_);
  t.shape_[0] = end - begin;
  return t;
}

Tensor Tensor::reshape(std::vector<std::int64_t> shape) const {
  Tensor t = *this;
  t.shape_ = std::move(shape);
  TESSEL_EXPECTS(t.numel() == numel(), "Tensor::reshape: {} does not match {} elements",
                 t.describe(), numel());
  return t;
}

Tensor Tensor::clone() const { return to(device_); }

Tensor Tensor::to(Device device) const {
  Tensor t = empty(shape_, dtype_, device);
  t.copy_from(*this);
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  TESSEL_EXPECTS(src.shape_ == shape_ && src.dtype_ == dtype_,
                 "Tensor::copy_from: {} into {}", src.describe(), describe());
  if (nbytes() > 0) device_memory::copy(raw(), device_, src.raw(), src.device_, nbytes());
}

std::string Tensor::describe() const {
  return fmt::format("{}[{}]@{}", dtype_name(dtype_), fmt::join(shape_, "x"), device_.str());
}

void Tensor::check_dtype(DType want) const {
  TESSEL_ASSERT(storage_ != nullptr, "access to an undefined tensor");
  TESSEL_ASSERT(want == dtype_, "tensor holds {}, accessed as {}", dtype_name(dtype_),
                dtype_name(want));
}

void Tensor::host_access_error() const {
  TESSEL_FAIL("Tensor::data: {} lives on {}; host code must copy it first (to(Device::cpu()))",
              describe(), device_.str());
}

}  // namespace tessel
