// A reader of the PyTorch .pt files that hold a dict of tensors (torch.save's zip format), as
// OGB ships its link-prediction splits: only the pickle subset such files use is accepted.
#pragma once

#include "npz.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace tessel::datasets::detail {

// The element type of a tensor's storage (torch.LongStorage, IntStorage, FloatStorage,
// DoubleStorage); any other storage type is refused when the file is opened.
enum class PtDtype { int64, int32, float32, float64 };
const char* pt_dtype_name(PtDtype dtype);

// One tensor of the dict, as the pickle describes it; its values stay in the archive until read.
struct PtTensorInfo {
  std::string key;
  PtDtype dtype = PtDtype::int64;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> stride; // in elements
  std::int64_t storage_offset = 0;  // in elements
  std::string storage_key;          // the pickle's key of the storage
  std::string storage_member;       // zip member holding the storage's raw bytes
  std::int64_t storage_numel = 0;
  std::int64_t storage_file_offset = -1; // legacy format: where the raw bytes start in the file
  std::int64_t numel() const;
  std::string describe() const; // e.g. "int64 [12, 2]"
};

// A torch.save'd file whose object is a dict {str: tensor}: a zip archive holding
// <prefix>/data.pkl (a pickle, protocol 2) and each storage's little-endian bytes as
// <prefix>/data/<key>; or the legacy format of PyTorch before 1.6 (pickles, then the storages
// one after the other). Opening parses the pickle and checks every tensor against its storage
// (dtype known, strides within the storage, member size = elements x element size); values
// are read on demand, in row-major order whatever the strides. Anything else (another pickle
// opcode or callable, a non-tensor value, a truncated file) is
// an InputError naming the file and what was expected.
class PtFile {
public:
  explicit PtFile(std::filesystem::path path);
  ~PtFile();
  PtFile(PtFile&&) noexcept;
  PtFile& operator=(PtFile&&) noexcept;

  const std::filesystem::path& path() const { return path_; }
  bool has(const std::string& key) const;
  std::vector<std::string> keys() const; // in the file's order
  // Throws naming the file and the keys it holds if `key` is absent.
  const PtTensorInfo& info(const std::string& key) const;

  // The tensor's values, row-major. read_int64 takes integer tensors only; read_float takes
  // any dtype (float64 rounded to float32). Throws naming file and key on a short member.
  std::vector<std::int64_t> read_int64(const std::string& key) const;
  std::vector<float> read_float(const std::string& key) const;

private:
  template <class T> std::vector<T> read_as(const PtTensorInfo& t) const;
  void open_zip();
  void open_legacy();

  std::filesystem::path path_;
  std::int64_t file_bytes_ = 0;
  std::unique_ptr<NpzArchive> archive_; // null for the legacy format
  std::vector<PtTensorInfo> tensors_;
};

} // namespace tessel::datasets::detail
