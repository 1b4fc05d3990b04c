// RAII handles and typed helpers over the HDF5 C API (files, groups, datasets, attributes).
#pragma once

#include "tessel/core/error.hpp"
#include "tessel/datasets/feature_dtype.hpp"

#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

// TESSEL_CHECK_HDF5(call): HDF5 returns a negative value on failure.
#define TESSEL_CHECK_HDF5(call)                                                                    \
  ([&]() {                                                                                         \
    const auto tessel_h5_rc_ = (call);                                                             \
    if (tessel_h5_rc_ < 0) [[unlikely]]                                                            \
      TESSEL_LIB_FAIL("HDF5 call {} failed", #call);                                               \
    return tessel_h5_rc_;                                                                          \
  }())

namespace tessel::h5 {

// Owns one hid_t and closes it with the right H5*close.
class Handle {
public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  ~Handle() { reset(); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& o) noexcept : id_(o.id_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      o.id_ = H5I_INVALID_HID;
    }
    return *this;
  }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset() noexcept;
  // Gives up ownership without closing: the caller closes the id and checks the result.
  hid_t release() noexcept {
    const hid_t id = id_;
    id_ = H5I_INVALID_HID;
    return id;
  }

private:
  hid_t id_ = H5I_INVALID_HID;
};

template <class T> hid_t native_type();

// The HDF5 file type of a feature dtype: IEEE float32 little-endian, or a 16-bit IEEE-style float
// type built from it (HDF5 1.10 has no predefined 16-bit float; h5py reads the float16 layout
// as numpy float16 and the bfloat16 layout as float32).
Handle feature_file_type(datasets::FeatureDtype dtype);
// float16 or bfloat16 when a float type has exactly that 16-bit layout, else float32 (any other
// float type is read through HDF5's own conversion).
datasets::FeatureDtype float_dtype_of(hid_t type);

// An open HDF5 file. Errors name the file and the object.
class File {
public:
  // Truncates. The file gets a 512-byte user block, where close() writes a checksum of every
  // byte after it (file_checksum.hpp).
  static File create(const std::filesystem::path& path);
  // Verifies the whole-file checksum when the file has one (verify_file_checksum), then opens.
  static File open_read(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  hid_t id() const { return handle_.get(); }
  // Closes the file (flushing it); every object opened through it is closed too. A failed
  // flush or close (a full disk) throws InputError naming the file: call it, and let it
  // throw, before renaming a written file into place.
  void close();

  bool exists(const std::string& object) const;
  void create_group(const std::string& group);

  // Attributes on the root group (or on `object`).
  void set_attr(const std::string& name, const std::string& value, const std::string& object = "/");
  void set_attr(const std::string& name, std::int64_t value, const std::string& object = "/");
  void set_attr(const std::string& name, double value, const std::string& object = "/");
  std::string attr_string(const std::string& name, const std::string& object = "/") const;
  std::int64_t attr_int(const std::string& name, const std::string& object = "/") const;
  // A single number (float or integer attribute) as a double.
  double attr_double(const std::string& name, const std::string& object = "/") const;
  bool has_attr(const std::string& name, const std::string& object = "/") const;

  // Writes a 1-D or 2-D dataset (dims = {n} or {n, m}); chunked by rows (chunk_rows) and,
  // when deflate > 0, compressed. `description` becomes its "description" attribute.
  template <class T>
  void write(const std::string& name, const T* data, std::vector<std::int64_t> dims,
             const std::string& description, std::int64_t chunk_rows = 0, int deflate = 0);
  template <class T, class A>
  void write(const std::string& name, const std::vector<T, A>& data, const std::string& description) {
    write(name, data.data(), {static_cast<std::int64_t>(data.size())}, description);
  }

  // Creates a 1-D or 2-D dataset without writing it, for data written in row blocks with
  // write_rows (features streamed from a parser, parts written piece by piece).
  template <class T>
  void create_dataset(const std::string& name, std::vector<std::int64_t> dims,
                      const std::string& description, std::int64_t chunk_rows = 0, int deflate = 0);
  // A 2-D float dataset stored as `dtype` (feature_file_type), for write_rows (float32) or
  // write_rows_stored (16-bit).
  void create_feature_dataset(const std::string& name, std::vector<std::int64_t> dims,
                              datasets::FeatureDtype dtype, const std::string& description,
                              std::int64_t chunk_rows);
  // Writes 16-bit values as they are stored (narrow_features made them).
  void write_rows_stored(const std::string& name, std::int64_t begin, const std::uint16_t* data,
                         std::int64_t rows);
  // The dtype a float dataset is stored as (float_dtype_of). Reading a 16-bit dataset as float
  // (read, read_into, read_rows) widens it in row blocks, exactly.
  datasets::FeatureDtype feature_dtype(const std::string& name) const;
  // Rows [begin, end) of a 16-bit dataset as stored (for checksums over the stored values).
  void read_rows_stored(const std::string& name, std::int64_t begin, std::int64_t end,
                        std::vector<std::uint16_t>& out) const;
  // Writes rows [begin, begin + rows) of a dataset made by create_dataset (or write); data
  // holds rows * (columns) elements, row-major.
  template <class T>
  void write_rows(const std::string& name, std::int64_t begin, const T* data, std::int64_t rows);

  // Shape of a dataset; throws InputError naming the file if it is missing, or if the file does
  // not hold the bytes its shape needs (checked by every read too, before anything is sized).
  std::vector<std::int64_t> dims(const std::string& name) const;
  // Reads a whole dataset, checking the stored element type converts to T and, when
  // expect_dims is non-empty, that the shape matches.
  template <class T>
  std::vector<T> read(const std::string& name, std::vector<std::int64_t> expect_dims = {}) const;
  // Like read, into caller memory of exactly the dataset's size (no temporary copy).
  template <class T> void read_into(const std::string& name, T* out, std::int64_t count) const;
  // Like read, into `out` (resized; any allocator, no temporary copy).
  template <class T, class A>
  void read_to(const std::string& name, std::vector<T, A>& out,
               const std::vector<std::int64_t>& expect_dims = {}) const {
    out.resize(static_cast<std::size_t>(elements(name, expect_dims)));
    read_into<T>(name, out.data(), static_cast<std::int64_t>(out.size()));
  }
  // Elements of a dataset, checking its shape against expect_dims when that is non-empty (as
  // read does).
  std::int64_t elements(const std::string& name, const std::vector<std::int64_t>& expect_dims) const;
  // Reads rows [begin, end) of a 1-D or 2-D dataset into out (resized).
  template <class T>
  void read_rows(const std::string& name, std::int64_t begin, std::int64_t end,
                 std::vector<T>& out) const;

private:
  // Opens a dataset, reusing the one write_rows used last so its chunk cache survives
  // between row blocks.
  hid_t open_dataset(const std::string& name) const;
  void create_typed(const std::string& name, const std::vector<std::int64_t>& dims, hid_t type,
                    const std::string& description, std::int64_t chunk_rows, int deflate);
  // Rows [begin, end) of a 16-bit dataset (cols values each) widened into out, in blocks.
  void read_widened(const std::string& name, hid_t dataset, datasets::FeatureDtype dtype,
                    std::int64_t begin, std::int64_t end, std::int64_t cols, float* out) const;

  std::filesystem::path path_;
  Handle handle_;
  mutable std::string open_name_;
  mutable Handle open_dataset_;
  bool written_ = false;  // made by create(): close() writes the whole-file checksum
};

} // namespace tessel::h5
