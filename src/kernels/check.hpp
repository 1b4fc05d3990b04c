// Argument checks shared by the dispatch entry points: every message names the op.
#pragma once

#include "tessel/core/error.hpp"
#include "tessel/core/tensor.hpp"

#include <fmt/ranges.h>

#include <cstdint>
#include <initializer_list>

namespace tessel::kernels::detail {

// t is defined, has dtype `dtype` and rank `rank`.
inline void expect_tensor(const char* op, const char* name, const Tensor& t, DType dtype,
                          int rank) {
  TESSEL_EXPECTS(t.defined(), "{}: {} is undefined", op, name);
  TESSEL_EXPECTS(t.dtype() == dtype && t.dim() == rank, "{}: {} must be {} of rank {}, got {}", op,
                 name, dtype_name(dtype), rank, t.describe());
}

inline void expect_shape(const char* op, const char* name, const Tensor& t,
                         std::initializer_list<std::int64_t> shape) {
  TESSEL_EXPECTS(t.shape() == std::vector<std::int64_t>(shape), "{}: {} has shape {}, expected {}",
                 op, name, t.describe(), fmt::join(shape, "x"));
}

inline void expect_device(const char* op, const char* name, const Tensor& t, Device device) {
  TESSEL_EXPECTS(t.device() == device, "{}: {} is on {}, expected {} like the other operands", op,
                 name, t.device().str(), device.str());
}

inline void expect_same_shape(const char* op, const char* a_name, const Tensor& a,
                              const char* b_name, const Tensor& b) {
  TESSEL_EXPECTS(a.shape() == b.shape(), "{}: {} is {} but {} is {}", op, a_name, a.describe(),
                 b_name, b.describe());
}

// Thrown when a CUDA tensor reaches an op in a build without CUDA, or a device kind has no twin.
[[noreturn]] inline void unsupported_device(const char* op, Device device) {
  TESSEL_FAIL("{}: no implementation for device {} (built {} CUDA)", op, device.str(),
#ifdef TESSEL_WITH_CUDA
              "with"
#else
              "without"
#endif
  );
}

// Calls f(Index{}) with Index the C++ type of an index tensor's dtype (i32 or i64; the op has
// checked it is one of them), so that an op writes its call once for both index types:
//   with_index_type(index, [&](auto tag) { using Index = decltype(tag); ... });
template <class F>
void with_index_type(const Tensor& index, F&& f) {
  if (index.dtype() == DType::i32)
    f(std::int32_t{});
  else
    f(std::int64_t{});
}

} // namespace tessel::kernels::detail

// Returns the CPU call or the CUDA call for `device` (`r` names the context's cuda::Resources in
// the CUDA call), else reports the op as unsupported. The calls are expressions: void for most
// ops, the value an op returns for those that return one (the losses).
#ifdef TESSEL_WITH_CUDA
#define TESSEL_KERNEL_DISPATCH(op, device, context, cpu_call, cuda_call)                           \
  do {                                                                                             \
    if ((device).is_cpu()) {                                                                       \
      return cpu_call;                                                                             \
    }                                                                                              \
    if ((device).is_cuda()) {                                                                      \
      auto& r = (context).cuda_resources();                                                        \
      return cuda_call;                                                                            \
    }                                                                                              \
    ::tessel::kernels::detail::unsupported_device(op, device);                                     \
  } while (0)
#else
#define TESSEL_KERNEL_DISPATCH(op, device, context, cpu_call, cuda_call)                           \
  do {                                                                                             \
    (void)(context);                                                                               \
    if ((device).is_cpu()) {                                                                       \
      return cpu_call;                                                                             \
    }                                                                                              \
    ::tessel::kernels::detail::unsupported_device(op, device);                                     \
  } while (0)
#endif
