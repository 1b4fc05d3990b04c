// `tessel train DIR --mode full|sampled ...`: distributed training under mpirun, one rank per part.
#include "command.hpp"
#include "train_options.hpp"

#include "tessel/comm/mpi_communicator.hpp"
#include "tessel/train/train.hpp"

#include <memory>

namespace tessel::cli {
namespace {

std::function<void()> setup_train(CLI::App& app) {
  auto options = std::make_shared<train::TrainOptions>();
  auto fanouts = std::make_shared<std::string>();
  app.add_option("DIR", options->part_dir, "partition folder made by `tessel partition`")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("--mode", options->mode,
                 "full (full-batch), sampled (mini-batches), dynamic (graph snapshots; needs a "
                 "partition of a temporal store) or pipeline (SIGN MLP in stages)")
      ->check(CLI::IsMember({"full", "sampled", "dynamic", "pipeline"}))
      ->capture_default_str();
  app.add_option("--epochs", options->epochs, "epochs to train")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  add_model_flags(app, *options, *fanouts);
  app.add_option("--metrics", options->metrics_path, "write one JSON object per epoch here");
  app.add_option("--checkpoint", options->checkpoint_dir, "folder for checkpoints");
  app.add_option("--checkpoint-every", options->checkpoint_every,
                 "write a checkpoint every N epochs (and after the last)");
  app.add_option("--resume", options->resume_dir, "continue from the checkpoint in this folder")
      ->check(CLI::ExistingDirectory);
  app.add_option("--predictions", options->predictions_path,
                 "write predicted classes and logits of every node to this HDF5 file");
  app.add_flag("--quiet", options->quiet, "no per-epoch lines");
  app.footer(
      "Run with one rank per part: mpirun -np K tessel train DIR ...\n"
      "--mode pipeline runs on data-parallel x stages ranks (a partition into that many parts).\n"
      "Each epoch prints loss, train/valid/test accuracy, seconds and their split, bytes sent.");
  return [options, fanouts] {
    finish_train_options(*options, *fanouts);
    TESSEL_EXPECTS(options->checkpoint_every == 0 || !options->checkpoint_dir.empty(),
                   "--checkpoint-every needs --checkpoint DIR");
    auto comm = comm::make_mpi_communicator();
    train::train(*comm, *options);
  };
}

const Registrar registrar({"train", "Train a GNN on a partition folder (run under mpirun).", true,
                           setup_train, 30});

}  // namespace
}  // namespace tessel::cli
