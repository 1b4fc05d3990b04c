// Checkpoint files: one HDF5 file per checkpoint directory, replaced atomically.
#include "tessel/train/checkpoint.hpp"

#include "tessel/core/error.hpp"
#include "tessel/datasets/atomic_output.hpp"
#include "tessel/datasets/dataset_checksums.hpp"
#include "tessel/datasets/h5.hpp"
#include "tessel/train/train.hpp"

#include <fmt/ranges.h>

#include <cmath>
#include <filesystem>

namespace tessel::train {
namespace fs = std::filesystem;

namespace {

// Writes a tensor with its own checksum, so damage behind a wiped whole-file header is still
// caught on load.
template <class T>
void write_values(h5::File& file, const std::string& name, const T* values,
                  const std::vector<std::int64_t>& dims, const std::string& description) {
  file.write(name, values, dims, description);
  std::size_t count = 1;
  for (const std::int64_t d : dims) count *= static_cast<std::size_t>(d);
  h5::set_dataset_checksum(file, name, values, count * sizeof(T));
}

void write_tensor(h5::File& file, const std::string& name, const Tensor& t) {
  const Tensor host = t.device().is_cpu() ? t : t.to(Device::cpu());
  std::vector<std::int64_t> dims = host.shape();
  switch (host.dtype()) {
    case DType::f32: write_values(file, name, host.data<float>(), dims, "f32 tensor"); break;
    case DType::f64: write_values(file, name, host.data<double>(), dims, "f64 tensor"); break;
    case DType::i64: write_values(file, name, host.data<std::int64_t>(), dims, "i64 tensor"); break;
    case DType::i32: write_values(file, name, host.data<std::int32_t>(), dims, "i32 tensor"); break;
    default: TESSEL_FAIL("checkpoint: cannot store a {} tensor ({})", dtype_name(host.dtype()), name);
  }
}

template <class T>
void read_into(const h5::File& file, const std::string& name, Tensor& t) {
  const auto values = file.read<T>(name, t.shape());
  h5::verify_dataset_checksum(file, name, values.data(), values.size() * sizeof(T));
  Tensor host = Tensor::empty(t.shape(), t.dtype());
  std::copy(values.begin(), values.end(), host.data<T>());
  t.copy_from(host);
}

void read_tensor(const h5::File& file, const std::string& name, Tensor& t) {
  switch (t.dtype()) {
    case DType::f32: read_into<float>(file, name, t); break;
    case DType::f64: read_into<double>(file, name, t); break;
    case DType::i64: read_into<std::int64_t>(file, name, t); break;
    case DType::i32: read_into<std::int32_t>(file, name, t); break;
    default: TESSEL_FAIL("checkpoint: cannot load a {} tensor ({})", dtype_name(t.dtype()), name);
  }
}

}  // namespace

void save_checkpoint(const fs::path& dir, const CheckpointMeta& meta, nn::Model& model,
                     nn::Optimizer& optimizer) {
  save_checkpoint(dir, meta, model.parameters(), optimizer);
}

CheckpointMeta load_checkpoint(const fs::path& dir, const CheckpointMeta& expect, nn::Model& model,
                               nn::Optimizer& optimizer) {
  return load_checkpoint(dir, expect, model.parameters(), optimizer);
}

void save_checkpoint(const fs::path& dir, const CheckpointMeta& meta,
                     const std::vector<nn::Parameter*>& params, nn::Optimizer& optimizer,
                     const std::string& file_name) {
  std::error_code ec;
  // A link is refused, never followed: the folder is opened with O_NOFOLLOW below too, so a link
  // made after this check is refused as well.
  TESSEL_EXPECTS(!fs::is_symlink(dir.has_filename() ? dir : dir.parent_path(), ec),
                 "--checkpoint {}: is a symbolic link; give the folder itself", dir.string());
  const bool existed = fs::exists(dir, ec);
  TESSEL_EXPECTS(!existed || fs::is_directory(dir, ec),
                 "--checkpoint {}: exists and is not a folder", dir.string());
  fs::create_directories(dir, ec);
  TESSEL_EXPECTS(!ec, "cannot create checkpoint folder {}: {}", dir.string(), ec.message());
  // A first checkpoint that fails (a full disk) leaves no empty folder behind.
  struct RemoveIfFailed {
    const fs::path& dir;
    bool armed;
    ~RemoveIfFailed() {
      std::error_code ignored;
      if (armed) fs::remove(dir, ignored);  // only if still empty
    }
  } cleanup{dir, !existed};
  datasets::AtomicOutput output(dir / file_name, false, datasets::AtomicOutput::FolderLink::refuse);
  {
    h5::File file = h5::File::create(output.temp_path());
    file.set_attr("format", std::string(kCheckpointFormat));
    file.set_attr("version", static_cast<std::int64_t>(kCheckpointVersion));
    file.set_attr("epoch", static_cast<std::int64_t>(meta.epoch));
    file.set_attr("seed", static_cast<std::int64_t>(meta.seed));
    file.set_attr("model", meta.model_json);
    file.set_attr("mode", meta.mode);
    file.set_attr("best_valid_acc", meta.best_valid_acc);
    file.set_attr("test_acc_at_best", meta.test_acc_at_best);
    file.set_attr("best_epoch", static_cast<std::int64_t>(meta.best_epoch));
    file.set_attr("time_to_target_s", meta.time_to_target_s);
    file.set_attr("wall_s", meta.wall_s);
    h5::mark_dataset_checksums(file);
    for (const auto& [name, value] : meta.kept_at_best)
      file.set_attr(name + "_at_best", value);
    file.create_group("/params");
    std::string names;
    for (nn::Parameter* p : params) {
      write_tensor(file, "/params/" + p->name, p->value);
      names += (names.empty() ? "" : ",") + p->name;
    }
    // Lets tools list the parameters without walking the group.
    file.set_attr("parameters", names);
    file.create_group("/optimizer");
    // Optimizer state is created lazily (no moments before the first step), so the file lists
    // what it holds: "name:dtype" entries, comma-separated.
    std::string entries;
    for (const auto& [name, t] : optimizer.state()) {
      write_tensor(file, "/optimizer/" + name, t);
      entries += fmt::format("{}{}:{}", entries.empty() ? "" : ",", name, dtype_name(t.dtype()));
    }
    file.set_attr("optimizer_state", entries);
    file.close();
  }
  output.commit();
  cleanup.armed = false;
}

CheckpointMeta load_checkpoint(const fs::path& dir, const CheckpointMeta& expect,
                               const std::vector<nn::Parameter*>& params, nn::Optimizer& optimizer,
                               const std::string& file_name) {
  const fs::path path = dir / file_name;
  TESSEL_EXPECTS(fs::exists(path), "{}: no checkpoint to resume from", path.string());
  h5::File file = h5::File::open_read(path);
  TESSEL_EXPECTS(file.has_attr("format") && file.attr_string("format") == kCheckpointFormat,
                 "{}: not a Tessel checkpoint", path.string());
  const auto version = file.attr_int("version");
  TESSEL_EXPECTS(version == 1 || version == kCheckpointVersion,
                 "{}: checkpoint version {}, this Tessel reads 1 and {}", path.string(), version,
                 kCheckpointVersion);
  CheckpointMeta meta;
  const std::int64_t epoch = file.attr_int("epoch");
  TESSEL_EXPECTS(epoch >= 1 && epoch <= kMaxEpochs,
                 "{}: epoch = {} is outside [1, {}] (a checkpoint follows a completed epoch)",
                 path.string(), epoch, kMaxEpochs);
  meta.epoch = static_cast<int>(epoch);
  meta.seed = static_cast<std::uint64_t>(file.attr_int("seed"));
  meta.model_json = file.attr_string("model");
  meta.mode = file.attr_string("mode");
  TESSEL_EXPECTS(meta.model_json == expect.model_json,
                 "{}: checkpoint was written for model {}, but this run builds {}", path.string(),
                 meta.model_json, expect.model_json);
  TESSEL_EXPECTS(meta.mode == expect.mode, "{}: checkpoint is from mode {}, this run is mode {}",
                 path.string(), meta.mode, expect.mode);
  // Dropout masks and samples are keyed by the seed: another seed would not continue the
  // trajectory the checkpoint belongs to.
  TESSEL_EXPECTS(meta.seed == expect.seed,
                 "{}: checkpoint was written with --seed {}, this run has --seed {} (resume with "
                 "--seed {})",
                 path.string(), meta.seed, expect.seed, meta.seed);
  if (version >= 2) {
    auto number = [&](const char* name, double lo, double hi) {
      const double value = file.attr_double(name);
      TESSEL_EXPECTS(std::isfinite(value) && value >= lo && value <= hi,
                     "{}: {} = {} is outside [{}, {}]", path.string(), name, value, lo, hi);
      return value;
    };
    // The mode's validation metric: an accuracy or an AUC in [0, 1], an MSE unbounded.
    const double metric_max = expect.metric_max;
    meta.best_valid_acc = number("best_valid_acc", 0, metric_max);
    meta.test_acc_at_best = number("test_acc_at_best", 0, metric_max);
    for (const auto& [name, value] : expect.kept_at_best)
      if (const std::string attr = name + "_at_best"; file.has_attr(attr))
        meta.kept_at_best[name] = number(attr.c_str(), 0, 1);
    meta.best_epoch = static_cast<int>(number("best_epoch", 0, static_cast<double>(meta.epoch)));
    meta.wall_s = number("wall_s", 0, 1e12);
    meta.time_to_target_s = number("time_to_target_s", -1, meta.wall_s);
    TESSEL_EXPECTS(meta.time_to_target_s == -1 || meta.time_to_target_s >= 0,
                   "{}: time_to_target_s = {} (expected -1 or seconds)", path.string(),
                   meta.time_to_target_s);
  }
  // The list tools read instead of walking /params: it must name exactly the parameters the
  // file holds for this model, in order (a damaged or edited list would mislead them).
  if (file.has_attr("parameters")) {
    std::string names;
    for (const nn::Parameter* p : params) names += (names.empty() ? "" : ",") + p->name;
    const std::string listed = file.attr_string("parameters");
    TESSEL_EXPECTS(listed == names, "{}: the parameters attribute lists \"{}\", expected \"{}\" "
                   "(this model's parameters, in order)", path.string(),
                   listed.size() > 200 ? listed.substr(0, 197) + "..." : listed,
                   names.size() > 200 ? names.substr(0, 197) + "..." : names);
  }
  for (nn::Parameter* p : params) {
    read_tensor(file, "/params/" + p->name, p->value);
    const Tensor host = p->value.device().is_cpu() ? p->value : p->value.to(Device::cpu());
    const float* values = host.data<float>();
    for (std::int64_t i = 0; i < host.numel(); ++i)
      TESSEL_EXPECTS(std::isfinite(values[i]), "{}: /params/{}[{}] = {} is not finite",
                     path.string(), p->name, i, values[i]);
  }
  std::vector<std::pair<std::string, Tensor>> state;
  const std::string entries = file.attr_string("optimizer_state");
  for (std::size_t start = 0; start < entries.size();) {
    auto comma = entries.find(',', start);
    if (comma == std::string::npos) comma = entries.size();
    const std::string entry = entries.substr(start, comma - start);
    start = comma + 1;
    const auto colon = entry.rfind(':');
    TESSEL_EXPECTS(colon != std::string::npos, "{}: malformed optimizer_state entry '{}'",
                   path.string(), entry);
    const std::string name = entry.substr(0, colon), dtype = entry.substr(colon + 1);
    const std::string object = "/optimizer/" + name;
    // State that belongs to a parameter ("adam.m.NAME") has its shape; any other entry (a step
    // count) is one value. Checked before the tensor is sized by what the file says.
    std::vector<std::int64_t> expected{1};
    std::size_t matched = 0;  // the longest parameter name that ends the entry's name
    for (const nn::Parameter* p : params) {
      if (p->name.size() > matched && name.size() > p->name.size() + 1 &&
          name.ends_with("." + p->name)) {
        expected = p->value.shape();
        matched = p->name.size();
      }
    }
    const std::vector<std::int64_t> dims = file.dims(object);
    TESSEL_EXPECTS(dims == expected, "{}: optimizer state {} has shape {}, expected {}",
                   path.string(), name, fmt::join(dims, "x"), fmt::join(expected, "x"));
    Tensor t;
    if (dtype == "f32") t = Tensor::empty(dims, DType::f32);
    else if (dtype == "i64") t = Tensor::empty(dims, DType::i64);
    else if (dtype == "f64") t = Tensor::empty(dims, DType::f64);
    else TESSEL_FAIL("{}: optimizer state {} has unsupported dtype {}", path.string(), name, dtype);
    read_tensor(file, object, t);
    state.emplace_back(name, std::move(t));
  }
  optimizer.load_state(state);
  return meta;
}

}  // namespace tessel::train
