// The decoder of link prediction on a static graph (--task link, --decoder): scores node pairs
// from a table of node embeddings.
//   dot: score = <z_src, z_dst> (GAE's inner product; no parameters).
//   mlp: score = W2 relu(W1 (z_src * z_dst) + b1) + b2 (elementwise product of the two
//        embeddings through a 2-layer MLP of width H, the embedding width, as the OGB link
//        baselines' LinkPredictor). Symmetric in the two endpoints, like the dot product.
// The MLP's parameters ("decoder.0.weight", "decoder.0.bias", "decoder.1.weight",
// "decoder.1.bias") live on the host, beside the host embedding table the scores read; their
// initial values depend on the seed only (Glorot keyed by (seed, init stream, layer)), so every
// rank and rank count starts from the same decoder.
#pragma once

#include "tessel/core/option_words.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/core/types.hpp"
#include "tessel/nn/layers.hpp"
#include "tessel/nn/model.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace tessel::nn {

enum class LinkDecoderKind { dot, mlp };
inline std::span<const OptionWord<LinkDecoderKind>> option_words(LinkDecoderKind) {
  static constexpr OptionWord<LinkDecoderKind> words[] = {{"dot", LinkDecoderKind::dot},
                                                          {"mlp", LinkDecoderKind::mlp}};
  return words;
}

class LinkDecoder {
 public:
  // dim: the embedding width H; seed: the run's --seed.
  LinkDecoder(LinkDecoderKind kind, std::int64_t dim, std::uint64_t seed);

  LinkDecoderKind kind() const { return kind_; }
  // Scores of the pairs (src[j], dst[j]), rows of z (f32 [rows, H] on the host): f32 [pairs].
  // The MLP keeps what backward() needs from the last call.
  Tensor forward(const Tensor& z, std::span<const LocalId> src, std::span<const LocalId> dst);
  // The backward pass of the last forward() for d(loss)/d score = grad_scores [pairs]: adds
  // into grad_z [rows, H] and into the parameters' grads (zero them first: zero_grad()).
  void backward(const Tensor& grad_scores, Tensor& grad_z);
  // The MLP's four parameters; none for the dot product.
  std::vector<Parameter*> parameters();
  void zero_grad();

 private:
  LinkDecoderKind kind_;
  std::int64_t dim_;
  Tensor ones_, zero_;  // the dot product as nn::link_scores' diagonal form (w = 1, b = 0)
  std::optional<Linear> hidden_, out_;
  // Kept by forward() for backward().
  Tensor z_, relu_out_;
  std::vector<LocalId> src_, dst_;
};

}  // namespace tessel::nn
