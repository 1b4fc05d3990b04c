// PyTorch .pt reader: the zip directory through NpzArchive, a small pickle machine for the
// opcodes torch.save writes for a dict of tensors, storages read and converted on demand.
#include "torch_pt.hpp"

#include "tessel/core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <type_traits>

namespace tessel::datasets::detail {

namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kMaxPickleBytes = std::int64_t{64} << 20; // a dict of tensors is tiny
constexpr std::size_t kMaxStack = 1u << 16;
constexpr std::size_t kMaxMemo = 1u << 20;

int itemsize(PtDtype d) {
  return d == PtDtype::int64 || d == PtDtype::float64 ? 8 : 4;
}

// One value on the pickle machine's stack or in its memo.
struct Value {
  enum class Kind {
    none,
    boolean,
    integer,
    string,
    tuple,
    list,
    dict,
    global,
    storage,
    tensor,
    mark
  };
  Kind kind = Kind::none;
  std::int64_t integer = 0;
  std::string text;                          // string; global "module.name"; storage key
  std::vector<std::shared_ptr<Value>> items; // tuple; dict as key, value, key, value...
  bool ordered_dict = false;                 // an empty collections.OrderedDict()
  PtDtype dtype = PtDtype::int64;            // storage
  PtTensorInfo tensor;                       // tensor
};
using ValuePtr = std::shared_ptr<Value>;

const char* kind_name(Value::Kind k) {
  switch (k) {
  case Value::Kind::none:
    return "None";
  case Value::Kind::boolean:
    return "a bool";
  case Value::Kind::integer:
    return "an int";
  case Value::Kind::string:
    return "a str";
  case Value::Kind::list:
    return "a list";
  case Value::Kind::tuple:
    return "a tuple";
  case Value::Kind::dict:
    return "a dict";
  case Value::Kind::global:
    return "a global";
  case Value::Kind::storage:
    return "a storage";
  case Value::Kind::tensor:
    return "a tensor";
  case Value::Kind::mark:
    return "a mark";
  }
  return "?";
}

ValuePtr make(Value::Kind kind) {
  auto v = std::make_shared<Value>();
  v->kind = kind;
  return v;
}

// Runs data.pkl; returns the object it builds.
class Unpickler {
public:
  // Runs the pickle that starts at bytes[start]; the caller keeps bytes alive.
  Unpickler(std::string where, std::span<const unsigned char> bytes, std::string prefix,
            std::size_t start = 0)
      : where_(std::move(where)), bytes_(bytes), prefix_(std::move(prefix)), pos_(start) {}
  // Offset just past the STOP opcode, once run() returned.
  std::size_t pos() const { return pos_; }

  ValuePtr run() {
    while (true) {
      const std::size_t at = pos_;
      const unsigned char op = byte();
      switch (op) {
      case 0x80: { // PROTO
        const int version = byte();
        expect(at, version == 2,
               fmt::format("pickle protocol {}, expected 2 (torch.save's)", version));
        break;
      }
      case '.': // STOP
        expect(at, stack_.size() == 1,
               fmt::format("pickle ends with {} values on the stack, expected one", stack_.size()));
        return stack_.back();
      case '(':
        push(make(Value::Kind::mark));
        break;
      case '}':
        push(make(Value::Kind::dict));
        break;
      case ']':
        push(make(Value::Kind::list));
        break;
      case 'a': { // APPEND
        auto value = pop(at);
        append(top(at), {value}, at);
        break;
      }
      case 'e': { // APPENDS
        auto items = pop_to_mark(at);
        append(top(at), items, at);
        break;
      }
      case ')':
        push(make(Value::Kind::tuple));
        break;
      case 'N':
        push(make(Value::Kind::none));
        break;
      case 0x88:   // NEWTRUE
      case 0x89: { // NEWFALSE
        auto v = make(Value::Kind::boolean);
        v->integer = op == 0x88;
        push(v);
        break;
      }
      case 'K':
        push_int(static_cast<std::int64_t>(le(1)));
        break;
      case 'M':
        push_int(static_cast<std::int64_t>(le(2)));
        break;
      case 'J':
        push_int(static_cast<std::int32_t>(static_cast<std::uint32_t>(le(4))));
        break;
      case 0x8a: { // LONG1: n little-endian two's-complement bytes
        const auto n = static_cast<int>(byte());
        expect(at, n <= 8, fmt::format("integer of {} bytes, expected at most 8", n));
        std::uint64_t u = le(n);
        if (n > 0 && n < 8 && (u >> (8 * n - 1)) & 1) u |= ~std::uint64_t{0} << (8 * n);
        push_int(static_cast<std::int64_t>(u));
        break;
      }
      case 'X': { // BINUNICODE
        const auto n = le(4);
        auto v = make(Value::Kind::string);
        v->text = take(n, at);
        push(v);
        break;
      }
      case 'c': { // GLOBAL module\nname\n
        auto v = make(Value::Kind::global);
        const std::string module = line(at); // two statements: the order matters
        v->text = module + "." + line(at);
        push(v);
        break;
      }
      case 'q':
        memo_put(le(1), at);
        break;
      case 'r':
        memo_put(le(4), at);
        break;
      case 'h':
        memo_get(le(1), at);
        break;
      case 'j':
        memo_get(le(4), at);
        break;
      case 0x85:
        tuple_of(1, at);
        break;
      case 0x86:
        tuple_of(2, at);
        break;
      case 0x87:
        tuple_of(3, at);
        break;
      case 't': {
        auto items = pop_to_mark(at);
        auto v = make(Value::Kind::tuple);
        v->items = std::move(items);
        push(v);
        break;
      }
      case 's': { // SETITEM
        auto value = pop(at);
        auto key = pop(at);
        set_items(top(at), {key, value}, at);
        break;
      }
      case 'u': { // SETITEMS
        auto items = pop_to_mark(at);
        expect(at, items.size() % 2 == 0, "SETITEMS with an odd number of values");
        set_items(top(at), items, at);
        break;
      }
      case 'Q': { // BINPERSID
        auto pid = pop(at);
        push(storage(pid, at));
        break;
      }
      case 'R': { // REDUCE
        auto args = pop(at);
        auto callable = pop(at);
        push(reduce(callable, args, at));
        break;
      }
      default:
        fail(at, fmt::format("pickle opcode 0x{:02x} is not supported (expected only the opcodes "
                             "torch.save writes for a dict of tensors)",
                             op));
      }
    }
  }

private:
  [[noreturn]] void fail(std::size_t at, const std::string& what) const {
    TESSEL_FAIL("{} byte {}: {}", where_, at, what);
  }
  void expect(std::size_t at, bool ok, const std::string& what) const {
    if (!ok) fail(at, what);
  }

  unsigned char byte() {
    if (pos_ >= bytes_.size()) fail(pos_, "pickle ends early (no STOP opcode)");
    return bytes_[pos_++];
  }
  std::uint64_t le(int n) {
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i)
      v |= static_cast<std::uint64_t>(byte()) << (8 * i);
    return v;
  }
  std::string take(std::uint64_t n, std::size_t at) {
    expect(at, n <= bytes_.size() - pos_, "string runs past the end of the pickle");
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return s;
  }
  std::string line(std::size_t at) {
    const auto* begin = bytes_.data() + pos_;
    const auto* nl =
        static_cast<const unsigned char*>(std::memchr(begin, '\n', bytes_.size() - pos_));
    expect(at, nl != nullptr && nl - begin < 256, "GLOBAL name without its newline");
    std::string s(reinterpret_cast<const char*>(begin), static_cast<std::size_t>(nl - begin));
    pos_ += s.size() + 1;
    return s;
  }

  void push(ValuePtr v) {
    if (stack_.size() >= kMaxStack) fail(pos_, "pickle stack too deep");
    stack_.push_back(std::move(v));
  }
  void push_int(std::int64_t i) {
    auto v = make(Value::Kind::integer);
    v->integer = i;
    push(v);
  }
  ValuePtr pop(std::size_t at) {
    expect(at, !stack_.empty() && stack_.back()->kind != Value::Kind::mark,
           "pickle pops an empty stack");
    auto v = stack_.back();
    stack_.pop_back();
    return v;
  }
  const ValuePtr& top(std::size_t at) {
    expect(at, !stack_.empty(), "pickle reads an empty stack");
    return stack_.back();
  }
  std::vector<ValuePtr> pop_to_mark(std::size_t at) {
    std::size_t mark = stack_.size();
    while (mark > 0 && stack_[mark - 1]->kind != Value::Kind::mark)
      --mark;
    expect(at, mark > 0, "pickle has no MARK to pop to");
    std::vector<ValuePtr> items(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark - 1);
    return items;
  }
  void tuple_of(std::size_t n, std::size_t at) {
    expect(at, stack_.size() >= n, "pickle builds a tuple from an empty stack");
    auto v = make(Value::Kind::tuple);
    for (std::size_t i = stack_.size() - n; i < stack_.size(); ++i) {
      expect(at, stack_[i]->kind != Value::Kind::mark, "pickle puts a MARK in a tuple");
      v->items.push_back(stack_[i]);
    }
    stack_.resize(stack_.size() - n);
    push(v);
  }
  void memo_put(std::uint64_t index, std::size_t at) {
    expect(at, index < kMaxMemo, "pickle memo index too large");
    if (memo_.size() <= index) memo_.resize(static_cast<std::size_t>(index) + 1);
    memo_[static_cast<std::size_t>(index)] = top(at);
  }
  void memo_get(std::uint64_t index, std::size_t at) {
    expect(at, index < memo_.size() && memo_[static_cast<std::size_t>(index)],
           fmt::format("pickle reads memo entry {}, which was never stored", index));
    push(memo_[static_cast<std::size_t>(index)]);
  }
  void append(const ValuePtr& list, const std::vector<ValuePtr>& items, std::size_t at) {
    expect(at, list->kind == Value::Kind::list,
           fmt::format("pickle appends to {}, expected a list", kind_name(list->kind)));
    list->items.insert(list->items.end(), items.begin(), items.end());
  }
  void set_items(const ValuePtr& dict, const std::vector<ValuePtr>& items, std::size_t at) {
    expect(at, dict->kind == Value::Kind::dict && !dict->ordered_dict,
           fmt::format("pickle sets items on {}, expected a dict", kind_name(dict->kind)));
    for (std::size_t i = 0; i < items.size(); i += 2) {
      expect(at, items[i]->kind == Value::Kind::string,
             fmt::format("dict key is {}, expected a str", kind_name(items[i]->kind)));
      dict->items.push_back(items[i]);
      dict->items.push_back(items[i + 1]);
    }
  }

  // ('storage', torch.<Type>Storage, key, location, numel) -> a storage of that dtype.
  ValuePtr storage(const ValuePtr& pid, std::size_t at) {
    const auto& t = pid->items;
    expect(at,
           pid->kind == Value::Kind::tuple && (t.size() == 5 || t.size() == 6) &&
               t[0]->kind == Value::Kind::string && t[0]->text == "storage" &&
               t[1]->kind == Value::Kind::global && t[2]->kind == Value::Kind::string &&
               t[3]->kind == Value::Kind::string && t[4]->kind == Value::Kind::integer,
           "persistent id is not ('storage', torch.<Type>Storage, key, location, size)");
    expect(at, t.size() == 5 || t[5]->kind == Value::Kind::none,
           "storage is a view of another storage (not supported in the legacy format)");
    static const std::map<std::string, PtDtype> kTypes = {
        {"torch.LongStorage", PtDtype::int64},
        {"torch.IntStorage", PtDtype::int32},
        {"torch.FloatStorage", PtDtype::float32},
        {"torch.DoubleStorage", PtDtype::float64}};
    const auto found = kTypes.find(t[1]->text);
    expect(at, found != kTypes.end(),
           fmt::format("storage type {} is not supported (expected torch.LongStorage, IntStorage, "
                       "FloatStorage or DoubleStorage: int64, int32, float32, float64)",
                       t[1]->text));
    expect(at, t[4]->integer >= 0, "storage size is negative");
    auto v = make(Value::Kind::storage);
    v->dtype = found->second;
    v->text = t[2]->text;
    v->integer = t[4]->integer;
    return v;
  }

  ValuePtr reduce(const ValuePtr& callable, const ValuePtr& args, std::size_t at) {
    expect(at, callable->kind == Value::Kind::global,
           fmt::format("pickle calls {}, expected a global", kind_name(callable->kind)));
    expect(at, args->kind == Value::Kind::tuple, "pickle calls a global without an argument tuple");
    if (callable->text == "collections.OrderedDict") {
      expect(at, args->items.empty(), "collections.OrderedDict called with arguments");
      auto v = make(Value::Kind::dict);
      v->ordered_dict = true; // a tensor's empty backward hooks
      return v;
    }
    expect(at, callable->text == "torch._utils._rebuild_tensor_v2",
           fmt::format("pickle calls {}, expected only torch._utils._rebuild_tensor_v2 (plain "
                       "tensors)",
                       callable->text));
    // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
    const auto& a = args->items;
    expect(at,
           (a.size() == 6 || a.size() == 7) && a[0]->kind == Value::Kind::storage &&
               a[1]->kind == Value::Kind::integer && a[2]->kind == Value::Kind::tuple &&
               a[3]->kind == Value::Kind::tuple && a[4]->kind == Value::Kind::boolean &&
               a[5]->kind == Value::Kind::dict,
           "_rebuild_tensor_v2 arguments are not (storage, offset, size, stride, requires_grad, "
           "hooks)");
    expect(at, a[5]->items.empty(), "tensor has backward hooks");
    expect(at,
           a.size() == 6 || a[6]->kind == Value::Kind::none ||
               (a[6]->kind == Value::Kind::dict && a[6]->items.empty()),
           "tensor carries metadata");
    auto v = make(Value::Kind::tensor);
    PtTensorInfo& t = v->tensor;
    t.dtype = a[0]->dtype;
    t.storage_key = a[0]->text;
    t.storage_member = prefix_ + "data/" + a[0]->text;
    t.storage_numel = a[0]->integer;
    t.storage_offset = a[1]->integer;
    expect(at, a[2]->items.size() == a[3]->items.size() && a[2]->items.size() <= 8,
           "tensor size and stride differ in rank (or rank above 8)");
    for (std::size_t i = 0; i < a[2]->items.size(); ++i) {
      const auto& d = a[2]->items[i];
      const auto& s = a[3]->items[i];
      expect(at, d->kind == Value::Kind::integer && s->kind == Value::Kind::integer,
             "tensor size or stride is not a tuple of ints");
      t.shape.push_back(d->integer);
      t.stride.push_back(s->integer);
    }
    return v;
  }

  std::string where_;
  std::span<const unsigned char> bytes_;
  std::string prefix_;
  std::size_t pos_ = 0;
  std::vector<ValuePtr> stack_;
  std::vector<ValuePtr> memo_;
};

// Largest element index a tensor touches, or -1 if it is empty; false if a size or stride is
// negative or the span overflows.
bool tensor_span(const PtTensorInfo& t, std::int64_t& last) {
  last = t.storage_offset;
  if (t.storage_offset < 0) return false;
  for (std::size_t i = 0; i < t.shape.size(); ++i) {
    if (t.shape[i] < 0 || t.stride[i] < 0) return false;
    if (t.shape[i] == 0) {
      last = -1;
      return true;
    }
    const std::int64_t step = t.shape[i] - 1;
    if (t.stride[i] != 0 && step > (std::numeric_limits<std::int64_t>::max() - last) / t.stride[i])
      return false;
    last += step * t.stride[i];
  }
  return true;
}

// The tensors of the root dict, each checked against its storage's size.
std::vector<PtTensorInfo> tensors_of(const std::string& file, const ValuePtr& root) {
  TESSEL_EXPECTS(root->kind == Value::Kind::dict && !root->ordered_dict,
                 "{}: holds {}, expected a dict of tensors", file, kind_name(root->kind));
  std::vector<PtTensorInfo> out;
  for (std::size_t i = 0; i < root->items.size(); i += 2) {
    const std::string& key = root->items[i]->text;
    const ValuePtr& value = root->items[i + 1];
    TESSEL_EXPECTS(value->kind == Value::Kind::tensor, "{}: \"{}\" is {}, expected a tensor", file,
                   key, kind_name(value->kind));
    TESSEL_EXPECTS(
        std::none_of(out.begin(), out.end(), [&](const PtTensorInfo& t) { return t.key == key; }),
        "{}: key \"{}\" appears twice", file, key);
    PtTensorInfo t = value->tensor;
    t.key = key;
    std::int64_t last = 0;
    TESSEL_EXPECTS(tensor_span(t, last) && last < t.storage_numel,
                   "{}: tensor \"{}\" ({}, offset {}) reaches past its storage of {} elements",
                   file, key, t.describe(), t.storage_offset, t.storage_numel);
    // More elements than the storage holds means overlapping views (stride 0, expand()):
    // refused, so that no tensor can ask for more memory than its storage takes.
    bool fits = true;
    for (std::size_t d = 0, count = 1; d < t.shape.size() && t.shape[d] != 0; ++d) {
      fits = static_cast<std::int64_t>(count) <= t.storage_numel / t.shape[d];
      if (!fits) break;
      count *= static_cast<std::size_t>(t.shape[d]);
    }
    TESSEL_EXPECTS(fits,
                   "{}: tensor \"{}\" ({}) has more elements than its storage of {} (an "
                   "expanded view); save it with .contiguous()",
                   file, key, t.describe(), t.storage_numel);
    TESSEL_EXPECTS(t.storage_numel <= std::numeric_limits<std::int64_t>::max() / 8,
                   "{}: tensor \"{}\": storage of {} elements is too large", file, key,
                   t.storage_numel);
    out.push_back(std::move(t));
  }
  return out;
}

// torch's legacy (pre-1.6) files start with the pickle of this magic number.
constexpr unsigned char kLegacyMagic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                          0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e};

} // namespace

const char* pt_dtype_name(PtDtype dtype) {
  switch (dtype) {
  case PtDtype::int64:
    return "int64";
  case PtDtype::int32:
    return "int32";
  case PtDtype::float32:
    return "float32";
  case PtDtype::float64:
    return "float64";
  }
  return "?";
}

std::int64_t PtTensorInfo::numel() const {
  std::int64_t n = 1;
  for (auto d : shape)
    n *= d;
  return n;
}

std::string PtTensorInfo::describe() const {
  std::string s = fmt::format("{} [", pt_dtype_name(dtype));
  for (std::size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

PtFile::PtFile(fs::path path) : path_(std::move(path)) {
  const std::string file = path_.string();
  std::error_code ec;
  TESSEL_EXPECTS(fs::is_regular_file(path_, ec), "{}: no such file", file);
  file_bytes_ = static_cast<std::int64_t>(fs::file_size(path_, ec));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path_.c_str(), "rb"), &std::fclose);
  TESSEL_EXPECTS(f != nullptr, "{}: cannot open: {}", file, std::strerror(errno));
  unsigned char head[sizeof kLegacyMagic] = {};
  const std::size_t got = std::fread(head, 1, sizeof head, f.get());
  f.reset();
  if (got >= 4 && std::memcmp(head, "PK\x03\x04", 4) == 0)
    open_zip();
  else if (got == sizeof head && std::memcmp(head, kLegacyMagic, sizeof head) == 0)
    open_legacy();
  else
    TESSEL_FAIL("{}: not a .pt file: expected the zip archive torch.save writes (PyTorch 1.6 "
                "and later) or its older legacy format",
                file);
}

void PtFile::open_zip() {
  const std::string file = path_.string();
  archive_ = std::make_unique<NpzArchive>(path_);
  // The pickle is <prefix>/data.pkl; torch names the prefix after the file it wrote.
  std::string pickle;
  for (const auto& name : archive_->member_names()) {
    const auto slash = name.find('/');
    if (slash != std::string::npos && name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      TESSEL_EXPECTS(pickle.empty(), "{}: two pickles ({} and {}), expected one data.pkl", file,
                     pickle, name);
      pickle = name;
    }
  }
  TESSEL_EXPECTS(!pickle.empty(),
                 "{}: no <name>/data.pkl member; expected a .pt file written by torch.save", file);
  const std::string prefix = pickle.substr(0, pickle.size() - std::strlen("data.pkl"));
  const std::int64_t pickle_bytes = archive_->member_bytes(pickle);
  TESSEL_EXPECTS(pickle_bytes <= kMaxPickleBytes,
                 "{}: {} is {} bytes, expected a small pickle of a dict of tensors", file, pickle,
                 pickle_bytes);
  std::vector<unsigned char> bytes(static_cast<std::size_t>(pickle_bytes));
  {
    auto member = archive_->open_member(pickle);
    member.read_raw(bytes.data(), bytes.size());
  }
  Unpickler unpickler(fmt::format("{} {}", file, pickle), bytes, prefix);
  tensors_ = tensors_of(file, unpickler.run());
  for (const auto& t : tensors_) {
    const std::int64_t member = archive_->member_bytes(t.storage_member);
    TESSEL_EXPECTS(member >= 0, "{}: tensor \"{}\" has no storage member {}", file, t.key,
                   t.storage_member);
    // torch.save stores storages uncompressed: a member larger than the file is refused before
    // anything is sized by it.
    TESSEL_EXPECTS(member <= file_bytes_,
                   "{}: {} claims {} bytes, more than the file's {} (torch.save stores storages "
                   "uncompressed)",
                   file, t.storage_member, member, file_bytes_);
    TESSEL_EXPECTS(member == t.storage_numel * itemsize(t.dtype),
                   "{}: {} holds {} bytes, but tensor \"{}\" needs a storage of {} {} elements "
                   "({} bytes)",
                   file, t.storage_member, member, t.key, t.storage_numel, pt_dtype_name(t.dtype),
                   t.storage_numel * itemsize(t.dtype));
  }
}

// The legacy format: five pickles (magic number, protocol version 1001, system info, the
// object, the list of storage keys), then each listed storage as its element count (int64)
// and its bytes.
void PtFile::open_legacy() {
  const std::string file = path_.string();
  std::vector<unsigned char> head(static_cast<std::size_t>(std::min(file_bytes_, kMaxPickleBytes)));
  {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path_.c_str(), "rb"),
                                                      &std::fclose);
    TESSEL_EXPECTS(f != nullptr && std::fread(head.data(), 1, head.size(), f.get()) == head.size(),
                   "{}: cannot read", file);
  }
  std::size_t pos = sizeof kLegacyMagic;
  const auto next = [&] {
    Unpickler unpickler(file, head, "", pos);
    ValuePtr v = unpickler.run();
    pos = unpickler.pos();
    return v;
  };
  const ValuePtr version = next();
  TESSEL_EXPECTS(version->kind == Value::Kind::integer && version->integer == 1001,
                 "{}: legacy format version is not 1001", file);
  const ValuePtr info = next();
  bool little = false;
  for (std::size_t i = 0; info->kind == Value::Kind::dict && i < info->items.size(); i += 2)
    if (info->items[i]->text == "little_endian")
      little = info->items[i + 1]->kind == Value::Kind::boolean && info->items[i + 1]->integer;
  TESSEL_EXPECTS(little, "{}: not written on a little-endian machine (legacy format)", file);
  tensors_ = tensors_of(file, next());
  const ValuePtr keys = next();
  TESSEL_EXPECTS(keys->kind == Value::Kind::list,
                 "{}: byte {}: the legacy format's storage list is {}, expected a list", file, pos,
                 kind_name(keys->kind));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path_.c_str(), "rb"), &std::fclose);
  TESSEL_EXPECTS(f != nullptr, "{}: cannot open: {}", file, std::strerror(errno));
  auto at = static_cast<std::int64_t>(pos);
  std::map<std::string, std::int64_t> offsets;
  for (const auto& key : keys->items) {
    const auto used = std::find_if(tensors_.begin(), tensors_.end(), [&](const PtTensorInfo& t) {
      return key->kind == Value::Kind::string && t.storage_key == key->text;
    });
    TESSEL_EXPECTS(used != tensors_.end(), "{}: byte {}: a listed storage that no tensor uses",
                   file, at);
    unsigned char count_bytes[8];
    TESSEL_EXPECTS(at + 8 <= file_bytes_ && fseeko(f.get(), at, SEEK_SET) == 0 &&
                       std::fread(count_bytes, 1, 8, f.get()) == 8,
                   "{}: truncated (storage {} should start at byte {})", file, key->text, at);
    std::int64_t count = 0;
    std::memcpy(&count, count_bytes, 8);
    TESSEL_EXPECTS(count == used->storage_numel,
                   "{}: byte {}: storage {} holds {} elements, but the pickle says {}", file, at,
                   key->text, count, used->storage_numel);
    const std::int64_t bytes = count * itemsize(used->dtype);
    TESSEL_EXPECTS(bytes <= file_bytes_ - at - 8,
                   "{}: truncated (storage {} needs {} bytes past byte {}, the file has {})", file,
                   key->text, bytes, at + 8, file_bytes_);
    offsets[key->text] = at + 8;
    at += 8 + bytes;
  }
  for (auto& t : tensors_) {
    const auto found = offsets.find(t.storage_key);
    TESSEL_EXPECTS(found != offsets.end(),
                   "{}: tensor \"{}\": its storage {} is not in the file's storage list", file,
                   t.key, t.storage_key);
    t.storage_file_offset = found->second;
  }
}

PtFile::~PtFile() = default;
PtFile::PtFile(PtFile&&) noexcept = default;
PtFile& PtFile::operator=(PtFile&&) noexcept = default;

bool PtFile::has(const std::string& key) const {
  return std::any_of(tensors_.begin(), tensors_.end(),
                     [&](const PtTensorInfo& t) { return t.key == key; });
}

std::vector<std::string> PtFile::keys() const {
  std::vector<std::string> out;
  for (const auto& t : tensors_)
    out.push_back(t.key);
  return out;
}

const PtTensorInfo& PtFile::info(const std::string& key) const {
  for (const auto& t : tensors_)
    if (t.key == key) return t;
  std::string have;
  for (const auto& t : tensors_)
    have += (have.empty() ? "" : ", ") + t.key;
  TESSEL_FAIL("{}: no tensor \"{}\" (the file holds: {})", path_.string(), key,
              have.empty() ? "nothing" : have);
}

template <class T> std::vector<T> PtFile::read_as(const PtTensorInfo& t) const {
  const std::int64_t n = t.numel();
  std::vector<T> out(static_cast<std::size_t>(n));
  if (n == 0) return out;
  // The whole storage is read, so that the member's CRC is checked (the span was checked on
  // open).
  const int size = itemsize(t.dtype);
  std::optional<NpzArchive::Array> member;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> legacy(nullptr, &std::fclose);
  if (t.storage_file_offset >= 0) {
    legacy.reset(std::fopen(path_.c_str(), "rb"));
    TESSEL_EXPECTS(legacy != nullptr && fseeko(legacy.get(), t.storage_file_offset, SEEK_SET) == 0,
                   "{}: cannot read tensor \"{}\"", path_.string(), t.key);
  } else {
    member.emplace(archive_->open_member(t.storage_member));
  }
  const auto read_raw = [&](void* out, std::size_t bytes) {
    if (member)
      member->read_raw(out, bytes);
    else if (std::fread(out, 1, bytes, legacy.get()) != bytes)
      TESSEL_FAIL("{}: tensor \"{}\": the file ends early", path_.string(), t.key);
  };
  const auto load_from = [&](const unsigned char* base, std::int64_t index) -> T {
    const unsigned char* p = base + index * size;
    switch (t.dtype) {
    case PtDtype::int64: {
      std::int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<T>(v);
    }
    case PtDtype::int32: {
      std::int32_t v;
      std::memcpy(&v, p, 4);
      return static_cast<T>(v);
    }
    case PtDtype::float32: {
      float v;
      std::memcpy(&v, p, 4);
      return static_cast<T>(v);
    }
    case PtDtype::float64: {
      double v;
      std::memcpy(&v, p, 8);
      return static_cast<T>(v);
    }
    }
    return T{};
  };
  // Contiguous (row-major strides): the storage streams through a small buffer straight into
  // the output, so peak memory is the output alone (citation2's negatives are 800 MB).
  bool contiguous = true;
  for (std::size_t d = t.shape.size(), step = 1; d-- > 0;) {
    if (t.shape[d] != 1 && t.stride[d] != static_cast<std::int64_t>(step)) contiguous = false;
    step *= static_cast<std::size_t>(t.shape[d]);
  }
  if (contiguous) {
    constexpr std::int64_t kBlock = std::int64_t{1} << 20; // elements per read
    std::vector<unsigned char> block(static_cast<std::size_t>(kBlock * size));
    const std::int64_t first = t.storage_offset, end = t.storage_offset + n;
    for (std::int64_t at = 0; at < t.storage_numel; at += kBlock) {
      const std::int64_t count = std::min(kBlock, t.storage_numel - at);
      read_raw(block.data(), static_cast<std::size_t>(count * size));
      for (std::int64_t i = std::max(at, first); i < std::min(at + count, end); ++i)
        out[static_cast<std::size_t>(i - first)] = load_from(block.data(), i - at);
    }
    return out;
  }
  std::vector<unsigned char> raw(static_cast<std::size_t>(t.storage_numel * size));
  read_raw(raw.data(), raw.size());
  const auto load = [&](std::int64_t index) { return load_from(raw.data(), index); };
  // Row-major walk of the index space; the element's storage index follows the strides.
  const std::size_t rank = t.shape.size();
  std::vector<std::int64_t> index(rank, 0);
  std::int64_t at = t.storage_offset;
  for (std::int64_t i = 0; i < n; ++i) {
    out[static_cast<std::size_t>(i)] = load(at);
    for (std::size_t d = rank; d-- > 0;) {
      if (++index[d] < t.shape[d]) {
        at += t.stride[d];
        break;
      }
      at -= (t.shape[d] - 1) * t.stride[d];
      index[d] = 0;
    }
  }
  return out;
}

std::vector<std::int64_t> PtFile::read_int64(const std::string& key) const {
  const PtTensorInfo& t = info(key);
  TESSEL_EXPECTS(t.dtype == PtDtype::int64 || t.dtype == PtDtype::int32,
                 "{}: tensor \"{}\" is {}, expected integers (int64)", path_.string(), key,
                 t.describe());
  return read_as<std::int64_t>(t);
}

std::vector<float> PtFile::read_float(const std::string& key) const {
  return read_as<float>(info(key));
}

} // namespace tessel::datasets::detail
