// Per-dataset CRC-32s of checkpoints and SIGN feature files.
#include "tessel/datasets/dataset_checksums.hpp"

#include "tessel/core/error.hpp"
#include "tessel/datasets/file_checksum.hpp"

#include <fmt/format.h>

namespace tessel::h5 {

std::string crc32_text(const void* data, std::size_t bytes) {
  return fmt::format("crc32:{:08x}", crc32(0, data, bytes));
}

void mark_dataset_checksums(File& file) {
  file.set_attr(kDatasetChecksumsAttr, std::string("crc32"));
}

void set_dataset_checksum(File& file, const std::string& dataset, const void* data,
                          std::size_t bytes) {
  file.set_attr(kDatasetCrcAttr, crc32_text(data, bytes), dataset);
}

bool has_dataset_checksums(const File& file) {
  if (!file.has_attr(kDatasetChecksumsAttr)) return false;
  const std::string algorithm = file.attr_string(kDatasetChecksumsAttr);
  TESSEL_EXPECTS(algorithm == "crc32",
                 "{}: {} = \"{}\", expected \"crc32\" (damaged, or written by a newer Tessel)",
                 file.path().string(), kDatasetChecksumsAttr,
                 algorithm.size() > 40 ? algorithm.substr(0, 37) + "..." : algorithm);
  return true;
}

void verify_dataset_checksum(const File& file, const std::string& dataset, const void* data,
                             std::size_t bytes) {
  if (!has_dataset_checksums(file)) return;
  TESSEL_EXPECTS(file.has_attr(kDatasetCrcAttr, dataset),
                 "{}: {} has no {} attribute, though the file says each dataset has one (the "
                 "file is damaged)",
                 file.path().string(), dataset, kDatasetCrcAttr);
  const std::string recorded = file.attr_string(kDatasetCrcAttr, dataset);
  bool well_formed = recorded.size() == 14 && recorded.starts_with("crc32:");
  for (std::size_t i = 6; well_formed && i < recorded.size(); ++i)
    well_formed = (recorded[i] >= '0' && recorded[i] <= '9') || (recorded[i] >= 'a' && recorded[i] <= 'f');
  TESSEL_EXPECTS(well_formed,
                 "{}: the {} attribute of {} is not \"crc32:\" and 8 hex digits (the file is "
                 "damaged)",
                 file.path().string(), kDatasetCrcAttr, dataset);
  const std::string actual = crc32_text(data, bytes);
  TESSEL_EXPECTS(actual == recorded,
                 "{}: {} has checksum {}, the file records {} (the file is damaged)",
                 file.path().string(), dataset, actual, recorded);
}

} // namespace tessel::h5
