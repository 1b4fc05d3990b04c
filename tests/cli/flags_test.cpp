// Flag values every command checks alike (src/cli/flag_checks.cpp): empty values, whole numbers
// beyond 64 bits or not in decimal, non-finite numbers, lists naming an item twice; each is one
// error line naming the flag, exit code 2, nothing written.
#include "test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace tessel {
namespace {

namespace fs = std::filesystem;

using test::quote;
using test::run_tessel;

std::size_t lines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

// Each case: the arguments, and pieces the one error line must hold.
void expect_refused(const fs::path& dir,
                    const std::vector<std::pair<std::string, std::vector<std::string>>>& cases) {
  for (const auto& [args, pieces] : cases) {
    const auto r = run_tessel(args);
    SCOPED_TRACE(args + "\n" + r.output);
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(lines(r.output), 1u);
    EXPECT_EQ(r.output.rfind("tessel: error: ", 0), 0u);
    for (const auto& piece : pieces) EXPECT_NE(r.output.find(piece), std::string::npos) << piece;
    EXPECT_FALSE(fs::exists(dir / "out")) << "something was written";
  }
}

class CliFlags : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir("cli-flags");
    const auto r = run_tessel("convert synthetic --nodes 200 --avg-degree 4 --classes 3 "
                              "--feat-dim 4 " + quote(*dir_ / "g.h5"));
    ASSERT_EQ(r.code, 0) << r.output;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path dir() { return dir_->path(); }
  static std::string store() { return quote(dir() / "g.h5"); }
  static std::string out() { return quote(dir() / "out"); }

 private:
  static test::TempDir* dir_;
};
test::TempDir* CliFlags::dir_ = nullptr;

// CLI11 clamps 99999999999999999999 to 2^63 - 1 and reads '' as 0.
TEST_F(CliFlags, WholeNumbersBeyond64BitsAndEmptyValuesAreRefused) {
  expect_refused(dir(), {
      {"partition " + store() + " --parts 2 --out " + out() +
           " --metis-max-edges 99999999999999999999",
       {"--metis-max-edges: 99999999999999999999 is outside", "9223372036854775807"}},
      {"partition " + store() + " --parts 2 --out " + out() + " --metis-max-edges -99999999999999999999",
       {"--metis-max-edges: -99999999999999999999 is outside"}},
      {"partition " + store() + " --parts 2 --out " + out() + " --seed 18446744073709551616",
       {"--seed: 18446744073709551616 is outside"}},
      {"partition " + store() + " --parts 2 --out " + out() + " --metis-max-edges 0x10",
       {"--metis-max-edges: '0x10' is not a whole number"}},
      {"convert synthetic " + quote(dir() / "out") + " --nodes 100 --train-frac ''",
       {"--train-frac: an empty value"}},
      {"convert synthetic " + quote(dir() / "out") + " --nodes ''", {"--nodes: an empty value"}},
      {"partition " + store() + " --parts 2 --out ''", {"--out: an empty value"}},
      {"convert synthetic " + quote(dir() / "out") + " --nodes 100 --train-frac nan",
       {"--train-frac: 'nan' is not a finite number"}},
      {"convert synthetic-temporal " + quote(dir() / "out") + " --nodes 100 --avg-degree 0x10",
       {"--avg-degree: '0x10' is not a finite number"}},
      {"convert synthetic-temporal " + quote(dir() / "out") + " --nodes 1e20",
       {"--nodes: '1e20' is not a whole number"}},
  });
}

// Found by the hostile run: these refusals named no flag ("synthetic: homophily must be in
// [0, 1]", "synthetic preset '1e12' is unknown", "1,,2: no such file").
TEST_F(CliFlags, LibraryRefusalsNameTheirFlag) {
  {
    std::ofstream edges(dir() / "e.csv");
    edges << "0,1,0\n1,2,1\n2,0,2\n";
  }
  { std::ofstream(dir() / "afile") << "x"; }
  const std::string synthetic = "convert synthetic " + out() + " --nodes 100 ";
  expect_refused(dir(), {
      {synthetic + "--homophily 2", {"--homophily must be in [0, 1] (got 2)"}},
      {synthetic + "--degree-exponent 99999999999999999999", {"--degree-exponent must be in"}},
      {synthetic + "--feature-signal -1", {"--feature-signal must be in [0, 1e6]"}},
      {synthetic + "--feature-signal 1e300", {"--feature-signal must be in [0, 1e6]"}},
      {synthetic + "--preset 1e12", {"--preset 1e12: unknown synthetic preset; expected one of"}},
      {"convert synthetic-temporal " + out() + " --nodes 100 --communities 0",
       {"--communities must be in [1, nodes], got 0"}},
      {"convert temporal " + quote(dir() / "e.csv") + " " + out() +
           " --snapshots 3 --node-features 1,,2",
       {"--node-features 1,,2: no such file"}},
      {"partition " + store() + " --parts 2 --out " + quote(dir() / "afile" / "out"),
       {"--out " + (dir() / "afile" / "out").string() + ": " + (dir() / "afile").string() +
        " is a file, not a folder"}},
  });
}

// 010 is ten parts, not octal 8.
TEST_F(CliFlags, LeadingZerosAreDecimal) {
  const auto r =
      run_tessel("partition " + store() + " --parts 010 --out " + quote(dir() / "p10"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("-> 10 parts"), std::string::npos) << r.output;
  fs::remove_all(dir() / "p10");
}

TEST_F(CliFlags, ListsNamingAnItemTwiceAreRefused) {
  std::ofstream(dir() / "e.json") << "{}";
  expect_refused(dir(), {
      {"partition " + store() + " --parts 2 --out " + out() + " --balance nodes,nodes",
       {"--balance: nodes is listed twice in nodes,nodes"}},
      {"partition " + store() + " --parts 2 --out " + out() + " --balance nodes,,train",
       {"--balance: an empty item"}},
      {"convert temporal " + quote(dir() / "e.json") + " " + out() + " --features s1 s1",
       {"--features: s1 is listed twice in s1 s1"}},
      {"convert temporal " + quote(dir() / "e.json") + " " + out() + " --features s2,s1,s2",
       {"--features: s2 is listed twice in s2 s1 s2"}},
      {"partition --check " + quote(dir()) + " --only 1,1", {"--only: 1 is listed twice"}},
  });
  // The bench checks its modes before MPI starts.
  const auto r = run_tessel("bench " + quote(dir()) + " --modes full,full --out " + out());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--modes: full is listed twice in full,full"), std::string::npos)
      << r.output;
}

// The check above refused `--edge-split 80,10,10`: a list of numbers may repeat one.
TEST_F(CliFlags, NumberListsMayRepeatAValue) {
  const auto r = run_tessel("convert synthetic " + quote(dir() / "split.h5") +
                            " --nodes 200 --feat-dim 2 --classes 2 --edge-split 80,10,10");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("edge split 80,10,10"), std::string::npos) << r.output;
}

// TESSEL_FAULT_RANK=x was read as rank 0: refused before MPI starts, naming the variable.
TEST_F(CliFlags, FaultVariablesAreWholeNumbers) {
  for (const auto& [env, piece] :
       {std::pair<std::string, std::string>{"TESSEL_FAULT_RANK=x TESSEL_FAULT_EPOCH=1",
                                            "TESSEL_FAULT_RANK=x: 'x' is not a whole number"},
        {"TESSEL_FAULT_RANK=0 TESSEL_FAULT_EPOCH=", "TESSEL_FAULT_EPOCH=: an empty value"},
        {"TESSEL_FAULT_RANK=-1 TESSEL_FAULT_EPOCH=1", "TESSEL_FAULT_RANK=-1"},
        {"TESSEL_FAULT_KIND=kil", "TESSEL_FAULT_KIND=kil: expected kill"},
        {"TESSEL_FAULT_MODE=ful", "TESSEL_FAULT_MODE=ful: expected one of full, "}}) {
    std::string output;
    const int code = test::run_command(env + " " + quote(test::tessel_binary()) + " train " +
                                           quote(dir()) + " --epochs 1 2>&1",
                                       &output);
    EXPECT_EQ(code, 2) << env << ": " << output;
    EXPECT_EQ(lines(output), 1u) << output;
    EXPECT_NE(output.find(piece), std::string::npos) << output;
  }
}

// A size no machine holds was a bare "out of memory": the flags and the memory are named first.
TEST_F(CliFlags, SyntheticTemporalBeyondMemoryNamesTheFlags) {
  expect_refused(dir(), {{"convert synthetic-temporal " + out() + " --nodes 100000000000",
                          {"--nodes 100000000000", "GB of memory", "memory and swap here"}}});
}

// `convert synthetic --nodes 4294967297` was "out of memory ... of 4294967297 nodes", naming no
// flag; each size flag is named with the memory it needs and what fits.
TEST_F(CliFlags, SyntheticBeyondMemoryNamesTheFlags) {
  const std::string cmd = "convert synthetic " + out() + " ";
  expect_refused(
      dir(),
      {{cmd + "--nodes 4294967297",
        {"--nodes 4294967297", "--avg-degree 16", "GB of memory (graph, labels and splits)",
         "memory and swap here", "nodes fit"}},
       {cmd + "--nodes 10000000000 --avg-degree 1000000000",
        {"--nodes 10000000000", "--avg-degree 1000000000", "memory and swap here"}},
       {cmd + "--nodes 1000000 --uniform-degree 999999",
        {"--uniform-degree 999999", "memory and swap here"}},
       {cmd + "--nodes 1000000 --classes 1000000 --feat-dim 1048576",
        {"--classes 1000000", "--feat-dim 1048576", "lower --classes or --feat-dim"}},
       {cmd + "--nodes 1000000000 --feat-dim 1048576 --ogb",
        {"--feat-dim 1048576", "(graph, labels, splits and features)"}},
       {cmd + "--nodes 1099511627776", {"--nodes must be in [2, 1099511627775]"}},
       {cmd + "--feat-dim 1048577", {"--feat-dim must be in [1, 1048576]"}},
       {cmd + "--classes 99999999999", {"--classes must be in [1, nodes]"}},
       {cmd + "--avg-degree 1e300", {"--avg-degree must be in [0, nodes - 1]"}}});
}

// CLI11 reads `--quiet=yes` or `--ogb=1e309` as the flag's own value: every command refuses a
// value on a flag, naming it; the flag alone and a value-taking `--name=x` still parse.
TEST_F(CliFlags, FlagsTakeNoValue) {
  expect_refused(
      dir(),
      {{"convert synthetic " + out() + " --nodes 100 --ogb=1e309",
        {"--ogb takes no value (got --ogb=1e309): give --ogb alone"}},
       {"train " + quote(dir()) + " --quiet=yes", {"--quiet takes no value (got --quiet=yes)"}},
       {"train " + quote(dir()) + " --quiet=true", {"--quiet takes no value (got --quiet=true)"}},
       {"bench " + quote(dir()) + " --out " + out() + " --force=0", {"--force takes no value"}},
       {"partition " + store() + " " + out() + " --parts 2 --force=", {"--force takes no value"}},
       {"info " + store() + " --no-degrees=false", {"--no-degrees takes no value"}},
       {"info " + store() + " --json=1", {"--json takes no value"}},
       {"convert ogb " + quote(dir()) + " " + out() + " --symmetrize=no",
        {"--symmetrize takes no value"}},
       {"--version=1", {"--version takes no value"}},
       {"info --help=yes", {"--help takes no value"}}});
  const auto ok = run_tessel("info " + store() + " --no-degrees --json");
  EXPECT_EQ(ok.code, 0) << ok.output;
  const auto named = run_tessel("convert synthetic " + quote(dir() / "n.h5") +
                                " --nodes=50 --name=a --feat-dim 2 --classes 2 --shuffle-ids");
  EXPECT_EQ(named.code, 0) << named.output;
}

// A --features path naming a file was reported as a missing folder.
TEST_F(CliFlags, SignFeaturesFolderThatIsAFileIsSaidToBeAFile) {
  const auto r = run_tessel("train " + quote(dir()) + " --mode pipeline --features " + store());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(lines(r.output), 1u) << r.output;
  EXPECT_NE(r.output.find("g.h5 is a file, expected a folder of precomputed SIGN features"),
            std::string::npos)
      << r.output;
}

// An unknown option before any command named the missing command instead.
TEST(CliTopLevel, UnknownOptionIsNamed) {
  for (const auto& [args, piece] :
       {std::pair<std::string, std::string>{"--versionn", "unknown option --versionn (did you mean --version?)"},
        {"--verbose train", "unknown option --verbose"}}) {
    const auto r = run_tessel(args);
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_EQ(lines(r.output), 1u) << r.output;
    EXPECT_NE(r.output.find(piece), std::string::npos) << r.output;
  }
  const auto v = run_tessel("--version");
  EXPECT_EQ(v.code, 0) << v.output;
  EXPECT_NE(v.output.find("tessel "), std::string::npos) << v.output;
}

}  // namespace
}  // namespace tessel
