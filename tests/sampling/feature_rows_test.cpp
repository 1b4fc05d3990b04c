// The out-of-core reader of a part's feature rows: every request answered with the stored rows
// whatever the budget, layout and I/O path; its statistics; a file truncated under it or changed
// since partitioning is an error naming the file and the row.
#include "tessel/sampling/feature_rows.hpp"

#include "test_support.hpp"

#include "tessel/core/error.hpp"
#include "tessel/datasets/h5.hpp"
#include "tessel/partition/part.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

using namespace tessel;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kRows = 50;
constexpr std::int64_t kDim = 6;

std::vector<float> make_rows() {
  std::vector<float> rows(kRows * kDim);
  for (std::size_t i = 0; i < rows.size(); ++i)
    rows[i] = static_cast<float>(i % 97) * 0.25f - 3.0f;
  return rows;
}

// /node/feat alone, with chunks of chunk_rows rows (0: contiguous), compressed when deflate > 0.
fs::path write_feat(const test::TempDir& dir, const std::string& name, std::int64_t chunk_rows,
                    int deflate) {
  const fs::path path = dir.path() / name;
  auto file = h5::File::create(path);
  file.create_group("/node");
  const auto rows = make_rows();
  file.create_dataset<float>("/node/feat", {kRows, kDim}, "features", chunk_rows, deflate);
  file.write_rows("/node/feat", 0, rows.data(), kRows);
  file.close();
  return path;
}

std::vector<std::int64_t> degrees() {
  std::vector<std::int64_t> d(kRows);
  for (std::int64_t i = 0; i < kRows; ++i)
    d[i] = (i * 7) % 11;
  return d;
}

// Resolves random requests (repeats, any order) and checks every row against the stored one.
void check_requests(sampling::OwnedFeatureRows& reader, std::uint32_t seed) {
  const auto expect = make_rows();
  std::mt19937 rng(seed);
  std::vector<const float*> rows;
  for (int round = 0; round < 30; ++round) {
    std::vector<LocalId> locals(rng() % 20);
    for (auto& l : locals)
      l = static_cast<LocalId>(rng() % kRows);
    reader.resolve(locals, rows);
    ASSERT_EQ(rows.size(), locals.size());
    for (std::size_t i = 0; i < locals.size(); ++i)
      ASSERT_EQ(std::memcmp(rows[i], expect.data() + locals[i] * kDim, kDim * sizeof(float)), 0)
          << "round " << round << " row " << locals[i];
  }
  std::vector<float> block(10 * kDim);
  reader.read_block(17, 27, block.data());
  EXPECT_EQ(std::memcmp(block.data(), expect.data() + 17 * kDim, block.size() * sizeof(float)), 0);
}

sampling::OutOfCoreOptions budget_of_rows(std::int64_t rows) {
  sampling::OutOfCoreOptions o;
  o.budget_bytes = sampling::out_of_core_index_bytes(kRows) + rows * kDim * 4;
  return o;
}

} // namespace

TEST(FeatureRows, EveryLayoutBudgetAndPathReadsTheStoredRows) {
  test::TempDir dir("feature-rows");
  const auto degree = degrees();
  const std::pair<std::int64_t, int> layouts[] = {{7, 0}, {0, 0}, {16, 1}};
  for (const auto& [chunk, deflate] : layouts) {
    const fs::path path = write_feat(dir, fmt::format("f{}-{}.h5", chunk, deflate), chunk, deflate);
    for (const std::int64_t held : {0, 1, 8, 30}) {
      for (const auto io : {sampling::FeatureIo::pread, sampling::FeatureIo::hdf5}) {
        auto options = budget_of_rows(held);
        options.io = io;
        options.recent_fraction = 0.5;  // both tiers
        auto reader = sampling::open_rows_out_of_core(path, kRows, kDim, degree, options);
        SCOPED_TRACE(fmt::format("chunk {} deflate {} rows {}", chunk, deflate, held));
        check_requests(*reader, static_cast<std::uint32_t>(held + chunk));
        const auto stats = reader->stats();
        EXPECT_GT(stats.requests, 0);
        EXPECT_LE(stats.hits(), stats.requests);
        EXPECT_EQ(stats.bytes_read, stats.rows_read * kDim * 4);
        if (held == 0)
          EXPECT_EQ(stats.hits(), 0);
        else
          EXPECT_GT(stats.hits(), 0);
        EXPECT_LE(reader->held_bytes(), options.budget_bytes);
      }
    }
  }
}

TEST(FeatureRows, StaticTierHoldsTheHighestDegreeRows) {
  test::TempDir dir("feature-rows-static");
  const fs::path path = write_feat(dir, "f.h5", 7, 0);
  auto options = budget_of_rows(4);
  options.recent_fraction = 0;
  std::vector<std::int64_t> degree(kRows, 1);
  degree[3] = degree[20] = degree[41] = degree[49] = 9;
  auto reader = sampling::open_rows_out_of_core(path, kRows, kDim, degree, options);
  std::vector<const float*> rows;
  const std::vector<LocalId> hot = {49, 3, 20, 41, 3};
  reader->resolve(hot, rows);
  EXPECT_EQ(reader->stats().static_hits, 5);
  EXPECT_EQ(reader->stats().rows_read, 0);
  const std::vector<LocalId> cold = {5, 4, 5};
  reader->resolve(cold, rows);
  EXPECT_EQ(reader->stats().rows_read, 2); // 4 and 5, each read once
  EXPECT_EQ(reader->stats().requests, 8);
}

TEST(FeatureRows, RecencyTierServesRowsReadJustBefore) {
  test::TempDir dir("feature-rows-recent");
  const fs::path path = write_feat(dir, "f.h5", 7, 0);
  auto options = budget_of_rows(4);
  options.recent_fraction = 1.0;
  auto reader = sampling::open_rows_out_of_core(path, kRows, kDim, degrees(), options);
  std::vector<const float*> rows;
  reader->resolve(std::vector<LocalId>{10, 11}, rows);
  reader->resolve(std::vector<LocalId>{11, 10, 12}, rows);
  EXPECT_EQ(reader->stats().recent_hits, 2);
  EXPECT_EQ(reader->stats().rows_read, 3);
  check_requests(*reader, 3);
}

TEST(FeatureRows, AFileTruncatedUnderTheReaderIsAnErrorNamingFileAndRow) {
  test::TempDir dir("feature-rows-truncated");
  const fs::path path = write_feat(dir, "part-0.h5", 0, 0);
  auto reader = sampling::open_rows_out_of_core(path, kRows, kDim, degrees(), budget_of_rows(0));
  fs::resize_file(path, fs::file_size(path) - 30 * kDim * 4);
  std::vector<const float*> rows;
  try {
    reader->resolve(std::vector<LocalId>{2, 45}, rows);
    FAIL() << "no error for a truncated file";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path.string()), std::string::npos) << what;
    EXPECT_NE(what.find("/node/feat row 45"), std::string::npos) << what;
  }
  // Opening it again says it is truncated: the whole-file checksum header's length, or (a file
  // without one) the first row past the end.
  try {
    sampling::open_rows_out_of_core(path, kRows, kDim, degrees(), budget_of_rows(0));
    FAIL() << "no error for a truncated file";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

// Bytes rewritten in place (same size) under an open reader: the next read names the file and
// the rows it read after the change, instead of serving them.
TEST(FeatureRows, AFileChangedInPlaceUnderTheReaderIsAnErrorNamingFileAndRows) {
  test::TempDir dir("feature-rows-changed");
  const fs::path path = write_feat(dir, "part-0.h5", 0, 0);
  const auto size = fs::file_size(path);
  auto reader = sampling::open_rows_out_of_core(path, kRows, kDim, degrees(), budget_of_rows(0));
  std::vector<const float*> rows;
  reader->resolve(std::vector<LocalId>{3, 4}, rows);
  // Past the file system's timestamp tick, so that the write is seen as a later modification.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  {
    std::FILE* f = std::fopen(path.string().c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fseek(f, -64, SEEK_END), 0);
    const char junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    ASSERT_EQ(std::fwrite(junk, 1, sizeof junk, f), sizeof junk);
    std::fclose(f);
  }
  ASSERT_EQ(fs::file_size(path), size); // a change the size check alone would miss
  try {
    reader->resolve(std::vector<LocalId>{7, 41}, rows);
    FAIL() << "no error for a file changed in place";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path.string()), std::string::npos) << what;
    EXPECT_NE(what.find("changed while the job ran"), std::string::npos) << what;
    EXPECT_NE(what.find("rows 7 to 41"), std::string::npos) << what;
  }
}

// A file's first rows all zero (a layer's outputs after a dead ReLU) read the same at a chunk's
// address and 512 bytes (the user block) past it: the reader decides where the chunks are from
// a later chunk, remembers it for the process, and reads such a file at its offsets, not
// through HDF5 (whose chunk reads held 4 MiB per chunk read and were several times slower).
TEST(FeatureRows, ChunksOfZeroRowsStillFindTheRowsOffsets) {
  test::TempDir dir("feature-rows-zero");
  const auto write = [&](const std::string& name, std::int64_t zero_rows) {
    auto rows = make_rows();
    std::fill(rows.begin(), rows.begin() + zero_rows * kDim, 0.0f);
    const fs::path path = dir.path() / name;
    auto file = h5::File::create(path);
    file.create_group("/node");
    file.create_dataset<float>("/node/feat", {kRows, kDim}, "features", 7, 0);
    file.write_rows("/node/feat", 0, rows.data(), kRows);
    file.close();
    return std::make_pair(path, rows);
  };
  // 22 zero rows (528 bytes) of 7-row chunks: row 0 (what decided before) and the first chunks
  // read alike at both places, the last does not.
  const auto [some, some_rows] = write("some.h5", 22);
  const auto [all, all_rows] = write("all.h5", kRows);
  const auto check = [&](const fs::path& path, const std::vector<float>& expect,
                         bool at_offsets) {
    auto reader = sampling::open_rows_out_of_core(path, kRows, kDim, degrees(), budget_of_rows(0));
    EXPECT_EQ(reader->reads_at_offsets(), at_offsets) << path;
    std::vector<float> block(kRows * kDim);
    reader->read_block(0, kRows, block.data());
    EXPECT_EQ(std::memcmp(block.data(), expect.data(), block.size() * sizeof(float)), 0) << path;
    const std::vector<LocalId> ask = {49, 0, 36, 34, 35};
    std::vector<const float*> rows;
    reader->resolve(ask, rows);
    for (std::size_t i = 0; i < ask.size(); ++i)
      EXPECT_EQ(std::memcmp(rows[i], expect.data() + ask[i] * kDim, kDim * sizeof(float)), 0)
          << path << " row " << ask[i];
  };
  sampling::forget_user_block_layout();
  check(all, all_rows, false); // nothing decides: through HDF5
  check(some, some_rows, true);
  check(all, all_rows, true); // what `some` showed holds for every file
  sampling::forget_user_block_layout();
  check(some, some_rows, true);
}

TEST(FeatureRows, AChecksumThatDiffersIsRefused) {
  test::TempDir dir("feature-rows-crc");
  const fs::path path = write_feat(dir, "f.h5", 7, 0);
  auto options = budget_of_rows(2);
  partition::Crc32 crc;
  crc.update(make_rows());
  options.checksum = crc.str();
  EXPECT_NO_THROW(sampling::open_rows_out_of_core(path, kRows, kDim, degrees(), options));
  options.checksum = "crc32:00000000";
  EXPECT_THROW(sampling::open_rows_out_of_core(path, kRows, kDim, degrees(), options), InputError);
}

// Rows read ahead on the reader's thread serve the next resolve(): the same values, fewer rows
// read then, and rows the read-ahead did not cover are still read.
TEST(FeatureRows, ReadAheadServesTheNextResolveWithTheSameRows) {
  test::TempDir dir("feature-rows-ahead");
  const auto expect = make_rows();
  for (const std::int64_t chunk : {7, 0}) {
    const fs::path path = write_feat(dir, fmt::format("f{}.h5", chunk), chunk, 0);
    for (const double recent : {0.0, 1.0}) {
      auto options = budget_of_rows(4);
      options.recent_fraction = recent;
      auto reader = sampling::open_rows_out_of_core(path, kRows, kDim, degrees(), options);
      SCOPED_TRACE(fmt::format("chunk {} recent {}", chunk, recent));
      std::mt19937 rng(5);
      std::vector<const float*> rows;
      for (int round = 0; round < 20; ++round) {
        std::vector<LocalId> next(1 + rng() % 15);
        for (auto& l : next) l = static_cast<LocalId>(rng() % kRows);
        reader->read_ahead(next);
        // Some rounds ask for a row the read-ahead did not cover as well.
        std::vector<LocalId> asked = next;
        if (round % 3 == 0) asked.push_back(static_cast<LocalId>(rng() % kRows));
        const auto before = reader->stats();
        reader->resolve(asked, rows);
        ASSERT_EQ(rows.size(), asked.size());
        for (std::size_t i = 0; i < asked.size(); ++i)
          ASSERT_EQ(std::memcmp(rows[i], expect.data() + asked[i] * kDim, kDim * sizeof(float)), 0)
              << "round " << round << " row " << asked[i];
        const auto after = reader->stats();
        // At most the one extra row is read by the resolve itself; the rest came ahead.
        EXPECT_LE(after.rows_read - before.rows_read, static_cast<std::int64_t>(next.size()) + 1);
      }
      EXPECT_GT(reader->stats().ahead_hits, 0);
      check_requests(*reader, 9);
    }
  }
}

TEST(FeatureRows, AReadAheadThatFailsIsAnErrorAtTheNextResolve) {
  test::TempDir dir("feature-rows-ahead-truncated");
  const fs::path path = write_feat(dir, "part-0.h5", 0, 0);
  auto reader = sampling::open_rows_out_of_core(path, kRows, kDim, degrees(), budget_of_rows(0));
  fs::resize_file(path, fs::file_size(path) - 30 * kDim * 4);
  reader->read_ahead(std::vector<LocalId>{2, 45});
  std::vector<const float*> rows;
  try {
    reader->resolve(std::vector<LocalId>{2, 45}, rows);
    FAIL() << "no error for a truncated file";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/node/feat row 45"), std::string::npos) << e.what();
  }
}
