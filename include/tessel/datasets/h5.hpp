// RAII handles and typed helpers over the HDF5 C API (files, groups, datasets, attributes).
#pragma once

#include "tessel/core/error.hpp"

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
  template <class T>
  void write(const std::string& name, const std::vector<T>& data, const std::string& description) {
    write(name, data.data(), {static_cast<std::int64_t>(data.size())}, description);
  }

  // Creates a 1-D or 2-D dataset without writing it, for data written in row blocks with
  // write_rows (features streamed from a parser, parts written piece by piece).
  template <class T>
  void create_dataset(const std::string& name, std::vector<std::int64_t> dims,
                      const std::string& description, std::int64_t chunk_rows = 0, int deflate = 0);
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
  // Reads rows [begin, end) of a 1-D or 2-D dataset into out (resized).
  template <class T>
  void read_rows(const std::string& name, std::int64_t begin, std::int64_t end,
                 std::vector<T>& out) const;

private:
  // Opens a dataset, reusing the one write_rows used last so its chunk cache survives
  // between row blocks.
  hid_t open_dataset(const std::string& name) const;

  std::filesystem::path path_;
  Handle handle_;
  mutable std::string open_name_;
  mutable Handle open_dataset_;
  bool written_ = false;  // made by create(): close() writes the whole-file checksum
};

} // namespace tessel::h5
