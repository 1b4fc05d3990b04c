// Interrupts (SIGINT, SIGTERM, SIGHUP): unfinished outputs are removed, the signal is reported
// in one line and the process ends with 128 + the signal number.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace tessel::interrupt {

// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread, and so in every thread started after
// it (OpenMP, MPI, std::async), and starts one thread that waits for them with sigwait. When
// one arrives, that thread removes every registered temporary path, prints "tessel: interrupted
// by SIGTERM ..." (naming the rank under mpirun, and on rank 0 of a job over several hosts what
// the peer watch knows of lost hosts) and calls _exit(128 + signal). No signal handler runs: libraries that install
// their own handlers for these signals (METIS traps SIGTERM and turns it into METIS_ERROR) never
// see them, and the cleanup runs in an ordinary thread, free to use the file system API.
// It also installs a std::terminate handler: an exception that escapes where it cannot be caught
// (an OpenMP parallel region, a noexcept function) ends the process with one line,
// "tessel: error: out of memory while <activity>" or the exception's message, after removing
// the registered temporary paths, and exit code 1.
// Call it first thing in main, before any thread exists. Idempotent.
void install();

// True once install() ran.
bool installed();

// Registers a temporary file or folder (removed recursively) for removal on interrupt; the
// destructor unregisters it without touching the file system (the owner renames or removes it).
// Thread-safe. Registering is cheap: one mutex, one map insertion.
class TemporaryPath {
 public:
  TemporaryPath() = default;
  explicit TemporaryPath(const std::filesystem::path& path);
  // Registers `path` and runs `create` (what makes the file or folder by that name) in one step
  // under the registry's lock, as create_registered() runs it: an interrupt's cleanup comes
  // wholly before (the process ends before anything is registered or made) or wholly after (the
  // cleanup removes what was made). Registered first and made outside the lock, a file could be
  // made in the moment between a cleanup that found nothing to remove and the process's end,
  // and stay behind. If `create` throws, nothing stays registered. `create` must not register
  // paths.
  TemporaryPath(const std::filesystem::path& path, const std::function<void()>& create);
  ~TemporaryPath();
  TemporaryPath(TemporaryPath&& other) noexcept : id_(other.id_) { other.id_ = 0; }
  TemporaryPath& operator=(TemporaryPath&& other) noexcept;
  TemporaryPath(const TemporaryPath&) = delete;
  TemporaryPath& operator=(const TemporaryPath&) = delete;

  // Unregisters now (after a successful rename onto the final name).
  void release() noexcept;

  // Runs `rename` (what moves the temporary onto its final name) with the registry locked, then
  // unregisters the temporary, or registers `leftover` in its place (a path the rename left for
  // removal, such as the old output moved aside). An interrupt's cleanup, which holds the same
  // lock until the process ends, so comes wholly before the rename (the temporary is removed
  // and the rename never starts) or wholly after it (the output stands complete): it can no
  // longer delete the files of a folder while that folder is renamed onto the final name.
  // If `rename` throws, the temporary stays registered. `rename` must not register paths.
  void publish(const std::function<void()>& rename, const std::filesystem::path& leftover = {});

 private:
  std::uint64_t id_ = 0;
};

// Runs `create` (what makes a file by the name of a registered temporary, such as H5Fcreate,
// which opens by path) with the registry locked, as publish() runs a rename: an interrupt's
// cleanup comes wholly before it (the process ends before the file is made) or wholly after it
// (the cleanup removes the file). Without it, a cleanup could remove the temporary and the
// creation make it again before the process ended, leaving an empty file behind. `create` must
// not register paths.
void create_registered(const std::function<void()>& create);

// The temporary paths registered now, oldest first (for tests and diagnostics).
std::size_t registered_count();

// Runs the program argv[0] (searched in PATH when it names no folder) with the arguments
// argv[1..], no shell in between: nothing in an argument is ever read as shell syntax. The
// child starts with SIGINT, SIGTERM and SIGHUP unblocked and at their default actions (a
// blocked mask would otherwise be inherited across exec). Returns the exit status (128 +
// signal if the child was killed), -1 if it could not start.
int run_program(const std::vector<std::string>& argv);

// A hook the interrupt thread runs on SIGINT, SIGTERM or SIGHUP before it removes the
// registered temporaries (bench: the partial report of the modes that finished); what it
// returns is appended to the line ("wrote the partial report rep"). An exception from it is
// ignored. One hook at a time; an empty function clears it. Thread-safe.
void set_interrupt_hook(std::function<std::string(int signal)> hook);

// Ends the process as an error nothing can recover from, from any thread: removes every
// registered temporary path, prints "tessel (rank R of P, host H): error: <message>" and exits
// with 1 (which mpirun turns into the end of the job). For the peer watch's lost-host line.
[[noreturn]] void fail_now(const std::string& message);

// Writes "tessel (rank R of P, host H): <message>" to stderr in one write, from any thread.
void say(const std::string& message);

// The signal's name: "SIGTERM", or "signal N".
std::string signal_name(int signal);

}  // namespace tessel::interrupt
