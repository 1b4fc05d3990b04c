// Streams a plain or gzip text file as chunks of whole lines, inflating on a background thread,
// and parses the chunks on OpenMP threads while the next ones inflate.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessel::datasets::detail {

// Whole lines of text: [data, data + size) ends with '\n' except possibly at the end of the
// file. first_line is the 0-based line number of its first line in the file.
struct TextChunk {
  std::vector<char> text;
  std::size_t size = 0;
  std::int64_t first_line = 0;
  std::int64_t num_lines = 0;
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
                           int queue_depth = 8);
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
  bool push(TextChunk&& chunk);  // false when asked to stop
  std::vector<char> fresh_buffer(std::size_t capacity);

  std::filesystem::path path_;
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

// A parse problem at a 0-based line of the file; line < 0 means none.
struct LineError {
  std::int64_t line = -1;
  std::string message;
  explicit operator bool() const { return line >= 0; }
};

// Runs parse(chunk, slot) -> LineError on OpenMP threads, several chunks at a time, then
// consume(chunk, slot) on the calling thread in file order. slot < max_batch_slots() numbers
// the chunk within its batch, so callers can keep one output buffer per slot. The first error in file order is
// thrown as InputError "<file> line <n>: <message>". Returns the number of lines.
template <class Parse, class Consume>
std::int64_t parse_chunks(LineChunkReader& reader, Parse&& parse, Consume&& consume);

inline std::size_t max_batch_slots() {
  const int threads = std::max(1, omp_get_max_threads());
  return threads == 1 ? 1 : static_cast<std::size_t>(2 * threads);
}

[[noreturn]] void throw_line_error(const std::filesystem::path& file, const LineError& error);

template <class Parse, class Consume>
std::int64_t parse_chunks(LineChunkReader& reader, Parse&& parse, Consume&& consume) {
  const std::size_t batch_size = max_batch_slots();
  std::vector<TextChunk> batch;
  std::vector<LineError> errors;
  std::int64_t lines = 0;
  for (;;) {
    batch.clear();
    while (batch.size() < batch_size) {
      TextChunk chunk;
      if (!reader.next(chunk)) break;
      batch.push_back(std::move(chunk));
    }
    if (batch.empty()) break;
    errors.assign(batch.size(), LineError{});
    const auto n = static_cast<std::int64_t>(batch.size());
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
    for (std::int64_t i = 0; i < n; ++i) 
      errors[static_cast<std::size_t>(i)] =
          parse(batch[static_cast<std::size_t>(i)], static_cast<std::size_t>(i));
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (errors[i]) throw_line_error(reader.path(), errors[i]);
      consume(batch[i], i);
      lines = batch[i].first_line + batch[i].num_lines;
      reader.recycle(std::move(batch[i]));
    }
  }
  return lines;
}

}  // namespace tessel::datasets::detail
