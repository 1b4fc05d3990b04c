// Command-line flags shared by `tessel train` and `tessel bench` (model, optimizer, modes).
#pragma once

#include "tessel/modes/modes.hpp"
#include "tessel/train/flags.hpp"
#include "tessel/train/train.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>

#include <string>

namespace tessel::cli {

// The flag helpers the modes' flags use too (tessel/train/flags.hpp).
using train::add_checked;
using train::add_choice;
using train::finite_range;
using train::int_range;
using train::parse_int_list;

// Above this a learning rate only makes the parameters overflow: refused at the command line.
constexpr double kMaxLearningRate = 10.0;



// A CLI11 check for a seed: decimal digits only, at most 2^64 - 1 (CLI11 alone wraps -1 to
// 2^64 - 1).
CLI::Validator seed_check();

// A CLI11 check for a partition folder argument: an existing folder; a file (a dataset store
// given where its partition belongs) is refused with the command that makes the partition.
CLI::Validator partition_folder();

// Refuses a flag given on the command line that none of the chosen modes reads ("--fanouts
// applies to --mode sampled, not --mode full"), instead of ignoring it.
void check_mode_flags(const CLI::App& app, const std::vector<std::string>& modes);

// Refuses outputs that would destroy something: a --checkpoint that names a file, and a
// --predictions, --metrics or checkpoint file that is one of the partition folder's files.
void check_train_outputs(const train::TrainOptions& options);

// Adds the model, optimizer and every mode's flags to `app`, writing into `options` (the flags
// every mode reads) and `modes` (each mode's own; tessel/modes/modes.hpp).
void add_model_flags(CLI::App& app, train::TrainOptions& options, train::ModeFlagValues& modes);

// The mode's own defaults (dynamic node regression: 1 layer, no dropout) for the flags `app`
// did not get; before finish_train_options().
void apply_mode_defaults(const CLI::App& app, train::TrainOptions& options);
// Parses what CLI11 cannot check (fanout lists, model kind, layer counts).
// Each mode finishes its own options first (sampled: --fanouts); then options.mode_options is set
// to options.mode's from `modes`.
void finish_train_options(const CLI::App& app, train::TrainOptions& options,
                          train::ModeFlagValues& modes);

}  // namespace tessel::cli
