// --feature-memory: parsing the size, and reading the memory limit the process runs under.
#include "tessel/train/feature_memory.hpp"

#include "tessel/core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

namespace tessel::train {

FeatureMemory parse_feature_memory(const std::string& text) {
  FeatureMemory m;
  m.text = text;
  if (text == "auto") return m;
  if (text == "all") {
    m.kind = FeatureMemory::Kind::all;
    return m;
  }
  const auto bad = [&] {
    return fmt::format("--feature-memory {}: expected auto, all, or a size in bytes with an "
                       "optional K, M or G suffix (e.g. 64K, 2G)",
                       text);
  };
  TESSEL_EXPECTS(!text.empty(), "{}", bad());
  std::string digits = text;
  double scale = 1;
  const char last = static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
  if (last == 'K' || last == 'M' || last == 'G') {
    scale = last == 'K' ? 1024.0 : last == 'M' ? 1048576.0 : 1073741824.0;
    digits.pop_back();
  }
  TESSEL_EXPECTS(!digits.empty() &&
                     std::all_of(digits.begin(), digits.end(),
                                 [](char c) {
                                   return std::isdigit(static_cast<unsigned char>(c)) || c == '.';
                                 }) &&
                     std::count(digits.begin(), digits.end(), '.') <= 1 && digits != ".",
                 "{}", bad());
  const double value = std::stod(digits) * scale;
  TESSEL_EXPECTS(std::isfinite(value) && value < 9e18, "{}", bad());
  m.kind = FeatureMemory::Kind::bytes;
  m.bytes = static_cast<std::int64_t>(value);
  return m;
}

std::string format_mib(std::int64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / 1048576.0);
}

std::filesystem::path scratch_folder() {
  const char* env = std::getenv("TMPDIR");
  return std::filesystem::path(env != nullptr && *env != '\0' ? env : "/tmp");
}

} // namespace tessel::train
