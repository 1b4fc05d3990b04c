// Command-line flags shared by `tessel train` and `tessel bench` (model, optimizer, modes).
#pragma once

#include "tessel/train/train.hpp"

#include <CLI/CLI.hpp>

#include <string>

namespace tessel::cli {

// Above this a learning rate only makes the parameters overflow: refused at the command line.
constexpr double kMaxLearningRate = 10.0;

// A CLI11 check for a finite number in [lo, hi] ((lo, hi] when lo_open; hi may be infinity).
CLI::Validator finite_range(double lo, double hi, bool lo_open = false);

// Adds the model, optimizer and sampled-mode flags to `app`, writing into `options`. The
// string `fanouts` is parsed by finish_train_options().
void add_model_flags(CLI::App& app, train::TrainOptions& options, std::string& fanouts);
// Parses what CLI11 cannot check (fanout lists, model kind, layer counts).
void finish_train_options(train::TrainOptions& options, const std::string& fanouts);

}  // namespace tessel::cli
