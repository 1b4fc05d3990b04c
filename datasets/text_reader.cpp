// Background inflation of plain or gzip text into chunks of whole lines.
#include "text_reader.hpp"

#include "tessel/core/error.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>

namespace tessel::datasets::detail {

namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

constexpr std::size_t kInputBlock = 1u << 20;

std::int64_t count_lines(const char* begin, const char* end) {
  std::int64_t n = 0;
  for (const char* p = begin; p < end; ++p) n += *p == '\n';
  if (end > begin && end[-1] != '\n') ++n;
  return n;
}

}  // namespace

void throw_line_error(const std::filesystem::path& file, const LineError& error) {
  TESSEL_FAIL("{} line {}: {}", file.string(), error.line + 1, error.message);
}

LineChunkReader::LineChunkReader(std::filesystem::path path, std::size_t chunk_bytes,
                                 int queue_depth)
    : path_(std::move(path)),
      chunk_bytes_(std::max<std::size_t>(chunk_bytes, 64)),
      queue_depth_(static_cast<std::size_t>(std::max(queue_depth, 1))) {
  std::error_code ec;
  TESSEL_EXPECTS(std::filesystem::exists(path_, ec), "{}: no such file", path_.string());
  TESSEL_EXPECTS(std::filesystem::is_regular_file(path_, ec), "{}: not a regular file",
                 path_.string());
  file_bytes_ = static_cast<std::int64_t>(std::filesystem::file_size(path_, ec));
  {
    FilePtr f(std::fopen(path_.c_str(), "rb"));
    TESSEL_EXPECTS(f != nullptr, "{}: cannot open: {}", path_.string(), std::strerror(errno));
    unsigned char magic[2] = {0, 0};
    const auto got = std::fread(magic, 1, 2, f.get());
    compressed_ = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  }
  thread_ = std::thread([this] { run(); });
}

LineChunkReader::~LineChunkReader() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool LineChunkReader::next(TextChunk& chunk) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !queue_.empty() || finished_; });
  if (!queue_.empty()) {
    chunk = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    changed_.notify_all();
    return true;
  }
  if (error_) std::rethrow_exception(error_);
  return false;
}

void LineChunkReader::unget(TextChunk&& chunk) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_front(std::move(chunk));
  }
  changed_.notify_all();
}

void LineChunkReader::recycle(TextChunk&& chunk) {
  std::lock_guard lock(mutex_);
  if (spare_.size() < queue_depth_ + 2 && chunk.text.capacity() >= chunk_bytes_)
    spare_.push_back(std::move(chunk.text));
}

std::vector<char> LineChunkReader::fresh_buffer(std::size_t capacity) {
  {
    std::lock_guard lock(mutex_);
    if (!spare_.empty()) {
      auto buf = std::move(spare_.back());
      spare_.pop_back();
      if (buf.size() < capacity) buf.resize(capacity);
      return buf;
    }
  }
  return std::vector<char>(capacity);
}

bool LineChunkReader::push(TextChunk&& chunk) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return queue_.size() < queue_depth_ || stop_; });
  if (stop_) return false;
  queue_.push_back(std::move(chunk));
  lock.unlock();
  changed_.notify_all();
  return true;
}

void LineChunkReader::run() {
  try {
    produce();
  } catch (...) {
    std::lock_guard lock(mutex_);
    error_ = std::current_exception();
  }
  {
    std::lock_guard lock(mutex_);
    finished_ = true;
  }
  changed_.notify_all();
}

// Fills text buffers from the (possibly inflated) byte stream and cuts them after their last
// newline; the remainder starts the next buffer. A line longer than a chunk grows the buffer.
void LineChunkReader::produce() {
  FilePtr f(std::fopen(path_.c_str(), "rb"));
  TESSEL_EXPECTS(f != nullptr, "{}: cannot open: {}", path_.string(), std::strerror(errno));
  std::vector<unsigned char> input(kInputBlock);
  z_stream zs{};
  bool zs_open = false;
  struct ZGuard {
    z_stream* zs;
    bool* open;
    ~ZGuard() {
      if (*open) inflateEnd(zs);
    }
  } zguard{&zs, &zs_open};
  if (compressed_) {
    // 15 + 16: a gzip wrapper with the largest window.
    if (inflateInit2(&zs, 15 + 16) != Z_OK) TESSEL_LIB_FAIL("{}: zlib inflateInit2 failed", path_.string());
    zs_open = true;
  }
  bool in_member = compressed_;  // inside a gzip member that has not ended yet
  bool input_eof = false;
  std::int64_t line = 0;
  std::vector<char> buf = fresh_buffer(chunk_bytes_);
  std::size_t used = 0;

  auto read_input = [&]() -> std::size_t {
    const std::size_t got = std::fread(input.data(), 1, input.size(), f.get());
    if (got < input.size()) {
      TESSEL_EXPECTS(!std::ferror(f.get()), "{}: read error: {}", path_.string(), std::strerror(errno));
      input_eof = true;
    }
    file_bytes_read_ += static_cast<std::int64_t>(got);
    return got;
  };
  // Hands buf[0, cut) over as a chunk and moves the rest to a fresh buffer.
  auto emit = [&](std::size_t cut) -> bool {
    std::vector<char> next = fresh_buffer(std::max(chunk_bytes_, used - cut + chunk_bytes_ / 2));
    std::memcpy(next.data(), buf.data() + cut, used - cut);
    TextChunk chunk;
    chunk.size = cut;
    chunk.first_line = line;
    chunk.num_lines = count_lines(buf.data(), buf.data() + cut);
    line += chunk.num_lines;
    chunk.text = std::move(buf);
    used -= cut;
    buf = std::move(next);
    return push(std::move(chunk));
  };
  // Called when buf is full: emit up to the last newline, or grow for a very long line.
  auto flush_full = [&]() -> bool {
    const char* last = static_cast<const char*>(memrchr(buf.data(), '\n', used));
    if (!last) {
      buf.resize(buf.size() * 2);
      return true;
    }
    return emit(static_cast<std::size_t>(last - buf.data()) + 1);
  };

  if (!compressed_) {
    while (!input_eof) {
      if (used == buf.size() && !flush_full()) return;
      const std::size_t want = buf.size() - used;
      const std::size_t got = std::fread(buf.data() + used, 1, want, f.get());
      if (got < want) {
        TESSEL_EXPECTS(!std::ferror(f.get()), "{}: read error: {}", path_.string(), std::strerror(errno));
        input_eof = true;
      }
      file_bytes_read_ += static_cast<std::int64_t>(got);
      text_bytes_ += static_cast<std::int64_t>(got);
      used += got;
      {
        std::lock_guard lock(mutex_);
        if (stop_) return;
      }
    }
  } else {
    zs.avail_in = 0;
    for (;;) {
      if (zs.avail_in == 0 && !input_eof) {
        zs.avail_in = static_cast<uInt>(read_input());
        zs.next_in = input.data();
      }
      if (!in_member) {
        if (zs.avail_in == 0) break;  // the file ended after a complete member
        // Another gzip member may follow the one that ended; anything else (zero padding some
        // tools append) ends the stream, as gzip -d treats it.
        if (zs.next_in[0] != 0x1f) break;
        if (inflateReset(&zs) != Z_OK) TESSEL_LIB_FAIL("{}: zlib inflateReset failed", path_.string());
        in_member = true;
      }
      if (used == buf.size() && !flush_full()) return;
      zs.next_out = reinterpret_cast<Bytef*>(buf.data() + used);
      zs.avail_out = static_cast<uInt>(buf.size() - used);
      const uInt before = zs.avail_out;
      const int rc = inflate(&zs, Z_NO_FLUSH);
      const std::size_t produced = before - zs.avail_out;
      used += produced;
      text_bytes_ += static_cast<std::int64_t>(produced);
      if (rc == Z_STREAM_END) {
        in_member = false;
      } else if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT) {
        TESSEL_FAIL("{}: corrupt gzip data ({}) after {} bytes of text", path_.string(),
                    zs.msg ? zs.msg : "invalid stream", text_bytes_.load());
      } else if (rc == Z_MEM_ERROR) {
        throw std::bad_alloc();
      } else if (rc == Z_BUF_ERROR && zs.avail_in == 0 && input_eof) {
        break;  // no progress possible: the member is incomplete, reported below
      }
      std::lock_guard lock(mutex_);
      if (stop_) return;
    }
    TESSEL_EXPECTS(!in_member,
                   "{}: truncated gzip file (the compressed data ends early, after {} bytes of "
                   "text); download or copy it again",
                   path_.string(), text_bytes_.load());
  }
  if (used > 0) emit(used);
}

}  // namespace tessel::datasets::detail
