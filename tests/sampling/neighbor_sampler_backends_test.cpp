// The tensor sampler entry on every backend present: CPU tensors, CUDA (when a GPU is visible).
#include "tessel/sampling/neighbor_sampler.hpp"

#include "sampling_graphs.hpp"

#include <gtest/gtest.h>

using namespace tessel;
using namespace tessel::sampling;

namespace {

template <class T> std::vector<T> to_vector(const Tensor& t) {
  const Tensor host = t.device().is_cpu() ? t : t.to(Device::cpu());
  if (host.numel() == 0) return {};
  return std::vector<T>(host.data<T>(), host.data<T>() + host.numel());
}

// A LocalCsr version of the graph (same ids), to exercise 32-bit indices.
LocalCsr to_local(const Csr& g) {
  LocalCsr l;
  l.num_rows = g.num_rows;
  l.num_cols = g.num_cols;
  l.indptr = g.indptr;
  l.indices.assign(g.indices.begin(), g.indices.end());
  return l;
}

struct Case {
  int fanout;
  rng::Key key;
};

const Case kCases[] = {{0, {7, rng::Stream::sampling, 0, 0, 0}},
                       {3, {7, rng::Stream::sampling, 1, 2, 0}},
                       {25, {7, rng::Stream::sampling, 1, 2, 1}},
                       {300, {8, rng::Stream::sampling, 0, 5, 2}},
                       {kAllNeighbors, {7, rng::Stream::sampling, 0, 0, 0}}};

} // namespace

TEST(NeighborSamplerBackends, CpuTensorsMatchTheVectorSampler) {
  const Csr g = test::skewed_graph(1500, 9000, 400, 11);
  const LocalCsr lg = to_local(g);
  std::vector<NodeId> rows64;
  for (NodeId v = 0; v < g.num_rows; v += 3)
    rows64.push_back(v);
  rows64.push_back(g.num_rows / 2); // the hub, for the bitmap path
  std::vector<LocalId> rows32(rows64.begin(), rows64.end());
  std::vector<NodeId> keys(rows64);
  for (auto& k : keys)
    k = k * 7919 + 13; // keys need not equal the row ids
  for (const Case& c : kCases) {
    const auto want64 = sample_neighbors(g, rows64, keys, c.fanout, c.key);
    const auto got64 =
        sample_neighbors(Tensor::from_vector(g.indptr), Tensor::from_vector(g.indices),
                         Tensor::from_vector(rows64), Tensor::from_vector(keys), c.fanout, c.key);
    EXPECT_EQ(to_vector<EdgeId>(got64.offsets), want64.offsets);
    EXPECT_EQ(to_vector<NodeId>(got64.neighbors), want64.neighbors);
    const auto want32 = sample_neighbors(lg, rows32, keys, c.fanout, c.key);
    const auto got32 =
        sample_neighbors(Tensor::from_vector(lg.indptr), Tensor::from_vector(lg.indices),
                         Tensor::from_vector(rows32), Tensor::from_vector(keys), c.fanout, c.key);
    EXPECT_EQ(to_vector<LocalId>(got32.neighbors), want32.neighbors);
    // 32- and 64-bit graphs with the same ids draw the same neighbors.
    EXPECT_TRUE(std::equal(want32.neighbors.begin(), want32.neighbors.end(),
                           want64.neighbors.begin(), want64.neighbors.end()));
  }
}

TEST(NeighborSamplerBackends, CudaMatchesCpu) {
  if (!device_memory::cuda_available()) {
    GTEST_SKIP() << "no CUDA device visible: the CPU vs CUDA sampler comparison was not run";
  }
  const Csr g = test::skewed_graph(5000, 40000, 1000, 12);
  const LocalCsr lg = to_local(g);
  std::vector<NodeId> rows64;
  for (NodeId v = 0; v < g.num_rows; ++v)
    rows64.push_back((v * 37) % g.num_rows);
  std::vector<LocalId> rows32(rows64.begin(), rows64.end());
  const std::vector<NodeId> keys(rows64);
  const Device gpu = Device::cuda(0);
  for (const Case& c : kCases) {
    const auto cpu64 = sample_neighbors(g, rows64, keys, c.fanout, c.key);
    const auto gpu64 = sample_neighbors(
        Tensor::from_vector(g.indptr).to(gpu), Tensor::from_vector(g.indices).to(gpu),
        Tensor::from_vector(rows64).to(gpu), Tensor::from_vector(keys).to(gpu), c.fanout, c.key);
    EXPECT_TRUE(gpu64.neighbors.device().is_cuda());
    EXPECT_EQ(to_vector<EdgeId>(gpu64.offsets), cpu64.offsets) << "fanout " << c.fanout;
    EXPECT_EQ(to_vector<NodeId>(gpu64.neighbors), cpu64.neighbors) << "fanout " << c.fanout;
    const auto cpu32 = sample_neighbors(lg, rows32, keys, c.fanout, c.key);
    const auto gpu32 = sample_neighbors(
        Tensor::from_vector(lg.indptr).to(gpu), Tensor::from_vector(lg.indices).to(gpu),
        Tensor::from_vector(rows32).to(gpu), Tensor::from_vector(keys).to(gpu), c.fanout, c.key);
    EXPECT_EQ(to_vector<LocalId>(gpu32.neighbors), cpu32.neighbors) << "fanout " << c.fanout;
  }
  // A row outside the graph is reported, not read.
  const std::vector<NodeId> bad{0, g.num_rows};
  EXPECT_THROW(sample_neighbors(Tensor::from_vector(g.indptr).to(gpu),
                                Tensor::from_vector(g.indices).to(gpu),
                                Tensor::from_vector(bad).to(gpu), Tensor::from_vector(bad).to(gpu),
                                3, kCases[1].key),
               InputError);
}

TEST(NeighborSamplerBackends, BadTensorsAreInputErrors) {
  const Csr g = test::symmetric_csr(4, test::path_edges(4));
  const Tensor indptr = Tensor::from_vector(g.indptr);
  const Tensor indices = Tensor::from_vector(g.indices);
  const Tensor rows = Tensor::from_vector(std::vector<NodeId>{0, 1});
  const Tensor rows32 = Tensor::from_vector(std::vector<LocalId>{0, 1});
  const Tensor keys = Tensor::from_vector(std::vector<NodeId>{0, 1});
  const Tensor one_key = Tensor::from_vector(std::vector<NodeId>{0});
  const rng::Key key{1, rng::Stream::sampling};
  EXPECT_THROW(sample_neighbors(indptr, indices, rows32, keys, 2, key), InputError);
  EXPECT_THROW(sample_neighbors(indptr, indices, rows, one_key, 2, key), InputError);
  EXPECT_THROW(sample_neighbors(indices.reshape({static_cast<std::int64_t>(g.indices.size()), 1}),
                                indices, rows, keys, 2, key),
               InputError);
  EXPECT_THROW(
      sample_neighbors(Tensor::from_vector(std::vector<float>{0.f}), indices, rows, keys, 2, key),
      InputError);
}
