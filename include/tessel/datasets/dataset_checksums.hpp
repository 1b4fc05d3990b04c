// Per-dataset CRC-32s for the HDF5 files whose datasets have no checksum anywhere else
// (checkpoints and SIGN feature files; a part's datasets are checked against partition.json).
// The whole-file checksum (file_checksum.hpp) is checked first; these catch damage it no longer
// covers, when its header is gone (wiped, or a file copied without its first 512 bytes).
#pragma once

#include "tessel/datasets/h5.hpp"

#include <cstddef>
#include <string>

namespace tessel::h5 {

// The root attribute that says every dataset of the file carries a checksum; its value names
// the algorithm ("crc32").
inline constexpr const char* kDatasetChecksumsAttr = "dataset_checksums";
// The attribute on each dataset: "crc32:" and 8 hex digits, the CRC-32 (zlib's) of the
// dataset's values as stored (little-endian, row-major).
inline constexpr const char* kDatasetCrcAttr = "crc32";

// "crc32:xxxxxxxx" of `bytes` bytes at `data`.
std::string crc32_text(const void* data, std::size_t bytes);

// Marks the file as one whose datasets each carry a checksum.
void mark_dataset_checksums(File& file);
// Records the checksum of a dataset just written from these values.
void set_dataset_checksum(File& file, const std::string& dataset, const void* data,
                          std::size_t bytes);
// Whether the file carries per-dataset checksums; a file written before them (or by another
// writer) does not, and is read without. A root attribute naming another algorithm is an
// InputError.
bool has_dataset_checksums(const File& file);
// Checks the values read from `dataset` against its recorded checksum when the file carries
// them (has_dataset_checksums): a missing or malformed attribute, or another CRC, is an
// InputError naming the file and the dataset.
void verify_dataset_checksum(const File& file, const std::string& dataset, const void* data,
                             std::size_t bytes);

} // namespace tessel::h5
