// Field-level parsing of headerless numeric CSV lines (OGB raw files), and one clear message
// when a line is malformed.
#pragma once

#include "text_reader.hpp"

#if __has_include(<fast_float/fast_float.h>)
#include <fast_float/fast_float.h>
#define TESSEL_HAVE_FAST_FLOAT 1
#endif

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

namespace tessel::datasets::detail {

enum class FieldKind { integer, number, label };

// End of the line starting at p: the '\n' or end.
inline const char* line_end(const char* p, const char* end) {
  const void* nl = std::memchr(p, '\n', static_cast<std::size_t>(end - p));
  return nl ? static_cast<const char*>(nl) : end;
}

// Parses a non-negative or negative decimal integer; nullptr if there is none at p.
inline const char* parse_integer(const char* p, const char* end, std::int64_t& value) {
  // Node ids are plain digit runs: a hand loop beats from_chars's generality on the hot path.
  if (p < end && static_cast<unsigned>(*p - '0') < 10) {
    std::uint64_t v = 0;
    const char* start = p;
    while (p < end && static_cast<unsigned>(*p - '0') < 10)
      v = v * 10 + static_cast<unsigned>(*p++ - '0');
    if (p - start < 19) {
      value = static_cast<std::int64_t>(v);
      return p;
    }
    p = start; // possibly too long for int64: let from_chars decide
  }
  const auto r = std::from_chars(p, end, value);
  return r.ec == std::errc() ? r.ptr : nullptr;
}

template <class T> inline const char* parse_real(const char* p, const char* end, T& value) {
#ifdef TESSEL_HAVE_FAST_FLOAT
  const auto r = fast_float::from_chars(p, end, value);
#else
  const auto r = std::from_chars(p, end, value);
#endif
  return r.ec == std::errc() ? r.ptr : nullptr;
}

// After a field: true if p is at ',' (consumed) and more fields follow.
inline bool at_separator(const char*& p, const char* end) {
  if (p < end && *p == ',') {
    ++p;
    return true;
  }
  return false;
}

// True if p is at the end of the line ("\n", "\r\n" or the end of the chunk); moves past it.
inline bool at_line_end(const char*& p, const char* end) {
  if (p == end) return true;
  if (*p == '\n') {
    ++p;
    return true;
  }
  if (*p == '\r' && (p + 1 == end || p[1] == '\n')) {
    p += p + 1 == end ? 1 : 2;
    return true;
  }
  return false;
}

// Number of comma-separated fields on the line starting at p.
inline std::int64_t count_fields(const char* p, const char* end) {
  const char* e = line_end(p, end);
  if (e > p && e[-1] == '\r') --e;
  if (e == p) return 0;
  std::int64_t n = 1;
  for (; p < e; ++p)
    n += *p == ',';
  return n;
}

// A label field: an integer class id, or "nan"/"NaN"/empty for unlabeled (-1), or a float that
// is a whole number (some exporters write "3.0").
inline const char* parse_label(const char* p, const char* end, std::int64_t& value) {
  const char* q = parse_integer(p, end, value);
  if (q && (q == end || *q == ',' || *q == '\n' || *q == '\r')) return q;
  if (p == end || *p == ',' || *p == '\n' || *p == '\r') {
    value = -1;
    return p;
  }
  double d = 0;
  q = parse_real(p, end, d);
  if (!q) return nullptr;
  if (std::isnan(d)) {
    value = -1;
    return q;
  }
  if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9e15) return nullptr;
  value = static_cast<std::int64_t>(d);
  return q;
}

// Explains why the line starting at p is not `expected` fields of `kind`.
std::string describe_bad_line(const char* p, const char* end, std::int64_t expected,
                              FieldKind kind);

// A LineError for the line starting at p, at 0-based file line `line`.
inline LineError bad_line(std::int64_t line, const char* p, const char* end, std::int64_t expected,
                          FieldKind kind) {
  return LineError{line, describe_bad_line(p, end, expected, kind)};
}

} // namespace tessel::datasets::detail
