// Choosing where a rank trains: its device (GPU local_rank % visible GPUs) and data plane.
#pragma once

#include "trainer.hpp"

#include <functional>
#include <memory>
#include <string>

namespace tessel::train {

// A mode: its name, whether its epoch steps run on a GPU, and how its trainer is built.
struct ModeInfo {
  std::string name;
  bool runs_on_gpu = false;
  std::function<std::unique_ptr<Trainer>(TrainerContext)> make;
};
// The registered modes; throws naming the known ones for an unknown name.
const ModeInfo& find_mode(const std::string& name);

// The runtime of this rank and the data communicator it owns (when it is not the control one).
struct RuntimeHolder {
  Runtime runtime;
  std::unique_ptr<comm::Communicator> owned_data;
  std::string description;  // one line for the log: device, data plane, GPU of every rank
};

// Resolves options.device and options.comm for `mode` (collective over `control`).
RuntimeHolder make_runtime(comm::Communicator& control, const TrainOptions& options,
                           const ModeInfo& mode);

}  // namespace tessel::train
