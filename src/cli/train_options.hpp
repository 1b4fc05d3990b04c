// Command-line flags shared by `tessel train` and `tessel bench` (model, optimizer, modes).
#pragma once

#include "tessel/train/train.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>

#include <string>

namespace tessel::cli {

// Above this a learning rate only makes the parameters overflow: refused at the command line.
constexpr double kMaxLearningRate = 10.0;

// A CLI11 check for a finite number in [lo, hi] ((lo, hi] when lo_open, [lo, hi) when hi_open;
// hi may be infinity).
CLI::Validator finite_range(double lo, double hi, bool lo_open = false, bool hi_open = false);

// A CLI11 check for a whole number in [lo, hi] that says so in one line ("--batch-size 0 is
// outside [1, 2^62]"), unlike CLI11's PositiveNumber.
CLI::Validator int_range(std::int64_t lo, std::int64_t hi);

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

// Adds the model, optimizer and sampled-mode flags to `app`, writing into `options`. The
// string `fanouts` is parsed by finish_train_options().
void add_model_flags(CLI::App& app, train::TrainOptions& options, std::string& fanouts);

// An option whose words stand for the values of an enum (its option_words): parsed into the
// enum here, once, so nothing after the command line compares the option as a string. Help
// shows the words and the default's word.
template <HasOptionWords E>
CLI::Option* add_choice(CLI::App& app, const std::string& name, E& value, const std::string& help) {
  const std::string listed = option_word_list(E{}, ",");
  // The word becomes the enum's number, which CLI11 then reads into the enum.
  const CLI::Validator to_number(
      [listed](std::string& input) {
        for (const OptionWord<E>& w : option_words(E{}))
          if (input == w.word) {
            input = std::to_string(static_cast<int>(w.value));
            return std::string();
          }
        return input + " not in {" + listed + "}";
      },
      "{" + listed + "}");
  return app.add_option(name, value, help)->transform(to_number)->default_str(option_word(value));
}
// The mode's own defaults (dynamic node regression: 1 layer, no dropout) for the flags `app`
// did not get; before finish_train_options().
void apply_mode_defaults(const CLI::App& app, train::TrainOptions& options);
// Parses what CLI11 cannot check (fanout lists, model kind, layer counts).
void finish_train_options(train::TrainOptions& options, const std::string& fanouts);

}  // namespace tessel::cli
