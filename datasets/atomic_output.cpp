// Temporary-then-rename output guard.
#include "tessel/datasets/atomic_output.hpp"

#include "tessel/core/error.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <atomic>
#include <system_error>

namespace tessel::datasets {

AtomicOutput::AtomicOutput(std::filesystem::path target, bool is_directory)
    : target_(std::move(target)) {
  TESSEL_EXPECTS(!target_.empty() && target_.has_filename(), "output path \"{}\" names no file",
                 target_.string());
  const auto parent = target_.parent_path();
  std::error_code ec;
  TESSEL_EXPECTS(parent.empty() || std::filesystem::is_directory(parent, ec),
                 "cannot write {}: folder {} does not exist", target_.string(), parent.string());
  if (!is_directory)
    TESSEL_EXPECTS(!std::filesystem::is_directory(target_, ec),
                   "cannot write {}: it is a folder, expected a file name", target_.string());
  static std::atomic<int> counter{0};
  temp_ = (parent.empty() ? std::filesystem::path(".") : parent) /
          fmt::format(".{}.tmp-{}-{}", target_.filename().string(), getpid(), counter++);
  // Registered before it exists, so no moment is left where an interrupt would miss it.
  registration_ = interrupt::TemporaryPath(temp_);
  std::filesystem::remove_all(temp_, ec);
  if (is_directory) {
    std::filesystem::create_directory(temp_, ec);
    TESSEL_EXPECTS(!ec, "cannot create folder {}: {}", temp_.string(), ec.message());
  }
}

AtomicOutput::~AtomicOutput() {
  if (committed_) return;
  std::error_code ec;
  std::filesystem::remove_all(temp_, ec);
}

void AtomicOutput::commit() {
  std::error_code ec;
  std::filesystem::rename(temp_, target_, ec);
  TESSEL_EXPECTS(!ec, "cannot move {} into place as {}: {}", temp_.string(), target_.string(),
                 ec.message());
  committed_ = true;
  registration_.release();
}

} // namespace tessel::datasets
