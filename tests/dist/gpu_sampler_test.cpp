// The distributed sampler on a GPU: owners drawing with the CUDA sampler from a graph in device
// memory, or in pinned host memory read over UVA, build exactly the CPU's blocks (same sources in
// the same order, same edges, same original ids and degrees), and the tiered feature store's
// rows (device cache, UVA, network) are the CPU's rows bit for bit. Skips without a GPU.
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
  const fs::path dir =
      fs::temp_directory_path() / ("tessel-gpu-sampler.np" + std::to_string(comm.size()));
  if (comm.rank() == 0) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string tessel = test::tessel_binary().string();
    std::string out;
    EXPECT_EQ(test::run_command(tessel +
                                    " convert synthetic --nodes 2000 --avg-degree 12 "
                                    "--classes 3 --feat-dim 7 --seed 5 " +
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

void expect_same_blocks(const dist::DistributedSampler& a, const dist::DistributedSampler& b,
                        int layers, const std::string& what) {
  for (int l = 0; l < layers; ++l) {
    const sampling::Block& x = a.blocks()[l];
    const sampling::Block& y = b.blocks()[l];
    EXPECT_EQ(x.dst, y.dst) << what << " layer " << l;
    EXPECT_EQ(x.src, y.src) << what << " layer " << l;
    EXPECT_EQ(x.adj.indptr, y.adj.indptr) << what << " layer " << l;
    EXPECT_EQ(x.adj.indices, y.adj.indices) << what << " layer " << l;
    EXPECT_TRUE(std::equal(a.src_orig(l).begin(), a.src_orig(l).end(), b.src_orig(l).begin(),
                           b.src_orig(l).end()))
        << what << " layer " << l;
    EXPECT_TRUE(std::equal(a.src_degree(l).begin(), a.src_degree(l).end(), b.src_degree(l).begin(),
                           b.src_degree(l).end()))
        << what << " layer " << l;
  }
}

} // namespace

TEST(GpuSampler, DeviceAndPinnedGraphsDrawTheCpuBlocksAndRows) {
  if (!device_memory::cuda_available()) GTEST_SKIP() << "no GPU visible: GPU sampler not tested";
  auto comm = comm::make_mpi_communicator();
  const fs::path dir = prepare(*comm);
  const partition::Manifest manifest = partition::read_manifest(dir / "parts");
  partition::Part part = partition::load_part(dir / "parts", comm->rank(), manifest);
  const Device gpu = Device::cuda(0);
  // Fanouts with whole rows (-1) and rows longer and shorter than the fanout.
  const std::vector<int> fanouts = {6, -1, 3};
  const int layers = static_cast<int>(fanouts.size());
  dist::DistributedSampler cpu(part, manifest, *comm, 13, fanouts, 16);
  dist::DistributedSampler on_device(part, manifest, *comm, 13, fanouts, 16);
  dist::DistributedSampler pinned(part, manifest, *comm, 13, fanouts, 16);
  on_device.sample_on_device(gpu, sampling::GraphPlacement::device);
  pinned.sample_on_device(gpu, sampling::GraphPlacement::pinned);
  EXPECT_EQ(on_device.graph_placement(), sampling::GraphPlacement::device);
  EXPECT_EQ(pinned.graph_placement(), sampling::GraphPlacement::pinned);
  // Device cache: a third of owned + halo rows by degree (hits in all three tiers); pinned: no
  // cache (every owned row over UVA, every remote one from its owner).
  sampling::CacheBudget third;
  third.ratio = 0.3;
  on_device.setup_device_store(sampling::CachePolicy::degree, third, gpu);
  pinned.setup_device_store(sampling::CachePolicy::none, {}, gpu);

  PhaseTimes phases;
  std::int64_t steps_checked = 0;
  for (int epoch = 1; epoch <= 2; ++epoch) {
    std::vector<std::vector<LocalId>> step_seeds;
    std::vector<std::int64_t> step_counts;
    cpu.assign_steps(epoch, step_seeds, step_counts, phases);
    for (std::size_t s = 0; s < step_counts.size() && s < 6; ++s) {
      if (step_counts[s] == 0) continue;
      const auto step = static_cast<std::uint32_t>(s);
      const std::string what = "epoch " + std::to_string(epoch) + " step " + std::to_string(s);
      cpu.sample(epoch, step, step_seeds[s], phases);
      on_device.sample(epoch, step, step_seeds[s], phases);
      pinned.sample(epoch, step, step_seeds[s], phases);
      expect_same_blocks(cpu, on_device, layers, what + " device");
      expect_same_blocks(cpu, pinned, layers, what + " pinned");

      const auto& input = cpu.blocks()[0].src;
      const Tensor x_cpu = cpu.fetch_features(input, part.features, phases);
      const Tensor x_device =
          on_device.fetch_features_device(on_device.blocks()[0].src, phases).to(Device::cpu());
      const Tensor x_pinned =
          pinned.fetch_features_device(pinned.blocks()[0].src, phases).to(Device::cpu());
      ASSERT_EQ(x_device.shape(), x_cpu.shape()) << what;
      ASSERT_EQ(x_pinned.shape(), x_cpu.shape()) << what;
      EXPECT_EQ(std::memcmp(x_device.data<float>(), x_cpu.data<float>(), x_cpu.nbytes()), 0)
          << what << ": device-cached rows differ from the CPU's";
      EXPECT_EQ(std::memcmp(x_pinned.data<float>(), x_cpu.data<float>(), x_cpu.nbytes()), 0)
          << what << ": UVA-gathered rows differ from the CPU's";
      ++steps_checked;
    }
  }
  EXPECT_GT(steps_checked, 2);
  EXPECT_EQ(cpu.counters().sampled_edges, on_device.counters().sampled_edges);
  EXPECT_EQ(cpu.counters().sampled_edges, pinned.counters().sampled_edges);
  for (const auto* sampler : {&on_device, &pinned}) {
    const sampling::FeatureStoreCounters& c = sampler->device_store()->counters();
    test::expect_tiers_add_up(c, cpu.counters().input_rows);
  }
  EXPECT_GT(on_device.device_store()->counters().device.hits, 0);
  EXPECT_EQ(pinned.device_store()->counters().device.hits, 0);
  EXPECT_GT(pinned.device_store()->counters().host.hits, 0);
  if (comm->size() > 1) {
    EXPECT_GT(pinned.device_store()->counters().network.hits, 0);
  }
}

// The blocks are built on the GPU and stay there (sample_device; at more than one rank the
// frontier is routed on the GPU and its ids cross over the data plane): they are the CPU
// sampler's blocks, with the same sources' original ids and degrees and the same traffic
// counted, from a device graph and a pinned one. route_on_host(true) refuses that path. The
// feature store plans from the blocks' input ids where they are (tier kernels on the GPU) and
// fetches remote rows over the data plane: the CPU's rows bit for bit, tier counters adding up.
TEST(GpuSampler, BlocksBuiltOnTheDeviceAreTheCpuBlocks) {
  if (!device_memory::cuda_available()) GTEST_SKIP() << "no GPU visible: GPU blocks not tested";
  auto comm = comm::make_mpi_communicator();
  const fs::path dir = prepare(*comm);
  const partition::Manifest manifest = partition::read_manifest(dir / "parts");
  partition::Part part = partition::load_part(dir / "parts", comm->rank(), manifest);
  const Device gpu = Device::cuda(0);
  const std::vector<int> fanouts = {6, -1, 3};
  const int layers = static_cast<int>(fanouts.size());
  // The MPI data plane (device tensors staged through host memory), as training without NCCL.
  const std::unique_ptr<comm::Communicator> data = comm->split(0, comm->rank());
  dist::DistributedSampler cpu(part, manifest, *comm, 13, fanouts, 16);
  dist::DistributedSampler on_device(part, manifest, *comm, 13, fanouts, 16, data.get());
  dist::DistributedSampler pinned(part, manifest, *comm, 13, fanouts, 16, data.get());
  dist::DistributedSampler host_routed(part, manifest, *comm, 13, fanouts, 16);
  on_device.sample_on_device(gpu, sampling::GraphPlacement::device);
  pinned.sample_on_device(gpu, sampling::GraphPlacement::pinned);
  host_routed.sample_on_device(gpu, sampling::GraphPlacement::device);
  host_routed.route_on_host(true);
  // The feature store planned from the blocks' input ids on the GPU, its remote rows over the
  // data plane: a degree cache with admission slots, and no cache at all.
  sampling::CacheBudget admitting;
  admitting.ratio = 0.3;
  admitting.admit_fraction = 0.5;
  on_device.setup_device_store(sampling::CachePolicy::degree, admitting, gpu);
  pinned.setup_device_store(sampling::CachePolicy::none, {}, gpu);
  PhaseTimes phases;
  std::vector<std::vector<LocalId>> step_seeds;
  std::vector<std::int64_t> step_counts;
  cpu.assign_steps(1, step_seeds, step_counts, phases);
  EXPECT_FALSE(host_routed.device_resident());
  EXPECT_THROW(host_routed.sample_device(1, 0, step_seeds[0], phases), InputError);
  ASSERT_TRUE(on_device.device_resident());
  auto host = [](const Tensor& t) {
    const Tensor h = t.to(Device::cpu());
    return std::vector<std::int64_t>(h.data<std::int64_t>(), h.data<std::int64_t>() + h.numel());
  };
  std::int64_t steps_checked = 0;
  for (std::size_t s = 0; s < step_counts.size() && s < 4; ++s) {
    const auto step = static_cast<std::uint32_t>(s);
    cpu.sample(1, step, step_seeds[s], phases);
    const Tensor x_cpu = cpu.fetch_features(cpu.blocks()[0].src, part.features, phases);
    for (auto* sampler : {&on_device, &pinned}) {
      const std::string what =
          "step " + std::to_string(s) + (sampler == &on_device ? " device graph" : " pinned graph");
      sampler->sample_device(1, step, step_seeds[s], phases);
      ASSERT_EQ(sampler->device_blocks().size(), static_cast<std::size_t>(layers)) << what;
      for (int l = 0; l < layers; ++l) {
        const sampling::BlockTensors& t = sampler->device_blocks()[l];
        EXPECT_EQ(t.src.device(), gpu) << what;
        const sampling::Block got = t.to_block();
        const sampling::Block& want = cpu.blocks()[l];
        EXPECT_EQ(got.dst, want.dst) << what << " layer " << l;
        EXPECT_EQ(got.src, want.src) << what << " layer " << l;
        EXPECT_EQ(got.adj.indptr, want.adj.indptr) << what << " layer " << l;
        EXPECT_EQ(got.adj.indices, want.adj.indices) << what << " layer " << l;
        const auto orig = host(t.src_orig);
        const auto degree = host(t.src_degree);
        EXPECT_TRUE(
            std::equal(orig.begin(), orig.end(), cpu.src_orig(l).begin(), cpu.src_orig(l).end()))
            << what << " layer " << l;
        EXPECT_TRUE(std::equal(degree.begin(), degree.end(), cpu.src_degree(l).begin(),
                               cpu.src_degree(l).end()))
            << what << " layer " << l;
      }
      const Tensor x = sampler->fetch_features_device(sampler->device_blocks()[0].src, phases);
      EXPECT_EQ(x.device(), gpu) << what;
      const Tensor x_host = x.to(Device::cpu());
      ASSERT_EQ(x_host.shape(), x_cpu.shape()) << what;
      if (x_cpu.numel() > 0) { // an empty tensor has no storage to compare
        EXPECT_EQ(std::memcmp(x_host.data<float>(), x_cpu.data<float>(), x_cpu.nbytes()), 0)
            << what << ": rows planned from device ids differ from the CPU's";
      }
    }
    ++steps_checked;
  }
  EXPECT_GT(steps_checked, 1);
  for (const auto* sampler : {&on_device, &pinned}) {
    EXPECT_EQ(sampler->counters().sampled_edges, cpu.counters().sampled_edges);
    EXPECT_EQ(sampler->counters().remote_requests, cpu.counters().remote_requests);
    EXPECT_EQ(sampler->counters().answer_ids, cpu.counters().answer_ids);
    EXPECT_EQ(sampler->counters().sample_bytes, cpu.counters().sample_bytes);
    const sampling::FeatureStoreCounters& c = sampler->device_store()->counters();
    test::expect_tiers_add_up(c, cpu.counters().input_rows);
    EXPECT_EQ(c.network.bytes, sampler->counters().fetched_rows * part.feature_dim * 4);
    EXPECT_EQ(sampler->counters().remote_input_rows, cpu.counters().remote_input_rows);
  }
  if (comm->size() > 1) {
    EXPECT_GT(pinned.device_store()->counters().network.requests, 0);
    EXPECT_GT(on_device.device_store()->counters().admitted, 0);
  }
}
