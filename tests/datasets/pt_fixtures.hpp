// .pt files built in the test, byte for byte as torch.save writes them (a stored zip holding a
// protocol-2 pickle and raw storages), so the reader can be tested without torch and fed
// hostile variants of what torch writes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace tessel::test {

// One tensor of a dict: a contiguous storage of `storage_type` ("LongStorage",
// "FloatStorage", ...) holding `bytes`, viewed with shape and contiguous strides.
struct PtEntry {
  std::string key;
  std::string storage_type = "LongStorage";
  std::vector<std::int64_t> shape;
  std::string bytes; // little-endian storage bytes
};
PtEntry pt_long(const std::string& key, std::vector<std::int64_t> shape,
                const std::vector<std::int64_t>& values);

// The pickle torch.save writes for {key: tensor, ...}.
std::string pt_pickle(const std::vector<PtEntry>& entries);
// A stored (uncompressed) zip of the members, in order.
void write_stored_zip(const std::filesystem::path& path,
                      const std::vector<std::pair<std::string, std::string>>& members);
// A whole .pt file: <stem>/data.pkl (pickle given, or pt_pickle(entries)), the storages.
void write_pt(const std::filesystem::path& path, const std::vector<PtEntry>& entries,
              const std::string& pickle = {});

} // namespace tessel::test
