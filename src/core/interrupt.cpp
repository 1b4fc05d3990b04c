// Interrupt handling: a sigwait thread that removes registered temporary outputs and exits, and
// a std::terminate handler that does the same for an exception nothing could catch.
#include "tessel/core/interrupt.hpp"

#include "tessel/core/activity.hpp"
#include "tessel/core/peer_watch.hpp"

#include <fmt/format.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

extern char** environ;

namespace tessel::interrupt {

namespace fs = std::filesystem;

namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::uint64_t, fs::path> paths;
  std::uint64_t next_id = 1;
  std::string who = "tessel"; // "tessel (rank 1 of 4)" under mpirun
  bool under_launcher = false;
};

// Never destroyed: the watcher thread may still use it while static destructors run at exit.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

std::atomic<bool> g_installed{false};

sigset_t watched_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

// Another thread may still be creating files in a folder being removed (a part file being
// opened), which makes the last rmdir fail: try a few times.
bool remove_with_retries(const fs::path& path) {
  std::error_code ec;
  for (int attempt = 0; attempt < 20; ++attempt) {
    fs::remove_all(path, ec);
    if (!fs::exists(fs::symlink_status(path, ec))) return true;
    std::this_thread::yield();
  }
  return false;
}

// write(2), not stdio: another thread may hold stderr's lock.
void write_stderr(const std::string& line) {
  for (std::size_t done = 0; done < line.size();) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
}

// Removes every registered path, appends what it did to `line`, writes the line to stderr and
// ends the process. Keeps the registry locked until _exit: a thread that registers or releases a
// path meanwhile waits for the end.
[[noreturn]] void clean_up_and_exit(std::string line, int exit_code) {
  Registry& r = registry();
  r.mutex.lock();
  std::string removed, kept;
  for (const auto& [id, path] : r.paths) {
    std::string& list = remove_with_retries(path) ? removed : kept;
    list += (list.empty() ? "" : ", ") + path.string();
  }
  if (!removed.empty()) line += "; removed the unfinished output " + removed;
  if (!kept.empty()) line += "; could not remove " + kept;
  line += '\n';
  // The process ends on purpose: its closing connection must not read as a lost rank.
  mpi::peer_watch::goodbye();
  write_stderr(line);
  // Under mpirun, a process that exits right after its last write while the job is being torn
  // down can lose that write: mpirun may see the exit before it reads the pipe. A moment's
  // wait lets the line through.
  if (r.under_launcher) ::usleep(100'000);
  ::_exit(exit_code);
}

std::mutex& hook_mutex() {
  static std::mutex* m = new std::mutex;
  return *m;
}

std::function<std::string(int)>& interrupt_hook() {
  static auto* hook = new std::function<std::string(int)>;
  return *hook;
}

[[noreturn]] void on_signal(int signal) {
  // mpirun ends the survivors of a lost host with SIGTERM, often before rank 0's watch has
  // declared the loss itself: the line then says what the watch saw close.
  const std::string lost = mpi::peer_watch::lost_note(0.3);
  std::string note;
  {
    std::lock_guard lock(hook_mutex());
    if (interrupt_hook()) {
      try {
        note = interrupt_hook()(signal);
      } catch (...) {
      }
    }
  }
  clean_up_and_exit(fmt::format("{}: interrupted by {}{}{}", registry().who, signal_name(signal),
                                lost.empty() ? "" : "; " + lost, note.empty() ? "" : "; " + note),
                    128 + signal);
}

// std::terminate: an exception that escaped where nothing can catch it, above all an OpenMP
// parallel region (the runtime terminates instead of unwinding into the caller) or a noexcept
// function. Without this the process would abort with the C++ runtime's message, a core dump
// and its unfinished outputs left behind; instead it says what failed, in one line, removes the
// outputs and exits with 1, which mpirun turns into the end of the job.
[[noreturn]] void on_terminate() {
  std::string what = "internal error: std::terminate called without an exception";
  if (const std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::bad_alloc&) {
      const std::string where = current_activity();
      what = where.empty() ? std::string("out of memory") : "out of memory while " + where;
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
      what = "internal error: an exception that is not a std::exception escaped";
    }
  }
  clean_up_and_exit(fmt::format("{}: error: {}", registry().who, what), 1);
}

void watch(sigset_t set) {
  for (;;) {
    int signal = 0;
    if (sigwait(&set, &signal) == 0) on_signal(signal);
  }
}

// This process's rank and the job's size from the launcher's environment (MPI itself may not be
// initialized, and may not be called from the watcher thread); {0, 1} outside mpirun.
std::pair<int, int> launcher_rank() {
  for (const auto& [rank_var, size_var] :
       {std::pair{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
        std::pair{"PMI_RANK", "PMI_SIZE"}}) {
    const char* rank = std::getenv(rank_var);
    const char* size = std::getenv(size_var);
    if (rank && size) return {std::atoi(rank), std::atoi(size)};
  }
  return {0, 1};
}

} // namespace

void install() {
  if (g_installed.exchange(true)) return;
  const auto [rank, size] = launcher_rank();
  if (size > 1) {
    registry().under_launcher = true;
    // The host too: when a job over several hosts is torn down, the lines say which survived.
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
    registry().who = host[0] ? fmt::format("tessel (rank {} of {}, host {})", rank, size, host)
                             : fmt::format("tessel (rank {} of {})", rank, size);
  }
  sigset_t set = watched_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread(watch, set).detach();
  std::set_terminate(on_terminate);
}

bool installed() {
  return g_installed.load();
}

void say(const std::string& message) {
  write_stderr(fmt::format("{}: {}\n", registry().who, message));
}

void fail_now(const std::string& message) {
  clean_up_and_exit(fmt::format("{}: error: {}", registry().who, message), 1);
}

TemporaryPath::TemporaryPath(const fs::path& path) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  id_ = r.next_id++;
  r.paths.emplace(id_, path);
}

TemporaryPath::TemporaryPath(const fs::path& path, const std::function<void()>& create) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const std::uint64_t id = r.next_id++;
  r.paths.emplace(id, path);
  try {
    create();
  } catch (...) {
    r.paths.erase(id);
    throw;
  }
  id_ = id;
}

TemporaryPath::~TemporaryPath() {
  release();
}

TemporaryPath& TemporaryPath::operator=(TemporaryPath&& other) noexcept {
  if (this != &other) {
    release();
    id_ = other.id_;
    other.id_ = 0;
  }
  return *this;
}

void TemporaryPath::release() noexcept {
  if (id_ == 0) return;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.paths.erase(id_);
  id_ = 0;
}

void TemporaryPath::publish(const std::function<void()>& rename, const fs::path& leftover) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  rename();
  if (id_ == 0) return;
  if (leftover.empty()) {
    r.paths.erase(id_);
    id_ = 0;
  } else {
    r.paths[id_] = leftover;
  }
}

void create_registered(const std::function<void()>& create) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  create();
}

std::size_t registered_count() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.paths.size();
}

int run_program(const std::vector<std::string>& args) {
  if (args.empty() || args.front().empty()) return -1;
  posix_spawnattr_t attr;
  if (posix_spawnattr_init(&attr) != 0) return -1;
  sigset_t empty;
  sigemptyset(&empty);
  sigset_t defaults = watched_signals();
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<std::string> copies = args;
  std::vector<char*> argv;
  for (std::string& a : copies) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], nullptr, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

void set_interrupt_hook(std::function<std::string(int signal)> hook) {
  std::lock_guard lock(hook_mutex());
  interrupt_hook() = std::move(hook);
}

std::string signal_name(int signal) {
  switch (signal) {
  case SIGINT:
    return "SIGINT";
  case SIGTERM:
    return "SIGTERM";
  case SIGHUP:
    return "SIGHUP";
  default:
    return fmt::format("signal {}", signal);
  }
}

} // namespace tessel::interrupt
