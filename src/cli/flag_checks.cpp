// Checks shared by every flag (see flag_checks.hpp).
#include "flag_checks.hpp"

#include "tessel/core/error.hpp"
#include "tessel/modes/modes.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>

namespace tessel::cli {
namespace {

// The option's value type as CLI11 names it ("INT", "UINT", "FLOAT", "TEXT", ...), without the
// validators' descriptions it appends after ':'.
std::string value_kind(const CLI::Option& option) {
  const std::string full = option.get_type_name();
  return full.substr(0, full.find(':'));
}

// A whole number in decimal digits that fits T; the error text otherwise. Leading zeros are
// dropped from `text` (CLI11 would read 010 as octal 8).
template <class T> std::string whole_number_error(std::string& text) {
  const bool is_signed = std::numeric_limits<T>::is_signed;
  const std::string range = fmt::format("[{}, {}]", std::numeric_limits<T>::min(),
                                        std::numeric_limits<T>::max());
  const std::size_t digits_from = is_signed && !text.empty() && text[0] == '-' ? 1 : 0;
  const bool digits_only =
      text.size() > digits_from &&
      std::all_of(text.begin() + static_cast<std::ptrdiff_t>(digits_from), text.end(),
                  [](char c) { return c >= '0' && c <= '9'; });
  if (!digits_only) {
    if (!is_signed && !text.empty() && text[0] == '-')
      return fmt::format("{} is outside {}", text, range);
    return fmt::format("'{}' is not a whole number (decimal digits{})", text,
                       is_signed ? ", with a leading - if negative" : "");
  }
  const std::size_t first = text.find_first_not_of('0', digits_from);
  text.erase(digits_from, (first == std::string::npos ? text.size() - 1 : first) - digits_from);
  if (text == "-0") text = "0";
  T value{};
  const auto [at, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range)
    return fmt::format("{} is outside the whole numbers this flag holds, {}", text, range);
  if (ec != std::errc() || at != text.data() + text.size())
    return fmt::format("'{}' is not a whole number", text);
  return std::string();
}

CLI::Validator common_check(const std::string& kind) {
  return CLI::Validator(
      [kind](std::string& text) -> std::string {
        if (text.empty()) return "an empty value; give one";
        if (kind == "INT") return whole_number_error<std::int64_t>(text);
        if (kind == "UINT") return whole_number_error<std::uint64_t>(text);
        if (kind == "FLOAT") {
          double value = 0;
          // Decimal only: strtod would read "0x10" as 16 and "infinity" as a number.
          const bool decimal = std::all_of(text.begin(), text.end(), [](char c) {
            return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' ||
                   c == '-';
          });
          if (!decimal || !CLI::detail::lexical_cast(text, value) || !std::isfinite(value))
            return fmt::format("'{}' is not a finite number", text);
        }
        return std::string();
      },
      // No description: --help shows the option's own checks only.
      std::string());
}

void add_checks_to(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    if (option->get_type_size_max() == 0) continue;  // a flag without a value
    option->transform(common_check(value_kind(*option)));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) add_checks_to(*sub);
}

void check_distinct_in(const CLI::App& app) {
  for (const CLI::Option* option : app.get_options()) {
    if (option->get_items_expected_max() <= 1 || option->count() < 2) continue;
    // A list of numbers is a tuple, not a set (`--edge-split 80,10,10`).
    const std::string kind = value_kind(*option);
    if (kind == "INT" || kind == "UINT" || kind == "FLOAT") continue;
    std::string shown;
    for (const auto& value : option->results()) shown += (shown.empty() ? "" : " ") + value;
    require_distinct(option->get_name(), shown, option->results());
  }
  for (const CLI::App* sub : app.get_subcommands()) check_distinct_in(*sub);
}

}  // namespace

void add_common_checks(CLI::App& app) {
  add_checks_to(app);
}

void refuse_flag_values(const CLI::App& app, int argc, const char* const* argv,
                        std::string& reached) {
  // The commands reached so far, outermost first.
  std::vector<const CLI::App*> chain{&app};
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") return;
    if (!word.starts_with("--")) {
      for (const CLI::App* sub : chain.back()->get_subcommands({}))
        if (sub->check_name(word)) {
          chain.push_back(sub);
          break;
        }
      continue;
    }
    const auto equals = word.find('=');
    if (equals == std::string::npos) continue;
    const std::string name = word.substr(2, equals - 2);
    for (const CLI::App* at : chain)
      for (const CLI::Option* option : at->get_options()) {
        if (option->get_expected_max() != 0) continue;  // takes a value
        const auto& names = option->get_lnames();
        if (std::find(names.begin(), names.end(), name) == names.end()) continue;
        for (const CLI::App* command : chain)
          reached += (reached.empty() ? "" : " ") + command->get_name();
        TESSEL_FAIL("--{} takes no value (got {}): give --{} alone", name, word, name);
      }
  }
}

void check_distinct_values(const CLI::App& app) {
  check_distinct_in(app);
}

void require_distinct(const std::string& flag, const std::string& shown,
                      const std::vector<std::string>& items) {
  for (std::size_t i = 0; i < items.size(); ++i)
    TESSEL_EXPECTS(std::find(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(i),
                             items[i]) == items.begin() + static_cast<std::ptrdiff_t>(i),
                   "{}: {} is listed twice in {}", flag, items[i], shown);
}

namespace {

// The items of "a,b,c"; `error` says what is wrong when an item is empty or listed twice.
std::vector<std::string> list_items(const std::string& text, std::string& error) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (true) {
    const auto comma = text.find(',', start);
    std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) {
      error = fmt::format("an empty item in the list {}", text);
      return items;
    }
    if (std::find(items.begin(), items.end(), item) != items.end()) {
      error = fmt::format("{} is listed twice in {}", item, text);
      return items;
    }
    items.push_back(std::move(item));
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

}  // namespace

std::vector<std::string> split_list(const std::string& flag, const std::string& text) {
  std::string error;
  auto items = list_items(text, error);
  TESSEL_EXPECTS(error.empty(), "{}: {}", flag, error);
  return items;
}

CLI::Validator distinct_list() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::string error;
        (void)list_items(text, error);
        return error;
      },
      std::string());
}

void check_fault_environment() {
  const bool rank_set = std::getenv("TESSEL_FAULT_RANK") != nullptr;
  TESSEL_EXPECTS(rank_set == (std::getenv("TESSEL_FAULT_EPOCH") != nullptr),
                 "TESSEL_FAULT_RANK and TESSEL_FAULT_EPOCH go together; only {} is set",
                 rank_set ? "TESSEL_FAULT_RANK" : "TESSEL_FAULT_EPOCH");
  for (const char* name : {"TESSEL_FAULT_RANK", "TESSEL_FAULT_EPOCH"}) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    std::string text = value;
    std::string error =
        text.empty() ? std::string("an empty value") : whole_number_error<std::uint32_t>(text);
    if (error.empty() && std::strtoull(value, nullptr, 10) >
                             static_cast<unsigned long long>(std::numeric_limits<int>::max()))
      error = "beyond a rank or epoch number";
    TESSEL_EXPECTS(error.empty(), "{}={}: {}; expected a whole number >= 0", name, value, error);
  }
  if (const char* kind = std::getenv("TESSEL_FAULT_KIND"))
    TESSEL_EXPECTS(std::string(kind) == "kill", "TESSEL_FAULT_KIND={}: expected kill", kind);
  if (const char* mode = std::getenv("TESSEL_FAULT_MODE")) {
    const auto known = train::mode_names();
    TESSEL_EXPECTS(std::find(known.begin(), known.end(), mode) != known.end(),
                   "TESSEL_FAULT_MODE={}: expected one of {}", mode, fmt::join(known, ", "));
  }
}

}  // namespace tessel::cli
