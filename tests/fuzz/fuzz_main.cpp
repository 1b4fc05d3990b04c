// libFuzzer entry of one target (TESSEL_FUZZ_TARGET names it): tessel::InputError is the
// expected answer to a bad input; any other exception is reported as a crash.
#include "fuzz_targets.hpp"

#include "tessel/core/error.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <typeinfo>

namespace {

tessel::fuzz::Target find_target() {
  for (const auto& t : tessel::fuzz::targets())
    if (std::strcmp(t.name, TESSEL_FUZZ_TARGET) == 0) return t;
  std::fprintf(stderr, "tessel fuzz: no target named %s\n", TESSEL_FUZZ_TARGET);
  std::abort();
}

[[noreturn]] void report(const char* kind, const char* what) {
  std::fprintf(stderr, "tessel fuzz (%s): %s instead of an InputError: %s\n", TESSEL_FUZZ_TARGET,
               kind, what);
  std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const tessel::fuzz::Target target = find_target();
  try {
    target.run({data, size});
  } catch (const tessel::InputError&) {
    // One clear message for a bad input: what the readers must do.
  } catch (const tessel::Error& e) {
    report(typeid(e).name(), e.what());
  } catch (const std::exception& e) {
    report(typeid(e).name(), e.what());
  }
  return 0;
}
