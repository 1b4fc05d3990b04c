// Choosing where a rank trains: its device (GPU local_rank % visible GPUs) and data plane.
#pragma once

#include "trainer.hpp"

#include <functional>
#include <memory>
#include <string>

namespace tessel::train {

// A mode: its traits, and how it runs: a Trainer built on the runtime (make), or a driver of
// the whole run that reads its own partition (run, for the temporal mode).
struct ModeInfo : ModeTraits {
  std::function<std::unique_ptr<Trainer>(TrainerContext)> make;
  std::function<TrainResult(comm::Communicator&, const TrainOptions&)> run;
  // The mode's refusals that need no data, for `ranks` ranks (may be empty).
  std::function<void(const TrainOptions&, int ranks)> check;
};
// The registered modes; throws naming the known ones for an unknown name.
const ModeInfo& find_mode(const std::string& name);

// The runtime of this rank and the data communicator it owns (when it is not the control one).
struct RuntimeHolder {
  Runtime runtime;
  std::unique_ptr<comm::Communicator> owned_data;
  std::string description;  // one line for the log: device, data plane, GPU of every rank
  // For the log after it (several ranks only): a table of every rank's host, local rank,
  // device, OpenMP threads and the cores it may run on.
  std::string placement;
};

// Resolves options.device and options.comm for `mode` (collective over `control`).
RuntimeHolder make_runtime(comm::Communicator& control, const TrainOptions& options,
                           const ModeInfo& mode);

}  // namespace tessel::train
