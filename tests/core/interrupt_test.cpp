// interrupt::install and TemporaryPath in a forked child: a process-directed SIGTERM removes the
// registered folder (recursively) and ends the child with 143; released paths are kept; a child
// started by run_program gets the signals unblocked; ScopedActivity remembers where an exception
// left.
#include "tessel/core/activity.hpp"
#include "tessel/core/interrupt.hpp"

#include "test_support.hpp"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <new>
#include <stdexcept>

namespace tessel {
namespace {

namespace fs = std::filesystem;

// Runs body in a forked child and returns its exit code (128 + signal if killed).
template <class Body> int in_child(Body body) {
  const pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(Interrupt, SigtermRemovesRegisteredPathsAndExits143) {
  test::TempDir dir;
  const auto doomed = dir / ".out.partial-1";
  const auto kept = dir / "kept.h5";
  const int code = in_child([&] {
    interrupt::install();
    fs::create_directories(doomed / "nested");
    std::ofstream(doomed / "part-0.h5") << "x";
    std::ofstream(doomed / "nested" / "f") << "y";
    std::ofstream(kept) << "z";
    interrupt::TemporaryPath registered(doomed);
    interrupt::TemporaryPath released(kept);
    released.release();
    ::kill(getpid(), SIGTERM); // process-directed: the watcher thread takes it
    for (;;) pause();
  });
  EXPECT_EQ(code, 128 + SIGTERM);
  EXPECT_FALSE(fs::exists(doomed));
  EXPECT_TRUE(fs::exists(kept));
}

// The last moments of an output: a folder renamed onto its final name while the interrupt's
// cleanup is removing its files. publish() holds the registry's lock, so the rename waits for the
// cleanup, which ends the process: the final name never appears. (With a plain rename the folder
// moved under the cleanup's feet, and the final name kept the files it had not yet removed:
// `partition` interrupted in its last ~50 ms left a partial partition folder.)
TEST(Interrupt, PublishNeverRacesTheCleanup) {
  test::TempDir dir;
  const auto temp = dir / ".parts.partial-1";
  const auto target = dir / "parts";
  const int code = in_child([&] {
    interrupt::install();
    fs::create_directories(temp);
    // Enough files that removing them takes a while (tens of milliseconds).
    for (int i = 0; i < 4000; ++i) std::ofstream(temp / ("part-" + std::to_string(i) + ".h5"));
    // The cleanup removes in the folder's own order: the first entry goes first.
    const fs::path first = fs::directory_iterator(temp)->path();
    interrupt::TemporaryPath registered(temp);
    ::kill(getpid(), SIGTERM);
    while (fs::exists(first)) {
    }
    // The cleanup has started and is still going: this rename must wait for it.
    registered.publish([&] { fs::rename(temp, target); });
    _exit(3);  // not reached: the cleanup ends the process
  });
  EXPECT_EQ(code, 128 + SIGTERM);
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_FALSE(fs::exists(target)) << "the folder was renamed into place while being removed";
}

// A file made by name at a registered temporary's path (H5Fcreate opens by path) after the
// cleanup removed it would stay behind: create_registered() waits for the cleanup, which ends
// the process first. The cleanup removes the oldest registration first; a folder of many files
// registered after the file keeps it busy while the file is made.
TEST(Interrupt, CreationNeverRemakesARemovedTemporary) {
  test::TempDir dir;
  const auto temp = dir / ".checkpoint.h5.tmp-1";
  const auto slow = dir / ".parts.partial-1";
  const int code = in_child([&] {
    interrupt::install();
    std::ofstream(temp) << "x";
    fs::create_directories(slow);
    for (int i = 0; i < 4000; ++i) std::ofstream(slow / ("part-" + std::to_string(i) + ".h5"));
    interrupt::TemporaryPath file(temp);
    interrupt::TemporaryPath folder(slow);
    ::kill(getpid(), SIGTERM);
    while (fs::exists(temp)) {
    }
    // The cleanup removed the file and is still removing the folder: this must wait for it.
    interrupt::create_registered([&] { std::ofstream(temp) << "remade"; });
    _exit(3);  // not reached: the cleanup ends the process
  });
  EXPECT_EQ(code, 128 + SIGTERM);
  EXPECT_FALSE(fs::exists(temp)) << "the temporary was made again after the cleanup removed it";
  EXPECT_FALSE(fs::exists(slow));
}

// An output's temporary is registered and made in one step (AtomicOutput, inference scratch
// files): made after a registration outside the lock, it could appear in the moment between a
// cleanup that found nothing yet and the process's end (a checkpoint's temporary was once left
// behind so under mpirun). Started while a cleanup runs, the step waits for it, which ends the
// process: the file is never made.
TEST(Interrupt, RegisteringAndMakingATemporaryIsOneStep) {
  test::TempDir dir;
  const auto temp = dir / ".checkpoint.h5.tmp-2";
  const auto slow = dir / ".parts.partial-2";
  const int code = in_child([&] {
    interrupt::install();
    fs::create_directories(slow);
    for (int i = 0; i < 4000; ++i) std::ofstream(slow / ("part-" + std::to_string(i) + ".h5"));
    const fs::path first = fs::directory_iterator(slow)->path();
    interrupt::TemporaryPath folder(slow);
    ::kill(getpid(), SIGTERM);
    while (fs::exists(first)) {
    }
    interrupt::TemporaryPath file(temp, [&] { std::ofstream(temp) << "made"; });
    _exit(3);  // not reached: the cleanup ends the process
  });
  EXPECT_EQ(code, 128 + SIGTERM);
  EXPECT_FALSE(fs::exists(temp)) << "the temporary was made after the cleanup started";
  EXPECT_FALSE(fs::exists(slow));
  // Outside an interrupt: registered while it lives, and not when `create` throws.
  {
    const std::size_t before = interrupt::registered_count();
    interrupt::TemporaryPath made(dir / "a", [] {});
    EXPECT_EQ(interrupt::registered_count(), before + 1);
    EXPECT_THROW(interrupt::TemporaryPath(dir / "b", [] { throw std::runtime_error("no"); }),
                 std::runtime_error);
    EXPECT_EQ(interrupt::registered_count(), before + 1);
  }
}

// After publish() the output is no longer the interrupt's to remove; a leftover given to it is.
TEST(Interrupt, PublishHandsOverToTheLeftover) {
  test::TempDir dir;
  const auto temp = dir / ".out.partial-1";
  const auto target = dir / "out";
  const auto old = dir / ".out.old-1";
  const int code = in_child([&] {
    interrupt::install();
    fs::create_directories(temp);
    fs::create_directories(target);
    std::ofstream(target / "old-file") << "x";
    interrupt::TemporaryPath registered(temp);
    registered.publish(
        [&] {
          fs::rename(target, old);
          fs::rename(temp, target);
        },
        old);
    ::kill(getpid(), SIGTERM);
    for (;;) pause();
  });
  EXPECT_EQ(code, 128 + SIGTERM);
  EXPECT_TRUE(fs::is_directory(target));
  EXPECT_FALSE(fs::exists(target / "old-file"));
  EXPECT_FALSE(fs::exists(old)) << "the old folder moved aside was left behind";
}

// An exception cannot leave an OpenMP parallel region: the runtime calls std::terminate. The
// handler install() sets names the failure in one line (out of memory, with the activity in
// progress), removes the registered outputs and exits with 1 instead of aborting.
TEST(Interrupt, ExceptionEscapingAParallelRegionIsOneLineAndCleansUp) {
  test::TempDir dir;
  const auto doomed = dir / ".out.h5.tmp-1-0";
  const auto log = dir / "stderr.txt";
  const int code = in_child([&] {
    interrupt::install();
    std::ofstream(doomed) << "x";
    interrupt::TemporaryPath registered(doomed);
    std::FILE* err = std::freopen(log.c_str(), "w", stderr);
    if (!err) _exit(99);
    const ScopedActivity activity("building the test's table");
#pragma omp parallel num_threads(2)
    {
      // Thrown on every thread: whichever reaches it first terminates the process.
      throw std::bad_alloc();
    }
    _exit(98);  // not reached
  });
  EXPECT_EQ(code, 1);
  EXPECT_FALSE(fs::exists(doomed));
  std::ifstream in(log);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  EXPECT_EQ(text, "tessel: error: out of memory while building the test's table; removed the "
                  "unfinished output " +
                      doomed.string() + "\n");
}

TEST(Interrupt, RegistrationFollowsLifetime) {
  const auto before = interrupt::registered_count();
  {
    interrupt::TemporaryPath a("x"), b("y");
    EXPECT_EQ(interrupt::registered_count(), before + 2);
    interrupt::TemporaryPath moved = std::move(a);
    EXPECT_EQ(interrupt::registered_count(), before + 2);
  }
  EXPECT_EQ(interrupt::registered_count(), before);
}

// std::system would hand the blocked mask to the shell, which would then ignore the SIGTERM it
// sends itself and run on; run_program's child takes it.
TEST(Interrupt, RunShellChildHasSignalsUnblocked) {
  const int code = in_child([] {
    interrupt::install();
    _exit(interrupt::run_program({"sh", "-c", "kill -TERM $$; exit 3"}) == 128 + SIGTERM ? 0 : 1);
  });
  EXPECT_EQ(code, 0);
}

TEST(Activity, RemembersWhereAnExceptionLeft) {
  clear_failed_activity();
  try {
    const ScopedActivity outer("converting data");
    EXPECT_EQ(current_activity(), "converting data");
    const ScopedActivity inner("reading edge.csv");
    EXPECT_EQ(current_activity(), "reading edge.csv, in converting data");
    throw std::bad_alloc();
  } catch (const std::bad_alloc&) {
    EXPECT_EQ(failed_activity(), "reading edge.csv, in converting data");
  }
  EXPECT_EQ(current_activity(), "");
  clear_failed_activity();
  EXPECT_EQ(failed_activity(), "");
}

} // namespace
} // namespace tessel
