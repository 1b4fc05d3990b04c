// The training driver shared by every mode: setup, epochs, evaluation, metrics lines and files,
// checkpoints, resume, time budget and fault injection.
#include "tessel/train/train.hpp"

#include "checkpoint.hpp"
#include "trainer.hpp"

#include "tessel/train/dynamic.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/mpi.hpp"
#include "tessel/kernels/dense.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <thread>

namespace tessel::train {
namespace fs = std::filesystem;

nlohmann::json EpochMetrics::to_json() const {
  nlohmann::json j = {{"epoch", epoch},         {"loss", loss},
                      {"train_acc", train_acc}, {"valid_acc", valid_acc},
                      {"test_acc", test_acc},   {"epoch_s", epoch_s},
                      {"wall_s", wall_s},       {"comm_bytes", comm_bytes}};
  j["evaluated"] = evaluated;
  j["phases"] = phases;
  if (!extra.is_null())
    for (const auto& [k, v] : extra.items()) j[k] = v;
  return j;
}

int choose_threads(int requested) {
  if (requested > 0) return requested;
  // An explicit OMP_NUM_THREADS is the user's (or the launcher's) choice: keep it.
  if (const char* env = std::getenv("OMP_NUM_THREADS"); env && std::atoi(env) > 0)
    return std::atoi(env);
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

// TESSEL_FAULT_RANK=r TESSEL_FAULT_EPOCH=e: rank r fails at the start of epoch e (tests the
// whole-job abort path).
void maybe_inject_fault(int rank, int epoch) {
  const char* fault_rank = std::getenv("TESSEL_FAULT_RANK");
  const char* fault_epoch = std::getenv("TESSEL_FAULT_EPOCH");
  if (!fault_rank || !fault_epoch) return;
  if (std::atoi(fault_rank) == rank && std::atoi(fault_epoch) == epoch)
    TESSEL_LIB_FAIL("injected fault (TESSEL_FAULT_RANK={}, TESSEL_FAULT_EPOCH={})", rank, epoch);
}

std::string model_signature(const TrainOptions& o) {
  nlohmann::json j = {{"kind", o.model.kind},     {"in_dim", o.model.in_dim},
                      {"hidden", o.model.hidden}, {"out_dim", o.model.out_dim},
                      {"layers", o.model.layers}, {"optimizer", o.optimizer.kind}};
  if (o.model.kind == "sign-mlp") {
    j["hops"] = o.pipeline.hops;
    j["mlp_layers"] = o.pipeline.mlp_layers;
    j["operator"] = o.pipeline.op;
  }
  return j.dump();
}

std::string format_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  return fmt::format("{:.1f} {}", b, units[u]);
}

}  // namespace

TrainResult train(comm::Communicator& comm, const TrainOptions& options_in) {
  TrainOptions options = options_in;
  Stopwatch setup_watch;
  const int threads = choose_threads(options.threads);
  kernels::set_cpu_threads(threads);
  if (options.mode == "dynamic") return train_dynamic(comm, options);

  const partition::Manifest manifest = partition::read_manifest(options.part_dir);
  TESSEL_EXPECTS(manifest.num_parts == comm.size(),
                 "{} holds a partition into {} parts, but {} ranks are running: run mpirun -np {}",
                 options.part_dir.string(), manifest.num_parts, comm.size(), manifest.num_parts);
  partition::Part part = partition::load_part(options.part_dir, comm.rank(), manifest);
  options.model.in_dim = manifest.feature_dim;
  options.model.out_dim = manifest.num_classes;
  options.model.seed = options.seed;
  TESSEL_EXPECTS(manifest.num_classes >= 2, "{}: the dataset has {} classes; need at least 2",
                 options.part_dir.string(), manifest.num_classes);
  TESSEL_EXPECTS(manifest.num_train > 0, "{}: the dataset has no training nodes",
                 options.part_dir.string());
  if (options.normalize_features == "row" && !part.features.empty()) {
    // The kernel op (L1: each row divided by the sum of its absolute values), then back into
    // the part's rows, which every mode reads its features from.
    Tensor features = Tensor::from_vector(part.features, {part.num_owned, part.feature_dim});
    kernels::normalize_rows(features);
    std::copy_n(features.data<float>(), features.numel(), part.features.data());
  }

  TrainerContext context{comm, options, manifest, part};
  std::unique_ptr<Trainer> trainer;
  if (options.mode == "full")
    trainer = make_full_trainer(context);
  else if (options.mode == "sampled")
    trainer = make_sampled_trainer(context);
  else if (options.mode == "pipeline")
    trainer = make_pipeline_trainer(context);
  else
    TESSEL_FAIL("unknown training mode '{}': expected full, sampled, dynamic or pipeline", options.mode);

  CheckpointMeta meta{0, options.seed, model_signature(options), options.mode};
  int first_epoch = 1;
  if (!options.resume_dir.empty()) {
    const CheckpointMeta loaded =
        load_checkpoint(options.resume_dir, meta, trainer->parameters(), trainer->optimizer());
    first_epoch = loaded.epoch + 1;
    log::info("resumed from {} after epoch {}", options.resume_dir.string(), loaded.epoch);
  }

  std::ofstream metrics;
  if (comm.rank() == 0 && !options.metrics_path.empty()) {
    if (options.metrics_path.has_parent_path())
      fs::create_directories(options.metrics_path.parent_path());
    metrics.open(options.metrics_path, std::ios::trunc);
    TESSEL_EXPECTS(metrics.good(), "cannot write metrics file {}", options.metrics_path.string());
  }

  TrainResult result;
  result.mode = options.mode;
  comm.barrier();
  result.setup_s = setup_watch.seconds();
  log::info("{} training: {} ranks x {} threads, {} {} layers hidden {}, {} nodes, GEMM {}, "
            "setup {:.2f} s",
            options.mode, comm.size(), threads, options.model.kind, options.model.layers,
            options.model.hidden, manifest.num_nodes, kernels::cpu_gemm_backend(),
            result.setup_s);

  Stopwatch wall;
  for (int epoch = first_epoch; epoch <= options.epochs; ++epoch) {
    maybe_inject_fault(comm.rank(), epoch);
    comm.reset_bytes_sent();
    Stopwatch epoch_watch;
    PhaseTimes phases;
    EpochMetrics m;
    m.epoch = epoch;
    m.loss = trainer->train_epoch(epoch, phases, m.extra);
    const bool last = epoch == options.epochs ||
                      (options.time_budget_s > 0 && wall.seconds() >= options.time_budget_s);
    if (options.eval_every > 0 && (epoch % options.eval_every == 0 || last)) {
      const Accuracy acc = trainer->evaluate(phases);
      m.train_acc = acc.train;
      m.valid_acc = acc.valid;
      m.test_acc = acc.test;
      m.evaluated = true;
    }
    const double local_epoch_s = epoch_watch.seconds();
    // Report the slowest rank: that is the epoch time the job sees.
    m.epoch_s = comm.allreduce_value(local_epoch_s, comm::ReduceOp::max);
    for (const auto& [name, s] : phases.all())
      m.phases[name] = comm.allreduce_value(s, comm::ReduceOp::max);
    const std::int64_t local_bytes = comm.bytes_sent();
    m.comm_bytes = comm.allreduce_value(local_bytes);
    m.wall_s = wall.seconds();

    if (m.evaluated && m.valid_acc > result.best_valid_acc) {
      result.best_valid_acc = m.valid_acc;
      result.test_acc_at_best = m.test_acc;
      result.best_epoch = epoch;
    }
    if (m.evaluated && options.target_acc > 0 && result.time_to_target_s < 0 &&
        m.valid_acc >= options.target_acc)
      result.time_to_target_s = m.wall_s;

    if (!options.quiet) {
      std::string split;
      for (const auto& [name, s] : m.phases) split += fmt::format(" {} {:.3f}", name, s);
      // Accuracies only for epochs that evaluated (--eval-every), not as zeros.
      const std::string accuracy =
          m.evaluated ? fmt::format("acc train {:.4f} valid {:.4f} test {:.4f}", m.train_acc,
                                    m.valid_acc, m.test_acc)
                      : std::string("not evaluated");
      log::info("epoch {:4d} | loss {:.4f} | {} | {:.3f} s ({}) | sent {}", epoch, m.loss,
                accuracy, m.epoch_s, split.empty() ? std::string("-") : split.substr(1),
                format_bytes(m.comm_bytes));
    }
    if (metrics.is_open()) metrics << m.to_json().dump() << '\n' << std::flush;
    result.epochs.push_back(std::move(m));

    if (options.checkpoint_every > 0 && !options.checkpoint_dir.empty() &&
        (epoch % options.checkpoint_every == 0 || epoch == options.epochs)) {
      meta.epoch = epoch;
      trainer->gather_parameters();
      if (comm.rank() == 0)
        save_checkpoint(options.checkpoint_dir, meta, trainer->parameters(), trainer->optimizer());
      comm.barrier();
    }
    if (last) break;
  }

  result.peak_rss_bytes =
      comm.allreduce_value<std::int64_t>(peak_rss_bytes(), comm::ReduceOp::max);
  trainer->gather_parameters();
  for (nn::Parameter* p : trainer->parameters()) {
    const Tensor host = p->value.device().is_cpu() ? p->value : p->value.to(Device::cpu());
    double sum = 0;
    for (std::int64_t i = 0; i < host.numel(); ++i) sum += host.data<float>()[i];
    result.final_parameters_checksum.push_back(sum);
  }
  if (metrics.is_open()) {
    nlohmann::json summary = {{"summary", true},
                              {"mode", options.mode},
                              {"best_valid_acc", result.best_valid_acc},
                              {"test_acc", result.test_acc_at_best},
                              {"best_epoch", result.best_epoch},
                              {"epochs", static_cast<int>(result.epochs.size())},
                              {"peak_rss_bytes", result.peak_rss_bytes},
                              {"setup_s", result.setup_s},
                              {"gemm_backend", kernels::cpu_gemm_backend()}};
    if (result.time_to_target_s >= 0) summary["time_to_target_s"] = result.time_to_target_s;
    metrics << summary.dump() << '\n';
  }
  if (!options.predictions_path.empty()) trainer->write_predictions(options.predictions_path);
  log::info("best valid acc {:.4f} at epoch {}, test acc there {:.4f}", result.best_valid_acc,
            result.best_epoch, result.test_acc_at_best);
  return result;
}

}  // namespace tessel::train
