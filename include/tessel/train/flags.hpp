// Helpers for command-line flags, shared by the CLI and the modes that register their own flags
// (tessel/modes/modes.hpp): range checks that say what they expected in one line, options whose
// words stand for enum values, and comma-separated number lists.
#pragma once

#include "tessel/core/option_words.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tessel::train {

// A CLI11 check for a finite number in [lo, hi] ((lo, hi] when lo_open, [lo, hi) when hi_open;
// hi may be infinity).
CLI::Validator finite_range(double lo, double hi, bool lo_open = false, bool hi_open = false);

// A CLI11 check for a whole number in [lo, hi] that says so in one line ("--batch-size 0 is
// outside [1, 2^62]"), unlike CLI11's PositiveNumber.
CLI::Validator int_range(std::int64_t lo, std::int64_t hi);

// A flag checked by CLI11 as it is parsed, its default shown in --help.
template <class T>
CLI::Option* add_checked(CLI::App& app, const std::string& name, T& value, const std::string& help,
                         const CLI::Validator& check) {
  return app.add_option(name, value, help)->check(check)->capture_default_str();
}

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

// The whole numbers of a comma-separated list such as "15,10,5"; InputError "<flag> <text>:
// '<item>' is not <expected>" for an item that is not one or that `ok` refuses.
std::vector<int> parse_int_list(const std::string& flag, const std::string& text,
                                const std::function<bool(int)>& ok, const char* expected);

}  // namespace tessel::train
