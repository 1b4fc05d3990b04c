// Tests of the chunked line reader: chunk boundaries, very long lines, multi-member gzip,
// line numbering, and the parse driver's ordered consumption.
#include "text_reader.hpp"

#include "tessel/core/error.hpp"

#include "dataset_fixtures.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>

namespace tessel {
namespace {

using datasets::detail::LineChunkReader;
using datasets::detail::LineError;
using datasets::detail::TextChunk;

std::string read_all(const std::filesystem::path& path, std::size_t chunk_bytes,
                      std::int64_t* lines = nullptr) {
  LineChunkReader reader(path, chunk_bytes, 2);
  std::string text;
  std::int64_t next_line = 0;
  TextChunk chunk;
  while (reader.next(chunk)) {
    EXPECT_EQ(chunk.first_line, next_line);
    next_line += chunk.num_lines;
    std::string part(chunk.begin(), chunk.end());
    if (part.size() && reader.text_bytes() > static_cast<std::int64_t>(text.size() + part.size()))
      EXPECT_EQ(part.back(), '\n') << "chunk cut inside a line";
    text += part;
    reader.recycle(std::move(chunk));
  }
  if (lines) *lines = next_line;
  return text;
}

std::string sample_text() {
  std::string text;
  for (int i = 0; i < 2000; ++i) text += std::to_string(i * 7919) + "," + std::to_string(i) + "\n";
  text += std::string(300, '9') + "\n";  // a line longer than the small chunks
  text += "last-without-newline";
  return text;
}

TEST(TextReader, PlainAndGzipAnyChunkSize) {
  test::TempDir dir;
  const std::string text = sample_text();
  test::write_text(dir / "a.csv", text);
  test::write_gz(dir / "a.csv.gz", text);
  for (std::size_t chunk : {64u, 1000u, 1u << 20}) {
    std::int64_t lines = 0;
    EXPECT_EQ(read_all(dir / "a.csv", chunk, &lines), text);
    EXPECT_EQ(lines, 2002);
    EXPECT_EQ(read_all(dir / "a.csv.gz", chunk, &lines), text);
    EXPECT_EQ(lines, 2002);
  }
}

TEST(TextReader, ConcatenatedGzipMembers) {
  test::TempDir dir;
  const std::string text = sample_text();
  test::write_gz(dir / "p1.gz", text.substr(0, 5000));
  test::write_gz(dir / "p2.gz", "");
  test::write_gz(dir / "p3.gz", text.substr(5000));
  test::write_text(dir / "all.gz", test::read_file_bytes(dir / "p1.gz") + test::read_file_bytes(dir / "p2.gz") +
                                       test::read_file_bytes(dir / "p3.gz"));
  EXPECT_EQ(read_all(dir / "all.gz", 256), text);
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
  for (int i = 0; i < 5000; ++i) text += (i == 1234 || i == 4000 ? "bad\n" : "ok\n");
  test::write_gz(dir / "x.csv.gz", text);
  LineChunkReader reader(dir / "x.csv.gz", 128, 4);
  std::int64_t consumed = 0;
  try {
    datasets::detail::parse_chunks(
        reader,
        [](const TextChunk& c, std::size_t) -> LineError {
          std::int64_t line = c.first_line;
          for (const char* p = c.begin(); p < c.end(); ++line) {
            if (*p == 'b') return {line, "found bad"};
            p = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(c.end() - p))) + 1;
          }
          return {};
        },
        [&](const TextChunk& c, std::size_t) { consumed += c.num_lines; });
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("x.csv.gz line 1235: found bad"), std::string::npos) << e.what();
  }
  EXPECT_LE(consumed, 1234);
}

}  // namespace
}  // namespace tessel
