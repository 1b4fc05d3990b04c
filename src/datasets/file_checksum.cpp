// The whole-file checksum in the user block of Tessel's HDF5 files: written after HDF5 closes
// the file, checked before HDF5 opens it.
#include "tessel/datasets/file_checksum.hpp"

#include "tessel/core/error.hpp"
#include "tessel/datasets/atomic_output.hpp"

#include <fmt/format.h>
#include <zlib.h>

#ifdef TESSEL_HAVE_ISAL
#include <isa-l/crc.h>
#endif

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>
#include <tuple>
#include <vector>

namespace tessel::h5 {

namespace {

// Header layout, little-endian, at byte 0 of the user block (the rest of the block is zero):
//   0  magic "TESSELCK"      8  u32 version (1)      12 u32 algorithm (1: CRC-32, zlib's)
//   16 u64 file length       24 u64 start of the checked bytes (kUserBlockBytes)
//   32 u32 CRC-32 of bytes [start, length)           36 u32 CRC-32 of header bytes [0, 36)
constexpr char kMagic[8] = {'T', 'E', 'S', 'S', 'E', 'L', 'C', 'K'};
constexpr std::uint32_t kVersion = 1;
constexpr std::uint32_t kAlgorithmCrc32 = 1;
constexpr std::size_t kHeaderBytes = 40;
constexpr std::size_t kReadBlock = std::size_t{8} << 20;

void put32(unsigned char* at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) at[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put64(unsigned char* at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<unsigned char>(v >> (8 * i));
}
std::uint32_t get32(const unsigned char* at) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | at[i];
  return v;
}
std::uint64_t get64(const unsigned char* at) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | at[i];
  return v;
}

// An open file descriptor, closed on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads exactly `bytes` at `offset` (short only at the end of the file); returns the count.
std::size_t read_at(int fd, void* out, std::size_t bytes, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t got = ::pread(fd, static_cast<char*>(out) + done, bytes - done,
                                static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    done += static_cast<std::size_t>(got);
  }
  return done;
}

// CRC-32 of bytes [begin, end) of an open file.
std::uint32_t crc_of_range(int fd, std::uint64_t begin, std::uint64_t end,
                           const std::string& name) {
  std::vector<unsigned char> block(static_cast<std::size_t>(
      std::min<std::uint64_t>(kReadBlock, std::max<std::uint64_t>(end - begin, 1))));
  std::uint32_t crc = crc32(0, nullptr, 0);
  for (std::uint64_t at = begin; at < end;) {
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(block.size(), end - at));
    const std::size_t got = read_at(fd, block.data(), want, at);
    TESSEL_EXPECTS(got == want, "{}: cannot read bytes {} to {} ({})", name, at, at + want,
                   got == 0 && errno != 0 ? std::strerror(errno) : "short read");
    crc = crc32(crc, block.data(), got);
    at += got;
  }
  return crc;
}

// Files already verified whole in this process, by identity: a store opened by every reader of
// a run is read through once, not once per open.
using FileVersion = std::tuple<dev_t, ino_t, std::uint64_t, std::int64_t, std::int64_t>;
std::mutex verified_mutex;
std::set<FileVersion> verified_files;

FileVersion version_of(const struct stat& st) {
  return {st.st_dev, st.st_ino, static_cast<std::uint64_t>(st.st_size),
          static_cast<std::int64_t>(st.st_mtim.tv_sec),
          static_cast<std::int64_t>(st.st_mtim.tv_nsec)};
}

} // namespace

std::uint32_t crc32_zlib(std::uint32_t crc, const void* data, std::size_t bytes) {
  if (data == nullptr) return static_cast<std::uint32_t>(::crc32(0L, Z_NULL, 0));
  const auto* at = static_cast<const Bytef*>(data);
  uLong value = crc;
  while (bytes > 0) {
    // zlib takes a 32-bit length.
    const auto step = static_cast<uInt>(std::min<std::size_t>(bytes, std::size_t{1} << 30));
    value = ::crc32(value, at, step);
    at += step;
    bytes -= step;
  }
  return static_cast<std::uint32_t>(value);
}

bool crc32_isal(std::uint32_t& crc, const void* data, std::size_t bytes) {
#ifdef TESSEL_HAVE_ISAL
  const auto* at = static_cast<const unsigned char*>(data);
  while (bytes > 0) {
    const auto step = static_cast<std::uint64_t>(std::min<std::size_t>(bytes, std::size_t{1} << 30));
    crc = ::crc32_gzip_refl(crc, at, step);
    at += step;
    bytes -= static_cast<std::size_t>(step);
  }
  return true;
#else
  (void)crc;
  (void)data;
  (void)bytes;
  return false;
#endif
}

std::uint32_t crc32(std::uint32_t crc, const void* data, std::size_t bytes) {
  if (data == nullptr) return 0;
#ifdef TESSEL_HAVE_ISAL
  crc32_isal(crc, data, bytes);
  return crc;
#else
  return crc32_zlib(crc, data, bytes);
#endif
}

void write_file_checksum(const std::filesystem::path& path) {
  const std::string name = datasets::output_name(path).string();
  Fd f{::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW)};
  TESSEL_EXPECTS(f.fd >= 0, "cannot write the checksum of {}: {}", name, std::strerror(errno));
  struct stat st {};
  TESSEL_EXPECTS(::fstat(f.fd, &st) == 0, "cannot write the checksum of {}: {}", name,
                 std::strerror(errno));
  const auto length = static_cast<std::uint64_t>(st.st_size);
  TESSEL_EXPECTS(length >= kUserBlockBytes, "cannot write the checksum of {}: {} bytes, fewer "
                 "than its user block", name, length);
  // The user block must be Tessel's: all zero as HDF5 leaves it, or an earlier header.
  std::array<unsigned char, kUserBlockBytes> block{};
  TESSEL_EXPECTS(read_at(f.fd, block.data(), block.size(), 0) == block.size(),
                 "cannot write the checksum of {}: cannot read its user block", name);
  TESSEL_ASSERT(std::memcmp(block.data(), kMagic, sizeof kMagic) == 0 ||
                    std::all_of(block.begin(), block.end(), [](unsigned char c) { return c == 0; }),
                "{}: the user block holds data that is not Tessel's checksum", name);
  const std::uint32_t body = crc_of_range(f.fd, kUserBlockBytes, length, name);
  block.fill(0);
  std::memcpy(block.data(), kMagic, sizeof kMagic);
  put32(block.data() + 8, kVersion);
  put32(block.data() + 12, kAlgorithmCrc32);
  put64(block.data() + 16, length);
  put64(block.data() + 24, kUserBlockBytes);
  put32(block.data() + 32, body);
  put32(block.data() + 36, crc32(crc32(0, nullptr, 0), block.data(), 36));
  std::size_t written = 0;
  while (written < kHeaderBytes) {
    const ssize_t n = ::pwrite(f.fd, block.data() + written, kHeaderBytes - written,
                               static_cast<off_t>(written));
    if (n < 0 && errno == EINTR) continue;
    TESSEL_EXPECTS(n > 0, "cannot write the checksum of {}: {}", name, std::strerror(errno));
    written += static_cast<std::size_t>(n);
  }
  const int closed = ::close(f.fd);
  f.fd = -1;
  TESSEL_EXPECTS(closed == 0, "cannot write the checksum of {}: {} (disk full?)", name,
                 std::strerror(errno));
}

FileChecksum verify_file_checksum(const std::filesystem::path& path, bool whole) {
  const std::string name = path.string();
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  TESSEL_EXPECTS(f.fd >= 0, "{}: cannot open: {}", name, std::strerror(errno));
  struct stat st {};
  TESSEL_EXPECTS(::fstat(f.fd, &st) == 0, "{}: cannot read: {}", name, std::strerror(errno));
  const auto length = static_cast<std::uint64_t>(st.st_size);
  std::array<unsigned char, kHeaderBytes> h{};
  if (read_at(f.fd, h.data(), h.size(), 0) < h.size()) return FileChecksum::absent;
  // A magic with a few bytes changed is a damaged header, not a file without one (a file
  // whose header was hit would otherwise reach HDF5 unchecked).
  int differing = 0;
  for (std::size_t i = 0; i < sizeof kMagic; ++i)
    differing += h[i] != static_cast<unsigned char>(kMagic[i]) ? 1 : 0;
  TESSEL_EXPECTS(differing == 0 || differing > 3,
                 "{}: the checksum header in the user block is damaged (its magic differs from "
                 "TESSELCK in {} bytes); the file is corrupt", name, differing);
  if (differing != 0) return FileChecksum::absent;
  // From here the file says it is Tessel's: anything that disagrees is damage, reported
  // before HDF5 parses a byte of it.
  const std::uint32_t header_crc = crc32(crc32(0, nullptr, 0), h.data(), 36);
  TESSEL_EXPECTS(get32(h.data() + 36) == header_crc,
                 "{}: the checksum header in the user block is damaged (its CRC-32 is {:08x}, "
                 "it records {:08x}); the file is corrupt", name, header_crc, get32(h.data() + 36));
  const std::uint32_t version = get32(h.data() + 8), algorithm = get32(h.data() + 12);
  TESSEL_EXPECTS(version == kVersion && algorithm == kAlgorithmCrc32,
                 "{}: checksum header version {} algorithm {} is not one this Tessel reads "
                 "(version {}, algorithm {})", name, version, algorithm, kVersion, kAlgorithmCrc32);
  const std::uint64_t recorded_length = get64(h.data() + 16), start = get64(h.data() + 24);
  TESSEL_EXPECTS(start == kUserBlockBytes, "{}: checksum header says the checked bytes start at "
                 "{}, expected {}", name, start, kUserBlockBytes);
  TESSEL_EXPECTS(length == recorded_length,
                 "{}: {} bytes, but Tessel wrote {} (the file is {}; copy it again)", name, length,
                 recorded_length, length < recorded_length ? "truncated" : "longer than written");
  // Only large files are remembered: a small file rewritten in place within the clock's
  // granularity (a test, a fuzzer) would keep its identity with other bytes.
  const bool large = length > kVerifyEveryOpenMaxBytes;
  if (!whole && large) return FileChecksum::length_only;
  const FileVersion id = version_of(st);
  if (large && !whole) {
    const std::lock_guard<std::mutex> lock(verified_mutex);
    if (verified_files.count(id) != 0) return FileChecksum::verified;
  }
  const std::uint32_t actual = crc_of_range(f.fd, start, length, name);
  TESSEL_EXPECTS(actual == get32(h.data() + 32),
                 "{}: whole-file CRC-32 is {:08x}, the file records {:08x} (damaged on disk or in "
                 "transfer, or changed by another program since Tessel wrote it)",
                 name, actual, get32(h.data() + 32));
  if (large) {
    const std::lock_guard<std::mutex> lock(verified_mutex);
    verified_files.insert(id);
  }
  return FileChecksum::verified;
}

} // namespace tessel::h5
