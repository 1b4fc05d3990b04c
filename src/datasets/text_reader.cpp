// Background inflation of plain or gzip text into chunks of whole lines.
#include "text_reader.hpp"

#include "tessel/core/error.hpp"

#include <omp.h>
#include <zlib.h>

#ifdef TESSEL_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <string_view>

namespace tessel::datasets::detail {

namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

constexpr std::size_t kInputBlock = 1u << 20;

// One gzip member at a time: zlib, or ISA-L's igzip (several times faster) when built with it.
struct InflateStep {
  std::size_t consumed = 0;
  std::size_t produced = 0;
  bool member_end = false; // the member's trailer (CRC-32, length) was read and checked
  std::string error;       // corrupt data
};

class Inflater {
public:
  virtual ~Inflater() = default;
  virtual void begin_member() = 0;
  virtual InflateStep step(const unsigned char* in, std::size_t in_len, char* out,
                           std::size_t out_len) = 0;
};

class ZlibInflater final : public Inflater {
public:
  ZlibInflater() {
    // 15 + 16: a gzip wrapper with the largest window.
    if (inflateInit2(&zs_, 15 + 16) != Z_OK) TESSEL_LIB_FAIL("zlib inflateInit2 failed");
  }
  ~ZlibInflater() override { inflateEnd(&zs_); }
  ZlibInflater(const ZlibInflater&) = delete;
  ZlibInflater& operator=(const ZlibInflater&) = delete;
  void begin_member() override {
    if (inflateReset(&zs_) != Z_OK) TESSEL_LIB_FAIL("zlib inflateReset failed");
  }
  InflateStep step(const unsigned char* in, std::size_t in_len, char* out,
                   std::size_t out_len) override {
    zs_.next_in = const_cast<Bytef*>(in);
    zs_.avail_in = static_cast<uInt>(std::min<std::size_t>(in_len, 1u << 30));
    zs_.next_out = reinterpret_cast<Bytef*>(out);
    zs_.avail_out = static_cast<uInt>(std::min<std::size_t>(out_len, 1u << 30));
    const uInt in_before = zs_.avail_in, out_before = zs_.avail_out;
    const int rc = inflate(&zs_, Z_NO_FLUSH);
    InflateStep s;
    s.consumed = in_before - zs_.avail_in;
    s.produced = out_before - zs_.avail_out;
    if (rc == Z_STREAM_END)
      s.member_end = true;
    else if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT || rc == Z_STREAM_ERROR)
      s.error = zs_.msg ? zs_.msg : "invalid stream";
    else if (rc == Z_MEM_ERROR)
      throw std::bad_alloc();
    return s;
  }

private:
  z_stream zs_{};
};

#ifdef TESSEL_HAVE_ISAL
class IsalInflater final : public Inflater {
public:
  IsalInflater() : state_(std::make_unique<inflate_state>()) { isal_inflate_init(state_.get()); }
  void begin_member() override {
    isal_inflate_reset(state_.get());
    state_->crc_flag = ISAL_GZIP; // parse the gzip header, check CRC-32 and length at the end
  }
  InflateStep step(const unsigned char* in, std::size_t in_len, char* out,
                   std::size_t out_len) override {
    inflate_state& st = *state_;
    st.next_in = const_cast<std::uint8_t*>(in);
    st.avail_in = static_cast<std::uint32_t>(std::min<std::size_t>(in_len, 1u << 30));
    st.next_out = reinterpret_cast<std::uint8_t*>(out);
    st.avail_out = static_cast<std::uint32_t>(std::min<std::size_t>(out_len, 1u << 30));
    const std::uint32_t in_before = st.avail_in, out_before = st.avail_out;
    const int rc = isal_inflate(&st);
    InflateStep s;
    s.consumed = in_before - st.avail_in;
    s.produced = out_before - st.avail_out;
    if (rc < 0) {
      s.error = rc == ISAL_INCORRECT_CHECKSUM ? "CRC mismatch"
                : rc == ISAL_INVALID_WRAPPER  ? "bad gzip header"
                                              : "invalid deflate data";
    } else if (st.block_state == ISAL_BLOCK_FINISH) {
      s.member_end = true;
    }
    return s;
  }

private:
  std::unique_ptr<inflate_state> state_; // large: keep it off the stack
};
#endif

std::unique_ptr<Inflater> make_inflater(InflateBackend backend) {
#ifdef TESSEL_HAVE_ISAL
  // TESSEL_INFLATE=zlib forces zlib, to compare the decoders on real data.
  const char* forced = std::getenv("TESSEL_INFLATE");
  const bool zlib_forced = forced && std::string_view(forced) == "zlib";
  if (backend != InflateBackend::zlib && !zlib_forced) return std::make_unique<IsalInflater>();
#endif
  (void)backend;
  return std::make_unique<ZlibInflater>();
}

} // namespace

const char* inflate_backend_name() {
#ifdef TESSEL_HAVE_ISAL
  return "isa-l";
#else
  return "zlib";
#endif
}

void throw_line_error(const std::filesystem::path& file, std::int64_t line,
                      const std::string& message) {
  TESSEL_FAIL("{} line {}: {}", file.string(), line + 1, message);
}

std::size_t parse_slots() {
  return 2 * static_cast<std::size_t>(std::max(1, omp_get_max_threads())) + 2;
}

std::int64_t parse_chunks(LineChunkReader& reader, const ParseFn& parse, const ConsumeFn& consume) {
  struct Done {
    TextChunk chunk;
    std::size_t slot = 0;
    ChunkResult result;
  };
  const int workers = std::max(1, omp_get_max_threads());
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::size_t> free_slots(parse_slots());
  std::iota(free_slots.begin(), free_slots.end(), std::size_t{0});
  std::map<std::int64_t, Done> done; // parsed, waiting for their turn
  bool stop = false;
  int running = workers;
  std::exception_ptr reader_error;

  // A worker claims a slot before it takes a chunk, so the chunk the consumer waits for always
  // holds a slot and no set of later chunks can starve it.
  auto work = [&] {
    for (;;) {
      std::size_t slot = 0;
      {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return stop || !free_slots.empty(); });
        if (stop) break;
        slot = free_slots.back();
        free_slots.pop_back();
      }
      TextChunk chunk;
      bool got = false;
      try {
        got = reader.next(chunk);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!reader_error) reader_error = std::current_exception();
        stop = true;
        break;
      }
      if (!got) {
        std::lock_guard lock(mutex);
        free_slots.push_back(slot);
        break;
      }
      ChunkResult result = parse(chunk, slot);
      {
        std::lock_guard lock(mutex);
        done.emplace(chunk.index, Done{std::move(chunk), slot, std::move(result)});
      }
      changed.notify_all();
    }
    {
      std::lock_guard lock(mutex);
      --running;
    }
    changed.notify_all();
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(workers));
  for (int i = 0; i < workers; ++i)
    threads.emplace_back(work);
  auto finish = [&] {
    {
      std::lock_guard lock(mutex);
      stop = true;
    }
    changed.notify_all();
    for (auto& t : threads)
      t.join();
  };

  std::int64_t next = 0, line = 0;
  try {
    for (;;) {
      Done d;
      {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return done.count(next) > 0 || running == 0; });
        auto it = done.find(next);
        if (it == done.end()) break; // every worker is gone and nothing is left
        d = std::move(it->second);
        done.erase(it);
      }
      if (d.result.error)
        throw_line_error(reader.path(), line + d.result.error.line, d.result.error.message);
      consume(d.chunk, d.slot, line, d.result.lines);
      line += d.result.lines;
      ++next;
      reader.recycle(std::move(d.chunk));
      {
        std::lock_guard lock(mutex);
        free_slots.push_back(d.slot);
      }
      changed.notify_all();
    }
  } catch (...) {
    finish();
    throw;
  }
  finish();
  if (reader_error) std::rethrow_exception(reader_error);
  return line;
}

LineChunkReader::LineChunkReader(std::filesystem::path path, std::size_t chunk_bytes,
                                 int queue_depth, InflateBackend backend)
    : path_(std::move(path)), backend_(backend),
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
  // Small files (counts, split lists) get buffers of their size, not chunk_bytes each: a plain
  // file's text is its bytes; gzip text is rarely more than 8x its input, and a chunk that
  // fills up is cut at its last newline anyway (a longer line grows the buffer).
  const auto bound = static_cast<std::size_t>(std::max<std::int64_t>(file_bytes_, 0)) + 1;
  chunk_bytes_ = std::min(chunk_bytes_, std::max<std::size_t>(compressed_ ? 8 * bound : bound, 64));
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
  bool input_eof = false;
  std::int64_t index = 0;
  std::vector<char> buf = fresh_buffer(chunk_bytes_);
  std::size_t used = 0;

  // Hands buf[0, cut) over as a chunk and moves the rest to a fresh buffer.
  auto emit = [&](std::size_t cut) -> bool {
    std::vector<char> next = fresh_buffer(std::max(chunk_bytes_, used - cut + chunk_bytes_ / 2));
    std::memcpy(next.data(), buf.data() + cut, used - cut);
    TextChunk chunk;
    chunk.size = cut;
    chunk.index = index++;
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
  auto stopped = [&] {
    std::lock_guard lock(mutex_);
    return stop_;
  };
  auto read_into = [&](void* dst, std::size_t want) -> std::size_t {
    const std::size_t got = std::fread(dst, 1, want, f.get());
    if (got < want) {
      TESSEL_EXPECTS(!std::ferror(f.get()), "{}: read error: {}", path_.string(),
                     std::strerror(errno));
      input_eof = true;
    }
    file_bytes_read_ += static_cast<std::int64_t>(got);
    return got;
  };

  if (!compressed_) {
    while (!input_eof) {
      if (used == buf.size() && !flush_full()) return;
      const std::size_t got = read_into(buf.data() + used, buf.size() - used);
      text_bytes_ += static_cast<std::int64_t>(got);
      used += got;
      if (stopped()) return;
    }
  } else {
    std::unique_ptr<Inflater> inflater = make_inflater(backend_);
    std::vector<unsigned char> input(
        std::min<std::size_t>(kInputBlock, static_cast<std::size_t>(file_bytes_) + 1));
    const unsigned char* in = input.data();
    std::size_t in_len = 0;
    bool in_member = false; // inside a gzip member that has not ended yet
    int idle_steps = 0;
    for (;;) {
      if (in_len == 0 && !input_eof) {
        in_len = read_into(input.data(), input.size());
        in = input.data();
      }
      if (!in_member) {
        // Another gzip member may follow the one that ended; anything else (zero padding some
        // tools append) ends the stream, as gzip -d treats it.
        if (in_len == 0 || in[0] != 0x1f) break;
        inflater->begin_member();
        in_member = true;
      }
      if (used == buf.size() && !flush_full()) return;
      const InflateStep step = inflater->step(in, in_len, buf.data() + used, buf.size() - used);
      if (!step.error.empty())
        TESSEL_FAIL("{}: corrupt gzip data ({}) after {} bytes of text", path_.string(), step.error,
                    text_bytes_.load());
      in += step.consumed;
      in_len -= step.consumed;
      used += step.produced;
      text_bytes_ += static_cast<std::int64_t>(step.produced);
      if (step.member_end) in_member = false;
      // No progress with room to write: the decoder wants input. At the end of the file that
      // means the member is incomplete (reported below); with input left it is corrupt.
      idle_steps =
          step.consumed == 0 && step.produced == 0 && !step.member_end ? idle_steps + 1 : 0;
      if (idle_steps > 0 && in_len == 0 && input_eof) break;
      TESSEL_EXPECTS(idle_steps < 4, "{}: corrupt gzip data (the decoder makes no progress)",
                     path_.string());
      if (stopped()) return;
    }
    TESSEL_EXPECTS(!in_member,
                   "{}: truncated gzip file (the compressed data ends early, after {} bytes of "
                   "text); download or copy it again",
                   path_.string(), text_bytes_.load());
  }
  if (used > 0) emit(used);
}

} // namespace tessel::datasets::detail
