// Scratch-file mappings for large arrays (see spill.hpp): the scope, the registry, the files.
#include "tessel/core/spill.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace tessel::spill {
namespace {

struct Mapping {
  std::size_t bytes = 0;
  int fd = -1;
};

struct State {
  std::mutex mutex;
  std::vector<std::filesystem::path> scopes;  // innermost last
  std::unordered_map<const void*, Mapping> mappings;
  std::int64_t mapped = 0;
  bool warned = false;
};

// Never destroyed: a static container freed after this one would still deallocate through it.
State& state() {
  static State* s = new State;
  return *s;
}

// Reserves the file's blocks: posix_fallocate returns the error instead of setting errno.
int reserve(int fd, std::size_t bytes) {
  int rc;
  do rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  while (rc == EINTR);
  return rc;
}

// Logs the first case of large arrays staying on the heap; later ones are alike.
void warn_once(const std::string& message) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.warned) log::warn("{}", message);
  s.warned = true;
}

// The live mapping that starts at p, if any.
std::optional<Mapping> find(const void* p) noexcept {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.mappings.find(p);
  if (it == s.mappings.end()) return std::nullopt;
  return it->second;
}

}  // namespace

std::size_t min_bytes() noexcept {
  static const std::size_t bytes = [] {
    const char* env = std::getenv("TESSEL_SPILL_MIN_BYTES");
    if (env == nullptr || *env == '\0') return std::size_t{16} << 20;
    const bool digits = std::all_of(env, env + std::strlen(env),
                                    [](char c) { return c >= '0' && c <= '9'; });
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(env, &end, 10);
    if (digits && end != nullptr && *end == '\0' && errno == 0) return static_cast<std::size_t>(v);
    try {
      log::warn("TESSEL_SPILL_MIN_BYTES={}: expected a byte count (digits only); using 16 MiB",
                env);
    } catch (...) {
    }
    return std::size_t{16} << 20;
  }();
  return bytes;
}

Scope::Scope(std::filesystem::path dir) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.scopes.push_back(std::move(dir));
}

Scope::~Scope() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.scopes.pop_back();
}

void* try_map(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  State& s = state();
  std::filesystem::path dir;
  {
    std::lock_guard lock(s.mutex);
    if (s.scopes.empty()) return nullptr;
    dir = s.scopes.back();
  }
  // A folder in memory (tmpfs) gains nothing: its pages could only go to swap.
  if (struct statfs fs; ::statfs(dir.c_str(), &fs) == 0 &&
                        (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC)) {
    warn_once(fmt::format("{} is in memory (tmpfs or ramfs); large arrays stay in anonymous memory (point "
                          "TMPDIR at a disk to let the kernel page them)",
                          dir.string()));
    return nullptr;
  }
  std::string name = (dir / "tessel-spill-XXXXXX").string();
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);  // mode 0600, created exclusively
  if (fd < 0) {
    const int err = errno;
    warn_once(fmt::format("cannot make a scratch file in {} ({}); large arrays stay in memory",
                          dir.string(), std::strerror(err)));
    return nullptr;
  }
  if (::unlink(name.c_str()) != 0) {
    const int err = errno;
    ::close(fd);
    warn_once(fmt::format("cannot unlink a scratch file in {} ({}); large arrays stay in memory",
                          dir.string(), std::strerror(err)));
    return nullptr;
  }
  if (const int rc = reserve(fd, bytes); rc != 0) {
    ::close(fd);
    if (rc == ENOSPC || rc == EDQUOT)
      TESSEL_FAIL("{}: no room for a scratch file of {} bytes (the graph's arrays of an "
                  "out-of-core run live there); free disk space or point TMPDIR elsewhere",
                  dir.string(), bytes);
    warn_once(fmt::format("cannot reserve a scratch file in {} ({}); large arrays stay in memory",
                          dir.string(), std::strerror(rc)));
    return nullptr;
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    ::close(fd);
    warn_once(fmt::format("cannot map a scratch file in {} ({}); large arrays stay in memory",
                          dir.string(), std::strerror(err)));
    return nullptr;
  }
  try {
    std::lock_guard lock(s.mutex);
    s.mappings.emplace(p, Mapping{bytes, fd});
    s.mapped += static_cast<std::int64_t>(bytes);
  } catch (...) {
    ::munmap(p, bytes);
    ::close(fd);
    throw;
  }
  return p;
}

bool unmap(void* p, std::size_t bytes) noexcept {
  State& s = state();
  Mapping m;
  {
    std::lock_guard lock(s.mutex);
    auto it = s.mappings.find(p);
    if (it == s.mappings.end()) return false;
    m = it->second;
    s.mappings.erase(it);
    s.mapped -= static_cast<std::int64_t>(m.bytes);
  }
  (void)bytes;
  ::munmap(p, m.bytes);
  ::close(m.fd);  // the last reference to the unlinked file: its blocks are freed
  return true;
}

bool write_back(const void* p) noexcept {
  const std::optional<Mapping> m = find(p);
  // Asynchronous: the pages stay readable and writable; clean ones can then be dropped at once.
  if (m) (void)::sync_file_range(m->fd, 0, static_cast<off_t>(m->bytes), SYNC_FILE_RANGE_WRITE);
  return m.has_value();
}

bool advise_random(const void* p) noexcept {
  const std::optional<Mapping> m = find(p);
  if (m) (void)::madvise(const_cast<void*>(p), m->bytes, MADV_RANDOM);
  return m.has_value();
}

bool is_mapped(const void* p) noexcept { return find(p).has_value(); }

std::int64_t mapped_bytes() noexcept {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.mapped;
}

}  // namespace tessel::spill
