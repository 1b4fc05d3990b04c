// Model semantics: Glorot init from the seed, aggregation weights per Norm, dropout keyed by
// node ids, row normalization, shapes and errors, and a short training run that learns.
#include "nn_test_util.hpp"

#include "tessel/nn/layers.hpp"
#include "tessel/nn/local_aggregator.hpp"
#include "tessel/nn/loss.hpp"
#include "tessel/nn/model.hpp"
#include "tessel/nn/optimizer.hpp"

#include <algorithm>
#include <numeric>

namespace tessel {
namespace {

nn::ModelConfig small_config(const std::string& kind, float dropout = 0.0f) {
  nn::ModelConfig c;
  c.kind = option_value<nn::ModelKind>(kind);
  c.in_dim = 6;
  c.hidden = 5;
  c.out_dim = 3;
  c.layers = 2;
  c.dropout = dropout;
  c.seed = 77;
  return c;
}

TEST(Init, GlorotUniformIsDeterministicFromTheSeedAndBounded) {
  for (const std::string kind : {"gcn", "sage"}) {
    nn::Model a(small_config(kind)), b(small_config(kind));
    auto other_config = small_config(kind);
    other_config.seed = 78;
    nn::Model c(other_config);
    const auto pa = a.parameters(), pb = b.parameters(), pc = c.parameters();
    ASSERT_EQ(pa.size(), pb.size());
    for (std::size_t i = 0; i < pa.size(); ++i) {
      EXPECT_EQ(pa[i]->name, pb[i]->name);
      EXPECT_EQ(std::memcmp(pa[i]->value.raw(), pb[i]->value.raw(), pa[i]->value.nbytes()), 0)
          << pa[i]->name;
      if (pa[i]->value.dim() == 2) {
        EXPECT_NE(std::memcmp(pa[i]->value.raw(), pc[i]->value.raw(), pa[i]->value.nbytes()), 0);
        const double limit =
            std::sqrt(6.0 / static_cast<double>(pa[i]->value.rows() + pa[i]->value.cols()));
        for (std::int64_t j = 0; j < pa[i]->value.numel(); ++j)
          EXPECT_LE(std::fabs(pa[i]->value.data<float>()[j]), limit);
      } else {
        for (std::int64_t j = 0; j < pa[i]->value.numel(); ++j)
          EXPECT_EQ(pa[i]->value.data<float>()[j], 0.0f) << "biases start at zero";
      }
    }
  }
  // Large draws: mean ~ 0 and variance ~ limit^2 / 3.
  const Tensor w = nn::glorot_uniform(200, 300, rng::Key{1}, 0);
  double mean = 0, sq = 0;
  for (std::int64_t i = 0; i < w.numel(); ++i) {
    mean += w.data<float>()[i];
    sq += double(w.data<float>()[i]) * w.data<float>()[i];
  }
  mean /= w.numel();
  sq /= w.numel();
  EXPECT_NEAR(mean, 0.0, 0.005);
  EXPECT_NEAR(sq, 6.0 / 500 / 3, 0.0005);
  nn::ModelConfig names = small_config("sage");
  nn::Model sage(names);
  std::vector<std::string> got;
  for (auto* p : sage.parameters())
    got.push_back(p->name);
  EXPECT_EQ(got,
            (std::vector<std::string>{"layer0.self_weight", "layer0.neigh_weight", "layer0.bias",
                                      "layer1.self_weight", "layer1.neigh_weight", "layer1.bias"}));
}

// Dense Â from aggregator.hpp's definition.
std::vector<double> dense_norm(const LocalCsr& g, nn::Norm norm) {
  const auto n = g.num_rows;
  std::vector<double> a(static_cast<std::size_t>(n * g.num_cols), 0.0);
  for (std::int64_t v = 0; v < n; ++v) {
    const double dv = static_cast<double>(g.degree(v));
    if (norm == nn::Norm::gcn) {
      a[v * g.num_cols + v] += 1.0 / (dv + 1);
      for (EdgeId e = g.indptr[v]; e < g.indptr[v + 1]; ++e) {
        const auto u = g.indices[e];
        a[v * g.num_cols + u] += 1.0 / std::sqrt((dv + 1) * (static_cast<double>(g.degree(u)) + 1));
      }
    } else {
      for (EdgeId e = g.indptr[v]; e < g.indptr[v + 1]; ++e)
        a[v * g.num_cols + g.indices[e]] += 1.0 / dv;
    }
  }
  return a;
}

TEST(LocalAggregator, MatchesTheDocumentedNormalizations) {
  // Path plus an isolated node 6 (mean row of an isolated node is 0).
  auto edges = test::path_edges(6);
  const LocalCsr g = test::local_graph(7, edges);
  nn::LocalAggregator agg(g);
  const Tensor x = test::random_tensor({7, 3}, 1);
  for (nn::Norm norm : {nn::Norm::gcn, nn::Norm::mean}) {
    const auto a = dense_norm(g, norm);
    const Tensor y = agg.aggregate(x, norm);
    for (int v = 0; v < 7; ++v)
      for (int j = 0; j < 3; ++j) {
        double expected = 0;
        for (int u = 0; u < 7; ++u)
          expected += a[v * 7 + u] * x.data<float>()[u * 3 + j];
        EXPECT_NEAR(y.data<float>()[v * 3 + j], expected, 1e-6) << int(norm) << " " << v;
      }
    // Backward is the transpose: <A x, z> == <x, A^T z>.
    const Tensor z = test::random_tensor({7, 3}, 2);
    const Tensor atz = agg.aggregate_backward(z, norm);
    EXPECT_NEAR(test::weighted_sum(y, z), test::weighted_sum(atz, x), 1e-5);
  }
  const Tensor isolated = agg.aggregate(x, nn::Norm::mean);
  for (int j = 0; j < 3; ++j)
    EXPECT_EQ(isolated.data<float>()[6 * 3 + j], 0.0f);
  LocalCsr rectangular = g;
  rectangular.num_cols = 9;
  nn::LocalAggregator block(rectangular);
  EXPECT_THROW(block.aggregate(test::random_tensor({9, 2}, 3), nn::Norm::gcn), InputError);
  EXPECT_NO_THROW(block.aggregate(test::random_tensor({9, 2}, 3), nn::Norm::mean));
}

TEST(GcnLayer, BothOrdersComputeTheSameFunction) {
  const LocalCsr g = test::local_graph(6, test::two_cliques_edges(3));
  nn::LocalAggregator agg(g);
  const auto a = dense_norm(g, nn::Norm::gcn);
  for (auto [in, out] : {std::pair<int, int>{4, 2}, {2, 4}, {3, 3}}) {
    nn::GcnLayer layer("gcn", in, out, rng::Key{3}, Device::cpu());
    const Tensor x = test::random_tensor({6, in}, 4);
    const Tensor y = layer.forward(x, agg);
    const auto params = layer.parameters();
    const Tensor& w = params[0]->value;
    for (int v = 0; v < 6; ++v)
      for (int j = 0; j < out; ++j) {
        double expected = 0;
        for (int u = 0; u < 6; ++u)
          for (int k = 0; k < in; ++k)
            expected += a[v * 6 + u] * x.data<float>()[u * in + k] * w.data<float>()[k * out + j];
        EXPECT_NEAR(y.data<float>()[v * out + j], expected, 1e-5);
      }
  }
}

TEST(Model, DropoutMasksFollowNodeIdsNotRowOrder) {
  // Relabel the nodes of a graph by a permutation; src_ids carry the original ids. With
  // dropout on, the logits of each node must be the same in both labelings.
  const NodeId n = 10;
  const LocalCsr g = test::local_graph(n, test::two_cliques_edges(5));
  std::vector<NodeId> perm(n); // new label of old node i
  for (NodeId i = 0; i < n; ++i)
    perm[i] = (i * 7 + 3) % n;
  std::vector<std::pair<NodeId, NodeId>> relabeled;
  for (auto [u, v] : test::two_cliques_edges(5))
    relabeled.emplace_back(perm[u], perm[v]);
  const LocalCsr h = test::local_graph(n, relabeled);
  std::vector<NodeId> ids(n); // original id of the node at new label j
  for (NodeId i = 0; i < n; ++i)
    ids[perm[i]] = i;
  nn::LocalAggregator agg_g(g), agg_h(h, Device::cpu(), ids);
  const Tensor x = test::random_tensor({n, 6}, 5);
  Tensor x_h = Tensor::empty({n, 6}, DType::f32);
  for (NodeId i = 0; i < n; ++i)
    std::copy_n(x.data<float>() + i * 6, 6, x_h.data<float>() + perm[i] * 6);
  for (const std::string kind : {"gcn", "sage"}) {
    nn::Model model(small_config(kind, 0.5f));
    std::vector<nn::Aggregator*> aggs_g = {&agg_g, &agg_g}, aggs_h = {&agg_h, &agg_h};
    const rng::Key key{9, rng::Stream::dropout, 4, 0, 0};
    const Tensor out_g = model.forward(x, aggs_g, key, true);
    const Tensor out_h = model.forward(x_h, aggs_h, key, true);
    for (NodeId i = 0; i < n; ++i)
      for (int j = 0; j < 3; ++j)
        EXPECT_NEAR(out_g.data<float>()[i * 3 + j], out_h.data<float>()[perm[i] * 3 + j], 1e-5)
            << kind << " node " << i;
    // Another epoch's key draws other masks; evaluation (no dropout) is deterministic.
    rng::Key next = key;
    next.epoch = 5;
    const Tensor out_next = model.forward(x, aggs_g, next, true);
    EXPECT_NE(std::memcmp(out_next.raw(), out_g.raw(), out_g.nbytes()), 0);
    const Tensor eval1 = model.forward(x, aggs_g, key, false);
    const Tensor eval2 = model.forward(x, aggs_g, next, false);
    EXPECT_EQ(std::memcmp(eval1.raw(), eval2.raw(), eval1.nbytes()), 0);
  }
}

TEST(Model, InferEqualsEvaluationForwardAndReportsEachLayer) {
  const NodeId n = 10;
  const LocalCsr g = test::local_graph(n, test::two_cliques_edges(5));
  nn::LocalAggregator agg(g);
  const Tensor x = test::random_tensor({n, 6}, 7);
  for (const std::string kind : {"gcn", "sage"}) {
    nn::Model model(small_config(kind, 0.5f));
    std::vector<nn::Aggregator*> aggs = {&agg, &agg};
    const Tensor expected = model.forward(x, aggs, rng::Key{}, false);
    std::vector<int> layers_done;
    const Tensor inferred = model.infer(x, aggs, [&](int l) { layers_done.push_back(l); });
    ASSERT_EQ(inferred.shape(), expected.shape());
    EXPECT_EQ(std::memcmp(inferred.raw(), expected.raw(), expected.nbytes()), 0) << kind;
    EXPECT_EQ(layers_done, (std::vector<int>{0, 1})) << kind;
    // Inference keeps nothing for a backward pass.
    EXPECT_THROW(model.backward(test::random_tensor({n, 3}, 1)), InputError) << kind;
  }
}

TEST(Model, InferBlocksMatchesInferAndReadsEachRowInItsBlock) {
  const NodeId n = 10;
  const LocalCsr g = test::local_graph(n, test::two_cliques_edges(5));
  nn::LocalAggregator agg(g);
  // Wider and narrower inputs than the hidden layer: forward() takes both orders there, the
  // blocks always transform first.
  for (const int in_dim : {3, 6, 9}) {
    const Tensor x = test::random_tensor({n, in_dim}, 11);
    for (const std::string kind : {"gcn", "sage"}) {
      nn::ModelConfig config = small_config(kind);
      config.in_dim = in_dim;
      nn::Model model(config);
      ASSERT_TRUE(model.infer_blocks_possible());
      std::vector<nn::Aggregator*> aggs = {&agg, &agg};
      Tensor hidden_whole, hidden_blocks;
      const Tensor expected = model.infer(x, aggs, {}, &hidden_whole);
      std::vector<std::pair<std::int64_t, std::int64_t>> asked;
      auto rows = [&](std::int64_t begin, std::int64_t end, Tensor& block) {
        asked.emplace_back(begin, end);
        ASSERT_EQ(block.rows(), end - begin);
        std::copy_n(x.data<float>() + begin * in_dim, (end - begin) * in_dim, block.data<float>());
      };
      std::vector<int> layers_done;
      const Tensor got = model.infer_blocks(rows, n, 4, aggs,
                                            [&](int l) { layers_done.push_back(l); },
                                            &hidden_blocks);
      ASSERT_EQ(got.shape(), expected.shape());
      for (std::int64_t i = 0; i < got.numel(); ++i)
        EXPECT_NEAR(got.data<float>()[i], expected.data<float>()[i],
                    1e-5 * (1 + std::abs(expected.data<float>()[i])))
            << kind << " " << in_dim << " " << i;
      ASSERT_EQ(hidden_blocks.shape(), hidden_whole.shape());
      EXPECT_EQ(layers_done, (std::vector<int>{0, 1}));
      // Blocks of 4 rows: [0,4) [4,8) [8,10), once for GCN, twice for SAGE (its self term).
      const std::vector<std::pair<std::int64_t, std::int64_t>> pass = {{0, 4}, {4, 8}, {8, 10}};
      std::vector<std::pair<std::int64_t, std::int64_t>> want = pass;
      if (kind == "sage") want.insert(want.end(), pass.begin(), pass.end());
      EXPECT_EQ(asked, want) << kind;
      // The same rows from another source give the same bits.
      const Tensor copy = x.clone();
      const Tensor again = model.infer_blocks(
          [&](std::int64_t begin, std::int64_t end, Tensor& block) {
            std::copy_n(copy.data<float>() + begin * in_dim, (end - begin) * in_dim,
                        block.data<float>());
          },
          n, 4, aggs);
      EXPECT_EQ(std::memcmp(again.raw(), got.raw(), got.nbytes()), 0) << kind;
    }
  }
  nn::ModelConfig gat = small_config("gat");
  EXPECT_FALSE(nn::Model(gat).infer_blocks_possible());
}

TEST(Model, ConfigAndShapeErrorsAreClear) {
  EXPECT_THROW(option_value<nn::ModelKind>("gin"), InputError);
  auto bad = small_config("gcn");
  bad.kind = nn::ModelKind::sign_mlp;  // not a GNN model kind
  EXPECT_THROW(nn::Model{bad}, InputError);
  bad = small_config("gcn");
  bad.dropout = 1.0f;
  EXPECT_THROW(nn::Model{bad}, InputError);
  nn::Model model(small_config("gcn"));
  const LocalCsr g = test::local_graph(4, test::path_edges(4));
  nn::LocalAggregator agg(g);
  std::vector<nn::Aggregator*> one = {&agg};
  EXPECT_THROW(model.forward(test::random_tensor({4, 6}, 1), one, rng::Key{}, false), InputError);
  std::vector<nn::Aggregator*> two = {&agg, &agg};
  EXPECT_THROW(model.forward(test::random_tensor({4, 5}, 1), two, rng::Key{}, false), InputError);
  EXPECT_THROW(model.backward(test::random_tensor({4, 3}, 1)), InputError); // no forward yet
  nn::ModelConfig one_layer = small_config("sage");
  one_layer.layers = 1;
  nn::Model linear_model(one_layer);
  EXPECT_EQ(linear_model.forward(test::random_tensor({4, 6}, 1), one, rng::Key{}, false).cols(), 3);
}

TEST(Features, NormalizeRows) {
  Tensor x = Tensor::from_vector<float>({1, 1, 2, 0, 0, 0}, {2, 3});
  nn::normalize_rows(x);
  EXPECT_FLOAT_EQ(x.data<float>()[0], 0.25f);
  EXPECT_FLOAT_EQ(x.data<float>()[2], 0.5f);
  EXPECT_FLOAT_EQ(x.data<float>()[4], 0.0f);
}

// Two cliques, labels by clique, features = noisy clique indicator: a 2-layer GCN with Adam
// must fit the training nodes quickly.
TEST(Model, TrainingReducesLossOnTwoCliques) {
  for (const std::string kind : {"gcn", "sage"}) {
    const NodeId k = 6;
    const LocalCsr g = test::local_graph(2 * k, test::two_cliques_edges(k));
    nn::LocalAggregator agg(g);
    Tensor x = test::random_tensor({2 * k, 4}, 3, 0.0f, 0.3f);
    for (NodeId v = 0; v < 2 * k; ++v)
      x.data<float>()[v * 4 + (v < k ? 0 : 1)] += 1.0f;
    nn::normalize_rows(x);
    auto config = small_config(kind, 0.1f);
    config.in_dim = 4;
    config.out_dim = 2;
    config.hidden = 8;
    nn::Model model(config);
    nn::OptimizerConfig oc;
    oc.lr = 0.05f;
    oc.weight_decay = 5e-4f;
    auto optimizer = nn::make_optimizer(oc);
    std::vector<LocalId> rows = {0, 1, 2, 7, 8, 9};
    std::vector<std::int64_t> labels = {0, 0, 0, 1, 1, 1};
    std::vector<nn::Aggregator*> aggs = {&agg, &agg};
    double first = 0, last = 0;
    for (int epoch = 0; epoch < 40; ++epoch) {
      model.zero_grad();
      const Tensor logits =
          model.forward(x, aggs, rng::Key{1, rng::Stream::dropout, std::uint32_t(epoch)}, true);
      const auto loss = nn::softmax_cross_entropy(logits, rows, labels, 1.0 / rows.size());
      model.backward(loss.grad);
      optimizer->step(model.parameters());
      (epoch == 0 ? first : last) = loss.loss_sum / rows.size();
    }
    EXPECT_LT(last, 0.5 * first) << kind;
    std::vector<LocalId> all(2 * k);
    std::iota(all.begin(), all.end(), 0);
    std::vector<std::int64_t> truth(2 * k);
    for (NodeId v = 0; v < 2 * k; ++v)
      truth[v] = v < k ? 0 : 1;
    EXPECT_EQ(nn::count_correct(model.forward(x, aggs, rng::Key{}, false), all, truth), 2 * k)
        << kind;
  }
}

TEST(Model, CudaDeviceRunsWhereAGpuIsPresent) {
  if (!device_memory::cuda_available()) {
    std::fprintf(stderr, "no CUDA device: the CUDA model comparison was not run\n");
    return;
  }
  const LocalCsr g = test::local_graph(8, test::two_cliques_edges(4));
  nn::LocalAggregator cpu_agg(g), cuda_agg(g, Device::cuda(0));
  for (const std::string kind : {"gcn", "sage"}) {
    auto config = small_config(kind, 0.5f);
    nn::Model cpu_model(config);
    config.device = Device::cuda(0);
    nn::Model cuda_model(config);
    const Tensor x = test::random_tensor({8, 6}, 1);
    std::vector<nn::Aggregator*> ca = {&cpu_agg, &cpu_agg}, ga = {&cuda_agg, &cuda_agg};
    const rng::Key key{2, rng::Stream::dropout, 1};
    const Tensor lc = cpu_model.forward(x, ca, key, true);
    const Tensor lg = cuda_model.forward(x.to(Device::cuda(0)), ga, key, true).to(Device::cpu());
    for (std::int64_t i = 0; i < lc.numel(); ++i)
      EXPECT_NEAR(lc.data<float>()[i], lg.data<float>()[i], 1e-5);
    const std::vector<LocalId> rows = {0, 5};
    const std::vector<std::int64_t> labels = {1, 2};
    cpu_model.zero_grad();
    cuda_model.zero_grad();
    cpu_model.backward(nn::softmax_cross_entropy(lc, rows, labels, 0.5).grad);
    cuda_model.backward(nn::softmax_cross_entropy(lg.to(Device::cuda(0)), rows, labels, 0.5).grad);
    const auto pc = cpu_model.parameters(), pg = cuda_model.parameters();
    for (std::size_t i = 0; i < pc.size(); ++i) {
      const Tensor gg = pg[i]->grad.to(Device::cpu());
      for (std::int64_t j = 0; j < gg.numel(); ++j)
        EXPECT_NEAR(pc[i]->grad.data<float>()[j], gg.data<float>()[j], 1e-5) << pc[i]->name;
    }
  }
}

} // namespace
} // namespace tessel

namespace tessel {
namespace {

// The memory design of a training step, measured with the host allocator's counters (the CUDA
// twin allocates the same tensors from the device cache). Besides the features, the graph
// matrices and the parameters, a 2-layer step with dropout 0.5 holds at most two [N, hidden]
// f32 activations at once for GCN (layer 0's aggregation, plus the dropped features, then
// layer 0's output, then layer 1's input gradient), and three for GraphSAGE (its layer 0
// redraws the dropped features in chunks, here one chunk of all N rows), plus [N, classes]
// tensors and one bit per hidden element. The step as first written (ReLU output, u8 masks,
// dropped copies and a halo copy kept) held about seven.
TEST(ModelMemory, TwoLayerStepHoldsTwoOrThreeHiddenActivations) {
  const std::int64_t n = 6000, f = 48, hidden = 48, classes = 4;
  std::vector<std::pair<NodeId, NodeId>> edges;
  for (NodeId v = 0; v < n; ++v) {
    edges.emplace_back(v, (v + 1) % n);
    edges.emplace_back(v, (v * 7 + 3) % n);
  }
  const LocalCsr graph = test::local_graph(n, edges);
  nn::LocalAggregator agg(graph);
  std::vector<nn::Aggregator*> aggs{&agg, &agg};
  Tensor x = Tensor::empty({n, f}, DType::f32);
  for (std::int64_t i = 0; i < n * f; ++i)
    x.data<float>()[i] = static_cast<float>((i * 37) % 101) / 101.0f;
  std::vector<LocalId> rows(n);
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<std::int64_t> labels(n);
  for (std::int64_t i = 0; i < n; ++i)
    labels[i] = i % classes;
  const std::int64_t unit = n * hidden * 4, small = n * classes * 4;
  for (const std::string kind : {"gcn", "sage"}) {
    SCOPED_TRACE(kind);
    nn::ModelConfig config;
    config.kind = option_value<nn::ModelKind>(kind);
    config.in_dim = f;
    config.hidden = hidden;
    config.out_dim = classes;
    config.dropout = 0.5f;
    nn::Model model(config);
    auto step = [&](std::uint32_t epoch) {
      model.zero_grad();
      Tensor logits = model.forward(x, aggs, rng::Key{5, rng::Stream::dropout, epoch, 0, 0}, true);
      const nn::LossResult loss = nn::softmax_cross_entropy(logits, rows, labels, 1.0 / n);
      logits = Tensor();
      model.backward(loss.grad);
      return loss.loss_sum;
    };
    step(1); // builds the aggregation matrices and the bit buffers
    const auto before = device_memory::stats(Device::cpu());
    device_memory::reset_peak(Device::cpu());
    const double loss = step(2);
    const auto after = device_memory::stats(Device::cpu());
    EXPECT_TRUE(std::isfinite(loss));
    const std::int64_t step_bytes = after.peak_bytes_in_use - before.bytes_in_use;
    const std::int64_t activations = kind == "gcn" ? 2 : 3;
    EXPECT_LE(step_bytes, activations * unit + 6 * small + n * hidden / 8 + (1 << 16))
        << "a step held " << double(step_bytes) / unit << " [N, hidden] activations";
    // The counters see the step at all (layer 0's aggregation alone is one activation).
    EXPECT_GE(step_bytes, unit);
    // Nothing a step allocates outlives it but the bit buffer it reuses.
    EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  }
}

} // namespace
} // namespace tessel
