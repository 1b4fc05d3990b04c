// Outputs through the binary when the disk is full, when the output name is not a regular
// file, or when it is very long: one error line naming the file, a non-zero exit, and nothing
// half-written left behind (no temporary, no truncated file under the final name, no empty
// folder). The full disks are small tmpfs mounts (root only; skipped with a message elsewhere).
#include "dataset_fixtures.hpp"
#include "tessel/datasets/h5.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>

#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace tessel {
namespace {

namespace fs = std::filesystem;

using Result = test::CommandResult;
using test::quote;
using test::run_tessel;

// A tmpfs of `bytes` mounted on a fresh folder, unmounted on destruction; mounted() is false
// (with the reason) where mounting is refused.
class SmallDisk {
 public:
  explicit SmallDisk(const std::string& tag, std::size_t bytes) : dir_(tag) {
    mount_point_ = dir_ / "disk";
    fs::create_directories(mount_point_);
    const std::string options = "size=" + std::to_string(bytes);
    if (::mount("tmpfs", mount_point_.c_str(), "tmpfs", 0, options.c_str()) == 0)
      mounted_ = true;
    else
      reason_ = std::string("cannot mount a tmpfs here: ") + std::strerror(errno);
  }
  ~SmallDisk() {
    if (mounted_) ::umount2(mount_point_.c_str(), MNT_DETACH);
  }
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;

  bool mounted() const { return mounted_; }
  const std::string& reason() const { return reason_; }
  const fs::path& path() const { return mount_point_; }
  // Fills the disk up with one file, leaving about `leave` bytes free.
  void fill(std::size_t leave) {
    std::FILE* out = std::fopen((mount_point_ / "filler").c_str(), "wb");
    ASSERT_NE(out, nullptr);
    const std::string block(4096, 'x');
    while (fs::space(mount_point_).available > leave &&
           std::fwrite(block.data(), 1, block.size(), out) == block.size() &&
           std::fflush(out) == 0) {
    }
    std::fclose(out);
  }
  // What the test left in the disk, the filler aside.
  std::vector<std::string> left() const {
    auto names = test::list_dir(mount_point_);
    names.erase(std::remove(names.begin(), names.end(), "filler"), names.end());
    return names;
  }

 private:
  test::TempDir dir_;
  fs::path mount_point_;
  bool mounted_ = false;
  std::string reason_;
};

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += n + " ";
  return s;
}

// One error line naming `piece`, exit code 2.
void expect_one_line(const Result& r, const std::string& piece) {
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_EQ(r.output.rfind("tessel: error: ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find(piece), std::string::npos) << "no \"" << piece << "\" in " << r.output;
}

// Commands that print progress before they fail: exactly one error line, naming `piece`.
void expect_error_line(const Result& r, const std::string& piece) {
  EXPECT_EQ(r.code, 2) << r.output;
  std::size_t lines = 0;
  for (auto at = r.output.find("tessel: error: "); at != std::string::npos;
       at = r.output.find("tessel: error: ", at + 1))
    ++lines;
  EXPECT_EQ(lines, 1u) << r.output;
  EXPECT_NE(r.output.find(piece), std::string::npos) << "no \"" << piece << "\" in " << r.output;
  EXPECT_EQ(r.output.find(".tmp-"), std::string::npos) << "names a temporary: " << r.output;
}

class Outputs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir("outputs");
    auto r = run_tessel("convert synthetic --nodes 400 --avg-degree 6 --classes 3 --feat-dim 8 "
                        "--seed 3 " + quote(dir_->path() / "g.h5"));
    ASSERT_EQ(r.code, 0) << r.output;
    r = run_tessel("partition " + quote(dir_->path() / "g.h5") + " --parts 1 --out " +
                   quote(dir_->path() / "p1"));
    ASSERT_EQ(r.code, 0) << r.output;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path at(const std::string& name) { return dir_->path() / name; }
  static inline test::TempDir* dir_ = nullptr;
};

#define TESSEL_NEED_MOUNT(disk) \
  if (!(disk).mounted()) GTEST_SKIP() << (disk).reason()

// Stores (convert synthetic, convert ogb), partitions and temporal stores larger than the disk.
TEST_F(Outputs, StoresAndPartitionsAreErrorsAndLeaveNothing) {
  SmallDisk disk("full-disk-stores", 1 << 20);
  TESSEL_NEED_MOUNT(disk);
  Result r = run_tessel("convert synthetic --nodes 20000 --avg-degree 8 --classes 4 --feat-dim 32 "
                        "--seed 1 " + quote(disk.path() / "big.h5"));
  expect_one_line(r, "big.h5");
  EXPECT_TRUE(disk.left().empty()) << joined(disk.left());

  disk.fill(8 << 10);
  test::write_tiny_ogb(at("tiny"));
  r = run_tessel("convert ogb " + quote(at("tiny")) + " " + quote(disk.path() / "tiny.h5"));
  expect_one_line(r, "tiny.h5");
  EXPECT_TRUE(disk.left().empty()) << joined(disk.left());

  r = run_tessel("partition " + quote(at("g.h5")) + " --parts 2 --out " +
                 quote(disk.path() / "parts"));
  expect_error_line(r, "parts");
  EXPECT_TRUE(disk.left().empty()) << joined(disk.left());

  r = run_tessel("convert synthetic-temporal " + quote(disk.path() / "t.h5") +
                 " --nodes 2000 --snapshots 8");
  expect_one_line(r, "t.h5");
  EXPECT_TRUE(disk.left().empty()) << joined(disk.left());
}

// Metrics, checkpoints and predictions on a full disk: the run fails naming the file, the torn
// metrics file is removed, and a first checkpoint leaves no empty folder.
TEST_F(Outputs, TrainingOutputsAreErrorsAndLeaveNothing) {
  SmallDisk disk("full-disk-train", 256 << 10);
  TESSEL_NEED_MOUNT(disk);
  disk.fill(0);
  const std::string train = "train " + quote(at("p1")) + " --epochs 3 --hidden 8 --quiet ";
  Result r = run_tessel(train + "--metrics " + quote(disk.path() / "m.jsonl"));
  expect_error_line(r, "cannot write metrics file");
  EXPECT_NE(r.output.find("m.jsonl"), std::string::npos) << r.output;
  EXPECT_TRUE(disk.left().empty()) << joined(disk.left());

  r = run_tessel(train + "--checkpoint " + quote(disk.path() / "ck"));
  expect_error_line(r, "ck");
  EXPECT_TRUE(disk.left().empty()) << joined(disk.left());

  r = run_tessel(train + "--predictions " + quote(disk.path() / "pred.h5"));
  expect_error_line(r, "pred.h5");
  EXPECT_TRUE(disk.left().empty()) << joined(disk.left());

  r = run_tessel("precompute " + quote(at("p1")) + " --hops 1 --out " +
                 quote(disk.path() / "sign"));
  expect_error_line(r, "sign");
  EXPECT_TRUE(disk.left().empty()) << joined(disk.left());
}

// A name that is a FIFO, a device or a link is never replaced by the rename.
TEST_F(Outputs, NonRegularOutputsAreRefused) {
  const fs::path fifo = at("a-fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  test::write_tiny_ogb(at("tiny-fifo"));
  Result r = run_tessel("convert ogb " + quote(at("tiny-fifo")) + " " + quote(fifo));
  expect_one_line(r, "is not a regular file");
  EXPECT_TRUE(fs::is_fifo(fifo));
  const fs::path link = at("a-link.h5");
  test::write_text(at("linked.txt"), "keep\n");
  fs::create_symlink(at("linked.txt"), link);
  r = run_tessel("convert synthetic --nodes 50 --seed 1 " + quote(link));
  expect_one_line(r, "is not a regular file");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(test::read_file_bytes(at("linked.txt")), "keep\n");
  // A character device like /dev/null, made here (as root only).
  const fs::path nul = at("nul");
  if (::mknod(nul.c_str(), S_IFCHR | 0600, makedev(1, 3)) == 0) {
    r = run_tessel("convert ogb " + quote(at("tiny-fifo")) + " " + quote(nul));
    expect_one_line(r, "is not a regular file");
    EXPECT_TRUE(fs::is_character_file(nul));
  }
}

// An output name of 248 bytes is legal (a name may have 255): its hidden temporary must fit too.
TEST_F(Outputs, LongOutputNamesWork) {
  test::write_tiny_ogb(at("tiny-long"));
  const fs::path out = at(std::string(245, 'a') + ".h5");
  const Result r = run_tessel("convert ogb " + quote(at("tiny-long")) + " " + quote(out));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::is_regular_file(out));
}

// No run writes over what it reads: a convert over its own input file, a bench --force over
// the partition it benchmarks, predictions or metrics over the run's checkpoint; and a metrics
// name that is a FIFO (it blocked the run) or a link is refused before training.
TEST_F(Outputs, RunsNeverWriteOverTheirInputs) {
  test::write_tiny_ogb(at("own"), test::TinyOgb{.gzip = false});
  const std::string edges = test::read_file_bytes(at("own") / "raw" / "edge.csv");
  Result r = run_tessel("convert ogb " + quote(at("own")) + " " + quote(at("own") / "raw" / "edge.csv"));
  expect_one_line(r, "an input of this run");
  EXPECT_EQ(test::read_file_bytes(at("own") / "raw" / "edge.csv"), edges);
  test::write_text(at("t.csv"), "0,1,0\n1,2,1\n");
  r = run_tessel("convert temporal " + quote(at("t.csv")) + " " + quote(at("t.csv")) +
                 " --snapshots 2");
  expect_one_line(r, "an input of this run");
  EXPECT_EQ(test::read_file_bytes(at("t.csv")), "0,1,0\n1,2,1\n");

  r = run_tessel("bench " + quote(at("p1")) + " --out " + quote(at("p1")) +
                 " --force --epochs 1 --quiet --modes full");
  expect_error_line(r, "--out");
  EXPECT_TRUE(fs::exists(at("p1") / "partition.json"));

  const std::string train = "train " + quote(at("p1")) + " --epochs 1 --quiet ";
  r = run_tessel(train + "--checkpoint " + quote(at("ck")));
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_tessel(train + "--checkpoint " + quote(at("ck")) + " --predictions " +
                 quote(at("ck") / "checkpoint.h5"));
  expect_one_line(r, "--predictions");
  EXPECT_EQ(h5::File::open_read(at("ck") / "checkpoint.h5").attr_string("format"),
            "tessel-checkpoint");
  ASSERT_EQ(::mkfifo(at("m.fifo").c_str(), 0600), 0);
  r = run_tessel(train + "--metrics " + quote(at("m.fifo")));
  expect_one_line(r, "--metrics");
  test::write_text(at("kept.txt"), "keep\n");
  fs::create_symlink(at("kept.txt"), at("m-link.jsonl"));
  r = run_tessel(train + "--metrics " + quote(at("m-link.jsonl")));
  expect_one_line(r, "is not a regular file");
  EXPECT_EQ(test::read_file_bytes(at("kept.txt")), "keep\n");
}

// A bench at a rank count the partition does not fit (one rank, two parts) is refused with
// exit code 2 and leaves no report folder (before: an empty report of 0 modes).
TEST_F(Outputs, BenchAtTheWrongRankCountLeavesNoFolder) {
  Result r = run_tessel("partition " + quote(at("g.h5")) + " --parts 2 --out " + quote(at("c2")));
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_tessel("bench " + quote(at("c2")) + " --modes full --epochs 1 --quiet --out " +
                     quote(at("rep-c2")),
                 1);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("holds a partition into 2 parts"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(at("rep-c2"))) << r.output;
  for (const auto& e : fs::directory_iterator(dir_->path()))
    EXPECT_EQ(e.path().filename().string().find(".rep-c2"), std::string::npos) << e.path();
}

// A partition folder name of 250 bytes works (its hidden temporary is cut to fit).
TEST_F(Outputs, LongPartitionFolderNamesWork) {
  const fs::path out = at(std::string(250, 'b'));
  const Result r = run_tessel("partition " + quote(at("g.h5")) + " --parts 2 --out " + quote(out));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(out / "partition.json"));
}

}  // namespace
}  // namespace tessel
