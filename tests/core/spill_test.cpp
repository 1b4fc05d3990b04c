// spill: large arrays made under a Scope live in unlinked scratch-file mappings (values intact,
// nothing left in the folder, the bytes counted and returned), small ones and those made outside
// a Scope take the heap, and a folder where no file can be made, or one in memory (tmpfs), falls
// back to the heap.
#include "tessel/core/csr.hpp"
#include "tessel/core/spill.hpp"

#include "test_support.hpp"

#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/vfs.h>

#include <filesystem>
#include <numeric>
#include <vector>

using namespace tessel;
namespace fs = std::filesystem;

namespace {

using Spilled = std::vector<std::int32_t, spill::Allocator<std::int32_t>>;

// Elements of an array just at the spill threshold.
std::size_t large() { return std::max<std::size_t>(spill::min_bytes() / sizeof(std::int32_t), 1); }

bool folder_empty(const fs::path& dir) { return fs::directory_iterator(dir) == fs::directory_iterator(); }

}  // namespace

TEST(Spill, OutsideAScopeLargeArraysTakeTheHeap) {
  const std::int64_t before = spill::mapped_bytes();
  Spilled v(large(), 7);
  EXPECT_FALSE(spill::is_mapped(v.data()));
  EXPECT_FALSE(spill::write_back(v.data()));
  EXPECT_FALSE(spill::advise_random(v.data()));
  EXPECT_EQ(spill::mapped_bytes(), before);
}

TEST(Spill, InsideAScopeLargeArraysMapAnUnlinkedFile) {
  test::TempDir dir("spill");
  const std::int64_t before = spill::mapped_bytes();
  {
    spill::Scope scope(dir.path());
    Spilled v(large());
    ASSERT_TRUE(spill::is_mapped(v.data()));
    EXPECT_EQ(spill::mapped_bytes() - before,
              static_cast<std::int64_t>(v.size() * sizeof(std::int32_t)));
    std::iota(v.begin(), v.end(), 0);
    EXPECT_TRUE(spill::write_back(v.data()));
    EXPECT_TRUE(spill::advise_random(v.data()));
    for (std::size_t i = 0; i < v.size(); i += 4099) ASSERT_EQ(v[i], static_cast<std::int32_t>(i));
    EXPECT_EQ(v.back(), static_cast<std::int32_t>(v.size() - 1));
    // The file was unlinked as soon as it was made: nothing to leave behind.
    EXPECT_TRUE(folder_empty(dir.path()));
  }
  EXPECT_EQ(spill::mapped_bytes(), before);
}

TEST(Spill, SmallArraysStayOnTheHeap) {
  test::TempDir dir("spill");
  spill::Scope scope(dir.path());
  Spilled v(large() / 2 > 0 ? large() / 2 : 1, 3);
  EXPECT_FALSE(spill::is_mapped(v.data()));
}

TEST(Spill, ArraysOutliveTheirScopeMoveWithTheirMappingAndCopyByValue) {
  test::TempDir dir("spill");
  Spilled v;
  {
    spill::Scope scope(dir.path());
    v.resize(large());
  }
  std::iota(v.begin(), v.end(), 5);
  ASSERT_TRUE(spill::is_mapped(v.data()));
  const std::int32_t* at = v.data();
  Spilled moved = std::move(v);
  EXPECT_EQ(moved.data(), at);
  EXPECT_TRUE(spill::is_mapped(moved.data()));
  const Spilled copy = moved;  // outside any scope: the heap
  EXPECT_FALSE(spill::is_mapped(copy.data()));
  EXPECT_TRUE(copy == moved);
  const std::vector<std::int32_t> plain(copy.begin(), copy.end());
  EXPECT_TRUE(moved == plain);
  EXPECT_TRUE(plain == moved);
  moved[3] = -1;
  EXPECT_FALSE(moved == plain);
}

TEST(Spill, AFolderWhereNoFileCanBeMadeFallsBackToTheHeap) {
  test::TempDir dir("spill");
  spill::Scope scope(dir.path() / "missing");
  Spilled v(large(), 9);
  EXPECT_FALSE(spill::is_mapped(v.data()));
  EXPECT_EQ(v[v.size() / 2], 9);
}

TEST(Spill, AFolderInMemoryKeepsArraysOnTheHeap) {
  // /dev/shm is a tmpfs on Linux: a mapping there could only ever go to swap.
  struct statfs fs {};
  ASSERT_EQ(::statfs("/dev/shm", &fs), 0);
  ASSERT_EQ(fs.f_type, static_cast<decltype(fs.f_type)>(TMPFS_MAGIC));
  spill::Scope scope("/dev/shm");
  Spilled v(large(), 4);
  EXPECT_FALSE(spill::is_mapped(v.data()));
  EXPECT_EQ(v.back(), 4);
}

TEST(Spill, AGraphsIndicesSpillAndSortInPlace) {
  test::TempDir dir("spill");
  const std::int64_t n = static_cast<std::int64_t>(large());
  LocalCsr g;
  {
    spill::Scope scope(dir.path());
    // One row of n edges, columns descending.
    g.num_rows = 1;
    g.num_cols = n;
    g.indptr = {0, n};
    g.indices.resize(static_cast<std::size_t>(n));
  }
  ASSERT_TRUE(spill::is_mapped(g.indices.data()));
  for (std::int64_t i = 0; i < n; ++i) g.indices[static_cast<std::size_t>(i)] = static_cast<LocalId>(n - 1 - i);
  const LocalId* at = g.indices.data();
  g.sort_rows();
  EXPECT_EQ(g.indices.data(), at);
  EXPECT_TRUE(spill::is_mapped(g.indices.data()));
  EXPECT_NO_THROW(g.validate("spilled"));
  for (std::int64_t i = 0; i < n; i += 997) ASSERT_EQ(g.indices[static_cast<std::size_t>(i)], i);
}
