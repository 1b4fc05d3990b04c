// What every run uses around the driver's epochs: the thread count, an epoch's metrics record,
// fault injection, and a trainer's default closing summary.
#include "tessel/train/train.hpp"

#include "tessel/train/trainer.hpp"
#include "tessel/dist/halo_aggregation.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/mpi.hpp"
#include "tessel/kernels/dense.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace tessel::train {

nlohmann::json EpochMetrics::to_json() const {
  nlohmann::json j = {{"epoch", epoch},         {"loss", loss},
                      {"train_acc", train_acc}, {"valid_acc", valid_acc},
                      {"test_acc", test_acc},   {"epoch_s", epoch_s},
                      {"wall_s", wall_s},       {"comm_bytes", comm_bytes}};
  j["comm_bytes_inside_hosts"] = comm_bytes - comm_bytes_between_hosts;
  j["comm_bytes_between_hosts"] = comm_bytes_between_hosts;
  j["evaluated"] = evaluated;
  j["phases"] = phases;
  if (!extra.is_null())
    for (const auto& [k, v] : extra.items()) j[k] = v;
  if (halo) halo->write(j);
  return j;
}

// HaloEpoch::aggregation's default ({}) is post.
static_assert(dist::HaloAggregation{} == dist::HaloAggregation::post);

void HaloEpoch::write(nlohmann::json& record) const {
  record["halo_rows_sent"] = rows_sent;
  if (boundary_sampling > 0) record["boundary_sampling"] = boundary_sampling;
  record["halo_dtype"] = kernels::row_codec_name(dtype);
  record["halo_aggregation"] = option_word(aggregation);
  if (aggregation != dist::HaloAggregation::post) record["halo_pre_rows"] = pre_rows;
  if (stale) {
    record["stale_halo"] = true;
    record["stale_smoothing"] = stale_smoothing;
  }
  record["halo_exposed_s"] = exposed_s;
  record["halo_bytes"] = bytes;
  record["halo_grad_bytes"] = grad_bytes;
}

int max_threads() {
  return 4 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int choose_threads(int requested) {
  if (requested > 0) {
    TESSEL_EXPECTS(requested <= max_threads(),
                   "--threads {} is more than {} (4x the {} hardware threads of this node)",
                   requested, max_threads(), std::thread::hardware_concurrency());
    return requested;
  }
  // An explicit OMP_NUM_THREADS is the user's (or the launcher's) choice: keep it.
  if (const char* env = std::getenv("OMP_NUM_THREADS"); env && std::strtoll(env, nullptr, 10) > 0) {
    const long long from_env = std::strtoll(env, nullptr, 10);
    TESSEL_EXPECTS(from_env <= max_threads(),
                   "OMP_NUM_THREADS={} is more than {} (4x the {} hardware threads of this node)",
                   env, max_threads(), std::thread::hardware_concurrency());
    return static_cast<int>(from_env);
  }
  int local_ranks = 1;
  if (mpi::initialized()) {
    MPI_Comm node = MPI_COMM_NULL;
    TESSEL_CHECK_MPI(
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    TESSEL_CHECK_MPI(MPI_Comm_size(node, &local_ranks));
    MPI_Comm_free(&node);
  }
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / local_ranks);
}

namespace {
// A fault variable's value: a whole number from 0 to INT_MAX in decimal digits, nothing else
// (atoi read "x" as 0 and "1x" as 1). The command line checks these before MPI starts; a program
// that trains through the library meets the same refusal here, on every rank alike.
int fault_number(const char* name, const char* value) {
  const std::string text = value;
  int number = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  TESSEL_EXPECTS(!text.empty() && error == std::errc() && end == text.data() + text.size() &&
                     number >= 0,
                 "{}={}: expected a whole number from 0 to {}", name, text,
                 std::numeric_limits<int>::max());
  return number;
}
}  // namespace

// TESSEL_FAULT_RANK=r TESSEL_FAULT_EPOCH=e: rank r fails at the start of epoch e (tests the
// whole-job abort path); with TESSEL_FAULT_KIND=kill it dies by SIGKILL instead, as a rank
// killed from outside would, without a chance to report anything itself; with
// TESSEL_FAULT_MODE=m only mode m fails (a later mode of a bench).
void maybe_inject_fault(int rank, int epoch, const std::string& mode) {
  const char* fault_rank = std::getenv("TESSEL_FAULT_RANK");
  const char* fault_epoch = std::getenv("TESSEL_FAULT_EPOCH");
  if (!fault_rank && !fault_epoch) return;
  TESSEL_EXPECTS(fault_rank && fault_epoch,
                 "TESSEL_FAULT_RANK and TESSEL_FAULT_EPOCH go together; only {} is set",
                 fault_rank ? "TESSEL_FAULT_RANK" : "TESSEL_FAULT_EPOCH");
  const int at_rank = fault_number("TESSEL_FAULT_RANK", fault_rank);
  const int at_epoch = fault_number("TESSEL_FAULT_EPOCH", fault_epoch);
  const char* kind = std::getenv("TESSEL_FAULT_KIND");
  TESSEL_EXPECTS(kind == nullptr || std::string(kind) == "kill",
                 "TESSEL_FAULT_KIND={}: expected kill", kind ? kind : "");
  const char* fault_mode = std::getenv("TESSEL_FAULT_MODE");
  TESSEL_EXPECTS(fault_mode == nullptr || *fault_mode != '\0',
                 "TESSEL_FAULT_MODE=: an empty value; expected a mode's name");
  if (fault_mode && mode != fault_mode) return;
  if (at_rank != rank || at_epoch != epoch) return;
  if (kind) std::raise(SIGKILL);
  TESSEL_LIB_FAIL("injected fault (TESSEL_FAULT_RANK={}, TESSEL_FAULT_EPOCH={})", rank, epoch);
}
std::string Trainer::finish(comm::Communicator& comm, const Runtime& runtime, TrainResult& result,
                            nlohmann::json& summary) {
  // Device memory of the run (max over ranks): the caching allocator's peak bytes in use and
  // reserved since setup ended (what a step holds, comparable to torch.cuda.max_memory_allocated
  // and max_memory_reserved), and the device's use as cudaMemGetInfo reports it now.
  if (runtime.device.is_cuda()) {
    const Device gpu = runtime.device;
    const auto mem = device_memory::stats(gpu);
    const std::vector<std::pair<std::string, std::int64_t>> gpu_memory = {
        {"gpu_peak_bytes", comm.allreduce_value(mem.peak_bytes_in_use, comm::ReduceOp::max)},
        {"gpu_peak_reserved_bytes",
         comm.allreduce_value(mem.peak_bytes_reserved, comm::ReduceOp::max)},
        {"gpu_device_used_bytes",
         comm.allreduce_value(device_memory::device_used_bytes(gpu), comm::ReduceOp::max)}};
    log::info("gpu memory: peak in use {:.3f} GB, peak reserved {:.3f} GB (caching allocator, "
              "since setup), device used {:.3f} GB (cudaMemGetInfo)",
              static_cast<double>(gpu_memory[0].second) / 1e9,
              static_cast<double>(gpu_memory[1].second) / 1e9,
              static_cast<double>(gpu_memory[2].second) / 1e9);
    for (const auto& [name, value] : gpu_memory) summary[name] = value;
  } else {
    // The host's counterpart: the peak bytes held by tensors since setup ended (host_allocate,
    // rounded to its size classes; kernels' own scratch vectors are not counted).
    const std::int64_t host_peak = comm.allreduce_value(
        device_memory::host_stats().peak_bytes_in_use, comm::ReduceOp::max);
    summary["host_peak_bytes"] = host_peak;
    log::info("host memory: peak in use {:.3f} GB (tensors, since setup)",
              static_cast<double>(host_peak) / 1e9);
  }
  summary["best_valid_acc"] = result.best_valid_acc;
  summary["test_acc"] = result.test_acc_at_best;
  summary["best_epoch"] = result.best_epoch;
  summary["gemm_backend"] = kernels::cpu_gemm_backend();
  if (result.time_to_target_s >= 0) summary["time_to_target_s"] = result.time_to_target_s;
  if (result.best_epoch == 0) return "no epoch was evaluated";
  return fmt::format("best valid acc {:.4f} at epoch {}, test acc there {:.4f}",
                     result.best_valid_acc, result.best_epoch, result.test_acc_at_best);
}
}  // namespace tessel::train
