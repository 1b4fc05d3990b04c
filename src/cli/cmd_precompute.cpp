// `tessel precompute DIR --hops K`: SIGN hop features of every part, under mpirun (one rank per
// part).
#include "command.hpp"
#include "train_options.hpp"

#include "tessel/comm/mpi_communicator.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/timer.hpp"
#include "tessel/kernels/dense.hpp"
#include "tessel/partition/part.hpp"
#include "tessel/dist/precompute.hpp"
#include "tessel/train/train.hpp"

#include <omp.h>

#include <algorithm>
#include <memory>

namespace tessel::cli {
namespace {

struct PrecomputeArgs {
  std::filesystem::path part_dir;
  std::filesystem::path out_dir;
  dist::PrecomputeOptions options;
  int threads = 0;
};

std::function<void()> setup_precompute(CLI::App& app) {
  auto args = std::make_shared<PrecomputeArgs>();
  app.add_option("DIR", args->part_dir, "partition folder made by `tessel partition`")
      ->required()
      ->check(partition_folder());
  app.add_option("--hops", args->options.hops, "K: write X, AX, ..., A^K X")
      ->check(CLI::Range(0, 16))
      ->capture_default_str();
  add_choice(app, "--operator", args->options.op,
             "gcn: D^-1/2 (A+I) D^-1/2; mean: mean of the in-neighbors");
  add_choice(app, "--normalize-features", args->options.normalize_features,
             "normalize X before propagating: none or row (as tessel train does)");
  app.add_option("--out", args->out_dir,
                 "output folder (default: DIR/sign-<operator>-k<K>[-row], where `tessel train "
                 "--mode pipeline` looks)");
  app.add_option("--threads", args->threads, "OpenMP threads per rank (default: cores / ranks)")
      ->check(CLI::Range(1, train::max_threads()));
  app.footer(
      "Run with one rank per part: mpirun -np P tessel precompute DIR --hops K.\n"
      "Writes sign-<p>.h5 per part (format in docs/formats.md): [X, AX, ..., A^K X] of the\n"
      "part's owned nodes, computed with the halo exchange and SpMM; P ranks write what one\n"
      "rank computes.");
  return [args] {
    auto comm = comm::make_mpi_communicator();
    const int threads = train::choose_threads(args->threads);
    omp_set_num_threads(threads);
    Stopwatch watch;
    train::RankPartition read = train::read_rank_partition(*comm, args->part_dir);
    const partition::Manifest& manifest = read.manifest;
    partition::Part& part = read.part;
    if (args->options.normalize_features == train::FeatureNormalization::row &&
        !part.features.empty()) {
      // The kernel op tessel train applies (L1: each row divided by the sum of the absolute
      // values of its entries).
      Tensor features = Tensor::from_vector(part.features, {part.num_owned, part.feature_dim});
      kernels::normalize_rows(features);
      std::copy_n(features.data<float>(), features.numel(), part.features.data());
    }
    const auto dir = args->out_dir.empty() ? dist::default_sign_dir(args->part_dir, args->options)
                                           : args->out_dir;
    const auto hops = dist::precompute_hops(*comm, part, args->options);
    dist::write_sign_folder(*comm, dir, part, manifest.dataset, args->options, hops);
    log::info("precomputed {} hops ({}) of {} nodes x {} features on {} ranks into {} in {:.2f} s",
              args->options.hops, args->options.op, manifest.num_nodes, manifest.feature_dim,
              comm->size(), dir.string(), watch.seconds());
  };
}

const Registrar registrar({"precompute",
                           "Propagate node features K hops (SIGN) for --mode pipeline (run under "
                           "mpirun).",
                           true, setup_precompute, 35});

} // namespace
} // namespace tessel::cli
