// Choosing where a rank trains: its device (GPU local_rank % visible GPUs) and data plane.
#pragma once

#include "tessel/train/trainer.hpp"

#include <functional>
#include <memory>
#include <string>

namespace tessel::train {

// A mode: its traits, and the steps train() runs it by: read this rank's share of the partition
// folder (load, before the runtime is chosen; it may settle options that depend on the data),
// build its Trainer on the runtime (make), and describe the run for the log and checkpoints
// (describe). The shared driver then runs the epochs.
struct ModeInfo : ModeTraits {
  std::function<LoadedPart(comm::Communicator&, TrainOptions&)> load;
  std::function<std::unique_ptr<Trainer>(TrainerContext)> make;
  std::function<RunInfo(const Trainer&, const TrainerContext&)> describe;
  // The mode's refusals that need no data, for `ranks` ranks (may be empty).
  std::function<void(const TrainOptions&, int ranks)> check;
};

// The runtime of this rank and the data communicator it owns (when it is not the control one).
struct RuntimeHolder {
  Runtime runtime;
  std::unique_ptr<comm::Communicator> owned_data;
  std::string description;  // one line for the log: device, data plane, GPU of every rank
  // For the log after it (several ranks only): a table of every rank's host, local rank,
  // device, OpenMP threads and the cores it may run on.
  std::string placement;
};

// Runs `mode` on this rank's part: its load step, the runtime, its trainer, then the shared
// driver (or, with options.predict_from, the checkpoint's predictions). Collective.
TrainResult run_mode(comm::Communicator& comm, const TrainOptions& options, const ModeInfo& mode);

// Resolves options.device and options.comm for `mode` (collective over `control`).
RuntimeHolder make_runtime(comm::Communicator& control, const TrainOptions& options,
                           const ModeInfo& mode);

}  // namespace tessel::train
