// Streams a plain or gzip text file as chunks of whole lines, inflating on a background thread,
// and parses the chunks on worker threads while the next ones inflate.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessel::datasets::detail {

// Which gzip decoder to use: the fastest built in (ISA-L igzip when Tessel was built with it),
// or zlib (for tests that compare the two).
enum class InflateBackend { fastest, zlib };
// "isa-l" or "zlib": what InflateBackend::fastest means in this build.
const char* inflate_backend_name();

// Whole lines of text: [begin(), end()) ends with '\n' except possibly at the end of the file.
// index numbers the chunks of a file 0, 1, 2, ... in file order.
struct TextChunk {
  std::vector<char> text;
  std::size_t size = 0;
  std::int64_t index = 0;
  const char* begin() const { return text.data(); }
  const char* end() const { return text.data() + size; }
};

// Reads `path` on a background thread. gzip is detected from the magic bytes (several
// concatenated gzip members, as pigz or parallel writers produce, are read as one stream), so
// a .csv.gz holding plain text or a .csv holding gzip both work. Memory stays bounded: at most
// queue_depth chunks of about chunk_bytes wait between the threads. Errors found by the
// background thread (truncated gzip, corrupt data, I/O) are rethrown by next().
class LineChunkReader {
public:
  explicit LineChunkReader(std::filesystem::path path, std::size_t chunk_bytes = 4u << 20,
                           int queue_depth = 8, InflateBackend backend = InflateBackend::fastest);
  ~LineChunkReader();
  LineChunkReader(const LineChunkReader&) = delete;
  LineChunkReader& operator=(const LineChunkReader&) = delete;

  // The next chunk in file order; false at the end of the file.
  bool next(TextChunk& chunk);
  // Puts a chunk taken with next() back at the front, to be returned again.
  void unget(TextChunk&& chunk);
  // Gives a chunk's buffer back for reuse, saving a fresh allocation per chunk.
  void recycle(TextChunk&& chunk);

  const std::filesystem::path& path() const { return path_; }
  std::int64_t file_bytes() const { return file_bytes_; }
  std::int64_t file_bytes_read() const { return file_bytes_read_.load(); }
  std::int64_t text_bytes() const { return text_bytes_.load(); }
  bool compressed() const { return compressed_; }

private:
  void run();
  void produce();
  bool push(TextChunk&& chunk); // false when asked to stop
  std::vector<char> fresh_buffer(std::size_t capacity);

  std::filesystem::path path_;
  InflateBackend backend_;
  std::size_t chunk_bytes_;
  std::size_t queue_depth_;
  std::int64_t file_bytes_ = 0;
  bool compressed_ = false;
  std::atomic<std::int64_t> file_bytes_read_{0};
  std::atomic<std::int64_t> text_bytes_{0};

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<TextChunk> queue_;
  std::vector<std::vector<char>> spare_;
  bool finished_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

// What parsing one chunk found: its number of lines, or the first problem, at a line counted
// from the chunk's start (error.line < 0: none).
struct LineError {
  std::int64_t line = -1;
  std::string message;
  explicit operator bool() const { return line >= 0; }
};
struct ChunkResult {
  std::int64_t lines = 0;
  LineError error;
};

// Parses a file's chunks on worker threads while the reader inflates the next ones, and hands
// them to consume on the calling thread in file order:
//   parse(chunk, slot) -> ChunkResult       on a worker; must not throw
//   consume(chunk, slot, first_line, lines)  on the caller, chunk by chunk in file order
// slot < parse_slots() names a buffer the caller keeps per slot for parse's output; a slot is
// reused only after its chunk was consumed. The first error in file order is thrown as
// InputError "<file> line <n>: <message>"; errors thrown by consume stop everything. Workers:
// omp_get_max_threads() (OMP_NUM_THREADS), blocking rather than spinning while they wait.
// Returns the number of lines.
using ParseFn = std::function<ChunkResult(const TextChunk&, std::size_t slot)>;
using ConsumeFn = std::function<void(const TextChunk&, std::size_t slot, std::int64_t first_line,
                                     std::int64_t lines)>;
std::int64_t parse_chunks(LineChunkReader& reader, const ParseFn& parse, const ConsumeFn& consume);
std::size_t parse_slots();

// Throws InputError "<file> line <line + 1>: <message>" (line is 0-based in the file).
[[noreturn]] void throw_line_error(const std::filesystem::path& file, std::int64_t line,
                                   const std::string& message);

} // namespace tessel::datasets::detail
