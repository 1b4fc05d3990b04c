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
//
// The target's folder is opened once (O_DIRECTORY) and everything after happens relative to
// it: the temporary ".NAME.tmp-RANDOM-PID-PIDNS-HOST" (16 characters from getrandom, then who
// made it) is created exclusively (O_CREAT|O_EXCL|O_NOFOLLOW for a file, mkdirat with mode 700 for a folder), so a
// symbolic link planted at any name beside the target is never followed, and in a shared
// sticky folder nobody else can replace the temporary once it exists. The rename onto the
// target replaces the name, never what a link there points at. A replaced file or folder keeps
// its permission bits (600 stays 600); a new one gets 666 or 777 less the umask, as with open.
//
// Before it makes its temporary, the constructor removes the temporaries of the same output that
// a run killed by SIGKILL (or a crash, or a power cut) left in the folder, when their maker is
// provably gone: the name gives this host and this pid namespace, and no process has its pid.
// Only this user's files and folders go, every step relative to an open folder without
// following a link; a link, another user's entry or a live process's temporary stays.
class AtomicOutput {
public:
  // Whether the target's folder may be a symbolic link: a --checkpoint folder may not.
  enum class FolderLink { follow, refuse };

  // Throws InputError if the target's folder does not exist (or is a link, with
  // FolderLink::refuse), the target is a folder when a file is expected, or the target exists
  // and is not a regular file (or folder, for a folder output): a device, a pipe, a socket or a
  // symbolic link is never replaced.
  explicit AtomicOutput(std::filesystem::path target, bool is_directory = false,
                        FolderLink folder_link = FolderLink::follow);
  ~AtomicOutput();
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;

  const std::filesystem::path& target() const { return target_; }
  // Where to write. The temporary already exists: an empty file (writers open it with
  // truncation) or an empty folder only this user may write in.
  const std::filesystem::path& temp_path() const { return temp_; }
  // Syncs the temporary (every file in it, for a folder) to disk, gives it its final mode,
  // renames it onto the target, replacing an existing file or folder (a non-empty folder is
  // swapped with the new one in one rename where the file system can, then removed), and syncs
  // the target's folder. A failed sync is an InputError naming the target, and the temporary
  // is removed by the destructor.
  void commit();

private:
  std::filesystem::path target_;
  std::filesystem::path temp_;
  std::string temp_name_;
  interrupt::TemporaryPath registration_;
  int folder_fd_ = -1; // the target's folder
  int temp_fd_ = -1;   // the temporary itself, for fsync and fchmod
  unsigned final_mode_ = 0;
  bool is_directory_ = false;
  bool committed_ = false;
};

// A random suffix for a temporary name: 16 characters of [0-9a-z] from getrandom.
std::string random_name_suffix();

// Opens `path` for writing as a regular file, without following a symbolic link at its last
// name, without blocking on a FIFO, and truncates it: the check (a regular file or nothing)
// and the open are one operation. For files written as a run goes (--metrics). Returns the
// descriptor, and in `created` whether this call made the file; an InputError naming `flag`
// otherwise.
int open_regular_for_writing(const std::filesystem::path& path, const std::string& flag,
                             bool* created = nullptr);

// Creates the folders above `path` that do not exist yet; an InputError naming `flag`, the path
// and why (a part of it that is a file, a folder that cannot be written) instead of the
// filesystem library's words.
void make_parent_folders(const std::filesystem::path& path, const std::string& flag);

// The name a user gave for a path that may be an AtomicOutput temporary (".NAME.tmp-..."
// beside NAME, or inside a temporary folder): messages name what the user asked for, not the
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
