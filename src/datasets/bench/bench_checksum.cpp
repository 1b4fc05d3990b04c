// Whole-file checksum benchmark: CRC-32 GB/s of zlib and ISA-L over one buffer (interleaved
// runs), and the cost of verify_file_checksum on a file given on the command line (page cache
// warm, and cold after the kernel is asked to drop the file's pages).
#include "tessel/datasets/file_checksum.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void drop_page_cache(const char* path) {
  const int fd = ::open(path, O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

} // namespace

int main(int argc, char** argv) {
  const std::size_t mb = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 512;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 3;
  std::vector<unsigned char> data(mb << 20);
  std::mt19937_64 rng(1);
  for (std::size_t i = 0; i + 8 <= data.size(); i += 8) {
    const auto v = rng();
    for (int b = 0; b < 8; ++b) data[i + b] = static_cast<unsigned char>(v >> (8 * b));
  }
  const double gb = static_cast<double>(data.size()) / 1e9;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    const std::uint32_t z = tessel::h5::crc32_zlib(0, data.data(), data.size());
    const double tz = seconds_since(t0);
    std::uint32_t i = 0;
    t0 = std::chrono::steady_clock::now();
    const bool have = tessel::h5::crc32_isal(i, data.data(), data.size());
    const double ti = seconds_since(t0);
    fmt::print("run {}: {} MB  zlib crc32 {:.2f} GB/s ({:08x})  ISA-L crc32_gzip_refl {}\n", r,
               mb, gb / tz, z,
               have ? fmt::format("{:.2f} GB/s ({:08x}, {})", gb / ti, i, i == z ? "same" : "DIFFERENT")
                    : std::string("not built"));
  }
  for (int a = 3; a < argc; ++a) {
    for (int r = 0; r < reps; ++r) {
      drop_page_cache(argv[a]);
      auto t0 = std::chrono::steady_clock::now();
      const auto cold = tessel::h5::verify_file_checksum(argv[a], true);
      const double tc = seconds_since(t0);
      t0 = std::chrono::steady_clock::now();
      tessel::h5::verify_file_checksum(argv[a], true);  // the pages are cached now
      const double tw = seconds_since(t0);
      fmt::print("{}: whole-file verify, cold cache {:.3f} s, warm cache {:.3f} s ({})\n",
                 argv[a], tc, tw,
                 cold == tessel::h5::FileChecksum::verified ? "verified" : "no header");
    }
  }
  return 0;
}
