// Outputs that appear all at once: written under a temporary name beside the target, renamed
// into place on commit, removed if the writer fails first.
#pragma once

#include "tessel/core/interrupt.hpp"

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::datasets {

// RAII guard for one output file or folder. The temporary lives in the target's folder (so
// the final rename never crosses file systems) and is hidden (leading dot). The destructor
// removes it unless commit() succeeded, so an exception anywhere leaves no half-written output;
// it is registered with interrupt::TemporaryPath, so SIGINT/SIGTERM/SIGHUP remove it too.
class AtomicOutput {
public:
  // Throws InputError if the target's folder does not exist, the target is a folder when a
  // file is expected, or the target exists and is not a regular file (or folder, for a folder
  // output): a device, a pipe, a socket or a symbolic link is never replaced.
  explicit AtomicOutput(std::filesystem::path target, bool is_directory = false);
  ~AtomicOutput();
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;

  const std::filesystem::path& target() const { return target_; }
  // Where to write. For a folder output the temporary folder already exists.
  const std::filesystem::path& temp_path() const { return temp_; }
  // Syncs the temporary (every file in it, for a folder) to disk, renames it onto the target,
  // replacing an existing file (or empty folder), and syncs the target's folder. A failed sync
  // is an InputError naming the target, and the temporary is removed by the destructor.
  void commit();

private:
  std::filesystem::path target_;
  std::filesystem::path temp_;
  interrupt::TemporaryPath registration_;
  bool is_directory_ = false;
  bool committed_ = false;
};

// The name a user gave for a path that may be an AtomicOutput temporary (".NAME.tmp-PID-N"
// beside NAME, or inside a temporary folder; a partition's ".NAME.partial-PID"): messages name what the user asked for, not the
// hidden file. Any other path is returned as it is.
std::filesystem::path output_name(const std::filesystem::path& path);

// Refuses (InputError naming `flag` and both paths) an output that is, or would replace, one of
// the run's inputs: `output` itself, or any file under it for a folder output, equal to an input
// file or to a file under an input folder. A run must never write over what it reads.
void refuse_overwriting_inputs(const std::filesystem::path& output,
                               const std::vector<std::filesystem::path>& inputs,
                               const std::string& flag);

// Writes `text` as the whole file at `path` (created or truncated) and checks every step, the
// close included: a short write or a full disk is an InputError naming `path`.
void write_text_file(const std::filesystem::path& path, std::string_view text);

// Flushes a file, or a folder and every file and folder in it, to stable storage; a failure is
// an InputError naming `target` (the name the data is meant to appear under).
void sync_to_disk(const std::filesystem::path& path, const std::filesystem::path& target);

} // namespace tessel::datasets
