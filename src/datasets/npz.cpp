// Streaming reader and small writer for NumPy .npz archives (zip of .npy, zip64 aware).
#include "npz.hpp"

#include "tessel/core/error.hpp"
#include "tessel/datasets/atomic_output.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace tessel::datasets::detail {

namespace {

constexpr std::uint32_t kLocalHeaderSig = 0x04034b50;
constexpr std::uint32_t kCentralSig = 0x02014b50;
constexpr std::uint32_t kEndSig = 0x06054b50;
constexpr std::uint32_t kZip64EndSig = 0x06064b50;
constexpr std::uint32_t kZip64LocatorSig = 0x07064b50;

std::uint64_t le(const unsigned char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

void put(std::vector<unsigned char>& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}

void read_at(std::FILE* f, const std::filesystem::path& path, std::int64_t offset, void* out,
             std::size_t bytes) {
  if (fseeko(f, offset, SEEK_SET) != 0 || std::fread(out, 1, bytes, f) != bytes)
    TESSEL_FAIL("{}: truncated zip archive (cannot read {} bytes at offset {})", path.string(),
                bytes, offset);
}

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1f;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { // subnormal: normalize
      exp = 127 - 15 + 1;
      while (!(mant & 0x400u)) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Parses the Python dict literal of an .npy header.
NpyHeader parse_npy_dict(const std::string& text, const std::string& where) {
  NpyHeader h;
  const auto value_of = [&](const char* key) -> std::size_t {
    const auto pos = text.find(std::string("'") + key + "'");
    TESSEL_EXPECTS(pos != std::string::npos, "{}: .npy header has no '{}'", where, key);
    const auto colon = text.find(':', pos);
    TESSEL_EXPECTS(colon != std::string::npos, "{}: malformed .npy header", where);
    const auto value = text.find_first_not_of(' ', colon + 1);
    TESSEL_EXPECTS(value != std::string::npos, "{}: .npy header has no value for '{}'", where,
                   key);
    return value;
  };
  std::size_t p = value_of("descr");
  TESSEL_EXPECTS(p != std::string::npos && (text[p] == '\'' || text[p] == '"'),
                 "{}: .npy descr is not a simple dtype (structured arrays are not supported)",
                 where);
  const auto close = text.find(text[p], p + 1);
  const std::string descr = text.substr(p + 1, close - p - 1);
  TESSEL_EXPECTS(descr.size() >= 3, "{}: unknown dtype '{}'", where, descr);
  TESSEL_EXPECTS(descr[0] == '<' || descr[0] == '|' || (descr[0] == '>' && descr.substr(1) == "u1"),
                 "{}: dtype '{}' is big-endian; only little-endian arrays are supported", where,
                 descr);
  h.kind = descr[1];
  h.itemsize = std::atoi(descr.c_str() + 2);
  const bool ok = ((h.kind == 'i' || h.kind == 'u') &&
                   (h.itemsize == 1 || h.itemsize == 2 || h.itemsize == 4 || h.itemsize == 8)) ||
                  (h.kind == 'f' && (h.itemsize == 2 || h.itemsize == 4 || h.itemsize == 8)) ||
                  (h.kind == 'b' && h.itemsize == 1);
  TESSEL_EXPECTS(ok, "{}: dtype '{}' is not supported (integers, bool, float16/32/64 are)", where,
                 descr);
  p = value_of("fortran_order");
  h.fortran_order = text.compare(p, 4, "True") == 0;
  p = value_of("shape");
  TESSEL_EXPECTS(p != std::string::npos && text[p] == '(', "{}: malformed .npy shape", where);
  const auto end = text.find(')', p);
  TESSEL_EXPECTS(end != std::string::npos, "{}: malformed .npy shape", where);
  std::size_t q = p + 1;
  while (q < end) {
    while (q < end && (text[q] == ' ' || text[q] == ','))
      ++q;
    if (q >= end) break;
    std::int64_t d = 0;
    std::size_t digits = 0;
    while (q < end && text[q] >= '0' && text[q] <= '9') {
      d = d * 10 + (text[q++] - '0');
      ++digits;
    }
    TESSEL_EXPECTS(digits > 0 && digits < 18, "{}: malformed .npy shape", where);
    while (q < end && (text[q] == 'L' || text[q] == ' '))
      ++q; // Python 2 longs
    h.shape.push_back(d);
  }
  return h;
}

} // namespace

std::int64_t NpyHeader::count() const {
  std::int64_t n = 1;
  for (auto d : shape)
    n *= d;
  return n;
}

std::string NpyHeader::describe() const {
  const char* name = kind == 'f' ? "float" : kind == 'i' ? "int" : kind == 'u' ? "uint" : "bool";
  std::string s = kind == 'b' ? std::string("bool") : fmt::format("{}{}", name, itemsize * 8);
  s += " [";
  for (std::size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

NpzArchive::NpzArchive(std::filesystem::path path) : path_(std::move(path)) {
  std::error_code ec;
  TESSEL_EXPECTS(std::filesystem::is_regular_file(path_, ec), "{}: no such file", path_.string());
  file_bytes_ = static_cast<std::int64_t>(std::filesystem::file_size(path_, ec));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path_.c_str(), "rb"), &std::fclose);
  TESSEL_EXPECTS(f != nullptr, "{}: cannot open: {}", path_.string(), std::strerror(errno));
  const std::int64_t tail = std::min<std::int64_t>(file_bytes_, 22 + 65535);
  std::vector<unsigned char> buf(static_cast<std::size_t>(tail));
  read_at(f.get(), path_, file_bytes_ - tail, buf.data(), buf.size());
  std::int64_t eocd = -1;
  for (std::int64_t i = tail - 22; i >= 0; --i)
    if (le(&buf[static_cast<std::size_t>(i)], 4) == kEndSig) {
      eocd = i;
      break;
    }
  TESSEL_EXPECTS(eocd >= 0,
                 "{}: not a zip archive, or truncated (no end-of-central-directory record); "
                 ".npz (a zip of .npy arrays) and torch.save's .pt files are zip archives",
                 path_.string());
  const unsigned char* e = &buf[static_cast<std::size_t>(eocd)];
  std::uint64_t count = le(e + 10, 2), cd_size = le(e + 12, 4), cd_offset = le(e + 16, 4);
  if (count == 0xffff || cd_size == 0xffffffffu || cd_offset == 0xffffffffu) {
    const std::int64_t locator = file_bytes_ - tail + eocd - 20;
    TESSEL_EXPECTS(locator >= 0, "{}: zip64 archive without its locator (truncated?)",
                   path_.string());
    unsigned char loc[20];
    read_at(f.get(), path_, locator, loc, 20);
    TESSEL_EXPECTS(le(loc, 4) == kZip64LocatorSig, "{}: zip64 locator missing (corrupt archive)",
                   path_.string());
    const auto end64 = static_cast<std::int64_t>(le(loc + 8, 8));
    TESSEL_EXPECTS(end64 >= 0 && end64 + 56 <= file_bytes_, "{}: corrupt zip64 end record offset",
                   path_.string());
    unsigned char rec[56];
    read_at(f.get(), path_, end64, rec, 56);
    TESSEL_EXPECTS(le(rec, 4) == kZip64EndSig, "{}: zip64 end record missing (corrupt archive)",
                   path_.string());
    count = le(rec + 32, 8);
    cd_size = le(rec + 40, 8);
    cd_offset = le(rec + 48, 8);
  }
  // Compared without adding: a corrupt offset plus size can wrap around 2^64.
  const auto file_size = static_cast<std::uint64_t>(file_bytes_);
  TESSEL_EXPECTS(cd_size <= file_size && cd_offset <= file_size - cd_size && count < (1u << 20),
                 "{}: corrupt zip central directory", path_.string());
  std::vector<unsigned char> cd(static_cast<std::size_t>(cd_size));
  read_at(f.get(), path_, static_cast<std::int64_t>(cd_offset), cd.data(), cd.size());
  std::size_t p = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    TESSEL_EXPECTS(p + 46 <= cd.size() && le(&cd[p], 4) == kCentralSig,
                   "{}: corrupt zip central directory (entry {})", path_.string(), i);
    Entry entry;
    entry.flags = static_cast<std::uint16_t>(le(&cd[p + 8], 2));
    entry.method = static_cast<std::uint16_t>(le(&cd[p + 10], 2));
    entry.crc = static_cast<std::uint32_t>(le(&cd[p + 16], 4));
    std::uint64_t csize = le(&cd[p + 20], 4), usize = le(&cd[p + 24], 4);
    const std::size_t name_len = le(&cd[p + 28], 2), extra_len = le(&cd[p + 30], 2),
                      comment_len = le(&cd[p + 32], 2);
    std::uint64_t offset = le(&cd[p + 42], 4);
    TESSEL_EXPECTS(p + 46 + name_len + extra_len + comment_len <= cd.size(),
                   "{}: corrupt zip central directory (entry {})", path_.string(), i);
    entry.name.assign(reinterpret_cast<const char*>(&cd[p + 46]), name_len);
    // The zip64 extra field holds, in this order, only the fields whose 32-bit slots are full.
    std::size_t x = p + 46 + name_len;
    const std::size_t x_end = x + extra_len;
    while (x + 4 <= x_end) {
      const auto id = le(&cd[x], 2);
      const auto size = le(&cd[x + 2], 2);
      TESSEL_EXPECTS(x + 4 + size <= x_end,
                     "{}: corrupt zip central directory (entry {}: an extra field of {} bytes "
                     "overruns the entry's {} bytes of extra fields)",
                     path_.string(), i, size, extra_len);
      if (id == 0x0001) {
        std::size_t y = x + 4;
        const auto take = [&](std::uint64_t& field) {
          if (field == 0xffffffffu && y + 8 <= x + 4 + size) {
            field = le(&cd[y], 8);
            y += 8;
          }
        };
        take(usize);
        take(csize);
        take(offset);
      }
      x += 4 + size;
    }
    entry.compressed = static_cast<std::int64_t>(csize);
    entry.uncompressed = static_cast<std::int64_t>(usize);
    entry.header_offset = static_cast<std::int64_t>(offset);
    entries_.push_back(std::move(entry));
    p += 46 + name_len + extra_len + comment_len;
  }
}

const NpzArchive::Entry* NpzArchive::find(const std::string& key) const {
  for (const auto& e : entries_)
    if (e.name == key + ".npy" || e.name == key) return &e;
  return nullptr;
}

bool NpzArchive::has(const std::string& key) const {
  return find(key) != nullptr;
}

std::vector<std::string> NpzArchive::keys() const {
  std::vector<std::string> out;
  for (const auto& e : entries_) {
    std::string k = e.name;
    if (k.size() > 4 && k.compare(k.size() - 4, 4, ".npy") == 0) k.resize(k.size() - 4);
    out.push_back(k);
  }
  return out;
}

std::string NpzArchive::Array::where() const {
  return fmt::format("{} {} {}", path_.string(), kind_, key_);
}

std::vector<std::string> NpzArchive::member_names() const {
  std::vector<std::string> out;
  for (const auto& e : entries_)
    out.push_back(e.name);
  return out;
}

std::int64_t NpzArchive::member_bytes(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.name == name) return e.uncompressed;
  return -1;
}

NpzArchive::Array NpzArchive::open_member(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.name == name) return open_entry(e, name, "member");
  TESSEL_FAIL("{}: no member \"{}\" in the zip archive", path_.string(), name);
}

NpzArchive::Array NpzArchive::open_entry(const Entry& entry, const std::string& key,
                                          const char* kind) const {
  const Entry* e = &entry;
  Array a;
  a.path_ = path_;
  a.key_ = key;
  a.kind_ = kind;
  const std::string where = a.where();
  TESSEL_EXPECTS(!(e->flags & 1), "{}: encrypted zip members are not supported", where);
  TESSEL_EXPECTS(e->method == 0 || e->method == 8,
                 "{}: zip compression method {} is not supported (stored and deflate are)", where,
                 e->method);
  a.file_.reset(std::fopen(path_.c_str(), "rb"));
  TESSEL_EXPECTS(a.file_ != nullptr, "{}: cannot open: {}", path_.string(), std::strerror(errno));
  unsigned char local[30];
  read_at(a.file_.get(), path_, e->header_offset, local, 30);
  TESSEL_EXPECTS(le(local, 4) == kLocalHeaderSig, "{}: corrupt zip member header", where);
  const std::int64_t data = e->header_offset + 30 + static_cast<std::int64_t>(le(local + 26, 2)) +
                            static_cast<std::int64_t>(le(local + 28, 2));
  TESSEL_EXPECTS(data + e->compressed <= file_bytes_,
                 "{}: truncated archive (member needs {} bytes past offset {}, file has {})", where,
                 e->compressed, data, file_bytes_);
  if (fseeko(a.file_.get(), data, SEEK_SET) != 0) TESSEL_FAIL("{}: cannot seek", where);
  a.compressed_left_ = e->compressed;
  a.uncompressed_left_ = e->uncompressed;
  a.expect_crc_ = e->crc;
  a.crc_ = static_cast<std::uint32_t>(crc32(0L, Z_NULL, 0));
  if (e->method == 8) {
    a.zs_.reset(new z_stream{});
    if (inflateInit2(a.zs_.get(), -15) != Z_OK) {
      delete a.zs_.release();
      TESSEL_LIB_FAIL("{}: zlib inflateInit2 failed", where);
    }
    a.input_.resize(1u << 20);
  }
  return a;
}

NpzArchive::Array NpzArchive::open(const std::string& key) const {
  const Entry* e = find(key);
  if (!e) {
    std::string have;
    for (const auto& k : keys())
      have += (have.empty() ? "" : ", ") + k;
    TESSEL_FAIL("{}: no array \"{}\" (the archive holds: {})", path_.string(), key,
                have.empty() ? "nothing" : have);
  }
  Array a = open_entry(*e, key, "array");
  const std::string where = a.where();
  // The .npy header: magic, version, header length (2 or 4 bytes), dict text.
  unsigned char pre[10];
  a.read_bytes(pre, 10);
  TESSEL_EXPECTS(std::memcmp(pre, "\x93NUMPY", 6) == 0, "{}: not an .npy array (bad magic)", where);
  std::size_t header_len = le(pre + 8, 2);
  if (pre[6] >= 2) {
    unsigned char more[2];
    a.read_bytes(more, 2);
    header_len = static_cast<std::size_t>(le(pre + 8, 2) | (le(more, 2) << 16));
  }
  TESSEL_EXPECTS(header_len < (1u << 20), "{}: .npy header too long", where);
  std::string text(header_len, '\0');
  a.read_bytes(text.data(), header_len);
  a.header_ = parse_npy_dict(text, where);
  const std::int64_t need = a.header_.count() * a.header_.itemsize;
  TESSEL_EXPECTS(a.uncompressed_left_ == need,
                 "{}: holds {} bytes of data, but its header ({}) needs {}", where,
                 a.uncompressed_left_, a.header_.describe(), need);
  a.bytes_read_ = 0;
  return a;
}

void NpzArchive::Array::read_bytes(void* out, std::size_t bytes) {
  if (bytes == 0) return;
  TESSEL_EXPECTS(static_cast<std::int64_t>(bytes) <= uncompressed_left_,
                 "{}: member ends early (truncated or corrupt archive)", where());
  auto* dst = static_cast<unsigned char*>(out);
  if (!zs_) {
    if (std::fread(dst, 1, bytes, file_.get()) != bytes)
      TESSEL_FAIL("{}: truncated archive (read failed)", where());
    compressed_left_ -= static_cast<std::int64_t>(bytes);
  } else {
    std::size_t done = 0;
    while (done < bytes) {
      if (zs_->avail_in == 0) {
        const auto want = static_cast<std::size_t>(
            std::min<std::int64_t>(compressed_left_, static_cast<std::int64_t>(input_.size())));
        TESSEL_EXPECTS(want > 0, "{}: compressed data ends early (truncated archive)", where());
        if (std::fread(input_.data(), 1, want, file_.get()) != want)
          TESSEL_FAIL("{}: truncated archive (read failed)", where());
        compressed_left_ -= static_cast<std::int64_t>(want);
        zs_->next_in = input_.data();
        zs_->avail_in = static_cast<uInt>(want);
      }
      const std::size_t step = std::min<std::size_t>(bytes - done, 1u << 30);
      zs_->next_out = dst + done;
      zs_->avail_out = static_cast<uInt>(step);
      const int rc = inflate(zs_.get(), Z_NO_FLUSH);
      done += step - zs_->avail_out;
      if (rc == Z_STREAM_END) {
        TESSEL_EXPECTS(done == bytes, "{}: compressed data ends early (corrupt archive)", where());
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        TESSEL_FAIL("{}: corrupt deflate data ({})", where(),
                    zs_->msg ? zs_->msg : "invalid stream");
      }
    }
  }
  for (std::size_t off = 0; off < bytes; off += 1u << 30) {
    const auto n = static_cast<uInt>(std::min<std::size_t>(bytes - off, 1u << 30));
    crc_ = static_cast<std::uint32_t>(crc32(crc_, dst + off, n));
  }
  uncompressed_left_ -= static_cast<std::int64_t>(bytes);
  bytes_read_ += static_cast<std::int64_t>(bytes);
  if (uncompressed_left_ == 0)
    TESSEL_EXPECTS(crc_ == expect_crc_, "{}: CRC mismatch (corrupt archive)", where());
}

template <class T> void NpzArchive::Array::read(T* out, std::int64_t count) {
  static_assert(std::is_same_v<T, std::int64_t> || std::is_same_v<T, float> ||
                std::is_same_v<T, double>);
  const NpyHeader& h = header_;
  if constexpr (std::is_same_v<T, std::int64_t>)
    TESSEL_EXPECTS(h.kind != 'f', "{}: holds {}, expected integers", where(), h.describe());
  const std::int64_t block = std::max<std::int64_t>(1, (4 << 20) / h.itemsize);
  for (std::int64_t done = 0; done < count;) {
    const std::int64_t n = std::min(block, count - done);
    convert_.resize(static_cast<std::size_t>(n * h.itemsize));
    read_bytes(convert_.data(), convert_.size());
    const unsigned char* src = convert_.data();
    T* dst = out + done;
    const auto load = [&](auto tag) {
      using S = decltype(tag);
      for (std::int64_t i = 0; i < n; ++i) {
        S s;
        std::memcpy(&s, src + i * static_cast<std::int64_t>(sizeof(S)), sizeof(S));
        if constexpr (std::is_same_v<T, std::int64_t> && std::is_same_v<S, std::uint64_t>)
          TESSEL_EXPECTS(s <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
                         "{}: element {} = {} does not fit in int64", where(), done + i, s);
        dst[i] = static_cast<T>(s);
      }
    };
    switch (h.kind) {
    case 'b':
    case 'u':
      if (h.itemsize == 1)
        load(std::uint8_t{});
      else if (h.itemsize == 2)
        load(std::uint16_t{});
      else if (h.itemsize == 4)
        load(std::uint32_t{});
      else
        load(std::uint64_t{});
      break;
    case 'i':
      if (h.itemsize == 1)
        load(std::int8_t{});
      else if (h.itemsize == 2)
        load(std::int16_t{});
      else if (h.itemsize == 4)
        load(std::int32_t{});
      else
        load(std::int64_t{});
      break;
    case 'f':
      if constexpr (!std::is_same_v<T, std::int64_t>) {
        if (h.itemsize == 2) {
          for (std::int64_t i = 0; i < n; ++i) {
            std::uint16_t bits;
            std::memcpy(&bits, src + 2 * i, 2);
            dst[i] = static_cast<T>(half_to_float(bits));
          }
        } else if (h.itemsize == 4) {
          load(float{});
        } else {
          load(double{});
        }
      }
      break;
    default:
      break;
    }
    done += n;
  }
}

template void NpzArchive::Array::read<std::int64_t>(std::int64_t*, std::int64_t);
template void NpzArchive::Array::read<float>(float*, std::int64_t);
template void NpzArchive::Array::read<double>(double*, std::int64_t);

namespace {

// The .npy v1 header of an array, padded with spaces so the data starts at a multiple of 64
// bytes.
std::vector<unsigned char> npy_header(const NpyArrayData& a) {
  std::string dict = "{'descr': '" + a.descr + "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < a.shape.size(); ++i)
    dict += std::to_string(a.shape[i]) +
            (a.shape.size() == 1 || i + 1 < a.shape.size() ? "," : "") +
            (i + 1 < a.shape.size() ? " " : "");
  dict += "), }";
  while ((10 + dict.size() + 1) % 64 != 0)
    dict += ' ';
  dict += '\n';
  std::vector<unsigned char> header = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  put(header, dict.size(), 2);
  header.insert(header.end(), dict.begin(), dict.end());
  return header;
}

// The CRC-32 of an entry: its .npy header, then its data.
std::uint32_t entry_crc(const std::vector<unsigned char>& header, const NpyArrayData& a) {
  auto crc = static_cast<std::uint32_t>(crc32(0L, Z_NULL, 0));
  crc = static_cast<std::uint32_t>(crc32(crc, header.data(), static_cast<uInt>(header.size())));
  const auto* bytes = static_cast<const unsigned char*>(a.data);
  for (std::size_t off = 0; off < a.bytes; off += 1u << 30)
    crc = static_cast<std::uint32_t>(
        crc32(crc, bytes + off, static_cast<uInt>(std::min<std::size_t>(a.bytes - off, 1u << 30))));
  return crc;
}

// One archive being written: each array an entry (local header, then the stored or deflated
// .npy), then the central directory and the end records.
class NpzWriter {
public:
  NpzWriter(const std::filesystem::path& path, bool compress, bool zip64)
      : path_(path), f_(std::fopen(path.c_str(), "wb"), &std::fclose), compress_(compress),
        zip64_(zip64) {
    TESSEL_EXPECTS(f_ != nullptr, "cannot create {}: {}", path.string(), std::strerror(errno));
  }

  void add(const NpyArrayData& a) {
    const std::vector<unsigned char> header = npy_header(a);
    Written w;
    w.name = a.key + ".npy";
    w.offset = static_cast<std::uint64_t>(ftello(f_.get()));
    w.usize = header.size() + a.bytes;
    w.crc = entry_crc(header, a);
    // Local header with placeholders, patched once the compressed size is known.
    auto lh = local_header(w, 0);
    write(lh.data(), lh.size());
    if (!compress_) {
      write(header.data(), header.size());
      write(a.data, a.bytes);
      w.csize = w.usize;
    } else {
      w.csize = write_deflated(header, a);
    }
    const auto end = ftello(f_.get());
    lh = local_header(w, w.csize);
    fseeko(f_.get(), static_cast<off_t>(w.offset), SEEK_SET);
    write(lh.data(), lh.size());
    fseeko(f_.get(), end, SEEK_SET);
    TESSEL_EXPECTS(zip64_ || (w.csize < 0xffffffffu && w.offset < 0xffffffffu),
                   "{}: archive exceeds 4 GiB; write it with zip64", path_.string());
    written_.push_back(w);
  }

  // The central directory and the end records, then the flush.
  void finish() {
    const auto cd_offset = static_cast<std::uint64_t>(ftello(f_.get()));
    const std::vector<unsigned char> cd = central_directory();
    write(cd.data(), cd.size());
    const std::vector<unsigned char> tail = end_records(cd.size(), cd_offset);
    write(tail.data(), tail.size());
    TESSEL_EXPECTS(std::fflush(f_.get()) == 0, "writing {} failed (disk full?)",
                   output_name(path_).string());
  }

private:
  struct Written {
    std::string name;
    std::uint32_t crc;
    std::uint64_t csize, usize, offset;
  };

  void write(const void* data, std::size_t bytes) {
    if (bytes && std::fwrite(data, 1, bytes, f_.get()) != bytes)
      TESSEL_FAIL("writing {} failed (disk full?)", output_name(path_).string());
  }

  std::vector<unsigned char> local_header(const Written& w, std::uint64_t csize) const {
    std::vector<unsigned char> h;
    put(h, kLocalHeaderSig, 4);
    put(h, zip64_ ? 45 : 20, 2);
    put(h, 0, 2);
    put(h, compress_ ? 8 : 0, 2);
    put(h, 0, 2);
    put(h, 0x21, 2); // 1980-01-01: fixed so archives are reproducible
    put(h, w.crc, 4);
    put(h, zip64_ ? 0xffffffffu : csize, 4);
    put(h, zip64_ ? 0xffffffffu : w.usize, 4);
    put(h, w.name.size(), 2);
    put(h, zip64_ ? 20 : 0, 2);
    h.insert(h.end(), w.name.begin(), w.name.end());
    if (zip64_) {
      put(h, 0x0001, 2);
      put(h, 16, 2);
      put(h, w.usize, 8);
      put(h, csize, 8);
    }
    return h;
  }

  // Deflates the .npy header and data into the file; returns the compressed size.
  std::uint64_t write_deflated(const std::vector<unsigned char>& header, const NpyArrayData& a) {
    z_stream zs{};
    TESSEL_EXPECTS(deflateInit2(&zs, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK,
                   "zlib deflateInit2 failed");
    std::vector<unsigned char> out(1u << 20);
    std::uint64_t csize = 0;
    const auto* bytes = static_cast<const unsigned char*>(a.data);
    pump(zs, out, csize, header.data(), header.size(), Z_NO_FLUSH);
    for (std::size_t off = 0; off < a.bytes; off += 1u << 28)
      pump(zs, out, csize, bytes + off, std::min<std::size_t>(a.bytes - off, 1u << 28), Z_NO_FLUSH);
    pump(zs, out, csize, nullptr, 0, Z_FINISH);
    deflateEnd(&zs);
    return csize;
  }

  // Feeds n bytes to the deflate stream and writes what it makes through `out`.
  void pump(z_stream& zs, std::vector<unsigned char>& out, std::uint64_t& csize,
            const unsigned char* data, std::size_t n, int flush) {
    zs.next_in = const_cast<unsigned char*>(data);
    zs.avail_in = static_cast<uInt>(n);
    int rc;
    do {
      zs.next_out = out.data();
      zs.avail_out = static_cast<uInt>(out.size());
      rc = deflate(&zs, flush);
      const std::size_t made = out.size() - zs.avail_out;
      write(out.data(), made);
      csize += made;
    } while (zs.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
  }

  std::vector<unsigned char> central_directory() const {
    std::vector<unsigned char> cd;
    for (const auto& w : written_) {
      put(cd, kCentralSig, 4);
      put(cd, zip64_ ? 45 : 20, 2); // made by
      put(cd, zip64_ ? 45 : 20, 2); // needed
      put(cd, 0, 2);
      put(cd, compress_ ? 8 : 0, 2);
      put(cd, 0, 2);
      put(cd, 0x21, 2);
      put(cd, w.crc, 4);
      put(cd, zip64_ ? 0xffffffffu : w.csize, 4);
      put(cd, zip64_ ? 0xffffffffu : w.usize, 4);
      put(cd, w.name.size(), 2);
      put(cd, zip64_ ? 28 : 0, 2);
      put(cd, 0, 2); // comment
      put(cd, 0, 2); // disk
      put(cd, 0, 2); // internal attributes
      put(cd, 0, 4); // external attributes
      put(cd, zip64_ ? 0xffffffffu : w.offset, 4);
      cd.insert(cd.end(), w.name.begin(), w.name.end());
      if (zip64_) {
        put(cd, 0x0001, 2);
        put(cd, 24, 2);
        put(cd, w.usize, 8);
        put(cd, w.csize, 8);
        put(cd, w.offset, 8);
      }
    }
    return cd;
  }

  // The zip64 end record and locator (with zip64), then the end of central directory record.
  std::vector<unsigned char> end_records(std::uint64_t cd_size, std::uint64_t cd_offset) const {
    std::vector<unsigned char> tail;
    if (zip64_) {
      const auto end64 = static_cast<std::uint64_t>(ftello(f_.get()));
      put(tail, kZip64EndSig, 4);
      put(tail, 44, 8);
      put(tail, 45, 2);
      put(tail, 45, 2);
      put(tail, 0, 4);
      put(tail, 0, 4);
      put(tail, written_.size(), 8);
      put(tail, written_.size(), 8);
      put(tail, cd_size, 8);
      put(tail, cd_offset, 8);
      put(tail, kZip64LocatorSig, 4);
      put(tail, 0, 4);
      put(tail, end64, 8);
      put(tail, 1, 4);
    }
    put(tail, kEndSig, 4);
    put(tail, 0, 2);
    put(tail, 0, 2);
    put(tail, zip64_ ? 0xffff : written_.size(), 2);
    put(tail, zip64_ ? 0xffff : written_.size(), 2);
    put(tail, zip64_ ? 0xffffffffu : cd_size, 4);
    put(tail, zip64_ ? 0xffffffffu : cd_offset, 4);
    put(tail, 0, 2);
    return tail;
  }

  const std::filesystem::path& path_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f_;
  bool compress_, zip64_;
  std::vector<Written> written_;
};

} // namespace

void write_npz(const std::filesystem::path& path, const std::vector<NpyArrayData>& arrays,
               bool compress, bool zip64) {
  NpzWriter writer(path, compress, zip64);
  for (const auto& a : arrays)
    writer.add(a);
  writer.finish();
}

} // namespace tessel::datasets::detail
