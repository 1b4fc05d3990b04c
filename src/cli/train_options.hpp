// Command-line flags shared by `tessel train` and `tessel bench` (model, optimizer, modes).
#pragma once

#include "tessel/train/train.hpp"

#include <CLI/CLI.hpp>

#include <string>

namespace tessel::cli {

// Adds the model, optimizer and sampled-mode flags to `app`, writing into `options`. The
// string `fanouts` is parsed by finish_train_options().
void add_model_flags(CLI::App& app, train::TrainOptions& options, std::string& fanouts);
// Parses what CLI11 cannot check (fanout lists, model kind, layer counts).
void finish_train_options(train::TrainOptions& options, const std::string& fanouts);

}  // namespace tessel::cli
