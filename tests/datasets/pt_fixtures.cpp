// .pt files built in the test the way torch.save writes them.
#include "pt_fixtures.hpp"

#include <zlib.h>

#include <cstring>
#include <fstream>

namespace tessel::test {

namespace {

void put(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void unicode(std::string& p, const std::string& s) {
  p.push_back('X');
  put(p, s.size(), 4);
  p += s;
}

void integer(std::string& p, std::int64_t v) {
  if (v >= 0 && v < 256) {
    p.push_back('K');
    put(p, static_cast<std::uint64_t>(v), 1);
  } else {
    p.push_back('J');
    put(p, static_cast<std::uint64_t>(v), 4);
  }
}

void int_tuple(std::string& p, const std::vector<std::int64_t>& values) {
  p.push_back('(');
  for (auto v : values)
    integer(p, v);
  p.push_back('t');
}

} // namespace

PtEntry pt_long(const std::string& key, std::vector<std::int64_t> shape,
                const std::vector<std::int64_t>& values) {
  PtEntry e;
  e.key = key;
  e.shape = std::move(shape);
  e.bytes.resize(values.size() * 8);
  std::memcpy(e.bytes.data(), values.data(), e.bytes.size());
  return e;
}

std::string pt_pickle(const std::vector<PtEntry>& entries) {
  std::string p = "\x80\x02}(";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const PtEntry& e = entries[i];
    const int item = e.storage_type == "LongStorage" || e.storage_type == "DoubleStorage" ? 8 : 4;
    unicode(p, e.key);
    p += "ctorch._utils\n_rebuild_tensor_v2\n((";
    unicode(p, "storage");
    p += "ctorch\n" + e.storage_type + "\n";
    unicode(p, std::to_string(i));
    unicode(p, "cpu");
    integer(p, static_cast<std::int64_t>(e.bytes.size()) / item);
    p += "tQ"; // the persistent id tuple, then BINPERSID
    integer(p, 0);
    int_tuple(p, e.shape);
    std::vector<std::int64_t> stride(e.shape.size(), 1);
    for (std::size_t d = e.shape.size(); d-- > 1;)
      stride[d - 1] = stride[d] * e.shape[d];
    int_tuple(p, stride);
    p += "\x89"
         "ccollections\nOrderedDict\n)Rt"
         "R";
  }
  p += "u.";
  return p;
}

void write_stored_zip(const std::filesystem::path& path,
                      const std::vector<std::pair<std::string, std::string>>& members) {
  std::string out, directory;
  for (const auto& [name, data] : members) {
    const auto crc = static_cast<std::uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
    const auto offset = out.size();
    std::string header;
    put(header, 0x04034b50, 4);
    put(header, 20, 2);
    put(header, 0, 2);
    put(header, 0, 2); // stored
    put(header, 0, 2);
    put(header, 0x21, 2);
    put(header, crc, 4);
    put(header, data.size(), 4);
    put(header, data.size(), 4);
    put(header, name.size(), 2);
    put(header, 0, 2);
    out += header + name + data;
    put(directory, 0x02014b50, 4);
    put(directory, 20, 2);
    put(directory, 20, 2);
    put(directory, 0, 2);
    put(directory, 0, 2);
    put(directory, 0, 2);
    put(directory, 0x21, 2);
    put(directory, crc, 4);
    put(directory, data.size(), 4);
    put(directory, data.size(), 4);
    put(directory, name.size(), 2);
    put(directory, 0, 2);
    put(directory, 0, 2);
    put(directory, 0, 2);
    put(directory, 0, 2);
    put(directory, 0, 4);
    put(directory, offset, 4);
    directory += name;
  }
  const auto cd_offset = out.size();
  out += directory;
  put(out, 0x06054b50, 4);
  put(out, 0, 4);
  put(out, members.size(), 2);
  put(out, members.size(), 2);
  put(out, directory.size(), 4);
  put(out, cd_offset, 4);
  put(out, 0, 2);
  std::ofstream(path, std::ios::binary) << out;
}

void write_pt(const std::filesystem::path& path, const std::vector<PtEntry>& entries,
              const std::string& pickle) {
  const std::string stem = path.stem().string();
  std::vector<std::pair<std::string, std::string>> members;
  members.emplace_back(stem + "/data.pkl", pickle.empty() ? pt_pickle(entries) : pickle);
  members.emplace_back(stem + "/byteorder", "little");
  for (std::size_t i = 0; i < entries.size(); ++i)
    members.emplace_back(stem + "/data/" + std::to_string(i), entries[i].bytes);
  members.emplace_back(stem + "/version", "3\n");
  write_stored_zip(path, members);
}

} // namespace tessel::test
