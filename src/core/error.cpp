// Formatting of the source location attached to every Tessel error, and the error of an unknown
// option word.
#include "tessel/core/error.hpp"

#include "tessel/core/log.hpp"
#include "tessel/core/option_words.hpp"

#include <cstring>

namespace tessel::detail {

std::string where_string(const char* file, int line) {
  // Keep the path relative to the project: the part from the last layer folder on.
  std::string_view path(file);
  for (const char* root : {"include/", "src/", "kernels/", "datasets/", "partition/", "sampling/",
                           "tests/"}) {
    const auto pos = path.rfind(root);
    if (pos != std::string_view::npos) {
      path = path.substr(pos);
      break;
    }
  }
  return fmt::format("{}:{}, rank {}", path, line, log::rank());
}

}  // namespace tessel::detail

namespace tessel {

void fail_option_word(std::string_view word, const std::string& listed) {
  TESSEL_FAIL("'{}' is not one of {}", word, listed);
}

}  // namespace tessel
