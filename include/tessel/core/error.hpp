// Typed exceptions and the check macros that build them (file:line and rank in every message).
#pragma once

#if defined(__CUDACC__)
#include <sstream>
#else
#include <fmt/format.h>
#endif

#include <stdexcept>
#include <string>
#include <string_view>

namespace tessel {

// Base of every error Tessel throws. what() is the user-facing line; where() says which
// source line raised it, for developers.
class Error : public std::runtime_error {
 public:
  Error(std::string message, std::string where)
      : std::runtime_error(std::move(message)), where_(std::move(where)) {}
  const std::string& where() const noexcept { return where_; }

 private:
  std::string where_;
};

// Bad input from a user: arguments, files, formats. Exit code 2 at the command line.
class InputError : public Error {
  using Error::Error;
};
// An input error every rank of a job finds at the same point, from data they all share (the
// partition manifest, a checkpoint, an all-reduced loss): reported once, by rank 0.
class AgreedInputError : public InputError {
  using InputError::InputError;
};
// A call into a library (MPI, HDF5, METIS, CUDA, ...) failed.
class LibraryError : public Error {
  using Error::Error;
};
// A broken internal invariant: a bug in Tessel.
class InternalError : public Error {
  using Error::Error;
};

namespace detail {
std::string where_string(const char* file, int line);

// Formats an error message. fmt's headers do not compile under nvcc in C++20 mode, so CUDA
// translation units substitute each "{}" in order with the streamed argument.
#if defined(__CUDACC__)
inline void message_append(std::ostringstream& out, std::string_view& format) { out << format; }
template <class T, class... Rest>
void message_append(std::ostringstream& out, std::string_view& format, const T& value,
                    const Rest&... rest) {
  const auto pos = format.find("{}");
  if (pos == std::string_view::npos) {
    out << format;
    return;
  }
  out << format.substr(0, pos) << value;
  format.remove_prefix(pos + 2);
  message_append(out, format, rest...);
}
template <class... Args>
std::string message(std::string_view format, const Args&... args) {
  std::ostringstream out;
  message_append(out, format, args...);
  return out.str();
}
#else
template <class... Args>
std::string message(fmt::format_string<Args...> format, Args&&... args) {
  return fmt::format(format, std::forward<Args>(args)...);
}
#endif

template <class E>
[[noreturn]] void raise(const char* file, int line, std::string message) {
  throw E(std::move(message), where_string(file, line));
}
}  // namespace detail

}  // namespace tessel

// TESSEL_EXPECTS(cond, "fmt", args...): user input must satisfy cond, else InputError.
#define TESSEL_EXPECTS(cond, ...)                                                          \
  do {                                                                                     \
    if (!(cond)) [[unlikely]]                                                              \
      ::tessel::detail::raise<::tessel::InputError>(__FILE__, __LINE__,                   \
                                                     ::tessel::detail::message(__VA_ARGS__));          \
  } while (0)

// TESSEL_FAIL("fmt", args...): unconditional InputError.
#define TESSEL_FAIL(...)                                                                   \
  ::tessel::detail::raise<::tessel::InputError>(__FILE__, __LINE__, ::tessel::detail::message(__VA_ARGS__))

// TESSEL_ASSERT(cond, "fmt", args...): internal invariant, else InternalError.
#define TESSEL_ASSERT(cond, ...)                                                           \
  do {                                                                                     \
    if (!(cond)) [[unlikely]]                                                              \
      ::tessel::detail::raise<::tessel::InternalError>(                                   \
          __FILE__, __LINE__, "internal error: " + ::tessel::detail::message(__VA_ARGS__));            \
  } while (0)

// TESSEL_LIB_FAIL("fmt", args...): a library call failed.
#define TESSEL_LIB_FAIL(...)                                                               \
  ::tessel::detail::raise<::tessel::LibraryError>(__FILE__, __LINE__,                     \
                                                   ::tessel::detail::message(__VA_ARGS__))
