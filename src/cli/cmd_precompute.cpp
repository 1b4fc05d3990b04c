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
#include "tessel/sampling/feature_rows.hpp"
#include "tessel/train/feature_memory.hpp"
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
  train::FeatureMemory memory{train::FeatureMemory::Kind::all, 0, "all"};
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
  app.add_option_function<std::string>(
         "--feature-memory",
         [args](const std::string& text) {
           args->memory = train::parse_feature_memory(text);
           TESSEL_EXPECTS(args->memory.kind != train::FeatureMemory::Kind::automatic,
                          "--feature-memory {}: precompute takes a size (K, M, G suffixes) or "
                          "all",
                          text);
         },
         "bytes of feature and hop rows a rank holds (K, M, G suffixes: 64K, 2G) or all: X "
         "over it is read from the part file in row blocks, and each hop's output over what is "
         "left goes to a scratch file in the output folder; the files written are the same")
      ->default_str("all");
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
    const partition::Manifest first = partition::read_manifest(args->part_dir);
    const bool bounded = args->memory.kind == train::FeatureMemory::Kind::bytes;
    // X in memory when the budget holds it, as tessel train decides.
    const int rank = comm->rank();
    const std::int64_t owned =
        rank + 1 < static_cast<int>(first.offsets.size())
            ? static_cast<std::int64_t>(first.offsets[rank + 1] - first.offsets[rank])
            : 0;
    const std::int64_t feature_bytes =
        owned * first.feature_dim * static_cast<std::int64_t>(sizeof(float));
    const bool in_memory = !bounded || args->memory.bytes >= feature_bytes;
    train::RankPartition read = train::read_rank_partition(*comm, args->part_dir, in_memory);
    const partition::Manifest& manifest = read.manifest;
    partition::Part& part = read.part;
    const bool normalize = args->options.normalize_features == train::FeatureNormalization::row;
    if (in_memory && normalize && !part.features.empty()) {
      // The kernel op tessel train applies (L1: each row divided by the sum of the absolute
      // values of its entries).
      Tensor features = Tensor::from_vector(part.features, {part.num_owned, part.feature_dim});
      kernels::normalize_rows(features);
      std::copy_n(features.data<float>(), features.numel(), part.features.data());
    }
    const auto part_file = args->part_dir / partition::part_file_name(rank);
    const std::string checksum = partition::recorded_feature_checksum(manifest, rank);
    const dist::InputRowsOpener open_input =
        [&](std::int64_t cache_bytes) -> std::unique_ptr<sampling::OwnedFeatureRows> {
      if (in_memory) return sampling::rows_in_memory(part.features, part.feature_dim);
      sampling::OutOfCoreOptions ooc;
      ooc.budget_bytes = cache_bytes;
      ooc.normalize_rows = normalize;
      ooc.checksum = checksum;
      return sampling::open_rows_out_of_core(
          part_file, part.num_owned, manifest.feature_dim,
          std::span<const std::int64_t>(part.degree.data(),
                                        static_cast<std::size_t>(part.num_owned)),
          ooc);
    };
    const auto dir = args->out_dir.empty() ? dist::default_sign_dir(args->part_dir, args->options)
                                           : args->out_dir;
    const dist::StreamedPrecompute streamed = dist::precompute_sign_folder(
        *comm, part, open_input, manifest.dataset, args->options, dir,
        bounded ? args->memory.bytes : -1);
    const std::int64_t out_of_core = comm->allreduce_value<std::int64_t>(in_memory ? 0 : 1);
    const std::int64_t on_disk =
        comm->allreduce_value<std::int64_t>(streamed.hops_on_disk, comm::ReduceOp::max);
    if (bounded)
      log::info("--feature-memory {}: features read from the part file on {} of {} ranks, up "
                "to {} of {} hops through scratch files",
                args->memory.text, out_of_core, comm->size(), on_disk, args->options.hops);
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
