// Tests of the chunked line reader: chunk boundaries, very long lines, multi-member gzip,
// line numbering, and the parse driver's ordered consumption.
#include "text_reader.hpp"

#include "tessel/core/error.hpp"

#include "dataset_fixtures.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

namespace tessel {
namespace {

using datasets::detail::LineChunkReader;
using datasets::detail::LineError;
using datasets::detail::TextChunk;

using datasets::detail::InflateBackend;

std::string read_all(const std::filesystem::path& path, std::size_t chunk_bytes,
                     std::int64_t* lines = nullptr,
                     InflateBackend backend = InflateBackend::fastest) {
  LineChunkReader reader(path, chunk_bytes, 2, backend);
  std::string text;
  std::int64_t next_index = 0, next_line = 0;
  TextChunk chunk;
  while (reader.next(chunk)) {
    EXPECT_EQ(chunk.index, next_index++);
    std::string part(chunk.begin(), chunk.end());
    next_line += std::count(part.begin(), part.end(), '\n');
    if (!part.empty() && part.back() != '\n') ++next_line;
    if (part.size() && reader.text_bytes() > static_cast<std::int64_t>(text.size() + part.size())) {
      EXPECT_EQ(part.back(), '\n') << "chunk cut inside a line";
    }
    text += part;
    reader.recycle(std::move(chunk));
  }
  if (lines) *lines = next_line;
  return text;
}

std::string sample_text() {
  std::string text;
  for (int i = 0; i < 2000; ++i)
    text += std::to_string(i * 7919) + "," + std::to_string(i) + "\n";
  text += std::string(300, '9') + "\n"; // a line longer than the small chunks
  text += "last-without-newline";
  return text;
}

TEST(TextReader, PlainAndGzipAnyChunkSize) {
  test::TempDir dir;
  const std::string text = sample_text();
  test::write_text(dir / "a.csv", text);
  test::write_gz(dir / "a.csv.gz", text);
  for (auto backend : {InflateBackend::fastest, InflateBackend::zlib})
    for (std::size_t chunk : {64u, 1000u, 1u << 20}) {
      std::int64_t lines = 0;
      EXPECT_EQ(read_all(dir / "a.csv", chunk, &lines, backend), text);
      EXPECT_EQ(lines, 2002);
      EXPECT_EQ(read_all(dir / "a.csv.gz", chunk, &lines, backend), text);
      EXPECT_EQ(lines, 2002);
    }
}

TEST(TextReader, ConcatenatedGzipMembers) {
  test::TempDir dir;
  const std::string text = sample_text();
  test::write_gz(dir / "p1.gz", text.substr(0, 5000));
  test::write_gz(dir / "p2.gz", "");
  test::write_gz(dir / "p3.gz", text.substr(5000));
  test::write_text(dir / "all.gz", test::read_file_bytes(dir / "p1.gz") +
                                       test::read_file_bytes(dir / "p2.gz") +
                                       test::read_file_bytes(dir / "p3.gz"));
  for (auto backend : {InflateBackend::fastest, InflateBackend::zlib})
    EXPECT_EQ(read_all(dir / "all.gz", 256, nullptr, backend), text)
        << datasets::detail::inflate_backend_name();
}

// Damaged gzip: a clear error from either decoder, never a crash or a hang.
TEST(TextReader, CorruptAndTruncatedGzipWithBothDecoders) {
  test::TempDir dir;
  const std::string text = sample_text();
  test::write_gz(dir / "ok.gz", text);
  const std::string bytes = test::read_file_bytes(dir / "ok.gz");
  test::write_text(dir / "cut.gz", bytes.substr(0, bytes.size() / 2));
  std::string flipped = bytes;
  flipped[flipped.size() - 6] = static_cast<char>(flipped[flipped.size() - 6] ^ 0x10); // CRC
  test::write_text(dir / "crc.gz", flipped);
  for (auto backend : {InflateBackend::fastest, InflateBackend::zlib}) {
    try {
      read_all(dir / "cut.gz", 512, nullptr, backend);
      ADD_FAILURE() << "truncated file read without error";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("cut.gz: truncated gzip"), std::string::npos)
          << e.what();
    }
    try {
      read_all(dir / "crc.gz", 512, nullptr, backend);
      ADD_FAILURE() << "bad CRC read without error";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("crc.gz: corrupt gzip data"), std::string::npos)
          << e.what();
    }
  }
}

TEST(TextReader, EmptyFiles) {
  test::TempDir dir;
  test::write_text(dir / "e.csv", "");
  test::write_gz(dir / "e.csv.gz", "");
  std::int64_t lines = -1;
  EXPECT_EQ(read_all(dir / "e.csv", 64, &lines), "");
  EXPECT_EQ(lines, 0);
  EXPECT_EQ(read_all(dir / "e.csv.gz", 64, &lines), "");
  EXPECT_EQ(lines, 0);
}

TEST(TextReader, ParseChunksReportsFirstErrorInFileOrder) {
  test::TempDir dir;
  std::string text;
  for (int i = 0; i < 5000; ++i)
    text += (i == 1234 || i == 4000 ? "bad\n" : "ok\n");
  test::write_gz(dir / "x.csv.gz", text);
  LineChunkReader reader(dir / "x.csv.gz", 128, 4);
  std::int64_t consumed = 0;
  try {
    datasets::detail::parse_chunks(
        reader,
        [](const TextChunk& c, std::size_t) -> datasets::detail::ChunkResult {
          std::int64_t line = 0;
          for (const char* p = c.begin(); p < c.end(); ++line) {
            if (*p == 'b') return {line, LineError{line, "found bad"}};
            p = static_cast<const char*>(
                    std::memchr(p, '\n', static_cast<std::size_t>(c.end() - p))) +
                1;
          }
          return {line, {}};
        },
        [&](const TextChunk&, std::size_t, std::int64_t first, std::int64_t lines) {
          EXPECT_EQ(first, consumed);
          consumed += lines;
        });
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("x.csv.gz line 1235: found bad"), std::string::npos)
        << e.what();
  }
  EXPECT_LE(consumed, 1234);
}

} // namespace
} // namespace tessel
