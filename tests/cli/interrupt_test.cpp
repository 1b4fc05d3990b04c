// Interrupting `tessel convert`, `tessel partition` and `tessel precompute` with SIGINT, SIGTERM or SIGHUP through the
// binary: the signal is reported in one line, the exit code is 128 + its number, and no hidden
// temporary file or folder is left (METIS, which traps SIGTERM itself, must not turn it into a
// "METIS_ERROR").
#include "tessel/core/mpi.hpp"
#include "tessel/datasets/dataset.hpp"
#include "tessel/datasets/synthetic.hpp"

#include "dataset_fixtures.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace tessel {
namespace {

namespace fs = std::filesystem;

// `tessel ARGS...` running in the background, stdout and stderr going to a log file.
class Background {
public:
  Background(const std::vector<std::string>& args, const fs::path& log)
      : Background(test::tessel_binary().string(), args, log) {}
  // `program ARGS...` (a full path).
  Background(const std::string& program, const std::vector<std::string>& args, const fs::path& log)
      : log_(log) {
    std::vector<std::string> argv_text{program};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_text)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) pid_ = -1;
  }
  ~Background() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;

  pid_t pid() const { return pid_; }
  bool running() {
    if (reaped_) return false;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      code_ = decode(status);
      return false;
    }
    return true;
  }
  // Exit code, or 128 + signal if it was killed.
  int wait() {
    if (!reaped_) {
      int status = 0;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      reaped_ = true;
      code_ = decode(status);
    }
    return code_;
  }
  std::string log() const { return test::read_file_bytes(log_); }

  // Polls until ready() holds or the process has ended; returns ready().
  template <class Ready> bool wait_until(Ready ready) {
    for (;;) {
      if (ready()) return true;
      if (!running()) return ready();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

private:
  static int decode(int status) {
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  fs::path log_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int code_ = -1;
};

// The hidden temporaries Tessel writes outputs under: .NAME.tmp-RANDOM (files and folders).
bool has_temporary(const fs::path& dir) {
  for (const auto& name : test::list_dir(dir))
    if (name[0] == '.' &&
        (name.find(".tmp-") != std::string::npos || name.find(".partial-") != std::string::npos))
      return true;
  return false;
}

void expect_interrupted(Background& run, int signal, const char* name, const fs::path& out_dir) {
  const int code = run.wait();
  const std::string log = run.log();
  EXPECT_EQ(code, 128 + signal) << log;
  EXPECT_NE(log.find(std::string("tessel: interrupted by ") + name), std::string::npos) << log;
  EXPECT_EQ(log.find("METIS_ERROR"), std::string::npos) << log;
  EXPECT_EQ(log.find("tessel: error"), std::string::npos) << log;
  EXPECT_TRUE(test::list_dir(out_dir).empty()) << "left in " << out_dir << ": " << log;
}

// The store is written after the graph is generated; 38 MB of features keep the writer busy
// long enough to be interrupted while the temporary file exists.
TEST(CliInterrupt, ConvertRemovesItsTemporaryStore) {
  for (const auto& [signal, name] : {std::pair{SIGINT, "SIGINT"}, std::pair{SIGHUP, "SIGHUP"}}) {
    test::TempDir dir;
    const auto out = dir / "out";
    fs::create_directories(out);
    Background run({"convert", "synthetic", "--nodes", "150000", "--avg-degree", "2", "--classes",
                    "2", "--feat-dim", "64", (out / "s.h5").string()},
                   dir / "log");
    ASSERT_GT(run.pid(), 0);
    ASSERT_TRUE(run.wait_until([&] { return has_temporary(out); }))
        << "the temporary store never appeared: " << run.log();
    ::kill(run.pid(), signal);
    expect_interrupted(run, signal, name, out);
    EXPECT_NE(run.log().find("removed the unfinished output"), std::string::npos) << run.log();
  }
}

// SIGTERM while METIS runs: METIS traps SIGTERM itself (and used to return METIS_ERROR).
TEST(CliInterrupt, PartitionDuringMetisRemovesItsPartialFolder) {
  test::TempDir dir;
  datasets::SyntheticOptions o;
  o.num_nodes = 200000;
  o.avg_degree = 12;
  o.num_classes = 4;
  o.feature_dim = 2;
  o.seed = 5;
  datasets::write_store(datasets::make_synthetic(o), dir / "g.h5");
  const auto out = dir / "out";
  fs::create_directories(out);
  for (const auto& [signal, name] : {std::pair{SIGTERM, "SIGTERM"}, std::pair{SIGINT, "SIGINT"}}) {
    Background run({"partition", (dir / "g.h5").string(), "--parts", "4", "--out",
                    (out / "parts").string(), "--metis-max-edges", "100000000"},
                   dir / "log");
    ASSERT_GT(run.pid(), 0);
    ASSERT_TRUE(run.wait_until([&] { return run.log().find("METIS k-way") != std::string::npos; }))
        << "METIS never started: " << run.log();
    ASSERT_TRUE(has_temporary(out)) << run.log();
    ::kill(run.pid(), signal);
    expect_interrupted(run, signal, name, out);
  }
}

// SIGTERM while SIGN precompute within a budget of no row writes a hop to its scratch file (in
// rows of 64 elements, so it is still running): the scratch files and the output folder the run
// made are removed.
TEST(CliInterrupt, PrecomputeRemovesItsScratchFilesAndFolder) {
  test::TempDir dir;
  datasets::SyntheticOptions o;
  o.num_nodes = 20000;
  o.avg_degree = 8;
  o.num_classes = 4;
  o.feature_dim = 32;
  o.seed = 5;
  datasets::write_store(datasets::make_synthetic(o), dir / "g.h5");
  std::string output;
  ASSERT_EQ(test::run_command(test::tessel_binary().string() + " partition " +
                                  (dir / "g.h5").string() + " --parts 1 --method random --out " +
                                  (dir / "parts").string(),
                              &output),
            0)
      << output;
  const auto out = dir / "out";
  fs::create_directories(out);
  ::setenv("TESSEL_INFER_BLOCK_ELEMENTS", "64", 1);
  Background run({"precompute", (dir / "parts").string(), "--hops", "3", "--feature-memory", "0",
                  "--out", (out / "sign").string()},
                 dir / "log");
  ::unsetenv("TESSEL_INFER_BLOCK_ELEMENTS");
  ASSERT_GT(run.pid(), 0);
  ASSERT_TRUE(run.wait_until([&] { return fs::exists(out / "sign") && has_temporary(out / "sign"); }))
      << "no scratch file appeared: " << run.log();
  ::kill(run.pid(), SIGTERM);
  expect_interrupted(run, SIGTERM, "SIGTERM", out);
}

// Ctrl-C on mpirun reaches every rank as SIGTERM: the ranks report it, the job ends, and the
// checkpoint folder holds only complete checkpoints.
TEST(CliInterrupt, TrainUnderMpirunReportsSigtermOnce) {
  test::TempDir dir;
  const std::string tessel = "'" + test::tessel_binary().string() + "'";
  std::string output;
  ASSERT_EQ(test::run_command(tessel + " convert synthetic --nodes 600 --avg-degree 8 --classes 4 "
                                       "--feat-dim 8 --seed 3 '" + (dir / "g.h5").string() + "'",
                              &output),
            0)
      << output;
  ASSERT_EQ(test::run_command(tessel + " partition '" + (dir / "g.h5").string() +
                                  "' --parts 2 --out '" + (dir / "parts").string() + "'",
                              &output),
            0)
      << output;
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  setenv("OMP_NUM_THREADS", "1", 1);
  const auto ck = dir / "ck";
  Background run(TESSEL_MPIEXEC,
                 {"--oversubscribe", "--bind-to", "none", "-np", "2",
                  test::tessel_binary().string(), "train", (dir / "parts").string(), "--epochs",
                  "1000000", "--checkpoint", ck.string(), "--checkpoint-every", "1"},
                 dir / "log");
  ASSERT_GT(run.pid(), 0);
  ASSERT_TRUE(run.wait_until([&] { return fs::exists(ck / "checkpoint.h5"); }))
      << "no checkpoint was written: " << run.log();
  ::kill(run.pid(), SIGTERM);
  EXPECT_NE(run.wait(), 0);
  const std::string log = run.log();
  // Each rank reports its own SIGTERM; mpirun may drop the line of a rank it kills while
  // tearing the job down, so at least one must come through.
  const std::string host = mpi::hostname();
  EXPECT_TRUE(
      log.find("tessel (rank 0 of 2, host " + host + "): interrupted by SIGTERM") !=
          std::string::npos ||
      log.find("tessel (rank 1 of 2, host " + host + "): interrupted by SIGTERM") !=
          std::string::npos)
      << log;
  EXPECT_EQ(log.find("tessel: error"), std::string::npos) << log;
  EXPECT_EQ(test::list_dir(ck), std::vector<std::string>{"checkpoint.h5"}) << log;
}

// SIGTERM while the second mode of a bench trains: the report of the first is written (it names
// the signal and the mode it stopped), not nothing; no temporary is left.
TEST(CliInterrupt, BenchInterruptedLeavesThePartialReport) {
  test::TempDir dir("interrupt-bench");
  auto r = test::run_tessel("convert synthetic --nodes 300 --avg-degree 5 --classes 3 "
                            "--feat-dim 8 --seed 1 " + test::quote(dir / "g.h5"));
  ASSERT_EQ(r.code, 0) << r.output;
  r = test::run_tessel("partition " + test::quote(dir / "g.h5") + " --parts 1 --out " +
                       test::quote(dir / "p1"));
  ASSERT_EQ(r.code, 0) << r.output;
  const fs::path out = dir / "out";
  fs::create_directories(out);
  Background run({"bench", (dir / "p1").string(), "--modes", "full,sampled", "--epochs", "100000",
                  "--quiet", "--out", (out / "rep").string()},
                 dir / "log");
  ASSERT_TRUE(run.wait_until([&] { return run.log().find("== bench: mode sampled") !=
                                          std::string::npos; }))
      << run.log();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(run.pid(), SIGTERM);
  EXPECT_EQ(run.wait(), 128 + SIGTERM) << run.log();
  EXPECT_NE(run.log().find("wrote the partial report"), std::string::npos) << run.log();
  ASSERT_TRUE(fs::exists(out / "rep" / "report.json")) << run.log();
  const std::string report = test::read_file_bytes(out / "rep" / "report.json");
  EXPECT_NE(report.find("\"interrupted\""), std::string::npos) << report;
  EXPECT_NE(report.find("\"mode\": \"full\""), std::string::npos) << report;
  EXPECT_NE(report.find("\"mode\": \"sampled\""), std::string::npos) << report;
  EXPECT_FALSE(has_temporary(out)) << run.log();
}

} // namespace
} // namespace tessel
