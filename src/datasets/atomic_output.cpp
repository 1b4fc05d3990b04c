// Temporary-then-rename output guard.
#include "tessel/datasets/atomic_output.hpp"

#include "tessel/core/error.hpp"

#include <fmt/format.h>

#include "tessel/core/log.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h> // renameat2
#include <sys/random.h>
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
// suffix: file systems cap one name at 255 bytes, and the suffix (".tmp-", 16 random
// characters, the pid, the pid namespace and up to 64 characters of host name) takes at most 115.
constexpr std::size_t kMaxKeptName = 140;
constexpr std::size_t kMaxHostChars = 64;
constexpr std::size_t kRandomChars = 16;

// Who makes this process's temporaries: the host name (letters, digits and '-', anything else
// as '_', so ".tmp-" never occurs in it), and the inode of the pid namespace ("pid:[N]"), 0 when
// /proc does not tell it. With the pid they tell, on a later run on the same host, whether the
// maker of a temporary is gone.
struct Maker {
  std::string host;
  unsigned long long pid_namespace = 0;
};

const Maker& this_maker() {
  static const Maker maker = [] {
    Maker m;
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    for (const char* c = host; *c != '\0' && m.host.size() < kMaxHostChars; ++c) {
      const bool plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                         (*c >= '0' && *c <= '9') || *c == '-';
      m.host += plain ? *c : '_';
    }
    if (m.host.empty()) m.host.push_back('_');
    char link[64] = {};
    const ssize_t n = ::readlink("/proc/self/ns/pid", link, sizeof link - 1);
    if (n > 0 && std::sscanf(link, "pid:[%llu]", &m.pid_namespace) != 1) m.pid_namespace = 0;
    return m;
  }();
  return maker;
}

// ".NAME.tmp-RANDOM-PID-PIDNS-HOST" for a target whose name (cut to kMaxKeptName) is `kept`.
std::string temporary_name(const std::string& kept) {
  const Maker& maker = this_maker();
  return fmt::format(".{}.tmp-{}-{}-{}-{}", kept, random_name_suffix(),
                     static_cast<long long>(::getpid()), maker.pid_namespace, maker.host);
}

// Parses a whole decimal number of at most `max_digits` digits at the front of `text`, up to
// the next '-'; advances `text` past the '-'.
bool take_number(std::string_view& text, std::size_t max_digits, unsigned long long& value) {
  const auto dash = text.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash > max_digits) return false;
  value = 0;
  for (std::size_t i = 0; i < dash; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    value = value * 10 + static_cast<unsigned>(text[i] - '0');
  }
  text.remove_prefix(dash + 1);
  return true;
}

// Whether the temporary whose name goes on with `rest` after ".tmp-" was made by a process that
// is provably gone: the name has the shape temporary_name gives it, names this host and this
// pid namespace, and no process has its pid now. Anything else (another host, another
// namespace, a live process, a name of another shape) is not provably gone.
bool maker_is_gone(std::string_view rest) {
  const Maker& maker = this_maker();
  if (maker.pid_namespace == 0 || rest.size() <= kRandomChars + 1 || rest[kRandomChars] != '-')
    return false;
  for (std::size_t i = 0; i < kRandomChars; ++i)
    if (!((rest[i] >= '0' && rest[i] <= '9') || (rest[i] >= 'a' && rest[i] <= 'z'))) return false;
  rest.remove_prefix(kRandomChars + 1);
  unsigned long long pid = 0, pid_namespace = 0;
  if (!take_number(rest, 10, pid) || !take_number(rest, 20, pid_namespace)) return false;
  if (rest != maker.host || pid_namespace != maker.pid_namespace) return false;
  if (pid == 0 || pid > 0x7fffffffULL || static_cast<pid_t>(pid) == ::getpid()) return false;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// The names in the folder open as `folder_fd` (not "." and ".."), read through a duplicate of
// the descriptor; empty when it cannot be read.
std::vector<std::string> folder_names(int folder_fd) {
  std::vector<std::string> names;
  const int fd = ::fcntl(folder_fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return names;
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    ::close(fd);
    return names;
  }
  ::rewinddir(dir);
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  ::closedir(dir);
  return names;
}

// Removes the folder `name` in the folder open as `parent_fd` and everything in it, every step
// relative to an open folder and without following a symbolic link (a link inside is removed
// itself; a link at `name` is not a folder, and is left alone).
void remove_tree_at(int parent_fd, const std::string& name, int depth = 0) {
  const int fd = ::openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  for (const std::string& child : folder_names(fd)) {
    struct stat status {};
    if (::fstatat(fd, child.c_str(), &status, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISDIR(status.st_mode)) (void)::unlinkat(fd, child.c_str(), 0);
    else if (depth < 32) remove_tree_at(fd, child, depth + 1);
  }
  ::close(fd);
  (void)::unlinkat(parent_fd, name.c_str(), AT_REMOVEDIR);
}

// Removes the temporaries of the same output (".KEPT.tmp-...") that an earlier run left in the
// folder open as `folder_fd` when it was killed (SIGKILL, a crash, a power cut) and whose maker
// is provably gone (maker_is_gone). Only this user's regular files and folders are removed, a
// folder with everything in it; a symbolic link, another user's entry, or the temporary of a
// process that may still run is never touched.
void remove_stale_temporaries(int folder_fd, const std::filesystem::path& folder,
                              const std::string& kept) {
  const std::string prefix = "." + kept + ".tmp-";
  for (const std::string& name : folder_names(folder_fd)) {
    if (!name.starts_with(prefix) || !maker_is_gone(std::string_view(name).substr(prefix.size())))
      continue;
    struct stat status {};
    if (::fstatat(folder_fd, name.c_str(), &status, AT_SYMLINK_NOFOLLOW) != 0 ||
        status.st_uid != ::geteuid())
      continue;
    if (S_ISREG(status.st_mode)) {
      if (::unlinkat(folder_fd, name.c_str(), 0) != 0) continue;
    } else if (S_ISDIR(status.st_mode)) {
      remove_tree_at(folder_fd, name);
    } else {
      continue;
    }
    log::info("removed {}, the unfinished output of an earlier run whose process is gone",
              (folder / name).string());
  }
}

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

// The process's umask, read without changing it (umask(2) both reads and sets, which races
// with threads creating files): /proc/self/status has it since Linux 4.7; 022 otherwise.
mode_t process_umask() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 022;
  char line[256];
  mode_t mask = 022;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned value = 0;
    if (std::sscanf(line, "Umask: %o", &value) == 1) {
      mask = static_cast<mode_t>(value & 0777);
      break;
    }
  }
  std::fclose(f);
  return mask;
}

// Removes a folder's contents and the folder, by name relative to `folder_fd` (links are
// removed, never followed).
void remove_temporary(int folder_fd, const std::string& name, bool directory) {
  if (directory) remove_tree_at(folder_fd, name);
  else ::unlinkat(folder_fd, name.c_str(), 0);
}

} // namespace

std::string random_name_suffix() {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      TESSEL_EXPECTS(errno == EINTR, "getrandom failed: {}", std::strerror(errno));
      continue;
    }
    got += static_cast<std::size_t>(n);
  }
  static constexpr char kAlphabet[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string suffix;
  for (const unsigned char b : bytes) suffix += kAlphabet[b % 36];
  return suffix;
}

AtomicOutput::AtomicOutput(std::filesystem::path target, bool is_directory, FolderLink folder_link)
    : target_(std::move(target)), is_directory_(is_directory) {
  TESSEL_EXPECTS(!target_.empty() && target_.has_filename(), "output path \"{}\" names no file",
                 target_.string());
  const auto parent = target_.parent_path();
  const std::filesystem::path folder = parent.empty() ? std::filesystem::path(".") : parent;
  const int folder_flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC |
                           (folder_link == FolderLink::refuse ? O_NOFOLLOW : 0);
  folder_fd_ = ::open(folder.c_str(), folder_flags);
  if (folder_fd_ < 0) {
    const int err = errno;
    struct stat link {};
    TESSEL_EXPECTS(!(folder_link == FolderLink::refuse && ::lstat(folder.c_str(), &link) == 0 &&
                     S_ISLNK(link.st_mode)),
                   "cannot write {}: folder {} is a symbolic link; give the folder itself",
                   target_.string(), folder.string());
    TESSEL_EXPECTS(err != ENOENT && err != ENOTDIR, "cannot write {}: folder {} does not exist",
                   target_.string(), parent.string());
    TESSEL_FAIL("cannot write {}: cannot open folder {}: {}", target_.string(), folder.string(),
                std::strerror(err));
  }
  try {
    const std::string name = target_.filename().string();
    struct stat status {};
    const bool exists = ::fstatat(folder_fd_, name.c_str(), &status, AT_SYMLINK_NOFOLLOW) == 0;
    if (exists && !is_directory)
      TESSEL_EXPECTS(!S_ISDIR(status.st_mode),
                     "cannot write {}: it is a folder, expected a file name", target_.string());
    // A rename would replace whatever the name is: refuse to replace a device, a pipe, a socket
    // or a link (writing through /dev/null's name would destroy it).
    TESSEL_EXPECTS(!exists || S_ISREG(status.st_mode) || (is_directory && S_ISDIR(status.st_mode)),
                   "cannot write {}: it exists and is not a regular {}; give another output name",
                   target_.string(), is_directory ? "folder" : "file");
    // What replaces a file keeps its permission bits; a new one gets what open or mkdir would
    // give it.
    final_mode_ = exists ? (status.st_mode & 07777)
                         : ((is_directory ? 0777u : 0666u) & ~static_cast<unsigned>(process_umask()));
    std::string kept = name;
    if (kept.size() > kMaxKeptName) kept.resize(kMaxKeptName);
    // What an earlier run killed before it could clean up left behind.
    remove_stale_temporaries(folder_fd_, folder, kept);
    for (int attempt = 0;; ++attempt) {
      temp_name_ = temporary_name(kept);
      temp_ = folder / temp_name_;
      // Registered and made in one step under the interrupt registry's lock, so no moment is
      // left where an interrupt would miss it or find nothing yet and let it appear after.
      bool made = false;
      int err = 0;
      registration_ = interrupt::TemporaryPath(temp_, [&] {
        if (is_directory)
          made = ::mkdirat(folder_fd_, temp_name_.c_str(), 0700) == 0;
        else
          temp_fd_ = ::openat(folder_fd_, temp_name_.c_str(),
                              O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        err = errno;
      });
      if (is_directory) {
        if (made) {
          temp_fd_ = ::openat(folder_fd_, temp_name_.c_str(),
                              O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          TESSEL_EXPECTS(temp_fd_ >= 0, "cannot open folder {}: {}", temp_.string(),
                         std::strerror(errno));
          break;
        }
      } else if (temp_fd_ >= 0) {
        break;
      }
      registration_ = interrupt::TemporaryPath(); // the name is not ours: never remove it
      TESSEL_EXPECTS(err == EEXIST && attempt < 8, "cannot create {} in {}: {}", temp_name_,
                     folder.string(), std::strerror(err));
    }
  } catch (...) {
    if (temp_fd_ >= 0) {
      ::close(temp_fd_);
      remove_temporary(folder_fd_, temp_name_, is_directory_);
    }
    ::close(folder_fd_);
    throw;
  }
}

AtomicOutput::~AtomicOutput() {
  if (!committed_ && temp_fd_ >= 0) remove_temporary(folder_fd_, temp_name_, is_directory_);
  if (temp_fd_ >= 0) ::close(temp_fd_);
  if (folder_fd_ >= 0) ::close(folder_fd_);
}

void AtomicOutput::commit() {
  struct stat status {};
  TESSEL_EXPECTS(::fstatat(folder_fd_, temp_name_.c_str(), &status, AT_SYMLINK_NOFOLLOW) == 0,
                 "cannot write {}: its temporary {} is gone", target_.string(), temp_.string());
  // Durable before visible: the data reaches the disk before the name does, so a crash or a
  // full disk never leaves a truncated file under the final name.
  if (is_directory_) {
    sync_to_disk(temp_, target_);
  } else {
    int rc = ::fsync(temp_fd_) == 0 ? 0 : errno;
    if (rc == EINVAL || rc == ENOTSUP) rc = 0;
    TESSEL_EXPECTS(rc == 0, "cannot write {}: {} (disk full?)", target_.string(),
                   std::strerror(rc));
  }
  TESSEL_EXPECTS(::fchmod(temp_fd_, static_cast<mode_t>(final_mode_)) == 0,
                 "cannot write {}: cannot set the mode of {}: {}", target_.string(),
                 temp_.string(), std::strerror(errno));
  const std::string name = target_.filename().string();
  // For a file system without RENAME_EXCHANGE, the old folder moves aside to a fresh name; it
  // is registered before the renames (publish's rename must not register paths).
  std::string old_name;
  interrupt::TemporaryPath old_registration;
  if (is_directory_) {
    old_name = temporary_name(name.substr(0, kMaxKeptName));
    old_registration = interrupt::TemporaryPath(temp_.parent_path() / old_name);
  }
  bool old_under_temp = false, old_aside = false;
  // The renames run under the interrupt registry's lock (TemporaryPath::publish): an
  // interrupt's cleanup comes wholly before them (the temporary removed, no rename) or wholly
  // after (the output complete in place), so it never removes a folder's files while that
  // folder is renamed onto the final name. A folder output stays registered under the
  // temporary's name, where a swap leaves the old folder, until that is removed below.
  registration_.publish(
      [&] {
        if (::renameat(folder_fd_, temp_name_.c_str(), folder_fd_, name.c_str()) == 0) {
          committed_ = true;
          return;
        }
        const int err = errno;
        TESSEL_EXPECTS(is_directory_ && (err == ENOTEMPTY || err == EEXIST),
                       "cannot move {} into place as {}: {}", temp_.string(), target_.string(),
                       std::strerror(err));
        // A folder that is not empty: swapped with the new one in one rename.
        if (::renameat2(folder_fd_, temp_name_.c_str(), folder_fd_, name.c_str(),
                        RENAME_EXCHANGE) == 0) {
          committed_ = true;
          old_under_temp = true;
          return;
        }
        const int exchange_err = errno;
        TESSEL_EXPECTS(exchange_err == EINVAL || exchange_err == ENOSYS || exchange_err == ENOTSUP,
                       "cannot replace {}: {}", target_.string(), std::strerror(exchange_err));
        TESSEL_EXPECTS(::renameat2(folder_fd_, name.c_str(), folder_fd_, old_name.c_str(),
                                   RENAME_NOREPLACE) == 0 ||
                           ((errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) &&
                            ::renameat(folder_fd_, name.c_str(), folder_fd_, old_name.c_str()) ==
                                0),
                       "cannot move the old {} aside: {}", target_.string(), std::strerror(errno));
        old_aside = true;
        if (::renameat(folder_fd_, temp_name_.c_str(), folder_fd_, name.c_str()) != 0) {
          const int move_err = errno;
          (void)::renameat(folder_fd_, old_name.c_str(), folder_fd_, name.c_str());
          old_aside = false;
          TESSEL_FAIL("cannot move {} into place as {}: {}", temp_.string(), target_.string(),
                      std::strerror(move_err));
        }
        committed_ = true;
      },
      is_directory_ ? temp_ : std::filesystem::path());
  std::error_code ec;
  if (old_under_temp) std::filesystem::remove_all(temp_, ec);
  if (old_aside) std::filesystem::remove_all(temp_.parent_path() / old_name, ec);
  registration_.release();
  old_registration.release();
  (void)::fsync(folder_fd_);
}

void make_parent_folders(const std::filesystem::path& path, const std::string& flag) {
  const std::filesystem::path parent = path.parent_path();
  if (parent.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (!ec) return;
  // The deepest part of the path that exists: a file there is the usual cause.
  std::filesystem::path at = parent;
  while (at.has_relative_path() && !std::filesystem::exists(at) && at != at.parent_path())
    at = at.parent_path();
  std::error_code ignored;
  if (std::filesystem::exists(at, ignored) && !std::filesystem::is_directory(at, ignored))
    TESSEL_FAIL("{} {}: {} is a file, not a folder", flag, path.string(), at.string());
  TESSEL_FAIL("{} {}: cannot create the folder {}: {}", flag, path.string(),
                    parent.string(), ec.message());
}

int open_regular_for_writing(const std::filesystem::path& path, const std::string& flag,
                             bool* created) {
  TESSEL_EXPECTS(!path.empty() && path.has_filename(), "{} \"{}\" names no file", flag,
                 path.string());
  const auto parent = path.parent_path();
  const std::filesystem::path folder = parent.empty() ? std::filesystem::path(".") : parent;
  const int folder_fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  TESSEL_EXPECTS(folder_fd >= 0, "{} {}: cannot open folder {}: {}", flag, path.string(),
                 folder.string(), std::strerror(errno));
  // O_NOFOLLOW: a link is refused (ELOOP), never written through; O_NONBLOCK: a FIFO without a
  // reader is refused (ENXIO) instead of blocking the run.
  constexpr int kFlags = O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  int fd = ::openat(folder_fd, path.filename().c_str(), kFlags | O_CREAT | O_EXCL, 0666);
  if (created != nullptr) *created = fd >= 0;
  if (fd < 0 && errno == EEXIST) fd = ::openat(folder_fd, path.filename().c_str(), kFlags);
  const int err = errno;
  ::close(folder_fd);
  TESSEL_EXPECTS(fd >= 0 || (err != ELOOP && err != ENXIO),
                 "{} {}: exists and is not a regular file; give another file name", flag,
                 path.string());
  TESSEL_EXPECTS(fd >= 0, "cannot write {} file {}: {}", flag, path.string(), std::strerror(err));
  struct stat status {};
  if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
    ::close(fd);
    TESSEL_FAIL("{} {}: exists and is not a regular file; give another file name", flag,
                path.string());
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (::ftruncate(fd, 0) != 0 || flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int truncate_err = errno;
    ::close(fd);
    TESSEL_FAIL("cannot write {} file {}: {}", flag, path.string(), std::strerror(truncate_err));
  }
  return fd;
}

std::filesystem::path output_name(const std::filesystem::path& path) {
  std::filesystem::path shown;
  for (const auto& part : path) {
    std::string name = part.string();
    for (const char* suffix : {".tmp-"}) {
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
