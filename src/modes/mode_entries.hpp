// Each mode's entry points, which the mode table (modes.cpp) registers: its factory, its run
// description and the refusals it makes before anything is loaded.
#pragma once

#include "tessel/train/trainer.hpp"

#include <functional>
#include <memory>
#include <string>

namespace tessel::train {

// The temporal mode: reads partition.json of a temporal partition (the trainer reads the store
// after its runtime is chosen), builds the trainer, and describes it.
LoadedPart load_temporal_part(comm::Communicator& comm, TrainOptions& options);
void check_dynamic_options(const TrainOptions& options, int ranks);
std::unique_ptr<Trainer> make_dynamic_trainer(TrainerContext context);
RunInfo dynamic_run_info(const Trainer& trainer, const TrainerContext& context);
// Dynamic mode's defaults: node regression takes the usual recipe's model (1 GCN layer, no
// dropout) unless --layers or --dropout is given, and the recipe of modes/dynamic.hpp
// (weight decay, epochs, patience).
void dynamic_defaults(TrainOptions& options,
                      const std::function<bool(const std::string&)>& given);

std::unique_ptr<Trainer> make_full_trainer(TrainerContext context);
// --task link on a static graph (full mode, modes/full/link_task.cpp): whether the options ask
// for it, its trainer, and the full mode's run description (the link metric when they do).
bool link_task(const TrainOptions& options);
std::unique_ptr<Trainer> make_link_trainer(TrainerContext context);
RunInfo full_run_info(const Trainer& trainer, const TrainerContext& context);
// The full mode's flags that exclude each other (boundary sampling changes the cut every
// epoch, which neither pre-aggregation plans nor stale halos follow).
void check_full_options(const TrainOptions& options, int ranks);
std::unique_ptr<Trainer> make_sampled_trainer(TrainerContext context);
// Sampled mode's refusals before loading: --task link takes the CPU's host path only.
void check_sampled_options(const TrainOptions& options, int ranks);
// graph_run_info and the sampler's own data plane, when it has one (own_comms).
RunInfo sampled_run_info(const Trainer& trainer, const TrainerContext& context);
std::unique_ptr<Trainer> make_pipeline_trainer(TrainerContext context);
// graph_run_info and the stage communicator of the gradient all-reduce (own_comms).
RunInfo pipeline_run_info(const Trainer& trainer, const TrainerContext& context);
// The pipeline's refusals that need no data (model, ranks = data-parallel x stages, blocks per
// stage, --split): run before any mode of a bench trains, and by the pipeline trainer.
void check_pipeline_options(const TrainOptions& options, int ranks);

}  // namespace tessel::train
