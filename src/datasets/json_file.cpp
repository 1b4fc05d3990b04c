// Depth-limited JSON file reading with messages that name the file.
#include "tessel/datasets/json_file.hpp"

#include "tessel/core/error.hpp"

#include <fstream>
#include <iterator>
#include <string>

namespace tessel::datasets {

namespace {

struct TooDeep {
  int depth;
};

} // namespace

nlohmann::json read_json_file(const std::filesystem::path& path, int max_depth) {
  const std::string file = path.string();
  std::error_code ec;
  TESSEL_EXPECTS(!std::filesystem::is_directory(path, ec), "{}: is a folder, expected a JSON file",
                 file);
  std::ifstream in(path, std::ios::binary);
  TESSEL_EXPECTS(in.good(), "{}: cannot open the file", file);
  const auto bytes = std::filesystem::file_size(path, ec);
  TESSEL_EXPECTS(ec || bytes <= kMaxJsonBytes,
                 "{}: {:.1f} GB of JSON, more than the {:.0f} GB Tessel reads as JSON (convert "
                 "large dynamic graphs from a timestamped edge list instead)",
                 file, static_cast<double>(bytes) / 1e9, static_cast<double>(kMaxJsonBytes) / 1e9);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  TESSEL_EXPECTS(!in.bad(), "{}: cannot read the file", file);
  std::size_t skip = 0;
  if (text.starts_with("\xEF\xBB\xBF")) skip = 3;
  // The callback sees each value's depth as the parser opens it, before anything is built at
  // that depth: a 1e5-deep file stops at max_depth + 1 with no deep value in memory.
  const nlohmann::json::parser_callback_t limit = [max_depth](int depth,
                                                              nlohmann::json::parse_event_t event,
                                                              nlohmann::json&) {
    if ((event == nlohmann::json::parse_event_t::object_start ||
         event == nlohmann::json::parse_event_t::array_start) &&
        depth >= max_depth)
      throw TooDeep{depth + 1};
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin() + static_cast<std::ptrdiff_t>(skip), text.end(),
                                 limit);
  } catch (const TooDeep& e) {
    TESSEL_FAIL("{}: not valid input: JSON nested more than {} levels deep (a value at depth "
                "{}; expected numbers, lists and objects at most {} deep)",
                file, max_depth, e.depth, max_depth);
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann's message starts with "[json.exception.parse_error.101] parse error at line
    // ..."; keep the part after the bracket.
    std::string what = e.what();
    if (const auto close = what.find("] "); close != std::string::npos) what.erase(0, close + 2);
    TESSEL_FAIL("{}: not valid JSON (byte {}): {}", file, e.byte + skip, what);
  } catch (const nlohmann::json::out_of_range& e) {
    std::string what = e.what();
    if (const auto close = what.find("] "); close != std::string::npos) what.erase(0, close + 2);
    TESSEL_FAIL("{}: not valid JSON: {} (expected a number that fits a 64-bit float)", file, what);
  }
}

} // namespace tessel::datasets
