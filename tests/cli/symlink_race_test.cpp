// Another user in a shared sticky folder (mode 1777) recreates, in a loop, a symbolic link at
// every name a Tessel output could use there (the output names, the old predictable temporary
// names for the process ids about to be used, and any hidden name that appears), pointing at a
// file and a folder outside; convert, partition, train --metrics/--checkpoint/--predictions and
// bench run meanwhile. The file and folder outside must stay untouched. The other user is a
// child process running as nobody (needs root: the test says so and skips elsewhere).
#include "dataset_fixtures.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

namespace tessel {
namespace {

namespace fs = std::filesystem;
using test::quote;
using test::run_tessel;

int last_pid() {
  std::ifstream in("/proc/sys/kernel/ns_last_pid");
  int pid = 0;
  in >> pid;
  return pid;
}

// The attacker's loop, in a child process as uid 65534, until killed.
[[noreturn]] void attack(const fs::path& shared, const fs::path& file, const fs::path& folder,
                         const std::vector<std::string>& targets) {
  if (::setgid(65534) != 0 || ::setuid(65534) != 0) _exit(3);
  for (;;) {
    const int pid = last_pid();
    std::vector<std::string> names;
    for (const auto& t : targets) {
      names.push_back(t);
      for (int p = pid; p < pid + 40; ++p) {
        names.push_back("." + t + ".partial-" + std::to_string(p));
        names.push_back("." + t + ".old-" + std::to_string(p));
        for (int n = 0; n < 3; ++n)
          names.push_back("." + t + ".tmp-" + std::to_string(p) + "-" + std::to_string(n));
      }
    }
    // Whatever hidden name appears: replaced by a link if the folder lets it be.
    if (DIR* d = ::opendir(shared.c_str())) {
      while (const dirent* e = ::readdir(d))
        if (e->d_name[0] == '.' && std::string(e->d_name) != "." && std::string(e->d_name) != "..")
          names.emplace_back(e->d_name);
      ::closedir(d);
    }
    for (const auto& name : names) {
      const fs::path at = shared / name;
      ::unlink(at.c_str());
      ::rmdir(at.c_str());
      const bool dir_like = name.find(".partial-") != std::string::npos ||
                            name.find(".old-") != std::string::npos || name == "parts" ||
                            name == "ck" || name == "rep";
      (void)::symlink((dir_like ? folder : file).c_str(), at.c_str());
    }
  }
}

TEST(SymlinkRace, OutputsInASharedStickyFolderAreNeverRedirected) {
  if (::geteuid() != 0) GTEST_SKIP() << "playing another user needs root (setuid to nobody)";
  test::TempDir dir("symlink-race");
  const fs::path shared = dir / "shared";
  fs::create_directories(shared);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);
  const fs::path victim = dir / "victim.txt";
  const fs::path victim_dir = dir / "victim-dir";
  {
    std::ofstream(victim) << "keep\n";
  }
  fs::create_directories(victim_dir);
  ASSERT_EQ(::chmod(victim.c_str(), 0666), 0);      // writable through a link by anyone
  ASSERT_EQ(::chmod(victim_dir.c_str(), 0777), 0);
  // Inputs made before the attack starts.
  auto r = run_tessel("convert synthetic --nodes 300 --avg-degree 5 --classes 3 --feat-dim 8 "
                      "--seed 1 " + quote(dir / "g.h5"));
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_tessel("partition " + quote(dir / "g.h5") + " --parts 1 --out " + quote(dir / "p1"));
  ASSERT_EQ(r.code, 0) << r.output;

  const std::vector<std::string> targets = {"g.h5", "parts", "m.jsonl", "ck", "pred.h5", "rep"};
  const pid_t attacker = ::fork();
  ASSERT_GE(attacker, 0);
  if (attacker == 0) attack(shared, victim, victim_dir, targets);

  int succeeded = 0;
  for (int round = 0; round < 3; ++round) {
    const std::vector<std::string> commands = {
        "convert synthetic --nodes 300 --avg-degree 5 --classes 3 --feat-dim 8 --seed 1 " +
            quote(shared / "g.h5"),
        "partition " + quote(dir / "g.h5") + " --parts 1 --force --out " + quote(shared / "parts"),
        "train " + quote(dir / "p1") + " --epochs 1 --quiet --metrics " +
            quote(shared / "m.jsonl") + " --checkpoint " + quote(shared / "ck") +
            " --predictions " + quote(shared / "pred.h5"),
        "bench " + quote(dir / "p1") + " --modes full --epochs 1 --quiet --force --out " +
            quote(shared / "rep")};
    for (const auto& command : commands) {
      r = run_tessel(command);
      succeeded += r.code == 0;
      // Refused or done, never through a link: one error line at most.
      if (r.code != 0) {
        EXPECT_NE(r.output.find("error"), std::string::npos) << r.output;
      }
    }
  }
  ::kill(attacker, SIGKILL);
  int status = 0;
  ::waitpid(attacker, &status, 0);
  EXPECT_FALSE(WIFEXITED(status)) << "the attacker could not start (exit " << WEXITSTATUS(status)
                                  << ")";
  EXPECT_EQ(test::read_file_bytes(victim), "keep\n");
  EXPECT_TRUE(fs::is_empty(victim_dir)) << "something was written into the folder outside";
  // Nothing of Tessel's is left behind under a hidden name (the attacker's links may be).
  for (const auto& e : fs::directory_iterator(shared))
    if (!fs::is_symlink(e.symlink_status())) {
      EXPECT_TRUE(e.path().filename().string()[0] != '.') << e.path();
    }
  std::printf("%d of 12 runs succeeded beside the attacker\n", succeeded);
}

// --out with a quote and $( ) in it names a folder, and runs nothing: the plot step gets the
// path as one argument, never through a shell.
TEST(NoShell, BenchOutWithShellSyntaxRunsNothing) {
  test::TempDir dir("no-shell");
  auto r = run_tessel("convert synthetic --nodes 200 --avg-degree 5 --classes 3 --feat-dim 8 "
                      "--seed 1 " + quote(dir / "g.h5"));
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_tessel("partition " + quote(dir / "g.h5") + " --parts 1 --out " + quote(dir / "p1"));
  ASSERT_EQ(r.code, 0) << r.output;
  const fs::path out = dir / "r'$(touch INJECTED)'";
  // run_tessel's shell line: the path in double quotes with $ escaped reaches tessel as is.
  std::string escaped;
  for (const char c : out.string()) {
    if (c == '$' || c == '"' || c == '\\' || c == '`') escaped += '\\';
    escaped += c;
  }
  const fs::path cwd = fs::current_path();
  fs::current_path(dir.path());
  r = run_tessel("bench " + quote(dir / "p1") + " --modes full --epochs 1 --quiet --out \"" +
                 escaped + "\"");
  fs::current_path(cwd);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(out / "report.json")) << r.output;
  EXPECT_FALSE(fs::exists(dir / "INJECTED"));
  EXPECT_FALSE(fs::exists(cwd / "INJECTED"));
}

}  // namespace
}  // namespace tessel
