// Flag helpers shared by the CLI and the modes' own flags.
#include "tessel/train/flags.hpp"

#include "tessel/core/error.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

namespace tessel::train {

CLI::Validator finite_range(double lo, double hi, bool lo_open, bool hi_open) {
  const std::string description =
      std::isinf(hi) ? fmt::format("finite, {} {}", lo_open ? ">" : ">=", lo)
                     : fmt::format("{}{}, {}{}", lo_open ? "(" : "[", lo, hi, hi_open ? ")" : "]");
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double value = 0;
        // CLI11's own Range lets NaN through (every comparison with NaN is false), and inf
        // passes an unbounded one: both are refused here.
        if (!CLI::detail::lexical_cast(text, value) || !std::isfinite(value))
          return fmt::format("'{}' is not a finite number", text);
        if (value < lo || value > hi || (lo_open && value == lo) || (hi_open && value == hi))
          return fmt::format("{} is outside {}", text,
                             std::isinf(hi) ? "[" + fmt::format("{}", lo) + ", inf)" : description);
        return std::string();
      },
      description);
}

CLI::Validator int_range(std::int64_t lo, std::int64_t hi) {
  const std::string description = fmt::format("[{}, {}]", lo, hi);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        std::int64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [at, ec] = std::from_chars(text.data(), end, value);
        if (ec == std::errc::result_out_of_range) return fmt::format("{} is outside {}", text, description);
        if (ec != std::errc() || at != end) return fmt::format("'{}' is not a whole number", text);
        if (value < lo || value > hi) return fmt::format("{} is outside {}", text, description);
        return std::string();
      },
      description);
}

std::vector<int> parse_int_list(const std::string& flag, const std::string& text,
                                const std::function<bool(int)>& ok, const char* expected) {
  std::vector<int> values;
  std::size_t start = 0;
  while (true) {
    const auto comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    int value = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    TESSEL_EXPECTS(ec == std::errc() && ptr == item.data() + item.size() && ok(value),
                   "{} {}: '{}' is not {}", flag, text, item, expected);
    values.push_back(value);
    if (comma == std::string::npos) return values;
    start = comma + 1;
  }
}

}  // namespace tessel::train
