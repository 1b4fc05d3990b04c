// GAT: finite-difference gradients of the layer (concatenated and averaged heads, with and
// without attention dropout, on a whole graph and on a block) and of a whole GAT model.
#include "nn_test_util.hpp"

#include "tessel/nn/gat.hpp"
#include "tessel/nn/local_aggregator.hpp"
#include "tessel/nn/loss.hpp"
#include "tessel/nn/model.hpp"

#include <cstring>

namespace tessel {
namespace {

using nn::Parameter;

const rng::Key kInitKey{123, rng::Stream::init, 0, 0, 0};

LocalCsr small_block() {
  // 4 destinations among 7 sources (a sampled block's shape); row 2 has no neighbours but its
  // self loop.
  LocalCsr block;
  block.num_rows = 4;
  block.num_cols = 7;
  block.indptr = {0, 3, 5, 5, 8};
  block.indices = {4, 1, 6, 0, 5, 2, 3, 6};
  return block;
}

void check_layer(const std::string& what, nn::GatLayer& layer, nn::Aggregator& agg, float p) {
  Tensor x = test::random_tensor({agg.num_src(), layer.in_dim()}, 1);
  const Tensor r = test::random_tensor({agg.num_dst(), layer.out_dim()}, 2);
  const rng::Key key{9, rng::Stream::dropout, 1, 0, nn::kAttentionDropoutLayer};
  for (Parameter* q : layer.parameters()) q->grad.fill_zero();
  layer.set_attention_dropout(key, p);
  (void)layer.forward(x, agg);
  const Tensor grad_x = layer.backward(r, true);
  ASSERT_TRUE(grad_x.defined());
  auto loss = [&] { return test::weighted_sum(layer.forward(x, agg), r); };
  for (Parameter* q : layer.parameters())
    test::expect_gradient(what + " " + q->name, q->value, q->grad.clone(), loss, 1e-3, 2e-2, 3e-4);
  test::expect_gradient(what + " input", x, grad_x, loss, 1e-3, 2e-2, 3e-4);
}

TEST(GatGradientCheck, LayerConcatAndAverageOnGraphAndBlock) {
  nn::LocalAggregator whole(test::local_graph(8, test::two_cliques_edges(4)));
  nn::LocalAggregator block(small_block());
  for (const float p : {0.0f, 0.5f}) {
    const std::string tag = p > 0 ? " dropout" : "";
    nn::GatLayer concat("gat", 5, 3, 4, false, kInitKey, Device::cpu());
    nn::GatLayer average("gat", 5, 3, 2, true, kInitKey, Device::cpu());
    EXPECT_EQ(concat.out_dim(), 12);
    EXPECT_EQ(average.out_dim(), 3);
    check_layer("whole concat" + tag, concat, whole, p);
    check_layer("whole average" + tag, average, whole, p);
    check_layer("block concat" + tag, concat, block, p);
    check_layer("block average" + tag, average, block, p);
  }
}

// The attention dropout changes the output, and evaluation (p = 0) is deterministic.
TEST(GatGradientCheck, AttentionDropoutActsOnlyWhenSet) {
  nn::LocalAggregator whole(test::local_graph(8, test::two_cliques_edges(4)));
  nn::GatLayer layer("gat", 5, 3, 2, false, kInitKey, Device::cpu());
  const Tensor x = test::random_tensor({8, 5}, 1);
  const rng::Key key{9, rng::Stream::dropout, 1, 0, nn::kAttentionDropoutLayer};
  layer.set_attention_dropout(key, 0.0f);
  const Tensor plain = layer.forward(x, whole);
  const Tensor again = layer.forward(x, whole);
  layer.set_attention_dropout(key, 0.5f);
  const Tensor dropped = layer.forward(x, whole);
  EXPECT_EQ(std::memcmp(plain.raw(), again.raw(), plain.nbytes()), 0);
  EXPECT_NE(std::memcmp(plain.raw(), dropped.raw(), plain.nbytes()), 0);
}

// A 2-layer GAT (4 heads of 3, 2 averaged output heads): d(mean CE) / d(every parameter), with
// feature and attention dropout (fixed draws: the key does not change between evaluations).
TEST(GatGradientCheck, ModelEveryParameter) {
  const LocalCsr graph = test::local_graph(8, test::two_cliques_edges(4));
  nn::LocalAggregator agg(graph);
  nn::ModelConfig config;
  config.kind = nn::ModelKind::gat;
  config.in_dim = 5;
  config.hidden = 3;
  config.heads = 4;
  config.out_heads = 2;
  config.out_dim = 3;
  config.layers = 2;
  config.dropout = 0.3f;
  config.attn_dropout = 0.3f;
  config.seed = 11;
  nn::Model model(config);
  const Tensor x = test::random_tensor({8, 5}, 9);
  std::vector<nn::Aggregator*> aggs(2, &agg);
  const std::vector<LocalId> rows = {0, 1, 3, 4, 6, 7};
  const std::vector<std::int64_t> labels = {0, 1, 2, 2, 1, 0};
  const double scale = 1.0 / static_cast<double>(rows.size());
  const rng::Key key{5, rng::Stream::dropout, 1, 0, 0};
  model.zero_grad();
  const Tensor logits = model.forward(x, aggs, key, true);
  ASSERT_EQ(logits.shape(), (std::vector<std::int64_t>{8, 3}));
  model.backward(nn::softmax_cross_entropy(logits, rows, labels, scale).grad);
  auto loss_fn = [&] {
    return scale *
           nn::softmax_cross_entropy(model.forward(x, aggs, key, true), rows, labels, scale).loss_sum;
  };
  const auto params = model.parameters();
  ASSERT_EQ(params.size(), 8u);
  EXPECT_EQ(params[0]->value.shape(), (std::vector<std::int64_t>{5, 12}));
  EXPECT_EQ(params[4]->value.shape(), (std::vector<std::int64_t>{12, 6}));
  for (nn::Parameter* p : params)
    test::expect_gradient("gat " + p->name, p->value, p->grad.clone(), loss_fn, 1e-3, 2e-2, 2e-4);
  // Inference equals the forward without dropout.
  const Tensor eval = model.forward(x, aggs, key, false);
  const Tensor inferred = model.infer(x, aggs);
  ASSERT_EQ(inferred.shape(), eval.shape());
  for (std::int64_t i = 0; i < eval.numel(); ++i)
    EXPECT_NEAR(inferred.data<float>()[i], eval.data<float>()[i], 1e-6) << i;
}

} // namespace
} // namespace tessel
