// Finite-difference gradient checks of every layer, the loss and the whole 2-layer models.
#include "nn_test_util.hpp"

#include "tessel/nn/layers.hpp"
#include "tessel/nn/local_aggregator.hpp"
#include "tessel/nn/loss.hpp"
#include "tessel/nn/model.hpp"

#include <numeric>

namespace tessel {
namespace {

using nn::Parameter;

const rng::Key kInitKey{123, rng::Stream::init, 0, 0, 0};

void zero(std::vector<Parameter*> params) {
  for (Parameter* p : params)
    p->grad.fill_zero();
}

// Checks d(sum r * layer(x)) / d(every parameter and x) for a graph layer on `agg`.
template <class Layer>
void check_graph_layer(const std::string& what, Layer& layer, nn::Aggregator& agg) {
  Tensor x = test::random_tensor({agg.num_src(), layer.in_dim()}, 1);
  const Tensor r = test::random_tensor({agg.num_dst(), layer.out_dim()}, 2);
  zero(layer.parameters());
  (void)layer.forward(x, agg);
  const Tensor grad_x = layer.backward(r, true);
  ASSERT_TRUE(grad_x.defined());
  auto loss = [&] { return test::weighted_sum(layer.forward(x, agg), r); };
  for (Parameter* p : layer.parameters()) {
    const Tensor analytic = p->grad.clone();
    test::expect_gradient(what + " " + p->name, p->value, analytic, loss);
  }
  test::expect_gradient(what + " input", x, grad_x, loss);
}

TEST(GradientCheck, Linear) {
  nn::Linear layer("lin", 4, 3, kInitKey, Device::cpu());
  Tensor x = test::random_tensor({5, 4}, 1);
  const Tensor r = test::random_tensor({5, 3}, 2);
  zero(layer.parameters());
  (void)layer.forward(x);
  const Tensor grad_x = layer.backward(r, true);
  auto loss = [&] { return test::weighted_sum(layer.forward(x), r); };
  for (Parameter* p : layer.parameters())
    test::expect_gradient(p->name, p->value, p->grad.clone(), loss);
  test::expect_gradient("input", x, grad_x, loss);
  EXPECT_FALSE(layer.backward(r, false).defined());
}

TEST(GradientCheck, GcnLayerBothOrdersOnTinyGraphs) {
  const std::vector<std::pair<std::string, LocalCsr>> graphs = {
      {"path5", test::local_graph(5, test::path_edges(5))},
      {"cycle6", test::local_graph(6, test::cycle_edges(6))},
      {"two_cliques3", test::local_graph(6, test::two_cliques_edges(3))}};
  for (const auto& [name, graph] : graphs) {
    nn::LocalAggregator agg(graph);
    nn::GcnLayer aggregate_first("gcn", 3, 4, kInitKey, Device::cpu()); // out >= in
    nn::GcnLayer transform_first("gcn", 4, 2, kInitKey, Device::cpu()); // out < in
    ASSERT_FALSE(aggregate_first.transforms_first());
    ASSERT_TRUE(transform_first.transforms_first());
    check_graph_layer(name + " aggregate-first", aggregate_first, agg);
    check_graph_layer(name + " transform-first", transform_first, agg);
  }
}

TEST(GradientCheck, SageLayerBothOrdersWithFewerDestinationsThanSources) {
  // 4 destinations among 7 sources (a sampled block's shape); row 2 has no neighbors.
  LocalCsr block;
  block.num_rows = 4;
  block.num_cols = 7;
  block.indptr = {0, 3, 5, 5, 8};
  block.indices = {4, 1, 6, 0, 5, 2, 3, 6};
  nn::LocalAggregator agg(block);
  nn::SageLayer aggregate_first("sage", 3, 4, kInitKey, Device::cpu());
  nn::SageLayer transform_first("sage", 5, 2, kInitKey, Device::cpu());
  check_graph_layer("block aggregate-first", aggregate_first, agg);
  check_graph_layer("block transform-first", transform_first, agg);
  nn::LocalAggregator whole(test::local_graph(6, test::two_cliques_edges(3)));
  check_graph_layer("two cliques", aggregate_first, whole);
}

TEST(GradientCheck, Relu) {
  // Inputs at least 0.1 away from the kink, steps of 1e-2: each difference stays on one side.
  Tensor x = test::random_tensor({6, 5}, 3, 0.1f, 1.0f);
  for (std::int64_t i = 0; i < x.numel(); i += 2)
    x.data<float>()[i] *= -1.0f;
  const Tensor r = test::random_tensor({6, 5}, 4);
  nn::Relu relu;
  (void)relu.forward(x);
  const Tensor grad_x = relu.backward(r);
  test::expect_gradient("relu", x, grad_x, [&] { return test::weighted_sum(relu.forward(x), r); });
}

TEST(GradientCheck, DropoutWithItsFixedMask) {
  Tensor x = test::random_tensor({8, 6}, 5);
  const Tensor r = test::random_tensor({8, 6}, 6);
  std::vector<NodeId> ids(8);
  std::iota(ids.begin(), ids.end(), 100);
  const rng::Key key{7, rng::Stream::dropout, 2, 0, 1};
  nn::Dropout dropout(0.4f);
  (void)dropout.forward(x, ids, key, true);
  const Tensor mask = dropout.mask().clone();
  const Tensor grad_x = dropout.backward(r);
  // Same key and ids: every forward in the difference quotient draws the same mask.
  test::expect_gradient("dropout", x, grad_x, [&] {
    const Tensor y = dropout.forward(x, ids, key, true);
    EXPECT_EQ(std::memcmp(dropout.mask().raw(), mask.raw(), mask.nbytes()), 0);
    return test::weighted_sum(y, r);
  });
  // Not training: identity, gradient passes through.
  EXPECT_EQ(dropout.forward(x, ids, key, false).raw(), x.raw());
}

TEST(GradientCheck, SoftmaxCrossEntropyWithScale) {
  Tensor logits = test::random_tensor({7, 4}, 8, -2.0f, 2.0f);
  const std::vector<LocalId> rows = {0, 2, 3, 6};
  const std::vector<std::int64_t> labels = {1, 0, 3, 3};
  const double scale = 0.25;
  const nn::LossResult result = nn::softmax_cross_entropy(logits, rows, labels, scale);
  EXPECT_EQ(result.count, 4);
  test::expect_gradient(
      "softmax_xent", logits, result.grad,
      [&] { return scale * nn::softmax_cross_entropy(logits, rows, labels, scale).loss_sum; }, 1e-2,
      1e-2, 1e-4);
}

// The whole model: d(mean CE over training rows) / d(every parameter), dropout on (fixed
// masks: the key does not change between evaluations).
void check_model(const std::string& kind, int layers = 2, std::int64_t in_dim = 5,
                 std::int64_t hidden = 4) {
  const LocalCsr graph = test::local_graph(8, test::two_cliques_edges(4));
  nn::LocalAggregator agg(graph);
  nn::ModelConfig config;
  config.kind = option_value<nn::ModelKind>(kind);
  config.in_dim = in_dim;
  config.hidden = hidden;
  config.out_dim = 3;
  config.layers = layers;
  config.dropout = 0.3f;
  config.seed = 11;
  nn::Model model(config);
  const Tensor x = test::random_tensor({8, in_dim}, 9);
  std::vector<nn::Aggregator*> aggs(static_cast<std::size_t>(layers), &agg);
  const std::vector<LocalId> rows = {0, 1, 3, 4, 6, 7};
  const std::vector<std::int64_t> labels = {0, 1, 2, 2, 1, 0};
  const double scale = 1.0 / static_cast<double>(rows.size());
  const rng::Key key{5, rng::Stream::dropout, 1, 0, 0};
  model.zero_grad();
  const Tensor logits = model.forward(x, aggs, key, true);
  ASSERT_EQ(logits.shape(), (std::vector<std::int64_t>{8, 3}));
  const nn::LossResult loss = nn::softmax_cross_entropy(logits, rows, labels, scale);
  model.backward(loss.grad);
  auto loss_fn = [&] {
    return scale * nn::softmax_cross_entropy(model.forward(x, aggs, key, true), rows, labels, scale)
                       .loss_sum;
  };
  const auto params = model.parameters();
  ASSERT_EQ(params.size(), static_cast<std::size_t>(layers) * (kind == "gcn" ? 2u : 3u));
  // Step 1e-3: with 1e-2 a hidden pre-activation of this model lies within one step of the
  // ReLU kink and the difference quotient straddles it (seen on layer0 column 3 only).
  for (nn::Parameter* p : params)
    test::expect_gradient(kind + " " + p->name, p->value, p->grad.clone(), loss_fn, 1e-3, 2e-2,
                          2e-4);
}

TEST(GradientCheck, GcnModelEveryParameter) {
  check_model("gcn");
}
TEST(GradientCheck, SageModelEveryParameter) {
  check_model("sage");
}
// Three layers, the first aggregating before it transforms (fewer input than hidden columns):
// the layers after the first get dropout(ReLU(.)) inputs and the self term of every layer.
TEST(GradientCheck, ThreeLayerModelsEveryParameter) {
  check_model("gcn", 3, 3, 6);
  check_model("sage", 3, 3, 6);
  check_model("sage", 3, 6, 4);
}

} // namespace
} // namespace tessel
