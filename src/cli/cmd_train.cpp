// `tessel train DIR --mode full|sampled ...`: distributed training under mpirun, one rank per part.
#include "command.hpp"
#include "train_options.hpp"

#include "tessel/comm/mpi_communicator.hpp"
#include "tessel/train/train.hpp"
#include "tessel/modes/modes.hpp"

#include <memory>

namespace tessel::cli {
namespace {

std::function<void()> setup_train(CLI::App& app) {
  auto options = std::make_shared<train::TrainOptions>();
  auto modes = std::make_shared<train::ModeFlagValues>();
  app.add_option("DIR", options->part_dir, "partition folder made by `tessel partition`")
      ->required()
      ->check(partition_folder());
  app.add_option("--mode", options->mode,
                 "full (full-batch), sampled (mini-batches), dynamic (graph snapshots; needs a "
                 "partition of a temporal store) or pipeline (SIGN MLP in stages)")
      ->check(CLI::IsMember(train::mode_names()))
      ->capture_default_str();
  app.add_option("--epochs", options->epochs,
                 "epochs to train (dynamic node regression: 100 unless given)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--patience", options->patience,
                 "stop once the validation metric has not improved for N epochs (every mode; "
                 "only with a validation split; 0: never; dynamic node regression: 10 unless "
                 "--epochs or --patience is given)")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  add_model_flags(app, *options, *modes);
  app.add_option("--metrics", options->metrics_path, "write one JSON object per epoch here");
  CLI::Option* checkpoint =
      app.add_option("--checkpoint", options->checkpoint_dir,
                     "write a checkpoint into this folder after the last epoch (and every N "
                     "epochs with --checkpoint-every N)");
  app.add_option("--checkpoint-every", options->checkpoint_every,
                 "also write a checkpoint every N >= 1 epochs (needs --checkpoint)")
      ->check(CLI::Range(1, 1000000))
      ->needs(checkpoint);
  app.add_option("--resume", options->resume_dir,
                 "continue from the checkpoint in this folder (same model, mode and --seed; "
                 "--epochs is the total, beyond the checkpoint's epoch)")
      ->check(CLI::ExistingDirectory);
  app.add_option("--predictions", options->predictions_path,
                 "write predicted classes and logits of every node to this HDF5 file (--task "
                 "link: the scores of the test edges)");
  app.add_option("--embeddings", options->embeddings_path,
                 "write the last hidden layer's output of every node to this HDF5 file (dynamic: "
                 "every node at every snapshot; --task link: the encoder's output)");
  add_choice(app, "--save", options->save,
             "which epoch --predictions and --embeddings hold, and DIR/best.h5 beside "
             "--checkpoint's checkpoint.h5: best (best validation metric; the last epoch when "
             "there is no validation split) or last");
  app.add_flag("--quiet", options->quiet, "no per-epoch lines");
  app.add_flag("--verbose", options->verbose,
               "with --eval-every N, also print the epochs between evaluations");
  app.footer(
      "Run with one rank per part: mpirun -np K tessel train DIR ...\n"
      "--mode pipeline runs on data-parallel x stages ranks (a partition into that many parts).\n"
      "Each epoch prints loss, train/valid/test accuracy, seconds and their split, bytes sent.\n"
      "Training stops with an error naming the epoch when the loss or a parameter stops being "
      "finite.\n"
      "Fault injection (tests the whole-job abort): TESSEL_FAULT_RANK=r TESSEL_FAULT_EPOCH=e "
      "make rank r fail at the start of epoch e.");
  // Checked while parsing, before MPI starts, so a bad option is one line from rank 0.
  app.final_callback([&app, options, modes] {
    check_mode_flags(app, {options->mode});
    apply_mode_defaults(app, *options);
    finish_train_options(app, *options, *modes);
    check_train_outputs(*options);
  });
  return [options] {
    auto comm = comm::make_mpi_communicator();
    train::train(*comm, *options);
  };
}

const Registrar registrar({"train", "Train a GNN on a partition folder (run under mpirun).", true,
                           setup_train, 30});

}  // namespace
}  // namespace tessel::cli
