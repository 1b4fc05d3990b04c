// HDF5 files through RAII handles: typed dataset and attribute I/O whose errors name file and
// object.
#include "tessel/datasets/h5.hpp"

#include "tessel/core/interrupt.hpp"
#include "tessel/datasets/atomic_output.hpp"
#include "tessel/datasets/file_checksum.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace tessel::h5 {

namespace {

// HDF5 prints its whole error stack to stderr by default; Tessel reports one line itself.
void quiet_hdf5_errors() {
  static const bool done = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

// The on-disk element type for T: little-endian standard types, so files are portable.
template <class T> hid_t file_type() {
  if constexpr (std::is_same_v<T, float>)
    return H5T_IEEE_F32LE;
  else if constexpr (std::is_same_v<T, double>)
    return H5T_IEEE_F64LE;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return H5T_STD_I32LE;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return H5T_STD_I64LE;
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return H5T_STD_U8LE;
  else if constexpr (std::is_same_v<T, std::uint32_t>)
    return H5T_STD_U32LE;
  else if constexpr (std::is_same_v<T, std::uint64_t>)
    return H5T_STD_U64LE;
  else
    static_assert(sizeof(T) == 0, "unsupported HDF5 element type");
}

template <class T> const char* type_word() {
  if constexpr (std::is_floating_point_v<T>)
    return "floating-point";
  else
    return "integer";
}

std::string parent_of(const std::string& name) {
  const auto pos = name.rfind('/');
  if (pos == std::string::npos || pos == 0) return "/";
  return name.substr(0, pos);
}

// Creation properties that leave timestamps out, so the same data gives the same file bytes.
Handle no_times_plist(hid_t cls) {
  Handle plist(TESSEL_CHECK_HDF5(H5Pcreate(cls)));
  TESSEL_CHECK_HDF5(H5Pset_obj_track_times(plist.get(), false));
  return plist;
}

std::int64_t product(const std::vector<std::int64_t>& dims) {
  std::int64_t n = 1;
  for (auto d : dims)
    n *= d;
  return n;
}

// A failed HDF5 call while reading a file means the file is damaged (HDF5 checks what it
// decodes): an input error naming the file and what was read, not a library failure.
template <class Rc> Rc read_check(Rc rc, const std::filesystem::path& file, const std::string& what) {
  if (rc < 0) TESSEL_FAIL("{}: cannot read {} (truncated or corrupt file?)", file.string(), what);
  return rc;
}

std::string dims_string(const std::vector<std::int64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

} // namespace

void Handle::reset() noexcept {
  if (id_ < 0) return;
  switch (H5Iget_type(id_)) {
  case H5I_FILE:
    H5Fclose(id_);
    break;
  case H5I_GROUP:
    H5Gclose(id_);
    break;
  case H5I_DATASET:
    H5Dclose(id_);
    break;
  case H5I_DATASPACE:
    H5Sclose(id_);
    break;
  case H5I_DATATYPE:
    H5Tclose(id_);
    break;
  case H5I_ATTR:
    H5Aclose(id_);
    break;
  case H5I_GENPROP_LST:
    H5Pclose(id_);
    break;
  default:
    H5Idec_ref(id_);
    break; // already closed with its file, or an unusual kind
  }
  id_ = H5I_INVALID_HID;
}

template <> hid_t native_type<float>() {
  return H5T_NATIVE_FLOAT;
}
template <> hid_t native_type<double>() {
  return H5T_NATIVE_DOUBLE;
}
template <> hid_t native_type<std::int32_t>() {
  return H5T_NATIVE_INT32;
}
template <> hid_t native_type<std::int64_t>() {
  return H5T_NATIVE_INT64;
}
template <> hid_t native_type<std::uint8_t>() {
  return H5T_NATIVE_UINT8;
}
template <> hid_t native_type<std::uint32_t>() {
  return H5T_NATIVE_UINT32;
}
template <> hid_t native_type<std::uint64_t>() {
  return H5T_NATIVE_UINT64;
}

File File::create(const std::filesystem::path& path) {
  quiet_hdf5_errors();
  const auto parent = path.parent_path();
  TESSEL_EXPECTS(parent.empty() || std::filesystem::is_directory(parent),
                 "cannot create {}: folder {} does not exist", path.string(), parent.string());
  Handle fcpl = no_times_plist(H5P_FILE_CREATE);
  // Room for the whole-file checksum close() writes (file_checksum.hpp).
  TESSEL_CHECK_HDF5(H5Pset_userblock(fcpl.get(), kUserBlockBytes));
  Handle fapl(TESSEL_CHECK_HDF5(H5Pcreate(H5P_FILE_ACCESS)));
  // Strong close: closing the file closes every object still open in it, so close() really
  // flushes before the caller renames the file into place.
  TESSEL_CHECK_HDF5(H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG));
  // The path is usually a registered temporary: an interrupt's cleanup must not remove it just
  // before H5Fcreate makes it again.
  hid_t id = -1;
  interrupt::create_registered(
      [&] { id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()); });
  TESSEL_EXPECTS(id >= 0, "cannot create HDF5 file {} (is the folder writable, with room?)",
                 datasets::output_name(path).string());
  File f;
  f.path_ = path;
  f.handle_ = Handle(id);
  f.written_ = true;
  return f;
}

File File::open_read(const std::filesystem::path& path) {
  quiet_hdf5_errors();
  std::error_code ec;
  TESSEL_EXPECTS(std::filesystem::exists(path, ec), "{}: no such file", path.string());
  TESSEL_EXPECTS(std::filesystem::is_regular_file(path, ec), "{}: not a regular file",
                 path.string());
  // Before HDF5 reads a byte: a damaged file of Tessel's making is one error line here, not a
  // crash in HDF5's decoder. Files without the header (h5py, older Tessel) go on unchecked.
  verify_file_checksum(path);
  TESSEL_EXPECTS(H5Fis_hdf5(path.c_str()) > 0, "{}: not an HDF5 file", path.string());
  Handle fapl(TESSEL_CHECK_HDF5(H5Pcreate(H5P_FILE_ACCESS)));
  TESSEL_CHECK_HDF5(H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG));
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
  TESSEL_EXPECTS(id >= 0, "{}: cannot open the HDF5 file (truncated or corrupt?)", path.string());
  File f;
  f.path_ = path;
  f.handle_ = Handle(id);
  return f;
}

void File::close() {
  open_dataset_.reset();
  if (!handle_.valid()) return;
  const hid_t id = handle_.release();
  // Flush first and check it: HDF5 keeps metadata and chunks in its caches, so a full disk
  // often shows only here. The id is closed whatever the flush says.
  const herr_t flushed = H5Iget_type(id) == H5I_FILE ? H5Fflush(id, H5F_SCOPE_LOCAL) : 0;
  const herr_t closed = H5Fclose(id);
  TESSEL_EXPECTS(flushed >= 0 && closed >= 0,
                 "cannot write {}: HDF5 could not flush and close it (disk full?)",
                 datasets::output_name(path_).string());
  // Every byte HDF5 wrote is on the file now: checksum them into the user block.
  if (written_) write_file_checksum(path_);
}

bool File::exists(const std::string& object) const {
  if (object.empty() || object == "/") return true;
  // H5Lexists fails rather than answering false when an intermediate group is missing, so
  // walk the path one component at a time.
  std::string prefix;
  std::size_t start = object[0] == '/' ? 1 : 0;
  while (start <= object.size()) {
    auto end = object.find('/', start);
    if (end == std::string::npos) end = object.size();
    if (end > start) {
      prefix += '/';
      prefix.append(object, start, end - start);
      if (H5Lexists(id(), prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    }
    start = end + 1;
  }
  return true;
}

void File::create_group(const std::string& group) {
  if (exists(group)) return;
  const auto parent = parent_of(group);
  if (!exists(parent)) create_group(parent);
  Handle gcpl = no_times_plist(H5P_GROUP_CREATE);
  const hid_t g = H5Gcreate2(id(), group.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT);
  if (g < 0)
    TESSEL_FAIL("cannot write {}: creating group {} failed (disk full?)",
                datasets::output_name(path_).string(), group);
  Handle owned(g);
}

namespace {

Handle open_object(const File& file, const std::string& object) {
  TESSEL_EXPECTS(file.exists(object), "{}: missing object {}", file.path().string(), object);
  const hid_t id = H5Oopen(file.id(), object.c_str(), H5P_DEFAULT);
  if (id < 0) TESSEL_FAIL("{}: cannot open object {}", file.path().string(), object);
  return Handle(id);
}

// Creates attribute `name` on `object`, replacing an existing one.
Handle fresh_attr(const File& file, const std::string& object, const std::string& name,
                  hid_t type) {
  Handle obj = open_object(file, object);
  if (H5Aexists(obj.get(), name.c_str()) > 0) TESSEL_CHECK_HDF5(H5Adelete(obj.get(), name.c_str()));
  Handle space(TESSEL_CHECK_HDF5(H5Screate(H5S_SCALAR)));
  const hid_t a = H5Acreate2(obj.get(), name.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT);
  if (a < 0)
    TESSEL_FAIL("cannot write {}: creating attribute {} on {} failed (disk full?)",
                datasets::output_name(file.path()).string(), name, object);
  return Handle(a);
}

Handle open_attr(const File& file, const std::string& object, const std::string& name) {
  Handle obj = open_object(file, object);
  TESSEL_EXPECTS(H5Aexists(obj.get(), name.c_str()) > 0, "{}: {} has no attribute \"{}\"",
                 file.path().string(), object, name);
  const hid_t a = H5Aopen(obj.get(), name.c_str(), H5P_DEFAULT);
  if (a < 0) TESSEL_FAIL("{}: cannot open attribute {} of {}", file.path().string(), name, object);
  return Handle(a);
}

} // namespace

void File::set_attr(const std::string& name, const std::string& value, const std::string& object) {
  // Variable-length UTF-8 strings read back as str in h5py and print plainly in h5dump.
  Handle type(TESSEL_CHECK_HDF5(H5Tcopy(H5T_C_S1)));
  TESSEL_CHECK_HDF5(H5Tset_size(type.get(), H5T_VARIABLE));
  TESSEL_CHECK_HDF5(H5Tset_cset(type.get(), H5T_CSET_UTF8));
  Handle attr = fresh_attr(*this, object, name, type.get());
  const char* text = value.c_str();
  TESSEL_CHECK_HDF5(H5Awrite(attr.get(), type.get(), &text));
}

void File::set_attr(const std::string& name, std::int64_t value, const std::string& object) {
  Handle attr = fresh_attr(*this, object, name, H5T_STD_I64LE);
  TESSEL_CHECK_HDF5(H5Awrite(attr.get(), H5T_NATIVE_INT64, &value));
}

void File::set_attr(const std::string& name, double value, const std::string& object) {
  Handle attr = fresh_attr(*this, object, name, H5T_IEEE_F64LE);
  TESSEL_CHECK_HDF5(H5Awrite(attr.get(), H5T_NATIVE_DOUBLE, &value));
}

bool File::has_attr(const std::string& name, const std::string& object) const {
  if (!exists(object)) return false;
  return H5Aexists_by_name(id(), object.c_str(), name.c_str(), H5P_DEFAULT) > 0;
}

std::string File::attr_string(const std::string& name, const std::string& object) const {
  Handle attr = open_attr(*this, object, name);
  const std::string what = "attribute \"" + name + "\" of " + object;
  Handle type(read_check(H5Aget_type(attr.get()), path_, what));
  TESSEL_EXPECTS(H5Tget_class(type.get()) == H5T_STRING,
                 "{}: attribute \"{}\" of {} is not a string", path_.string(), name, object);
  Handle space(read_check(H5Aget_space(attr.get()), path_, what));
  TESSEL_EXPECTS(H5Sget_simple_extent_npoints(space.get()) == 1,
                 "{}: attribute \"{}\" of {} is not a single string", path_.string(), name, object);
  if (H5Tis_variable_str(type.get()) > 0) {
    Handle mem(TESSEL_CHECK_HDF5(H5Tcopy(H5T_C_S1)));
    TESSEL_CHECK_HDF5(H5Tset_size(mem.get(), H5T_VARIABLE));
    // A damaged file can name a character set HDF5 does not know: that is the file's fault.
    const H5T_cset_t cset = H5Tget_cset(type.get());
    TESSEL_EXPECTS(cset == H5T_CSET_ASCII || cset == H5T_CSET_UTF8,
                   "{}: attribute \"{}\" of {} has an unknown character set (expected ASCII or "
                   "UTF-8)",
                   path_.string(), name, object);
    TESSEL_CHECK_HDF5(H5Tset_cset(mem.get(), cset));
    char* text = nullptr;
    read_check(H5Aread(attr.get(), mem.get(), &text), path_, what);
    std::string value = text ? text : "";
    H5free_memory(text);
    return value;
  }
  const std::size_t size = H5Tget_size(type.get());
  std::string value(size, '\0');
  Handle mem(TESSEL_CHECK_HDF5(H5Tcopy(type.get())));
  read_check(H5Aread(attr.get(), mem.get(), value.data()), path_, what);
  while (!value.empty() && (value.back() == '\0' || value.back() == ' '))
    value.pop_back();
  return value;
}

std::int64_t File::attr_int(const std::string& name, const std::string& object) const {
  Handle attr = open_attr(*this, object, name);
  const std::string what = "attribute \"" + name + "\" of " + object;
  Handle type(read_check(H5Aget_type(attr.get()), path_, what));
  TESSEL_EXPECTS(H5Tget_class(type.get()) == H5T_INTEGER,
                 "{}: attribute \"{}\" of {} is not an integer", path_.string(), name, object);
  Handle space(read_check(H5Aget_space(attr.get()), path_, what));
  TESSEL_EXPECTS(H5Sget_simple_extent_npoints(space.get()) == 1,
                 "{}: attribute \"{}\" of {} is not a single integer", path_.string(), name,
                 object);
  std::int64_t value = 0;
  read_check(H5Aread(attr.get(), H5T_NATIVE_INT64, &value), path_, what);
  return value;
}

double File::attr_double(const std::string& name, const std::string& object) const {
  Handle attr = open_attr(*this, object, name);
  const std::string what = "attribute \"" + name + "\" of " + object;
  Handle type(read_check(H5Aget_type(attr.get()), path_, what));
  const auto type_class = H5Tget_class(type.get());
  TESSEL_EXPECTS(type_class == H5T_FLOAT || type_class == H5T_INTEGER,
                 "{}: attribute \"{}\" of {} is not a number", path_.string(), name, object);
  Handle space(read_check(H5Aget_space(attr.get()), path_, what));
  TESSEL_EXPECTS(H5Sget_simple_extent_npoints(space.get()) == 1,
                 "{}: attribute \"{}\" of {} is not a single number", path_.string(), name,
                 object);
  double value = 0;
  read_check(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &value), path_, what);
  return value;
}

template <class T>
void File::create_dataset(const std::string& name, std::vector<std::int64_t> dims,
                          const std::string& description, std::int64_t chunk_rows, int deflate) {
  create_typed(name, dims, file_type<T>(), description, chunk_rows, deflate);
}

void File::create_feature_dataset(const std::string& name, std::vector<std::int64_t> dims,
                                  datasets::FeatureDtype dtype, const std::string& description,
                                  std::int64_t chunk_rows) {
  const Handle type = feature_file_type(dtype);
  create_typed(name, dims, type.get(), description, chunk_rows, 0);
}

void File::create_typed(const std::string& name, const std::vector<std::int64_t>& dims,
                        hid_t type, const std::string& description, std::int64_t chunk_rows,
                        int deflate) {
  TESSEL_ASSERT(dims.size() == 1 || dims.size() == 2, "{}: dataset {} must be 1-D or 2-D",
                path_.string(), name);
  for (auto d : dims)
    TESSEL_ASSERT(d >= 0, "{}: negative dimension for {}", path_.string(), name);
  create_group(parent_of(name));
  std::vector<hsize_t> hdims(dims.begin(), dims.end());
  Handle space(
      TESSEL_CHECK_HDF5(H5Screate_simple(static_cast<int>(hdims.size()), hdims.data(), nullptr)));
  Handle dcpl = no_times_plist(H5P_DATASET_CREATE);
  // Nothing is ever read before it is written: skip writing fill values.
  TESSEL_CHECK_HDF5(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER));
  const bool nonempty = product(dims) > 0;
  if (nonempty && (chunk_rows > 0 || deflate > 0)) {
    std::vector<hsize_t> chunk = hdims;
    chunk[0] = static_cast<hsize_t>(std::min(chunk_rows > 0 ? chunk_rows : dims[0], dims[0]));
    TESSEL_CHECK_HDF5(H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()));
    if (deflate > 0) {
      TESSEL_CHECK_HDF5(H5Pset_shuffle(dcpl.get()));
      TESSEL_CHECK_HDF5(H5Pset_deflate(dcpl.get(), static_cast<unsigned>(deflate)));
    }
  }
  const hid_t d =
      H5Dcreate2(id(), name.c_str(), type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT);
  if (d < 0)
    TESSEL_FAIL("cannot write {}: creating dataset {} {} failed (disk full?)",
                datasets::output_name(path_).string(), name, dims_string(dims));
  Handle dataset(d);
  if (!description.empty()) set_attr("description", description, name);
}

hid_t File::open_dataset(const std::string& name) const {
  if (open_dataset_.valid() && open_name_ == name) return open_dataset_.get();
  open_dataset_.reset();
  open_name_.clear();
  TESSEL_EXPECTS(exists(name), "{}: missing dataset {}", path_.string(), name);
  // A chunk cache larger than the default 1 MiB keeps partially written chunks in memory
  // between row blocks instead of rereading them from disk.
  Handle dapl(TESSEL_CHECK_HDF5(H5Pcreate(H5P_DATASET_ACCESS)));
  TESSEL_CHECK_HDF5(H5Pset_chunk_cache(dapl.get(), 1021, 32u << 20, 1.0));
  const hid_t d = H5Dopen2(id(), name.c_str(), dapl.get());
  TESSEL_EXPECTS(d >= 0, "{}: {} is not a dataset", path_.string(), name);
  open_dataset_ = Handle(d);
  open_name_ = name;
  return d;
}

namespace {

// Checks that data stored in `dataset` can be read as T without changing its meaning: no
// integer <-> float mixups and no narrowing of integers.
template <class T>
void check_readable_as(const File& file, const std::string& name, hid_t dataset) {
  Handle type(read_check(H5Dget_type(dataset), file.path(), "the type of dataset " + name));
  const H5T_class_t cls = H5Tget_class(type.get());
  const bool want_float = std::is_floating_point_v<T>;
  TESSEL_EXPECTS((want_float && cls == H5T_FLOAT) || (!want_float && cls == H5T_INTEGER),
                 "{}: dataset {} does not hold {} values", file.path().string(), name,
                 type_word<T>());
  if (!want_float)
    TESSEL_EXPECTS(H5Tget_size(type.get()) <= sizeof(T),
                   "{}: dataset {} holds {}-byte integers; reading them as {}-byte would truncate",
                   file.path().string(), name, H5Tget_size(type.get()), sizeof(T));
}

std::vector<std::int64_t> dataset_dims(const File& file, const std::string& name, hid_t dataset) {
  Handle space(read_check(H5Dget_space(dataset), file.path(), "the shape of dataset " + name));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  TESSEL_EXPECTS(rank >= 0 && rank <= 8, "{}: dataset {} has an unreadable shape",
                 file.path().string(), name);
  std::vector<hsize_t> d(static_cast<std::size_t>(rank));
  read_check(H5Sget_simple_extent_dims(space.get(), d.data(), nullptr), file.path(),
             "the shape of dataset " + name);
  for (const hsize_t extent : d)
    TESSEL_EXPECTS(extent < (hsize_t{1} << 62), "{}: dataset {} has an impossible extent {}",
                   file.path().string(), name, extent);
  return {d.begin(), d.end()};
}

// The shape of a dataset that is about to be read, after checking the file holds the bytes it
// promises: a damaged or hand-edited shape would otherwise size a huge allocation before any
// read fails. Tessel's writers (and h5py) write every element; compressed chunks hold at most
// deflate's 1032:1.
std::vector<std::int64_t> stored_dims(const File& file, const std::string& name, hid_t dataset) {
  auto shape = dataset_dims(file, name, dataset);
  Handle type(read_check(H5Dget_type(dataset), file.path(), "the type of dataset " + name));
  Handle dcpl(read_check(H5Dget_create_plist(dataset), file.path(), "the layout of dataset " + name));
  long double logical = static_cast<long double>(H5Tget_size(type.get()));
  for (const auto extent : shape)
    logical *= static_cast<long double>(extent);
  // A damaged chunk index can claim more stored bytes than the whole file has: no dataset
  // stores more than the file's size.
  hsize_t file_bytes = 0;
  read_check(H5Fget_filesize(file.id(), &file_bytes), file.path(), "the size of the file");
  const auto stored = static_cast<long double>(
      std::min<hsize_t>(H5Dget_storage_size(dataset), file_bytes));
  const long double bound = H5Pget_nfilters(dcpl.get()) > 0 ? 1032 * stored + 4096 : stored;
  TESSEL_EXPECTS(logical <= bound,
                 "{}: dataset {} has shape {} ({:.0f} bytes), but the file stores {:.0f} bytes for it "
                 "(truncated, unwritten or corrupt)",
                 file.path().string(), name, dims_string(shape), static_cast<double>(logical),
                 static_cast<double>(stored));
  return shape;
}

} // namespace

template <class T>
void File::write(const std::string& name, const T* data, std::vector<std::int64_t> dims,
                 const std::string& description, std::int64_t chunk_rows, int deflate) {
  create_dataset<T>(name, dims, description, chunk_rows, deflate);
  if (product(dims) > 0) write_rows<T>(name, 0, data, dims[0]);
}

template <class T>
void File::write_rows(const std::string& name, std::int64_t begin, const T* data,
                      std::int64_t rows) {
  if (rows == 0) return;
  const hid_t dataset = open_dataset(name);
  const auto dims = dataset_dims(*this, name, dataset);
  TESSEL_ASSERT(begin >= 0 && rows >= 0 && begin + rows <= dims.at(0),
                "{}: rows [{}, {}) outside dataset {} {}", path_.string(), begin, begin + rows,
                name, dims_string(dims));
  std::vector<hsize_t> start(dims.size(), 0), count(dims.begin(), dims.end());
  start[0] = static_cast<hsize_t>(begin);
  count[0] = static_cast<hsize_t>(rows);
  Handle file_space(TESSEL_CHECK_HDF5(H5Dget_space(dataset)));
  TESSEL_CHECK_HDF5(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr,
                                        count.data(), nullptr));
  Handle mem_space(
      TESSEL_CHECK_HDF5(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr)));
  if (H5Dwrite(dataset, native_type<T>(), mem_space.get(), file_space.get(), H5P_DEFAULT, data) < 0)
    TESSEL_FAIL("cannot write {}: writing rows [{}, {}) of {} failed (disk full?)",
                datasets::output_name(path_).string(), begin, begin + rows, name);
}

std::vector<std::int64_t> File::dims(const std::string& name) const {
  return stored_dims(*this, name, open_dataset(name));
}

std::int64_t File::elements(const std::string& name,
                            const std::vector<std::int64_t>& expect_dims) const {
  const auto shape = stored_dims(*this, name, open_dataset(name));
  if (!expect_dims.empty())
    TESSEL_EXPECTS(shape == expect_dims, "{}: dataset {} has shape {}, expected {}", path_.string(),
                   name, dims_string(shape), dims_string(expect_dims));
  return product(shape);
}

template <class T>
std::vector<T> File::read(const std::string& name, std::vector<std::int64_t> expect_dims) const {
  std::vector<T> out;
  read_to(name, out, expect_dims);
  return out;
}

template <class T> void File::read_into(const std::string& name, T* out, std::int64_t count) const {
  const hid_t dataset = open_dataset(name);
  check_readable_as<T>(*this, name, dataset);
  const auto shape = stored_dims(*this, name, dataset);
  TESSEL_EXPECTS(product(shape) == count, "{}: dataset {} has {} elements, expected {}",
                 path_.string(), name, product(shape), count);
  if (count == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    Handle type(read_check(H5Dget_type(dataset), path_, "the type of dataset " + name));
    const auto dtype = float_dtype_of(type.get());
    if (dtype != datasets::FeatureDtype::float32) {
      const std::int64_t cols = shape.size() == 2 ? shape[1] : 1;
      read_widened(name, dataset, dtype, 0, shape.empty() ? 0 : shape[0], cols, out);
      return;
    }
  }
  if (H5Dread(dataset, native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0)
    TESSEL_FAIL("{}: reading dataset {} failed (truncated or corrupt file?)", path_.string(), name);
}

template <class T>
void File::read_rows(const std::string& name, std::int64_t begin, std::int64_t end,
                     std::vector<T>& out) const {
  const hid_t dataset = open_dataset(name);
  check_readable_as<T>(*this, name, dataset);
  const auto shape = stored_dims(*this, name, dataset);
  TESSEL_EXPECTS(!shape.empty() && shape.size() <= 2, "{}: dataset {} is not 1-D or 2-D",
                 path_.string(), name);
  TESSEL_EXPECTS(begin >= 0 && begin <= end && end <= shape[0],
                 "{}: rows [{}, {}) are outside dataset {} with {} rows", path_.string(), begin,
                 end, name, shape[0]);
  const std::int64_t cols = shape.size() == 2 ? shape[1] : 1;
  out.resize(static_cast<std::size_t>((end - begin) * cols));
  if (out.empty()) return;
  if constexpr (std::is_same_v<T, float>) {
    Handle type(read_check(H5Dget_type(dataset), path_, "the type of dataset " + name));
    const auto dtype = float_dtype_of(type.get());
    if (dtype != datasets::FeatureDtype::float32) {
      read_widened(name, dataset, dtype, begin, end, cols, out.data());
      return;
    }
  }
  std::vector<hsize_t> start(shape.size(), 0), count(shape.begin(), shape.end());
  start[0] = static_cast<hsize_t>(begin);
  count[0] = static_cast<hsize_t>(end - begin);
  Handle file_space(TESSEL_CHECK_HDF5(H5Dget_space(dataset)));
  TESSEL_CHECK_HDF5(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr,
                                        count.data(), nullptr));
  Handle mem_space(
      TESSEL_CHECK_HDF5(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr)));
  if (H5Dread(dataset, native_type<T>(), mem_space.get(), file_space.get(), H5P_DEFAULT,
              out.data()) < 0)
    TESSEL_FAIL("{}: reading rows [{}, {}) of {} failed (truncated or corrupt file?)",
                path_.string(), begin, end, name);
}

namespace {

// The 16-bit layouts: sign bit 15, then the exponent, then the mantissa.
struct Float16Layout {
  std::size_t exponent_pos, exponent_bits, mantissa_bits, bias;
};
constexpr Float16Layout kHalf{10, 5, 10, 15};
constexpr Float16Layout kBfloat{7, 8, 7, 127};

bool has_layout(hid_t type, const Float16Layout& l) {
  std::size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
  if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) < 0) return false;
  return H5Tget_size(type) == 2 && H5Tget_order(type) == H5T_ORDER_LE &&
         H5Tget_precision(type) == 16 && H5Tget_offset(type) == 0 && spos == 15 &&
         epos == l.exponent_pos && esize == l.exponent_bits && mpos == 0 &&
         msize == l.mantissa_bits && H5Tget_ebias(type) == l.bias &&
         H5Tget_norm(type) == H5T_NORM_IMPLIED;
}

// Rows per block when widening: about 4 MiB of stored values.
std::int64_t widen_block_rows(std::int64_t cols) {
  return std::max<std::int64_t>(1, (std::int64_t{2} << 20) / std::max<std::int64_t>(cols, 1));
}

} // namespace

Handle feature_file_type(datasets::FeatureDtype dtype) {
  Handle type(TESSEL_CHECK_HDF5(H5Tcopy(H5T_IEEE_F32LE)));
  if (dtype == datasets::FeatureDtype::float32) return type;
  const Float16Layout& l = dtype == datasets::FeatureDtype::float16 ? kHalf : kBfloat;
  // Fields first (they must fit the precision being set), then precision and size.
  TESSEL_CHECK_HDF5(H5Tset_fields(type.get(), 15, l.exponent_pos, l.exponent_bits, 0,
                                  l.mantissa_bits));
  TESSEL_CHECK_HDF5(H5Tset_offset(type.get(), 0));
  TESSEL_CHECK_HDF5(H5Tset_precision(type.get(), 16));
  TESSEL_CHECK_HDF5(H5Tset_size(type.get(), 2));
  TESSEL_CHECK_HDF5(H5Tset_ebias(type.get(), l.bias));
  return type;
}

datasets::FeatureDtype float_dtype_of(hid_t type) {
  if (H5Tget_class(type) != H5T_FLOAT || H5Tget_size(type) != 2)
    return datasets::FeatureDtype::float32;
  if (has_layout(type, kHalf)) return datasets::FeatureDtype::float16;
  if (has_layout(type, kBfloat)) return datasets::FeatureDtype::bfloat16;
  return datasets::FeatureDtype::float32;
}

datasets::FeatureDtype File::feature_dtype(const std::string& name) const {
  const hid_t dataset = open_dataset(name);
  Handle type(read_check(H5Dget_type(dataset), path_, "the type of dataset " + name));
  return float_dtype_of(type.get());
}

void File::write_rows_stored(const std::string& name, std::int64_t begin, const std::uint16_t* data,
                             std::int64_t rows) {
  if (rows == 0) return;
  const hid_t dataset = open_dataset(name);
  const auto dims = dataset_dims(*this, name, dataset);
  TESSEL_ASSERT(dims.size() == 2 && begin >= 0 && begin + rows <= dims[0],
                "{}: rows [{}, {}) outside dataset {} {}", path_.string(), begin, begin + rows,
                name, dims_string(dims));
  Handle type(TESSEL_CHECK_HDF5(H5Dget_type(dataset)));
  TESSEL_ASSERT(float_dtype_of(type.get()) != datasets::FeatureDtype::float32,
                "{}: {} is not a 16-bit float dataset", path_.string(), name);
  hsize_t start[2] = {static_cast<hsize_t>(begin), 0};
  hsize_t count[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(dims[1])};
  Handle file_space(TESSEL_CHECK_HDF5(H5Dget_space(dataset)));
  TESSEL_CHECK_HDF5(
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr));
  Handle mem_space(TESSEL_CHECK_HDF5(H5Screate_simple(2, count, nullptr)));
  if (H5Dwrite(dataset, type.get(), mem_space.get(), file_space.get(), H5P_DEFAULT, data) < 0)
    TESSEL_FAIL("cannot write {}: writing rows [{}, {}) of {} failed (disk full?)",
                datasets::output_name(path_).string(), begin, begin + rows, name);
}

void File::read_rows_stored(const std::string& name, std::int64_t begin, std::int64_t end,
                            std::vector<std::uint16_t>& out) const {
  const hid_t dataset = open_dataset(name);
  const auto shape = stored_dims(*this, name, dataset);
  Handle type(read_check(H5Dget_type(dataset), path_, "the type of dataset " + name));
  TESSEL_EXPECTS(shape.size() == 2 && float_dtype_of(type.get()) != datasets::FeatureDtype::float32,
                 "{}: dataset {} is not a 2-D 16-bit float dataset", path_.string(), name);
  TESSEL_EXPECTS(begin >= 0 && begin <= end && end <= shape[0],
                 "{}: rows [{}, {}) are outside dataset {} with {} rows", path_.string(), begin,
                 end, name, shape[0]);
  out.resize(static_cast<std::size_t>((end - begin) * shape[1]));
  if (out.empty()) return;
  hsize_t start[2] = {static_cast<hsize_t>(begin), 0};
  hsize_t count[2] = {static_cast<hsize_t>(end - begin), static_cast<hsize_t>(shape[1])};
  Handle file_space(TESSEL_CHECK_HDF5(H5Dget_space(dataset)));
  TESSEL_CHECK_HDF5(
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr));
  Handle mem_space(TESSEL_CHECK_HDF5(H5Screate_simple(2, count, nullptr)));
  if (H5Dread(dataset, type.get(), mem_space.get(), file_space.get(), H5P_DEFAULT, out.data()) < 0)
    TESSEL_FAIL("{}: reading rows [{}, {}) of {} failed (truncated or corrupt file?)",
                path_.string(), begin, end, name);
}

void File::read_widened(const std::string& name, hid_t dataset, datasets::FeatureDtype dtype,
                        std::int64_t begin, std::int64_t end, std::int64_t cols, float* out) const {
  (void)dataset;
  TESSEL_EXPECTS(cols > 0, "{}: dataset {} is a 16-bit float dataset that is not 2-D",
                 path_.string(), name);
  std::vector<std::uint16_t> stored;
  const std::int64_t block = widen_block_rows(cols);
  for (std::int64_t r = begin; r < end; r += block) {
    const std::int64_t stop = std::min(end, r + block);
    read_rows_stored(name, r, stop, stored);
    datasets::widen_features(stored.data(), out + (r - begin) * cols, (stop - r) * cols, dtype);
  }
}

#define TESSEL_H5_INSTANTIATE(T)                                                                   \
  template void File::create_dataset<T>(const std::string&, std::vector<std::int64_t>,             \
                                        const std::string&, std::int64_t, int);                    \
  template void File::write<T>(const std::string&, const T*, std::vector<std::int64_t>,            \
                               const std::string&, std::int64_t, int);                             \
  template void File::write_rows<T>(const std::string&, std::int64_t, const T*, std::int64_t);     \
  template std::vector<T> File::read<T>(const std::string&, std::vector<std::int64_t>) const;      \
  template void File::read_into<T>(const std::string&, T*, std::int64_t) const;                    \
  template void File::read_rows<T>(const std::string&, std::int64_t, std::int64_t,                 \
                                   std::vector<T>&) const;

TESSEL_H5_INSTANTIATE(float)
TESSEL_H5_INSTANTIATE(double)
TESSEL_H5_INSTANTIATE(std::int32_t)
TESSEL_H5_INSTANTIATE(std::int64_t)
TESSEL_H5_INSTANTIATE(std::uint8_t)
TESSEL_H5_INSTANTIATE(std::uint32_t)
TESSEL_H5_INSTANTIATE(std::uint64_t)

#undef TESSEL_H5_INSTANTIATE

} // namespace tessel::h5
