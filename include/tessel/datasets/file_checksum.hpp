// A whole-file checksum for the HDF5 files Tessel writes, kept in their 512-byte user block and
// checked before HDF5 parses a byte of the file (layout: docs/formats.md, "Whole-file checksum").
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace tessel::h5 {

// Every HDF5 file Tessel writes reserves this many bytes in front of HDF5's superblock
// (H5Pset_userblock); HDF5 neither reads nor writes them, and h5py opens such files as usual.
inline constexpr std::size_t kUserBlockBytes = 512;

// Files up to this size are checksummed whole on every open. Larger ones (multi-GB stores) get
// the header and length check on every open; the whole-file pass only when a caller asks for it
// (verify_file_checksum's `whole`), as reading the file again on every open would cost more
// than the open's own reads.
inline constexpr std::uint64_t kVerifyEveryOpenMaxBytes = std::uint64_t{1} << 30;

// CRC-32 as zlib computes it (ISO-HDLC polynomial, reflected): crc32(crc32(0, a), b) is the
// CRC of a followed by b. ISA-L's PCLMUL implementation when Tessel is built with it, zlib's
// otherwise; both give the same value. The two are exposed for the benchmark.
std::uint32_t crc32(std::uint32_t crc, const void* data, std::size_t bytes);
std::uint32_t crc32_zlib(std::uint32_t crc, const void* data, std::size_t bytes);
// Returns false (and leaves crc alone) when Tessel is built without ISA-L.
bool crc32_isal(std::uint32_t& crc, const void* data, std::size_t bytes);

// Writes the checksum header into the user block of a closed HDF5 file made with a
// kUserBlockBytes user block: magic, version, algorithm, file length and the CRC-32 of every
// byte after the user block. Throws InputError naming the file when it cannot be read or written.
void write_file_checksum(const std::filesystem::path& path);

enum class FileChecksum {
  absent,       // no header (h5py, an older Tessel, or a user block of someone else's)
  verified,     // header, length and CRC of the whole file agree
  length_only,  // header and length agree; the CRC pass was skipped (large file, seen before)
};

// Checks a file before HDF5 opens it. With a header: the header's own CRC, the file's length
// and, for files up to kVerifyEveryOpenMaxBytes (or any size when `whole` is true), the CRC of
// every byte after the user block (a large file verified once is remembered for the process). Throws InputError
// "FILE: ..." naming what disagrees; returns `absent` when the file carries no header.
FileChecksum verify_file_checksum(const std::filesystem::path& path, bool whole = false);

} // namespace tessel::h5
