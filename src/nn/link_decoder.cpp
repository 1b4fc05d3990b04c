// The link decoders: the dot product through nn::link_scores, the MLP on the elementwise product.
#include "tessel/nn/link_decoder.hpp"

#include "tessel/core/error.hpp"
#include "tessel/kernels/dense.hpp"
#include "tessel/nn/link.hpp"

#include <algorithm>

namespace tessel::nn {

namespace {
// The decoder's Glorot draws: the init stream at epoch 2, one layer word per linear layer (the
// encoder's layers use epoch 0), so they do not depend on the encoder's shape.
rng::Key decoder_key(std::uint64_t seed, std::uint32_t layer) {
  return rng::Key{seed, rng::Stream::init, 2, 0, layer};
}
}  // namespace

LinkDecoder::LinkDecoder(LinkDecoderKind kind, std::int64_t dim, std::uint64_t seed)
    : kind_(kind), dim_(dim) {
  TESSEL_EXPECTS(dim >= 1, "link decoder: embedding width {} (expected at least 1)", dim);
  if (kind_ == LinkDecoderKind::dot) {
    ones_ = Tensor::from_vector(std::vector<float>(static_cast<std::size_t>(dim), 1.0f), {dim, 1});
    zero_ = Tensor::zeros({1}, DType::f32);
    return;
  }
  hidden_.emplace("decoder.0", dim, dim, decoder_key(seed, 0), Device::cpu());
  out_.emplace("decoder.1", dim, 1, decoder_key(seed, 1), Device::cpu());
}

Tensor LinkDecoder::forward(const Tensor& z, std::span<const LocalId> src,
                            std::span<const LocalId> dst) {
  TESSEL_ASSERT(src.size() == dst.size(), "LinkDecoder::forward: {} sources, {} targets",
                src.size(), dst.size());
  TESSEL_ASSERT(z.device().is_cpu() && z.cols() == dim_, "LinkDecoder::forward: z is not [rows, {}] on the host", dim_);
  if (kind_ == LinkDecoderKind::dot) {
    z_ = z;
    src_.assign(src.begin(), src.end());
    dst_.assign(dst.begin(), dst.end());
    return link_scores(z, src, dst, ones_, zero_);
  }
  const auto pairs = static_cast<std::int64_t>(src.size());
  const std::int64_t H = dim_;
  Tensor product = Tensor::empty({pairs, H}, DType::f32);
  const float* zv = z.data<float>();
  float* pv = product.data<float>();
#pragma omp parallel for schedule(static) if (pairs * H > (1 << 16))
  for (std::int64_t j = 0; j < pairs; ++j) {
    const float* a = zv + static_cast<std::int64_t>(src[static_cast<std::size_t>(j)]) * H;
    const float* b = zv + static_cast<std::int64_t>(dst[static_cast<std::size_t>(j)]) * H;
    for (std::int64_t k = 0; k < H; ++k) pv[j * H + k] = a[k] * b[k];
  }
  Tensor pre = hidden_->forward(product);
  kernels::relu_forward(pre, pre);
  relu_out_ = pre;
  Tensor scores = out_->forward(relu_out_);
  z_ = z;
  src_.assign(src.begin(), src.end());
  dst_.assign(dst.begin(), dst.end());
  return scores.reshape({pairs});
}

void LinkDecoder::backward(const Tensor& grad_scores, Tensor& grad_z) {
  TESSEL_ASSERT(z_.defined(), "LinkDecoder::backward before forward");
  const auto pairs = static_cast<std::int64_t>(src_.size());
  TESSEL_ASSERT(grad_scores.numel() == pairs, "LinkDecoder::backward: {} gradients for {} pairs",
                grad_scores.numel(), pairs);
  if (kind_ == LinkDecoderKind::dot) {
    Tensor grad_w = Tensor::zeros({dim_, 1}, DType::f32), grad_b = Tensor::zeros({1}, DType::f32);
    link_scores_backward(z_, src_, dst_, ones_, grad_scores, grad_z, grad_w, grad_b);
    return;
  }
  const std::int64_t H = dim_;
  Tensor grad_relu = out_->backward(grad_scores.reshape({pairs, 1}), true);
  kernels::relu_backward(grad_relu, relu_out_, grad_relu);
  const Tensor grad_product = hidden_->backward(grad_relu, true);
  // d product[j] / d z[src] = z[dst] and the reverse; pair after pair, so a row shared by many
  // pairs sums in one fixed order.
  const float* zv = z_.data<float>();
  const float* g = grad_product.data<float>();
  float* gz = grad_z.data<float>();
  for (std::int64_t j = 0; j < pairs; ++j) {
    const std::int64_t s = src_[static_cast<std::size_t>(j)], d = dst_[static_cast<std::size_t>(j)];
    const float* a = zv + s * H;
    const float* b = zv + d * H;
    for (std::int64_t k = 0; k < H; ++k) {
      const float gk = g[j * H + k];
      gz[s * H + k] += gk * b[k];
      gz[d * H + k] += gk * a[k];
    }
  }
}

std::vector<Parameter*> LinkDecoder::parameters() {
  if (kind_ == LinkDecoderKind::dot) return {};
  std::vector<Parameter*> params = hidden_->parameters();
  for (Parameter* p : out_->parameters()) params.push_back(p);
  return params;
}

void LinkDecoder::zero_grad() {
  for (Parameter* p : parameters()) p->grad.fill_zero();
}

}  // namespace tessel::nn
