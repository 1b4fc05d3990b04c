// Runtime selection: device per rank and data plane (NCCL or MPI staged through pinned memory).
#include "tessel/train/runtime.hpp"

#include "tessel/comm/nccl_communicator.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/mpi.hpp"

#include "tessel/core/log.hpp"

#include <fmt/ranges.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <set>

namespace tessel::train {

namespace {

// Ranks on this node and this rank's index among them.
std::pair<int, int> local_rank_and_size() {
  if (!mpi::initialized()) return {0, 1};
  MPI_Comm node = MPI_COMM_NULL;
  TESSEL_CHECK_MPI(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int rank = 0, size = 1;
  MPI_Comm_rank(node, &rank);
  MPI_Comm_size(node, &size);
  MPI_Comm_free(&node);
  return {rank, size};
}

// The CPUs this process may run on (its affinity mask, which `mpirun --bind-to` sets), as
// ranges: "0-7,16-23".
std::string affinity_text() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return "?";
  std::string text;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    int last = c;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
    text += fmt::format("{}{}", text.empty() ? "" : ",",
                        last == c ? fmt::format("{}", c) : fmt::format("{}-{}", c, last));
    c = last;
  }
  return text;
}

// A fixed-size field of a placement record (what the allgather carries), cut to fit.
template <std::size_t N> void put_field(std::array<char, N>& field, const std::string& text) {
  field.fill('\0');
  std::string cut = text;
  if (cut.size() >= N) cut = cut.substr(0, N - 4) + "...";
  std::copy(cut.begin(), cut.end(), field.begin());
}

struct PlacementRecord {
  std::array<char, 64> host;
  std::array<char, 16> device;
  std::array<char, 256> cores;
  std::int32_t local_rank = 0;
  std::int32_t local_size = 1;
  std::int32_t threads = 1;
};

// Where every rank runs, gathered from all ranks (collective): a table for the log, one row per
// rank. Empty for a single rank.
std::string placement_table(comm::Communicator& control, Device device) {
  if (control.size() <= 1) return {};
  PlacementRecord mine;
  put_field(mine.host, mpi::hostname());
  put_field(mine.device, device.str());
  put_field(mine.cores, affinity_text());
  const auto [local_rank, local_size] = local_rank_and_size();
  mine.local_rank = local_rank;
  mine.local_size = local_size;
  mine.threads = omp_get_max_threads();
  std::vector<PlacementRecord> all(static_cast<std::size_t>(control.size()));
  control.allgather(&mine, sizeof(PlacementRecord), all.data(), DType::u8);
  const auto text = [](const auto& field) { return std::string(field.data()); };
  std::set<std::string> hosts;
  std::size_t host_width = 4, device_width = 6;
  for (const auto& r : all) {
    hosts.insert(text(r.host));
    host_width = std::max(host_width, text(r.host).size());
    device_width = std::max(device_width, text(r.device).size());
  }
  std::string table =
      fmt::format("placement: {} on {}\n  rank  {:<{}}  local  {:<{}}  threads  cores",
                  log::counted(control.size(), "rank"),
                  log::counted(static_cast<long long>(hosts.size()), "host"), "host", host_width,
                  "device", device_width);
  for (std::size_t r = 0; r < all.size(); ++r)
    table += fmt::format("\n  {:>4}  {:<{}}  {:<5}  {:<{}}  {:>7}  {}", r, text(all[r].host),
                         host_width, fmt::format("{}/{}", all[r].local_rank, all[r].local_size),
                         text(all[r].device), device_width, all[r].threads, text(all[r].cores));
  return table;
}

}  // namespace

RuntimeHolder make_runtime(comm::Communicator& control, const TrainOptions& options,
                           const ModeInfo& mode) {
  const int gpus = device_memory::device_count();
  // Every rank must agree on CPU or GPU: auto takes GPUs only when all ranks see one.
  const int min_gpus = control.allreduce_value(gpus, comm::ReduceOp::min);
  bool use_gpu = false;
  if (options.device == DeviceChoice::cuda) {
#ifdef TESSEL_WITH_CUDA
    constexpr const char* kBuild = "";
#else
    constexpr const char* kBuild = " (Tessel was built without CUDA)";
#endif
    TESSEL_EXPECTS(gpus > 0, "--device cuda: no GPU is visible on rank {} (host {}){}",
                   control.rank(), mpi::hostname(), kBuild);
    use_gpu = true;
  } else if (options.device == DeviceChoice::automatic) {
    use_gpu = min_gpus > 0 && mode.runs_on_gpu;
  }
  TESSEL_EXPECTS(use_gpu || options.comm != CommChoice::nccl,
                 "--comm nccl needs GPUs (--device cuda); this run uses the CPU");

  RuntimeHolder holder;
  holder.runtime.control = &control;
  holder.runtime.data = &control;
  if (!use_gpu) {
    holder.runtime.device = Device::cpu();
    holder.runtime.context = &kernels::default_context(Device::cpu());
    holder.description = fmt::format("device cpu, data plane {} (host memory)", control.backend());
    holder.placement = placement_table(control, Device::cpu());
    return holder;
  }
  const auto [local_rank, local_size] = local_rank_and_size();
  const Device device = Device::cuda(local_rank % gpus);
  holder.runtime.device = device;
  holder.runtime.context = &kernels::default_context(device);  // registers the device's stream
  const auto gpu_of_rank = control.allgather_value<std::int64_t>(device.index);
  const auto host_of_rank = control.allgather_value<std::int64_t>(
      static_cast<std::int64_t>(std::hash<std::string>{}(mpi::hostname())));
  // NCCL needs one GPU per rank: two ranks of one host on one GPU share it through MPI.
  std::set<std::pair<std::int64_t, std::int64_t>> distinct;
  for (int r = 0; r < control.size(); ++r) distinct.insert({host_of_rank[r], gpu_of_rank[r]});
  const bool shared_gpu = static_cast<int>(distinct.size()) < control.size();
  const int any_shared = control.allreduce_value<int>(shared_gpu ? 1 : 0, comm::ReduceOp::max);
  bool nccl = false;
  std::string why;
  if (options.comm == CommChoice::nccl) {
    TESSEL_EXPECTS(comm::nccl_available(), "--comm nccl: Tessel was built without NCCL");
    TESSEL_EXPECTS(!any_shared,
                   "--comm nccl: {} ranks share {} GPU(s) on a host; NCCL needs one GPU per "
                   "rank (use --comm mpi)",
                   control.size(), gpus);
    nccl = true;
  } else if (options.comm == CommChoice::automatic) {
    nccl = comm::nccl_available() && !any_shared;
    why = nccl ? "one GPU per rank" : "ranks share a GPU";
  } else {
    why = "--comm mpi";
  }
  if (nccl) {
    holder.owned_data = comm::make_nccl_communicator(control, device);
    holder.runtime.data = holder.owned_data.get();
  }
  std::vector<std::string> per_rank;
  for (int r = 0; r < control.size(); ++r)
    per_rank.push_back(fmt::format("{}:cuda:{}", r, gpu_of_rank[r]));
  holder.description =
      fmt::format("device cuda, data plane {} ({}), GPU per rank {}",
                  nccl ? "nccl" : "mpi staged through pinned host memory",
                  why.empty() ? "--comm nccl" : why, fmt::join(per_rank, " "));
  holder.placement = placement_table(control, device);
  return holder;
}

}  // namespace tessel::train
