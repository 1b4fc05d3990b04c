// Dispatch of the Adam and SGD parameter updates.
#include "tessel/kernels/optim.hpp"

#include "check.hpp"
#include "cpu/cpu_ops.hpp"
#ifdef TESSEL_WITH_CUDA
#include "cuda/cuda_ops.hpp"
#endif

#include <cmath>

namespace tessel::kernels {

void adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamStep& step,
                 Context* ctx) {
  constexpr const char* kOp = "adam_update";
  const int rank = param.defined() ? param.dim() : 1;
  detail::expect_tensor(kOp, "param", param, DType::f32, rank);
  for (const auto& [name, t] :
       {std::pair<const char*, const Tensor*>{"grad", &grad}, {"m", &m}, {"v", &v}}) {
    detail::expect_tensor(kOp, name, *t, DType::f32, rank);
    detail::expect_same_shape(kOp, "param", param, name, *t);
    detail::expect_device(kOp, name, *t, param.device());
  }
  TESSEL_EXPECTS(step.step >= 1, "{}: step {} must be >= 1", kOp, step.step);
  const Device device = param.device();
  Context& context = resolve_context(ctx, device, kOp);
  if (param.numel() == 0) return;
  // Bias corrections in double: 1 - beta2^t is tiny for small t and loses digits in float.
  const double t = static_cast<double>(step.step);
  const auto step_size =
      static_cast<float>(step.lr / (1.0 - std::pow(static_cast<double>(step.beta1), t)));
  const auto bias2_sqrt =
      static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(step.beta2), t)));
  TESSEL_KERNEL_DISPATCH(kOp, device, context,
                         cpu::adam_update(param.numel(), param.ptr<float>(), grad.ptr<float>(),
                                          m.ptr<float>(), v.ptr<float>(), step.beta1, step.beta2,
                                          step.eps, step.weight_decay, step_size, bias2_sqrt),
                         cuda::adam_update(r, param.numel(), param.ptr<float>(),
                                           grad.ptr<float>(), m.ptr<float>(), v.ptr<float>(),
                                           step.beta1, step.beta2, step.eps, step.weight_decay,
                                           step_size, bias2_sqrt));
}

void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buf, float lr, float momentum,
                float weight_decay, Context* ctx) {
  constexpr const char* kOp = "sgd_update";
  const int rank = param.defined() ? param.dim() : 1;
  detail::expect_tensor(kOp, "param", param, DType::f32, rank);
  detail::expect_tensor(kOp, "grad", grad, DType::f32, rank);
  detail::expect_same_shape(kOp, "param", param, "grad", grad);
  const Device device = param.device();
  detail::expect_device(kOp, "grad", grad, device);
  float* buf = nullptr;
  if (momentum != 0.0f) {
    detail::expect_tensor(kOp, "momentum_buf", momentum_buf, DType::f32, rank);
    detail::expect_same_shape(kOp, "param", param, "momentum_buf", momentum_buf);
    detail::expect_device(kOp, "momentum_buf", momentum_buf, device);
    buf = momentum_buf.ptr<float>();
  }
  Context& context = resolve_context(ctx, device, kOp);
  if (param.numel() == 0) return;
  TESSEL_KERNEL_DISPATCH(kOp, device, context,
                         cpu::sgd_update(param.numel(), param.ptr<float>(), grad.ptr<float>(),
                                         buf, lr, momentum, weight_decay),
                         cuda::sgd_update(r, param.numel(), param.ptr<float>(), grad.ptr<float>(),
                                          buf, lr, momentum, weight_decay));
}

} // namespace tessel::kernels
