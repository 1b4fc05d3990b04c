// Outputs that appear all at once: written under a temporary name beside the target, renamed
// into place on commit, removed if the writer fails first.
#pragma once

#include "tessel/core/interrupt.hpp"

#include <filesystem>

namespace tessel::datasets {

// RAII guard for one output file or folder. The temporary lives in the target's folder (so
// the final rename never crosses file systems) and is hidden (leading dot). The destructor
// removes it unless commit() succeeded, so an exception anywhere leaves no half-written output;
// it is registered with interrupt::TemporaryPath, so SIGINT/SIGTERM/SIGHUP remove it too.
class AtomicOutput {
public:
  // Throws InputError if the target's folder does not exist or the target is a folder when a
  // file is expected.
  explicit AtomicOutput(std::filesystem::path target, bool is_directory = false);
  ~AtomicOutput();
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;

  const std::filesystem::path& target() const { return target_; }
  // Where to write. For a folder output the temporary folder already exists.
  const std::filesystem::path& temp_path() const { return temp_; }
  // Renames the temporary onto the target, replacing an existing file (or empty folder).
  void commit();

private:
  std::filesystem::path target_;
  std::filesystem::path temp_;
  interrupt::TemporaryPath registration_;
  bool committed_ = false;
};

} // namespace tessel::datasets
