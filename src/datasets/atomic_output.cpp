// Temporary-then-rename output guard.
#include "tessel/datasets/atomic_output.hpp"

#include "tessel/core/error.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <system_error>

namespace tessel::datasets {

namespace {

// The longest target name whose temporary name is the target's name with a prefix and a
// suffix: file systems cap one name at 255 bytes, and the suffix takes at most 40.
constexpr std::size_t kMaxKeptName = 200;

// Flushes one file or folder to stable storage; returns errno or 0.
int sync_path(const std::filesystem::path& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return errno;
  int rc = ::fsync(fd) == 0 ? 0 : errno;
  // Some file systems (tmpfs for folders, some FUSE mounts) do not sync folders: not an error.
  if (rc == EINVAL || rc == ENOTSUP) rc = 0;
  ::close(fd);
  return rc;
}

// Syncs a folder output's files (one level: the outputs Tessel writes are flat folders, with at
// most one level of subfolders).
int sync_tree(const std::filesystem::path& root) {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    const bool dir = it->is_directory(ec);
    if (!dir && !it->is_regular_file(ec)) continue;
    if (const int rc = sync_path(it->path(), dir)) return rc;
  }
  if (ec) return ec.value();
  return sync_path(root, true);
}

} // namespace

AtomicOutput::AtomicOutput(std::filesystem::path target, bool is_directory)
    : target_(std::move(target)), is_directory_(is_directory) {
  TESSEL_EXPECTS(!target_.empty() && target_.has_filename(), "output path \"{}\" names no file",
                 target_.string());
  const auto parent = target_.parent_path();
  std::error_code ec;
  TESSEL_EXPECTS(parent.empty() || std::filesystem::is_directory(parent, ec),
                 "cannot write {}: folder {} does not exist", target_.string(), parent.string());
  const auto status = std::filesystem::symlink_status(target_, ec);
  if (!is_directory)
    TESSEL_EXPECTS(!std::filesystem::is_directory(target_, ec),
                   "cannot write {}: it is a folder, expected a file name", target_.string());
  // A rename would replace whatever the name is: refuse to replace a device, a pipe, a socket
  // or a link (writing through /dev/null's name would destroy it).
  TESSEL_EXPECTS(!std::filesystem::exists(status) || std::filesystem::is_regular_file(status) ||
                     (is_directory && std::filesystem::is_directory(status)),
                 "cannot write {}: it exists and is not a regular {}; give another output name",
                 target_.string(), is_directory ? "folder" : "file");
  static std::atomic<int> counter{0};
  std::string name = target_.filename().string();
  if (name.size() > kMaxKeptName) name.resize(kMaxKeptName);
  temp_ = (parent.empty() ? std::filesystem::path(".") : parent) /
          fmt::format(".{}.tmp-{}-{}", name, getpid(), counter++);
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
  TESSEL_EXPECTS(std::filesystem::exists(temp_, ec), "cannot write {}: its temporary {} is gone",
                 target_.string(), temp_.string());
  // Durable before visible: the data reaches the disk before the name does, so a crash or a
  // full disk never leaves a truncated file under the final name.
  sync_to_disk(temp_, target_);
  // Under the interrupt registry's lock: an interrupt removes the temporary wholly before the
  // rename, or finds the output complete in place (a folder output is never half removed under
  // its final name). A folder that is replaced is moved aside in the same step, and removed
  // after it (by the interrupt, if one comes meanwhile).
  const bool replace_folder = is_directory_ && std::filesystem::is_directory(target_, ec);
  std::filesystem::path old;
  if (replace_folder) {
    old = temp_;
    old += ".old";
    std::filesystem::remove_all(old, ec);
  }
  registration_.publish(
      [&] {
        if (replace_folder) {
          std::filesystem::rename(target_, old, ec);
          TESSEL_EXPECTS(!ec, "cannot move the old {} aside: {}", target_.string(), ec.message());
        }
        std::filesystem::rename(temp_, target_, ec);
        if (ec && replace_folder) {
          std::error_code back;
          std::filesystem::rename(old, target_, back);
        }
        TESSEL_EXPECTS(!ec, "cannot move {} into place as {}: {}", temp_.string(),
                       target_.string(), ec.message());
        committed_ = true;
      },
      old);
  if (replace_folder) {
    std::filesystem::remove_all(old, ec);
    registration_.release();
  }
  const auto parent = target_.parent_path();
  (void)sync_path(parent.empty() ? std::filesystem::path(".") : parent, true);
}

std::filesystem::path output_name(const std::filesystem::path& path) {
  std::filesystem::path shown;
  for (const auto& part : path) {
    std::string name = part.string();
    for (const char* suffix : {".tmp-", ".partial-"}) {
      const auto at = name.rfind(suffix);
      if (name.size() > 1 && name[0] == '.' && at != std::string::npos && at > 1) {
        name = name.substr(1, at - 1);
        break;
      }
    }
    shown /= name;
  }
  return shown;
}

namespace {

// The regular files a path names: itself, or those under it (a folder).
std::vector<std::filesystem::path> files_of(const std::filesystem::path& path) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    for (auto it = std::filesystem::recursive_directory_iterator(path, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
      if (it->is_regular_file(ec)) files.push_back(it->path());
  } else if (std::filesystem::exists(path, ec)) {
    files.push_back(path);
  }
  return files;
}

} // namespace

void refuse_overwriting_inputs(const std::filesystem::path& output,
                               const std::vector<std::filesystem::path>& inputs,
                               const std::string& flag) {
  std::error_code ec;
  const auto out_files = files_of(output);
  for (const auto& input : inputs) {
    // A folder output that holds an input, or is held by one, would replace or hold it.
    const auto in = std::filesystem::weakly_canonical(input, ec);
    const auto out = std::filesystem::weakly_canonical(output, ec);
    TESSEL_EXPECTS(in != out, "{} {} is an input of this run; give another output name", flag,
                   output.string());
    for (const auto& a : out_files)
      for (const auto& b : files_of(input))
        TESSEL_EXPECTS(!std::filesystem::equivalent(a, b, ec),
                       "{} {} would overwrite {}, an input of this run; give another output name",
                       flag, output.string(), b.string());
  }
}

void write_text_file(const std::filesystem::path& path, std::string_view text) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  TESSEL_EXPECTS(f != nullptr, "cannot write {}: {}", path.string(), std::strerror(errno));
  const bool written = std::fwrite(text.data(), 1, text.size(), f.get()) == text.size() &&
                       std::fflush(f.get()) == 0;
  const int write_errno = errno;
  const bool closed = std::fclose(f.release()) == 0;
  TESSEL_EXPECTS(written && closed, "cannot write {}: {}", path.string(),
                 std::strerror(written ? errno : write_errno));
}

void sync_to_disk(const std::filesystem::path& path, const std::filesystem::path& target) {
  std::error_code ec;
  const int rc = std::filesystem::is_directory(path, ec) ? sync_tree(path) : sync_path(path, false);
  TESSEL_EXPECTS(rc == 0, "cannot write {}: {} (disk full?)", target.string(), std::strerror(rc));
}

} // namespace tessel::datasets
