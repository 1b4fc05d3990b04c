// The training modes: the table that registers them, and train(), the entry point that runs the
// one options.mode names.
#pragma once

#include "tessel/comm/communicator.hpp"
#include "tessel/train/runtime.hpp"
#include "tessel/train/train.hpp"

#include <string>
#include <vector>

namespace tessel::train {

// Runs training in the mode named by options.mode on this rank's part. Collective.
TrainResult train(comm::Communicator& comm, const TrainOptions& options);

// The training modes, in the order of their table.
std::vector<std::string> mode_names();
// Throws InputError naming the known modes for an unknown name.
const ModeTraits& mode_traits(const std::string& name);
// What can be refused of options.mode without reading data, for `ranks` ranks: the options
// every mode checks and the mode's own (the pipeline's stages and split). train() does the
// same; `tessel bench` calls it for every mode before training any.
void check_mode_options(const TrainOptions& options, int ranks);
// The modes `tessel bench` compares when --modes is not given, in table order.
std::vector<std::string> default_bench_modes();
// The registered mode of this name, with its steps; throws naming the known ones otherwise.
const ModeInfo& find_mode(const std::string& name);

}  // namespace tessel::train
