// The device-resident sampling path on the CPU (the device graph's CPU twin), at 1, 2 and 4
// ranks: sample_device's blocks, kept as tensors, are exactly sample()'s host blocks (sources in
// the same order, the same edges, the same original ids and degrees) over several epochs, steps
// and layers, with whole-row fanouts, and its traffic counters are sample()'s; owners drawing
// with the CPU twin inside sample() draw what the CPU sampler draws.
#include "tessel/comm/mpi_communicator.hpp"
#include "tessel/partition/part.hpp"
#include "tessel/dist/distributed_sampler.hpp"

#include "test_support.hpp"
#include "tier_checks.hpp"

#include <gtest/gtest.h>

#include <cstring>

using namespace tessel;
namespace fs = std::filesystem;

namespace {

// Rank 0 makes a dataset and its partition into P parts; everyone waits for it.
fs::path prepare(comm::Communicator& comm) {
  const fs::path dir = fs::path(TESSEL_BINARY_DIR) / "test-tmp" /
                       ("device-sampler.np" + std::to_string(comm.size()));
  if (comm.rank() == 0) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string tessel = test::tessel_binary().string();
    std::string out;
    EXPECT_EQ(test::run_command(tessel +
                                    " convert synthetic --nodes 600 --avg-degree 8 "
                                    "--classes 3 --feat-dim 4 --seed 9 " +
                                    (dir / "g.h5").string(),
                                &out),
              0)
        << out;
    EXPECT_EQ(test::run_command(tessel + " partition " + (dir / "g.h5").string() + " --parts " +
                                    std::to_string(comm.size()) + " --out " +
                                    (dir / "parts").string(),
                                &out),
              0)
        << out;
  }
  comm.barrier();
  return dir;
}

std::vector<std::int64_t> host_values(const Tensor& t) {
  const Tensor h = t.to(Device::cpu());
  return std::vector<std::int64_t>(h.data<std::int64_t>(), h.data<std::int64_t>() + h.numel());
}

// Every layer of `got` (device blocks) equals the host blocks of `want`.
void expect_device_blocks_equal(const dist::DistributedSampler& got,
                                const dist::DistributedSampler& want, int layers,
                                const std::string& what) {
  ASSERT_EQ(got.device_blocks().size(), static_cast<std::size_t>(layers)) << what;
  for (int l = 0; l < layers; ++l) {
    const sampling::BlockTensors& t = got.device_blocks()[l];
    EXPECT_TRUE(t.src.device().is_cpu()) << what;
    const sampling::Block b = t.to_block();
    const sampling::Block& w = want.blocks()[l];
    EXPECT_EQ(b.dst, w.dst) << what << " layer " << l;
    EXPECT_EQ(b.src, w.src) << what << " layer " << l;
    EXPECT_EQ(b.adj.indptr, w.adj.indptr) << what << " layer " << l;
    EXPECT_EQ(b.adj.indices, w.adj.indices) << what << " layer " << l;
    const auto orig = host_values(t.src_orig);
    const auto degree = host_values(t.src_degree);
    EXPECT_TRUE(
        std::equal(orig.begin(), orig.end(), want.src_orig(l).begin(), want.src_orig(l).end()))
        << what << " layer " << l;
    EXPECT_TRUE(std::equal(degree.begin(), degree.end(), want.src_degree(l).begin(),
                           want.src_degree(l).end()))
        << what << " layer " << l;
  }
}

} // namespace

// The device graph's CPU twin runs sample_device at every rank count (at more than one rank the
// frontier is routed with the frontier ops over the data plane), and its blocks are sample()'s,
// with the same traffic counted. Owners drawing with the twin inside sample() draw what the CPU
// sampler draws. route_on_host(true) turns sample_device off.
TEST(DeviceSampler, CpuTwinBuildsTheHostBlocks) {
  auto comm = comm::make_mpi_communicator();
  const fs::path dir = prepare(*comm);
  const partition::Manifest manifest = partition::read_manifest(dir / "parts");
  partition::Part part = partition::load_part(dir / "parts", comm->rank(), manifest);
  // A data plane of its own, as training has.
  const std::unique_ptr<comm::Communicator> data = comm->split(0, comm->rank());
  // Whole rows (-1) and fanouts above and below the degrees (8 on average).
  const std::vector<int> fanouts = {5, -1, 3};
  const int layers = static_cast<int>(fanouts.size());
  dist::DistributedSampler host(part, manifest, *comm, 31, fanouts, 6);
  dist::DistributedSampler routed(part, manifest, *comm, 31, fanouts, 6, data.get());
  dist::DistributedSampler twin(part, manifest, *comm, 31, fanouts, 6);
  EXPECT_FALSE(routed.device_resident());
  routed.sample_on_device(Device::cpu(), sampling::GraphPlacement::automatic);
  twin.sample_on_device(Device::cpu(), sampling::GraphPlacement::automatic);
  EXPECT_EQ(routed.graph_placement(), sampling::GraphPlacement::device);
  ASSERT_TRUE(routed.device_resident());
  twin.route_on_host(true);
  EXPECT_FALSE(twin.device_resident());
  PhaseTimes phases;
  std::int64_t steps_checked = 0, edges_checked = 0;
  for (int epoch = 1; epoch <= 2; ++epoch) {
    std::vector<std::vector<LocalId>> step_seeds;
    std::vector<std::int64_t> step_counts;
    host.assign_steps(epoch, step_seeds, step_counts, phases);
    ASSERT_GE(step_counts.size(), 2u);
    for (std::size_t s = 0; s < step_counts.size() && s < 5; ++s) {
      const auto step = static_cast<std::uint32_t>(s);
      const std::string what = "epoch " + std::to_string(epoch) + " step " + std::to_string(s);
      host.sample(epoch, step, step_seeds[s], phases);
      routed.sample_device(epoch, step, step_seeds[s], phases);
      expect_device_blocks_equal(routed, host, layers, what);
      EXPECT_THROW(twin.sample_device(epoch, step, step_seeds[s], phases), InputError);
      twin.sample(epoch, step, step_seeds[s], phases);
      for (int l = 0; l < layers; ++l) {
        EXPECT_EQ(twin.blocks()[l].src, host.blocks()[l].src) << what << " layer " << l;
        EXPECT_EQ(twin.blocks()[l].adj.indptr, host.blocks()[l].adj.indptr) << what;
        EXPECT_EQ(twin.blocks()[l].adj.indices, host.blocks()[l].adj.indices) << what;
      }
      for (int l = 0; l < layers; ++l)
        edges_checked += host.blocks()[l].num_edges();
      ++steps_checked;
    }
  }
  EXPECT_GE(steps_checked, 4);
  EXPECT_GT(edges_checked, 100);
  // The same draws, requests, replies and answers, counted the same way.
  const dist::SamplerCounters& want = host.counters();
  for (const auto* sampler : {&routed, &twin}) {
    const dist::SamplerCounters& got = sampler->counters();
    EXPECT_EQ(got.sampled_edges, want.sampled_edges);
    EXPECT_EQ(got.remote_requests, want.remote_requests);
    EXPECT_EQ(got.answer_ids, want.answer_ids);
    EXPECT_EQ(got.remote_adjacency, want.remote_adjacency);
    EXPECT_EQ(got.sample_bytes, want.sample_bytes);
  }
  if (comm->size() > 1) {
    // Something crossed ranks, and some sources were known only to their owners.
    EXPECT_GT(want.remote_requests, 0);
    EXPECT_GT(want.sample_bytes, 8 * (want.remote_requests + want.answer_ids));
  }
}

// The feature store over the data plane (the CPU twins of the store, its plan from device ids
// and its owners' gathers): fetch_features_device, from the device blocks' input ids and from host
// ids, returns exactly fetch_features' rows, for a store without cache, with a degree cache, and
// with admission slots, over several steps; every tier's counters add up, the network tier
// counts the rows received, and what crossed the data plane is exactly the requested ids and
// their rows.
TEST(DeviceSampler, FeatureStoreFetchesTheHostRowsOverTheDataPlane) {
  auto comm = comm::make_mpi_communicator();
  const fs::path dir = prepare(*comm);
  const partition::Manifest manifest = partition::read_manifest(dir / "parts");
  partition::Part part = partition::load_part(dir / "parts", comm->rank(), manifest);
  const std::unique_ptr<comm::Communicator> data = comm->split(0, comm->rank());
  const std::vector<int> fanouts = {4, 3};
  const std::int64_t f = part.feature_dim;
  dist::DistributedSampler host(part, manifest, *comm, 17, fanouts, 8);
  sampling::CacheBudget degree;
  degree.ratio = 0.3;
  sampling::CacheBudget admitting = degree;
  admitting.admit_fraction = 0.5;
  struct Case {
    std::string name;
    sampling::CachePolicy policy;
    sampling::CacheBudget budget;
    bool host_ids;
  };
  using sampling::CachePolicy;
  const std::vector<Case> cases = {
      {"no cache", CachePolicy::none, {}, false},
      {"degree cache", CachePolicy::degree, degree, false},
      {"admission slots", CachePolicy::degree, admitting, false},
      {"admission slots, host ids", CachePolicy::degree, admitting, true}};
  std::vector<std::unique_ptr<dist::DistributedSampler>> samplers;
  for (const Case& c : cases) {
    samplers.push_back(std::make_unique<dist::DistributedSampler>(part, manifest, *comm, 17,
                                                                   fanouts, 8, data.get()));
    samplers.back()->sample_on_device(Device::cpu(), sampling::GraphPlacement::automatic);
    samplers.back()->route_on_host(c.host_ids);
    samplers.back()->setup_device_store(c.policy, c.budget, Device::cpu());
  }
  std::vector<std::int64_t> data_bytes(cases.size(), 0);
  PhaseTimes phases;
  std::int64_t steps_checked = 0;
  for (int epoch = 1; epoch <= 3; ++epoch) {
    std::vector<std::vector<LocalId>> step_seeds;
    std::vector<std::int64_t> step_counts;
    host.assign_steps(epoch, step_seeds, step_counts, phases);
    for (std::size_t s = 0; s < step_counts.size() && s < 4; ++s) {
      const auto step = static_cast<std::uint32_t>(s);
      host.sample(epoch, step, step_seeds[s], phases);
      const Tensor want = host.fetch_features(host.blocks()[0].src, part.features, phases);
      for (std::size_t k = 0; k < cases.size(); ++k) {
        const std::string what =
            cases[k].name + ", epoch " + std::to_string(epoch) + " step " + std::to_string(s);
        dist::DistributedSampler& sampler = *samplers[k];
        Tensor got;
        if (cases[k].host_ids) {
          sampler.sample(epoch, step, step_seeds[s], phases);
          const std::int64_t before = data->bytes_sent();
          got = sampler.fetch_features_device(sampler.blocks()[0].src, phases);
          data_bytes[k] += data->bytes_sent() - before;
        } else {
          sampler.sample_device(epoch, step, step_seeds[s], phases);
          const std::int64_t before = data->bytes_sent();
          got = sampler.fetch_features_device(sampler.device_blocks()[0].src, phases);
          data_bytes[k] += data->bytes_sent() - before;
        }
        ASSERT_EQ(got.shape(), want.shape()) << what;
        EXPECT_TRUE(got.device().is_cpu()) << what;
        if (want.numel() > 0) { // an empty tensor has no storage to compare
          EXPECT_EQ(std::memcmp(got.data<float>(), want.data<float>(), want.nbytes()), 0)
              << what << ": rows differ from fetch_features'";
        }
      }
      ++steps_checked;
    }
  }
  EXPECT_GE(steps_checked, 6);
  const dist::SamplerCounters& h = host.counters();
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const std::string& what = cases[k].name;
    const dist::DistributedSampler& sampler = *samplers[k];
    const sampling::FeatureStoreCounters& c = sampler.device_store()->counters();
    test::expect_tiers_add_up(c, h.input_rows, what);
    EXPECT_EQ(c.network.misses, 0) << what;
    const dist::SamplerCounters& s = sampler.counters();
    EXPECT_EQ(s.input_rows, h.input_rows) << what;
    EXPECT_EQ(s.remote_input_rows, h.remote_input_rows) << what;
    EXPECT_EQ(s.fetched_rows, c.network.requests) << what;
    EXPECT_EQ(s.cache_hits + s.fetched_rows, s.remote_input_rows) << what;
    // The network tier's bytes are the rows this rank received.
    EXPECT_EQ(c.network.bytes, s.fetched_rows * f * 4) << what;
    // Over all ranks, the data plane carried each requested id (8 bytes) and its row, nothing
    // else: a rank sends what the others receive.
    const auto sent = comm->allreduce_value<std::int64_t>(data_bytes[k]);
    const auto fetched = comm->allreduce_value<std::int64_t>(s.fetched_rows);
    EXPECT_EQ(sent, fetched * (8 + f * 4)) << what;
    if (comm->size() > 1) {
      EXPECT_GT(fetched, 0) << what;
    }
  }
  const sampling::FeatureStoreCounters& none = samplers[0]->device_store()->counters();
  const sampling::FeatureStoreCounters& hot = samplers[1]->device_store()->counters();
  const sampling::FeatureStoreCounters& adm = samplers[2]->device_store()->counters();
  EXPECT_EQ(none.device.hits, 0);
  EXPECT_GT(hot.device.hits, 0);
  // Device ids and host ids plan alike: the same admissions and the same counts.
  const sampling::FeatureStoreCounters& adm_host = samplers[3]->device_store()->counters();
  EXPECT_EQ(adm.admitted, adm_host.admitted);
  EXPECT_EQ(adm.evicted, adm_host.evicted);
  EXPECT_EQ(adm.device.hits, adm_host.device.hits);
  EXPECT_EQ(adm.network.requests, adm_host.network.requests);
  if (comm->size() > 1) {
    EXPECT_GT(adm.admitted, 0);
    EXPECT_GT(none.network.requests, hot.network.requests);
  }
}

// The twin's tensor form refuses a frontier node outside its rows with an InputError, and
// row_info marks such a node with -1.
TEST(DeviceSampler, CpuTwinRefusesNodesOutsideItsRows) {
  auto comm = comm::make_mpi_communicator();
  const fs::path dir = prepare(*comm);
  const partition::Manifest manifest = partition::read_manifest(dir / "parts");
  partition::Part part = partition::load_part(dir / "parts", comm->rank(), manifest);
  std::vector<NodeId> keys(part.orig_id.begin(), part.orig_id.begin() + part.num_owned);
  std::vector<std::int64_t> degrees(part.degree.begin(), part.degree.begin() + part.num_owned);
  std::vector<NodeId> answers(static_cast<std::size_t>(part.graph.num_cols));
  for (std::size_t c = 0; c < answers.size(); ++c)
    answers[c] = static_cast<NodeId>(c) + 1000;
  sampling::DeviceGraph graph(part.graph, keys, degrees, answers, Device::cpu(),
                              sampling::GraphPlacement::device);
  const NodeId first = part.offset;
  const Tensor inside = graph.upload(std::vector<NodeId>{first, first + part.num_owned - 1});
  const Tensor outside = graph.upload(std::vector<NodeId>{first, first + part.num_owned});
  Tensor offsets, draws, orig, degree;
  const std::int64_t total = graph.sample(inside, first, -1, rng::Key{3}, offsets, draws);
  EXPECT_EQ(total, part.graph.degree(0) + part.graph.degree(part.num_owned - 1));
  EXPECT_EQ(host_values(offsets).back(), total);
  // A whole row is answered in row order through the answer table.
  for (EdgeId e = 0; e < part.graph.degree(0); ++e)
    EXPECT_EQ(host_values(draws)[static_cast<std::size_t>(e)], part.graph.indices[e] + 1000);
  EXPECT_THROW(graph.sample(outside, first, 2, rng::Key{3}, offsets, draws), InputError);
  graph.row_info(outside, first, orig, degree);
  EXPECT_EQ(host_values(orig), (std::vector<std::int64_t>{part.orig_id[0], -1}));
  EXPECT_EQ(host_values(degree), (std::vector<std::int64_t>{part.degree[0], -1}));
}
