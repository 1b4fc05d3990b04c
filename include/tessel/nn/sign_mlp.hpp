// SIGN-style MLP over precomputed hop features: one linear map per hop, concatenated, then a
// deep MLP; cut into blocks so a pipeline can give contiguous blocks to different ranks.
#pragma once

#include "tessel/core/rng.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/core/types.hpp"
#include "tessel/nn/model.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tessel::nn {

struct SignMlpConfig {
  int hops = 2;                 // K: the input holds hops 0..K
  std::int64_t feature_dim = 0; // F: columns of one hop
  std::int64_t hidden = 64;     // H: width of every hidden layer and of each hop's map
  std::int64_t out_dim = 0;     // classes
  int mlp_layers = 2;           // L >= 1 linear layers after the hop maps; the last gives logits
  float dropout = 0.0f;         // on the input of every block while training
  std::uint64_t seed = 0;
};

// Blocks: block 0 maps each hop k with its own Linear F -> H and concatenates them
// ([n, (K+1) F] -> [n, (K+1) H]); blocks 1..L are Linear layers ((K+1) H -> H -> ... -> C).
// Each block applies dropout to its input (mask keyed by (node id, block) through
// rng::Key::layer, so it depends on neither the micro-batch nor the rank that runs it) and a
// ReLU to its output, except the last block, which returns logits.
//
// Blocks keep no state between calls: forward fills a Saved that the caller hands back to
// backward, so several micro-batches can be in flight through one block (pipelining).
class SignMlp {
public:
  explicit SignMlp(const SignMlpConfig& config); // Glorot weights, zero biases, from seed

  struct Saved {
    Tensor input;  // block input after dropout
    Tensor mask;   // dropout mask, 1 bit per element (undefined when inactive)
    Tensor output; // after ReLU (undefined for the last block)
  };

  const SignMlpConfig& config() const { return config_; }
  int num_blocks() const { return config_.mlp_layers + 1; }
  std::int64_t block_in_dim(int block) const;
  std::int64_t block_out_dim(int block) const;
  // Multiply-adds of one row through the block (for balancing stages).
  std::int64_t block_flops_per_row(int block) const;

  // x: f32 [n, block_in_dim] on the CPU; ids: the n rows' node ids (dropout keys);
  // key.layer is replaced by the block index. Returns [n, block_out_dim].
  Tensor forward(int block, const Tensor& x, std::span<const NodeId> ids, const rng::Key& key,
                 bool training, Saved& saved) const;
  // Adds the block's parameter gradients; returns d/d(block input) or an undefined Tensor.
  Tensor backward(int block, const Tensor& grad_out, const Saved& saved, bool need_input_grad);

  std::vector<Parameter*> parameters(int block);
  std::vector<Parameter*> parameters(); // every block, in block order
  void zero_grad(int first_block, int end_block);

private:
  struct Block {
    std::vector<Parameter> weights; // block 0: one per hop; else one
    std::vector<Parameter> biases;
  };
  SignMlpConfig config_;
  std::vector<Block> blocks_;
};

} // namespace tessel::nn
