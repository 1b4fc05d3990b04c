// Tests of the HDF5 wrapper: typed round trips, row ranges, attributes, clear errors.
#include "tessel/datasets/h5.hpp"
#include "tessel/datasets/file_checksum.hpp"

#include "dataset_fixtures.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

namespace tessel {
namespace {

TEST(H5, WriteReadRoundTrip) {
  test::TempDir dir;
  const auto path = dir / "a.h5";
  std::vector<std::int64_t> ids = {5, -1, 7, 1LL << 40};
  std::vector<float> matrix(12);
  for (int i = 0; i < 12; ++i)
    matrix[i] = 0.5f * static_cast<float>(i);
  std::vector<std::int32_t> small = {1, 2, 3};
  {
    auto f = h5::File::create(path);
    f.write("/g/ids", ids, "some ids");
    f.write("/g/sub/matrix", matrix.data(), {4, 3}, "a matrix", 2);
    f.write("/small", small, "");
    f.set_attr("text", std::string("hello"));
    f.set_attr("count", std::int64_t{42}, "/g");
    f.set_attr("ratio", 0.25, "/g/ids");
  }
  const auto f = h5::File::open_read(path);
  EXPECT_TRUE(f.exists("/g/sub/matrix"));
  EXPECT_FALSE(f.exists("/g/nothing/here"));
  EXPECT_EQ(f.read<std::int64_t>("/g/ids"), ids);
  EXPECT_EQ(f.read<float>("/g/sub/matrix", {4, 3}), matrix);
  EXPECT_EQ(f.dims("/g/sub/matrix"), (std::vector<std::int64_t>{4, 3}));
  EXPECT_EQ(f.read<std::int64_t>("/small"), (std::vector<std::int64_t>{1, 2, 3})); // widening ok
  EXPECT_EQ(f.attr_string("text"), "hello");
  EXPECT_EQ(f.attr_int("count", "/g"), 42);
  EXPECT_EQ(f.attr_string("description", "/g/ids"), "some ids");
  EXPECT_TRUE(f.has_attr("ratio", "/g/ids"));
  EXPECT_FALSE(f.has_attr("ratio"));
}

TEST(H5, ReadRowsAndRowBlocks) {
  test::TempDir dir;
  const auto path = dir / "rows.h5";
  {
    auto f = h5::File::create(path);
    f.create_dataset<float>("/m", {10, 2}, "streamed", 3);
    for (std::int64_t r = 0; r < 10; r += 4) {
      std::vector<float> block;
      for (std::int64_t i = r; i < std::min<std::int64_t>(10, r + 4); ++i) {
        block.push_back(static_cast<float>(i));
        block.push_back(static_cast<float>(-i));
      }
      f.write_rows("/m", r, block.data(), static_cast<std::int64_t>(block.size() / 2));
    }
  }
  const auto f = h5::File::open_read(path);
  std::vector<float> rows;
  f.read_rows("/m", 3, 6, rows);
  EXPECT_EQ(rows, (std::vector<float>{3, -3, 4, -4, 5, -5}));
  f.read_rows("/m", 10, 10, rows);
  EXPECT_TRUE(rows.empty());
  const auto msg = test::input_error([&] { f.read_rows("/m", 8, 11, rows); });
  EXPECT_NE(msg.find("rows.h5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/m"), std::string::npos) << msg;
}

TEST(H5, MissingObjectsNameFileAndObject) {
  test::TempDir dir;
  const auto path = dir / "m.h5";
  {
    auto f = h5::File::create(path);
    f.write("/x", std::vector<std::int64_t>{1}, "x");
  }
  const auto f = h5::File::open_read(path);
  auto msg = test::input_error([&] { (void)f.read<std::int64_t>("/graph/indptr"); });
  EXPECT_NE(msg.find("m.h5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/graph/indptr"), std::string::npos) << msg;
  msg = test::input_error([&] { (void)f.attr_int("num_nodes"); });
  EXPECT_NE(msg.find("num_nodes"), std::string::npos) << msg;
  msg = test::input_error([&] { (void)f.read<std::int64_t>("/x", {2}); });
  EXPECT_NE(msg.find("shape"), std::string::npos) << msg;
}

TEST(H5, RefusesMeaningChangingReads) {
  test::TempDir dir;
  const auto path = dir / "t.h5";
  {
    auto f = h5::File::create(path);
    f.write("/big", std::vector<std::int64_t>{1LL << 40}, "");
    f.write("/real", std::vector<float>{1.5f}, "");
  }
  const auto f = h5::File::open_read(path);
  EXPECT_NE(test::input_error([&] { (void)f.read<std::int32_t>("/big"); }).find("truncate"),
            std::string::npos);
  EXPECT_NE(test::input_error([&] { (void)f.read<std::int64_t>("/real"); }).find("integer"),
            std::string::npos);
}

TEST(H5, OpenMissingOrForeignFile) {
  test::TempDir dir;
  auto msg = test::input_error([&] { (void)h5::File::open_read(dir / "nope.h5"); });
  EXPECT_NE(msg.find("nope.h5: no such file"), std::string::npos) << msg;
  test::write_text(dir / "plain.h5", "not hdf5 at all");
  msg = test::input_error([&] { (void)h5::File::open_read(dir / "plain.h5"); });
  EXPECT_NE(msg.find("not an HDF5 file"), std::string::npos) << msg;
  msg = test::input_error([&] { (void)h5::File::create(dir / "no" / "such" / "x.h5"); });
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
}

// Every file Tessel writes carries a whole-file CRC-32 in its user block, checked before HDF5
// parses it: a flipped bit, a truncation or a damaged header is one InputError naming the file;
// a file without the header (h5py, an older Tessel) opens as before.
TEST(H5, WholeFileChecksumIsCheckedBeforeHdf5Opens) {
  test::TempDir dir("h5-checksum");
  const auto path = dir / "c.h5";
  std::vector<std::int64_t> values(10000);
  std::iota(values.begin(), values.end(), 0);
  {
    auto f = h5::File::create(path);
    f.write("/v", values, "test values");
    f.close();
  }
  EXPECT_EQ(h5::verify_file_checksum(path), h5::FileChecksum::verified);
  EXPECT_EQ(h5::File::open_read(path).read<std::int64_t>("/v"), values);
  const std::string good = [&] {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  ASSERT_GT(good.size(), h5::kUserBlockBytes);
  EXPECT_EQ(good.substr(0, 8), "TESSELCK");
  const auto write_bytes = [&](const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  };
  const auto expect_refused = [&](const std::string& piece) {
    try {
      h5::File::open_read(path);
      ADD_FAILURE() << "opened; expected: " << piece;
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("c.h5"), std::string::npos) << what;
      EXPECT_NE(what.find(piece), std::string::npos) << what;
    }
  };
  // One bit flipped in the data, and in HDF5's superblock.
  for (const std::size_t at : {good.size() - 100, h5::kUserBlockBytes + 8}) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x10);
    write_bytes(bad);
    expect_refused("whole-file CRC-32 is");
  }
  std::string magic = good;
  magic[5] = '\1';
  write_bytes(magic);
  expect_refused("its magic differs from TESSELCK in 1 bytes");
  std::string bad = good;
  bad[20] = static_cast<char>(bad[20] ^ 1);
  write_bytes(bad);
  expect_refused("checksum header in the user block is damaged");
  write_bytes(good.substr(0, good.size() - 1000));
  expect_refused("truncated");
  // No header (the user block zeroed, as an older Tessel or h5py leaves it): opens unchecked.
  write_bytes(std::string(64, '\0') + good.substr(64));
  EXPECT_EQ(h5::verify_file_checksum(path), h5::FileChecksum::absent);
  EXPECT_EQ(h5::File::open_read(path).read<std::int64_t>("/v"), values);
}

// Both implementations give zlib's CRC-32 (the format does not depend on the build).
TEST(H5, Crc32ImplementationsAgree) {
  std::string data(100003, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + 7);
  const std::uint32_t z = h5::crc32_zlib(0, data.data(), data.size());
  EXPECT_EQ(z, h5::crc32(0, data.data(), data.size()));
  EXPECT_EQ(h5::crc32_zlib(0, "123456789", 9), 0xcbf43926u);  // the CRC-32 check value
  std::uint32_t i = 0;
  if (h5::crc32_isal(i, data.data(), data.size())) {
    EXPECT_EQ(i, z);
  }
}

} // namespace
} // namespace tessel
