// Messages for malformed CSV lines: ragged rows, empty lines, values that are not numbers.
#include "csv_parse.hpp"

#include <fmt/format.h>

namespace tessel::datasets::detail {

namespace {

std::string shorten(std::string token) {
  if (token.size() > 40) token = token.substr(0, 37) + "...";
  for (auto& c : token)
    if (static_cast<unsigned char>(c) < 32 || static_cast<unsigned char>(c) > 126) c = '?';
  return token;
}

bool field_ok(const char* b, const char* e, FieldKind kind) {
  switch (kind) {
  case FieldKind::integer: {
    std::int64_t v = 0;
    return parse_integer(b, e, v) == e && b != e;
  }
  case FieldKind::number: {
    float v = 0;
    return b != e && parse_real(b, e, v) == e && std::isfinite(v);
  }
  case FieldKind::label: {
    std::int64_t v = 0;
    return parse_label(b, e, v) == e;
  }
  }
  return false;
}

const char* kind_phrase(FieldKind kind) {
  switch (kind) {
  case FieldKind::integer:
    return "an integer";
  case FieldKind::number:
    return "a finite number";
  case FieldKind::label:
    return "a class id (an integer, or nan for unlabeled)";
  }
  return "valid";
}

} // namespace

std::string describe_bad_line(const char* p, const char* end, std::int64_t expected,
                              FieldKind kind) {
  const char* e = line_end(p, end);
  if (e > p && e[-1] == '\r') --e;
  const std::int64_t fields = count_fields(p, end);
  if (fields != expected) {
    if (fields == 0) return fmt::format("empty line, expected {} comma-separated values", expected);
    return fmt::format("has {} comma-separated value{}, expected {}", fields,
                       fields == 1 ? "" : "s", expected);
  }
  const char* f = p;
  for (std::int64_t i = 0; i < fields; ++i) {
    const char* fe = static_cast<const char*>(std::memchr(f, ',', static_cast<std::size_t>(e - f)));
    if (!fe) fe = e;
    if (!field_ok(f, fe, kind)) {
      const std::string token = shorten(std::string(f, fe));
      if (expected == 1) return fmt::format("\"{}\" is not {}", token, kind_phrase(kind));
      return fmt::format("value {} \"{}\" is not {}", i + 1, token, kind_phrase(kind));
    }
    f = fe + 1;
  }
  return "malformed line";
}

} // namespace tessel::datasets::detail
