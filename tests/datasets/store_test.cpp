// Tests of the dataset store: round trip, row-range reads, reproducible bytes, atomic writes,
// and one clear error for each kind of damaged file.
#include "tessel/core/error.hpp"
#include "tessel/core/interrupt.hpp"
#include "tessel/datasets/atomic_output.hpp"
#include "tessel/datasets/dataset.hpp"

#include "dataset_fixtures.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace tessel {
namespace {

namespace fs = std::filesystem;
using datasets::Dataset;

std::string store_error(const std::filesystem::path& path) {
  return test::input_error([&] { (void)datasets::read_store(path); });
}

// A store gives back everything written, name and directedness too.
void expect_same(const Dataset& a, const Dataset& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.directed, b.directed);
  test::expect_same_contents(a, b);
}

TEST(Store, RoundTrip) {
  test::TempDir dir;
  Dataset data = test::small_dataset();
  data.labels[3] = -1; // an unlabeled node survives
  datasets::write_store(data, dir / "s.h5");
  expect_same(datasets::read_store(dir / "s.h5"), data);
  EXPECT_EQ(test::list_dir(dir.path()), std::vector<std::string>{"s.h5"}); // no temporaries left
}

TEST(Store, InfoAndGraphOnly) {
  test::TempDir dir;
  const Dataset data = test::small_dataset();
  datasets::write_store(data, dir / "s.h5");
  const auto info = datasets::read_store_info(dir / "s.h5");
  EXPECT_EQ(info.num_nodes, data.num_nodes);
  EXPECT_EQ(info.num_edges, data.num_edges());
  EXPECT_EQ(info.num_classes, data.num_classes);
  EXPECT_EQ(info.feature_dim, data.feature_dim);
  EXPECT_EQ(info.num_train, static_cast<std::int64_t>(data.train.size()));
  EXPECT_EQ(info.num_valid, static_cast<std::int64_t>(data.valid.size()));
  EXPECT_EQ(info.num_test, static_cast<std::int64_t>(data.test.size()));
  EXPECT_EQ(info.version, datasets::kStoreVersion);
  EXPECT_GT(info.file_bytes, 0);
  datasets::ReadOptions options;
  options.features = false;
  const auto graph_only = datasets::read_store(dir / "s.h5", options);
  EXPECT_TRUE(graph_only.features.empty());
  EXPECT_EQ(graph_only.graph.indices, data.graph.indices);
}

TEST(Store, FeatureRowRange) {
  test::TempDir dir;
  const Dataset data = test::small_dataset(1000);
  datasets::write_store(data, dir / "s.h5");
  const std::int64_t f = data.feature_dim;
  for (auto [b, e] : {std::pair<std::int64_t, std::int64_t>{0, 1},
                      {17, 400},
                      {999, 1000},
                      {0, 1000},
                      {500, 500}}) {
    const auto rows = datasets::read_feature_rows(dir / "s.h5", b, e);
    const std::vector<float> expect(data.features.begin() + b * f, data.features.begin() + e * f);
    EXPECT_EQ(rows, expect) << b << ".." << e;
  }
  EXPECT_THROW((void)datasets::read_feature_rows(dir / "s.h5", 900, 1001), InputError);
  EXPECT_THROW((void)datasets::read_feature_rows(dir / "s.h5", 5, 4), InputError);
}

TEST(Store, SameDataSameBytes) {
  test::TempDir dir;
  const Dataset data = test::small_dataset();
  datasets::write_store(data, dir / "a.h5");
  datasets::write_store(data, dir / "b.h5");
  EXPECT_EQ(test::read_file_bytes(dir / "a.h5"), test::read_file_bytes(dir / "b.h5"));
}

TEST(Store, WriteRefusesInvalidDataAndLeavesNothing) {
  test::TempDir dir;
  Dataset data = test::small_dataset();
  data.graph.indices[0] = data.num_nodes; // out of range
  EXPECT_THROW(datasets::write_store(data, dir / "bad.h5"), InputError);
  EXPECT_TRUE(test::list_dir(dir.path()).empty());
  EXPECT_THROW(datasets::write_store(test::small_dataset(), dir / "missing" / "x.h5"), InputError);
}

TEST(Store, AtomicOutputRemovesTemporaryOnError) {
  test::TempDir dir;
  try {
    datasets::AtomicOutput out(dir / "x.bin");
    std::ofstream(out.temp_path()) << "half";
    EXPECT_EQ(test::list_dir(dir.path()).size(), 1u);
    throw std::runtime_error("writer failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_TRUE(test::list_dir(dir.path()).empty());
  {
    datasets::AtomicOutput out(dir / "x.bin");
    std::ofstream(out.temp_path()) << "whole";
    out.commit();
  }
  EXPECT_EQ(test::list_dir(dir.path()), std::vector<std::string>{"x.bin"});
  EXPECT_EQ(test::read_file_bytes(dir / "x.bin"), "whole");
}

// An interrupt at any moment of an output's life leaves nothing behind: each child makes and
// drops file and folder outputs as fast as it can until a SIGTERM sent at a varying moment ends
// it, and its folder must then be empty. (The moment that once left a checkpoint's temporary
// behind, between its registration and its creation, is too short to hit by chance here:
// Interrupt.RegisteringAndMakingATemporaryIsOneStep covers it.)
TEST(Store, AnInterruptNeverLeavesATemporaryBehind) {
  test::TempDir dir;
  for (int round = 0; round < 40; ++round) {
    const fs::path folder = dir / ("round-" + std::to_string(round));
    fs::create_directories(folder);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      // As a rank under mpirun: the cleanup then waits 100 ms before the process ends, the
      // moment in which a file made outside the lock would appear.
      ::setenv("OMPI_COMM_WORLD_RANK", "0", 1);
      ::setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
      interrupt::install();
      std::thread([round] {
        std::this_thread::sleep_for(std::chrono::microseconds(200 + 97 * round));
        ::kill(::getpid(), SIGTERM);
      }).detach();
      for (int i = 0;; ++i) {
        datasets::AtomicOutput out(folder / "x.h5", i % 2 == 1);
      }
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << "round " << round;
    EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << "round " << round;
    EXPECT_TRUE(test::list_dir(folder).empty()) << "round " << round << " left "
                                                << test::list_dir(folder).front();
  }
}

// A folder output replaces a folder that holds files (partition --force on a temporal store used
// to delete the old folder first, so an interrupt while writing left neither): the old folder is
// moved aside in the rename's step and removed after it.
TEST(Store, AtomicFolderOutputReplacesAFullFolder) {
  test::TempDir dir;
  fs::create_directories(dir / "out");
  std::ofstream(dir / "out" / "old.h5") << "old";
  {
    datasets::AtomicOutput out(dir / "out", true);
    std::ofstream(out.temp_path() / "new.h5") << "new";
    EXPECT_TRUE(fs::exists(dir / "out" / "old.h5")) << "the old folder must stand until commit";
    out.commit();
  }
  EXPECT_EQ(test::list_dir(dir.path()), std::vector<std::string>{"out"});
  EXPECT_EQ(test::list_dir(dir / "out"), std::vector<std::string>{"new.h5"});
}

// A run killed by SIGKILL cannot remove its temporary; the next run of an output in the same
// folder removes those whose maker is provably gone (this host, this pid namespace, no process
// with that pid), and nothing else: not the temporary of a live process, not another host's,
// not a symbolic link planted under such a name (nor what it points at).
TEST(Store, StaleTemporariesOfAGoneProcessAreRemoved) {
  test::TempDir dir;
  fs::create_directories(dir / "out");
  fs::create_directories(dir / "elsewhere");
  std::ofstream(dir / "elsewhere" / "keep.txt") << "keep";
  // The shape of this process's temporaries: ".x.bin.tmp-RANDOM-PID-PIDNS-HOST".
  std::string tail;  // "-PIDNS-HOST"
  {
    datasets::AtomicOutput probe(dir / "other.bin");
    const std::string name = probe.temp_path().filename().string();
    const std::string mine = "-" + std::to_string(::getpid()) + "-";
    const auto at = name.find(mine, std::string(".other.bin.tmp-").size());
    ASSERT_NE(at, std::string::npos) << name;
    tail = name.substr(at + mine.size() - 1);
  }
  // A pid that is provably gone: a child that has exited and been reaped.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  auto name = [&](const char* random, long long pid, const std::string& rest) {
    return ".x.bin.tmp-" + std::string(random) + "-" + std::to_string(pid) + rest;
  };
  const std::string dead_file = name("0123456789abcdef", child, tail);
  const std::string dead_folder = name("fedcba9876543210", child, tail);
  const std::string live = name("aaaaaaaaaaaaaaaa", ::getppid(), tail);
  const std::string other_host = name("bbbbbbbbbbbbbbbb", child, tail + "x");
  const std::string link_to_folder = name("cccccccccccccccc", child, tail);
  const std::string link_to_file = name("dddddddddddddddd", child, tail);
  std::ofstream(dir / "out" / dead_file) << "half";
  fs::create_directories(dir / "out" / dead_folder / "sub");
  std::ofstream(dir / "out" / dead_folder / "sub" / "part.h5") << "half";
  fs::create_directory_symlink(dir / "elsewhere", dir / "out" / dead_folder / "sub" / "away");
  std::ofstream(dir / "out" / live) << "being written";
  std::ofstream(dir / "out" / other_host) << "another host's";
  fs::create_directory_symlink(dir / "elsewhere", dir / "out" / link_to_folder);
  fs::create_symlink(dir / "elsewhere" / "keep.txt", dir / "out" / link_to_file);
  {
    datasets::AtomicOutput out(dir / "out" / "x.bin");
    std::ofstream(out.temp_path()) << "whole";
    out.commit();
  }
  std::vector<std::string> expected{"x.bin", live, other_host, link_to_folder, link_to_file};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(test::list_dir(dir / "out"), expected);
  EXPECT_TRUE(fs::is_symlink(dir / "out" / link_to_folder));
  EXPECT_EQ(test::list_dir(dir / "elsewhere"), std::vector<std::string>{"keep.txt"});
  EXPECT_EQ(test::read_file_bytes(dir / "elsewhere" / "keep.txt"), "keep");
  // A folder output removes its stale temporaries too.
  const std::string dead_out = ".rep.tmp-0123456789abcdef-" + std::to_string(child) + tail;
  fs::create_directories(dir / "out" / dead_out);
  std::ofstream(dir / "out" / dead_out / "report.json") << "{";
  {
    datasets::AtomicOutput out(dir / "out" / "rep", true);
    out.commit();
  }
  EXPECT_FALSE(fs::exists(dir / "out" / dead_out));
  EXPECT_TRUE(fs::is_directory(dir / "out" / "rep"));
}

TEST(Store, UndamagedFixtureReads) {
  test::TempDir dir;
  const Dataset data = test::small_dataset();
  test::write_damaged_store(dir / "ok.h5", data, test::StoreDamage::none);
  expect_same(datasets::read_store(dir / "ok.h5"), data);
}

TEST(Store, MissingDataset) {
  test::TempDir dir;
  test::write_damaged_store(dir / "d.h5", test::small_dataset(), test::StoreDamage::missing_label);
  const auto msg = store_error(dir / "d.h5");
  EXPECT_NE(msg.find("d.h5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/node/label"), std::string::npos) << msg;
}

TEST(Store, NonMonotoneIndptr) {
  test::TempDir dir;
  test::write_damaged_store(dir / "d.h5", test::small_dataset(),
                            test::StoreDamage::non_monotone_indptr);
  const auto msg = store_error(dir / "d.h5");
  EXPECT_NE(msg.find("d.h5 /graph"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not monotone at row 3"), std::string::npos) << msg;
}

TEST(Store, IndexOutOfRange) {
  test::TempDir dir;
  test::write_damaged_store(dir / "d.h5", test::small_dataset(),
                            test::StoreDamage::index_out_of_range);
  const auto msg = store_error(dir / "d.h5");
  EXPECT_NE(msg.find("d.h5 /graph"), std::string::npos) << msg;
  EXPECT_NE(msg.find("outside [0, 300)"), std::string::npos) << msg;
}

TEST(Store, LabelOutOfRange) {
  test::TempDir dir;
  test::write_damaged_store(dir / "d.h5", test::small_dataset(),
                            test::StoreDamage::label_out_of_range);
  const auto msg = store_error(dir / "d.h5");
  EXPECT_NE(msg.find("d.h5: /node/label[7] = 4 is outside [-1, 4)"), std::string::npos) << msg;
}

TEST(Store, SplitOutOfRange) {
  test::TempDir dir;
  test::write_damaged_store(dir / "d.h5", test::small_dataset(),
                            test::StoreDamage::split_out_of_range);
  const auto msg = store_error(dir / "d.h5");
  EXPECT_NE(msg.find("/split/test"), std::string::npos) << msg;
  EXPECT_NE(msg.find("300 is not a node id"), std::string::npos) << msg;
}

TEST(Store, WrongFormatOrNewerVersion) {
  test::TempDir dir;
  test::write_damaged_store(dir / "f.h5", test::small_dataset(), test::StoreDamage::wrong_format);
  EXPECT_NE(store_error(dir / "f.h5").find("format is \"something-else\""), std::string::npos);
  test::write_damaged_store(dir / "v.h5", test::small_dataset(), test::StoreDamage::newer_version);
  EXPECT_NE(store_error(dir / "v.h5").find("version 99 is not supported"), std::string::npos);
}

} // namespace
} // namespace tessel
