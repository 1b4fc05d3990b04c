// NumPy .npz archives (a zip of .npy arrays), read by streaming: the zip central directory
// (zip64 included), stored or deflated members, .npy headers, element conversion.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace tessel::datasets::detail {

// The .npy header of one array.
struct NpyHeader {
  char kind = 0;    // 'i' signed, 'u' unsigned, 'f' float, 'b' bool
  int itemsize = 0; // bytes per element
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
  std::int64_t count() const;
  std::string describe() const; // e.g. "float32 [2708, 1433]"
};

class NpzArchive {
public:
  explicit NpzArchive(std::filesystem::path path);
  const std::filesystem::path& path() const { return path_; }
  bool has(const std::string& key) const;
  std::vector<std::string> keys() const;
  std::int64_t file_bytes() const { return file_bytes_; }

  // Reads one array member as a stream of elements.
  class Array {
  public:
    const NpyHeader& header() const { return header_; }
    // Reads the next `count` elements converted to T (int64_t, float or double). Integers
    // read as integers; floats read as floats only, except that any numbers read as floats.
    // Throws InputError naming archive and key on a short, corrupt or mistyped member.
    template <class T> void read(T* out, std::int64_t count);
    std::int64_t bytes_read() const { return bytes_read_; }
    std::string where() const; // "<archive> array <key>" ("member" for open_member)
    // Raw bytes of the member (open_member): exactly `bytes`, CRC checked at the end.
    void read_raw(void* out, std::size_t bytes) { read_bytes(out, bytes); }
    std::int64_t bytes_left() const { return uncompressed_left_; }

  private:
    friend class NpzArchive;
    struct FileCloser {
      void operator()(std::FILE* f) const { std::fclose(f); }
    };
    struct InflateEnder {
      void operator()(z_stream* zs) const {
        inflateEnd(zs);
        delete zs;
      }
    };
    void read_bytes(void* out, std::size_t bytes); // exactly `bytes`, or throws

    std::filesystem::path path_;
    std::string key_;
    const char* kind_ = "array";
    NpyHeader header_;
    std::unique_ptr<std::FILE, FileCloser> file_;
    std::unique_ptr<z_stream, InflateEnder> zs_; // deflated members only; never moved once live
    std::vector<unsigned char> input_;
    std::int64_t compressed_left_ = 0;
    std::int64_t uncompressed_left_ = 0;
    std::uint32_t crc_ = 0;
    std::uint32_t expect_crc_ = 0;
    std::int64_t bytes_read_ = 0;
    std::vector<unsigned char> convert_;
  };
  Array open(const std::string& key) const;
  // Any member by its exact name, as raw bytes (no .npy header); for other zip-based formats
  // (torch.save's .pt). Throws naming the archive if it is absent.
  Array open_member(const std::string& name) const;
  // Exact member names, in the central directory's order.
  std::vector<std::string> member_names() const;
  // Uncompressed size of a member, or -1 if absent.
  std::int64_t member_bytes(const std::string& name) const;

private:
  struct Entry {
    std::string name;
    std::uint16_t method = 0;
    std::uint16_t flags = 0;
    std::uint32_t crc = 0;
    std::int64_t compressed = 0;
    std::int64_t uncompressed = 0;
    std::int64_t header_offset = 0;
  };
  const Entry* find(const std::string& key) const;
  Array open_entry(const Entry& e, const std::string& key, const char* kind) const;

  std::filesystem::path path_;
  std::int64_t file_bytes_ = 0;
  std::vector<Entry> entries_;
};

// One array for write_npz: raw little-endian bytes with their dtype and shape.
struct NpyArrayData {
  std::string key;
  std::string descr; // "<i8", "<f4", ...
  std::vector<std::int64_t> shape;
  const void* data = nullptr;
  std::size_t bytes = 0;
};

// Writes an .npz archive (np.savez layout; compress = np.savez_compressed). With zip64 the
// zip64 records are written even for small archives (numpy itself always marks its members).
void write_npz(const std::filesystem::path& path, const std::vector<NpyArrayData>& arrays,
               bool compress, bool zip64);

} // namespace tessel::datasets::detail
