// SIGN precomputation: repeated halo exchange + SpMM over the owned rows, and its HDF5 files.
#include "tessel/dist/precompute.hpp"

#include "tessel/dist/full_aggregator.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/interrupt.hpp"
#include "tessel/datasets/atomic_output.hpp"
#include "tessel/datasets/dataset_checksums.hpp"
#include "tessel/datasets/h5.hpp"
#include "tessel/kernels/sparse.hpp"
#include "tessel/dist/halo.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <span>

namespace tessel::dist {
namespace fs = std::filesystem;

namespace {

void check_options(const PrecomputeOptions& o) {
  TESSEL_EXPECTS(o.hops >= 0 && o.hops <= 16, "--hops {}: expected 0 to 16", o.hops);
}

constexpr std::int64_t kFeatChunkRows = 4096;  // rows of a chunk of /feat in the file

// Makes dir when missing, runs `write` (this rank's file; may be collective), and removes a dir
// this call created again if the job is interrupted or `write` fails before every rank's file
// is in place, so no empty or partial folder is left behind. Collective.
void with_sign_folder(comm::Communicator& comm, const fs::path& dir,
                      const std::function<void()>& write) {
  std::error_code ec;
  // Registered before the folder exists, so no moment is left where an interrupt would miss it.
  std::optional<interrupt::TemporaryPath> created;
  struct RemoveIfUnfinished {
    const fs::path& dir;
    bool armed = false;
    ~RemoveIfUnfinished() {
      std::error_code ignored;
      if (armed) fs::remove_all(dir, ignored);
    }
  } cleanup{dir};
  // Every rank makes the folder when it sees none: on shared storage one of them does, and
  // where each host holds its own copy of the partition folder, one rank of each host.
  if (!fs::exists(dir, ec)) {
    created.emplace(dir);
    cleanup.armed = true;
    fs::create_directories(dir, ec);
    TESSEL_EXPECTS(!ec, "cannot create folder {}: {}", dir.string(), ec.message());
  }
  comm.barrier();
  write();
  comm.barrier();
  cleanup.armed = false;
  if (created) created->release();
}

// The file's attributes and /nodes/orig_id, as every writer of a SIGN file sets them.
void write_sign_header(h5::File& file, const partition::Part& part, const std::string& dataset,
                       const PrecomputeOptions& options) {
  const std::int64_t n = part.num_owned;
  file.set_attr("format", std::string(kSignFormat));
  file.set_attr("version", static_cast<std::int64_t>(kSignVersion));
  file.set_attr("dataset", dataset);
  file.set_attr("part", static_cast<std::int64_t>(part.part_id));
  file.set_attr("num_parts", static_cast<std::int64_t>(part.num_parts));
  file.set_attr("num_owned", n);
  file.set_attr("feature_dim", part.feature_dim);
  file.set_attr("hops", static_cast<std::int64_t>(options.hops));
  file.set_attr("operator", option_word(options.op));
  file.set_attr("normalize_features", option_word(options.normalize_features));
  file.write("/nodes/orig_id", part.orig_id.data(), {n},
             "id in the source dataset of each owned node (row order of /feat)");
}

constexpr const char* kFeatDescription = "hop k of node i at columns [k F, (k+1) F): (A^k X)[i]";

void refuse_overflow(const partition::Part& part, int hop, std::int64_t row, std::int64_t column,
                     float value) {
  TESSEL_FAIL("precompute: hop {} of node {} (feature {}) is {}: the features overflow float32 "
              "when propagated; scale them down or use --normalize-features row",
              hop, part.orig_id[static_cast<std::size_t>(row)], column, value);
}

// One hop's output rows [rows, cols]: held in memory, or written in row blocks to a scratch
// file in the output folder (an AtomicOutput never committed: removed when dropped, on an error
// and on SIGINT/SIGTERM/SIGHUP) and read back through the out-of-core row reader.
class HopRows {
 public:
  HopRows(const fs::path& dir, int part, int hop, std::int64_t rows, std::int64_t cols,
          bool on_disk, std::span<const std::int64_t> degree)
      : rows_(rows), cols_(cols), degree_(degree) {
    if (!on_disk) {
      all_.resize(static_cast<std::size_t>(rows * cols));
      return;
    }
    scratch_.emplace(dir / fmt::format("sign-{}-hop{}.h5", part, hop));
    file_.emplace(h5::File::create(scratch_->temp_path()));
    file_->create_group("/node");
    file_->create_dataset<float>("/node/feat", {rows, cols}, "one SIGN hop's rows (scratch)",
                                 std::max<std::int64_t>(1, std::min(sign_block_rows(cols), rows)));
  }
  ~HopRows() {
    reader_.reset();
    file_.reset();
  }
  HopRows(const HopRows&) = delete;
  HopRows& operator=(const HopRows&) = delete;

  bool on_disk() const { return scratch_.has_value(); }
  std::int64_t bytes() const { return rows_ * cols_ * static_cast<std::int64_t>(sizeof(float)); }
  void write(std::int64_t begin, const float* data, std::int64_t count) {
    if (file_)
      file_->write_rows("/node/feat", begin, data, count);
    else
      std::copy_n(data, count * cols_, all_.data() + begin * cols_);
  }
  // The rows written (no write after), read with a cache of at most cache_bytes when on disk.
  sampling::OwnedFeatureRows& reader(std::int64_t cache_bytes) {
    reader_.reset();
    if (file_) {
      file_->close();
      file_.reset();
    }
    if (scratch_) {
      sampling::OutOfCoreOptions options;
      options.budget_bytes = std::max<std::int64_t>(0, cache_bytes);
      reader_ = sampling::open_rows_out_of_core(scratch_->temp_path(), rows_, cols_, degree_,
                                                options);
    } else {
      reader_ = sampling::rows_in_memory(std::span<const float>(all_), cols_);
    }
    return *reader_;
  }
  void close_reader() { reader_.reset(); }

 private:
  std::int64_t rows_, cols_;
  std::span<const std::int64_t> degree_;
  std::vector<float> all_;
  std::optional<datasets::AtomicOutput> scratch_;
  std::optional<h5::File> file_;
  std::unique_ptr<sampling::OwnedFeatureRows> reader_;
};

// Hop k + 1 of every owned row from hop k's rows (`input`) a block of destination rows at a
// time, each block's rows written to `next`. Collective (the halo exchange).
void propagate_hop(HaloExchange& halo, const kernels::SparseMatrix& a,
                   const partition::Part& part, int hop, sampling::OwnedFeatureRows& input,
                   HopRows& next) {
  const std::int64_t n = part.num_owned, f = part.feature_dim;
  const std::int64_t block_rows = sign_block_rows(f);
  std::vector<const float*> pointers;
  Tensor halo_rows;
  halo.forward_halo(
      [&](std::span<const LocalId> ids, Tensor& rows) {
        input.resolve(ids, pointers);
        for (std::size_t i = 0; i < ids.size(); ++i)
          std::copy_n(pointers[i], f, rows.data<float>() + static_cast<std::int64_t>(i) * f);
      },
      f, block_rows, halo_rows);
  const auto* indptr = a.indptr.data<EdgeId>();
  const auto* indices = a.indices.data<LocalId>();
  const auto* values = a.values.data<float>();
  std::vector<LocalId> columns, owned_columns;
  std::vector<EdgeId> sub_indptr;
  std::vector<LocalId> sub_indices;
  Tensor gathered, result;
  for (std::int64_t begin = 0; begin < n; begin += block_rows) {
    const std::int64_t end = std::min(n, begin + block_rows);
    const std::int64_t rows = end - begin;
    columns.assign(indices + indptr[begin], indices + indptr[end]);
    std::sort(columns.begin(), columns.end());
    columns.erase(std::unique(columns.begin(), columns.end()), columns.end());
    const auto owned_count =
        std::lower_bound(columns.begin(), columns.end(), static_cast<LocalId>(n)) -
        columns.begin();
    const auto width = static_cast<std::int64_t>(columns.size());
    if (!gathered.defined() || gathered.rows() < width)
      gathered = Tensor::empty({std::max<std::int64_t>(width, 1), f}, DType::f32);
    float* g = gathered.data<float>();
    owned_columns.assign(columns.begin(), columns.begin() + owned_count);
    input.resolve(owned_columns, pointers);
    for (std::int64_t k = 0; k < owned_count; ++k) std::copy_n(pointers[k], f, g + k * f);
    for (std::int64_t k = owned_count; k < width; ++k)
      std::copy_n(halo_rows.data<float>() + (columns[k] - n) * f, f, g + k * f);
    // The block's rows of the matrix with columns renumbered into the gathered rows: each
    // output row sums the same products in the same order as the whole-part SpMM.
    const EdgeId first = indptr[begin];
    sub_indptr.resize(static_cast<std::size_t>(rows + 1));
    for (std::int64_t r = 0; r <= rows; ++r) sub_indptr[r] = indptr[begin + r] - first;
    const EdgeId nnz = indptr[end] - first;
    sub_indices.resize(static_cast<std::size_t>(nnz));
    for (EdgeId e = 0; e < nnz; ++e)
      sub_indices[e] = static_cast<LocalId>(
          std::lower_bound(columns.begin(), columns.end(), indices[first + e]) - columns.begin());
    kernels::SparseMatrix sub;
    sub.num_rows = rows;
    sub.num_cols = width;
    sub.indptr = Tensor::from_vector(sub_indptr, {rows + 1});
    sub.indices = Tensor::from_vector(sub_indices, {nnz});
    sub.values = Tensor::empty({nnz}, DType::f32);
    std::copy_n(values + first, nnz, sub.values.data<float>());
    if (!result.defined() || result.rows() != rows) result = Tensor::empty({rows, f}, DType::f32);
    kernels::spmm(sub, gathered.rows_slice(0, width), result);
    // Finite features can still overflow float32 as they are propagated (values near 3e38):
    // refuse here rather than write a file every later run refuses.
    const float* out = result.data<float>();
    for (std::int64_t i = 0; i < rows * f; ++i)
      if (!std::isfinite(out[i])) refuse_overflow(part, hop + 1, begin + i / f, i % f, out[i]);
    next.write(begin, out, rows);
  }
}

} // namespace

std::int64_t sign_block_rows(std::int64_t width) {
  // Read at each call (a few per hop): tests set it between runs in one process.
  const char* env = std::getenv("TESSEL_INFER_BLOCK_ELEMENTS");
  std::int64_t elements = std::int64_t{1} << 20;
  if (env != nullptr) {
    const long long value = std::atoll(env);
    TESSEL_EXPECTS(value > 0, "TESSEL_INFER_BLOCK_ELEMENTS={}: expected a positive count", env);
    elements = static_cast<std::int64_t>(value);
  }
  return std::max<std::int64_t>(1, elements / std::max<std::int64_t>(width, 1));
}

fs::path default_sign_dir(const fs::path& part_dir, const PrecomputeOptions& o) {
  return part_dir /
         fmt::format("sign-{}-k{}{}", o.op, o.hops,
                     o.normalize_features == partition::FeatureNormalization::row ? "-row" : "");
}

std::string sign_file_name(int part) {
  return fmt::format("sign-{}.h5", part);
}

std::vector<float> precompute_hops(comm::Communicator& comm, const partition::Part& part,
                                   const PrecomputeOptions& options) {
  check_options(options);
  const std::int64_t n = part.num_owned, f = part.feature_dim, width = (options.hops + 1) * f;
  TESSEL_EXPECTS(static_cast<std::int64_t>(part.features.size()) == n * f,
                 "precompute: part {} has {} feature values, expected {} x {}", part.part_id,
                 part.features.size(), n, f);
  HaloExchange halo(part, comm);
  nn::AggregationMatrices matrices = part_matrices(part);
  const kernels::SparseMatrix& a =
      matrices.forward(options.op);
  std::vector<float> out(static_cast<std::size_t>(n * width));
  Tensor current = Tensor::empty({n, f}, DType::f32);
  std::copy(part.features.begin(), part.features.end(), current.data<float>());
  Tensor full;
  for (int k = 0;; ++k) {
    const float* src = current.data<float>();
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i)
      std::memcpy(&out[static_cast<std::size_t>(i * width + k * f)], src + i * f,
                  static_cast<std::size_t>(f) * sizeof(float));
    if (k == options.hops) break;
    halo.forward(current, full); // owned rows + halo rows from their owners
    Tensor next = Tensor::empty({n, f}, DType::f32);
    kernels::spmm(a, full, next);
    current = next;
  }
  // Finite features can still overflow float32 as they are propagated (values near 3e38):
  // refuse here rather than write a file every later run refuses.
  const auto bad = std::find_if(out.begin(), out.end(), [](float v) { return !std::isfinite(v); });
  if (bad != out.end()) {
    const auto at = bad - out.begin();
    TESSEL_FAIL("precompute: hop {} of node {} (feature {}) is {}: the features overflow float32 "
                "when propagated; scale them down or use --normalize-features row",
                at % width / f, part.orig_id[static_cast<std::size_t>(at / width)], at % f, *bad);
  }
  return out;
}

void write_sign_features(const fs::path& dir, const partition::Part& part,
                         const std::string& dataset, const PrecomputeOptions& options,
                         const std::vector<float>& hops) {
  const std::int64_t n = part.num_owned, width = (options.hops + 1) * part.feature_dim;
  TESSEL_ASSERT(static_cast<std::int64_t>(hops.size()) == n * width,
                "write_sign_features: {} values for {} x {}", hops.size(), n, width);
  datasets::AtomicOutput output(dir / sign_file_name(part.part_id));
  {
    h5::File file = h5::File::create(output.temp_path());
    write_sign_header(file, part, dataset, options);
    file.write("/feat", hops.data(), {n, width}, kFeatDescription, kFeatChunkRows);
    // Each dataset's own checksum: damage behind a wiped whole-file header is still caught.
    h5::mark_dataset_checksums(file);
    h5::set_dataset_checksum(file, "/nodes/orig_id", part.orig_id.data(),
                             static_cast<std::size_t>(n) * sizeof(part.orig_id[0]));
    h5::set_dataset_checksum(file, "/feat", hops.data(), hops.size() * sizeof(float));
    file.close();
  }
  output.commit();
}

StreamedPrecompute precompute_sign_folder(comm::Communicator& comm, const partition::Part& part,
                                          const InputRowsOpener& open_input,
                                          const std::string& dataset,
                                          const PrecomputeOptions& options, const fs::path& dir,
                                          std::int64_t budget_bytes) {
  check_options(options);
  const std::int64_t n = part.num_owned, f = part.feature_dim, width = (options.hops + 1) * f;
  const std::int64_t hop_bytes = n * f * static_cast<std::int64_t>(sizeof(float));
  const bool unbounded = budget_bytes < 0;
  const std::span<const std::int64_t> degree(part.degree.data(), static_cast<std::size_t>(n));
  StreamedPrecompute result;
  with_sign_folder(comm, dir, [&] {
    std::vector<std::unique_ptr<HopRows>> hops;  // hops[k - 1]: hop k
    std::int64_t x_resident = 0;  // X's rows held all along (a reader in memory)
    std::int64_t held_hops = 0;   // bytes of the hops held in memory
    if (options.hops > 0) {
      HaloExchange halo(part, comm);
      nn::AggregationMatrices matrices = part_matrices(part);
      const kernels::SparseMatrix& a = matrices.forward(options.op);
      std::unique_ptr<sampling::OwnedFeatureRows> x = open_input(unbounded ? 0 : budget_bytes);
      if (x->in_memory()) x_resident = x->held_bytes();
      for (int k = 0; k < options.hops; ++k) {
        const std::int64_t input_held = k == 0 ? x->held_bytes() : x_resident;
        const bool next_in_memory =
            unbounded || input_held + held_hops + hop_bytes <= budget_bytes;
        if (next_in_memory) held_hops += hop_bytes;
        auto next = std::make_unique<HopRows>(dir, part.part_id, k + 1, n, f, !next_in_memory,
                                              degree);
        if (!next_in_memory) ++result.hops_on_disk;
        sampling::OwnedFeatureRows& input =
            k == 0 ? *x
                   : hops.back()->reader(unbounded ? 0 : budget_bytes - x_resident - held_hops);
        propagate_hop(halo, a, part, k, input, *next);
        if (k == 0) {
          x.reset();
        } else {
          hops.back()->close_reader();
        }
        hops.push_back(std::move(next));
      }
    }
    // The file, a block of rows of every hop at a time; readers without a cache now.
    std::vector<sampling::OwnedFeatureRows*> readers;
    std::unique_ptr<sampling::OwnedFeatureRows> x = open_input(0);
    readers.push_back(x.get());
    for (auto& hop : hops) readers.push_back(&hop->reader(0));
    datasets::AtomicOutput output(dir / sign_file_name(part.part_id));
    {
      h5::File file = h5::File::create(output.temp_path());
      write_sign_header(file, part, dataset, options);
      file.create_dataset<float>("/feat", {n, width}, kFeatDescription, kFeatChunkRows);
      const std::int64_t block_rows = sign_block_rows(width);
      std::vector<float> block(static_cast<std::size_t>(std::min(block_rows, n) * width));
      std::vector<float> one(static_cast<std::size_t>(std::min(block_rows, n) * f));
      partition::Crc32 crc;
      for (std::int64_t begin = 0; begin < n; begin += block_rows) {
        const std::int64_t end = std::min(n, begin + block_rows);
        const std::int64_t rows = end - begin;
        for (std::size_t k = 0; k < readers.size(); ++k) {
          readers[k]->read_block(begin, end, one.data());
          for (std::int64_t r = 0; r < rows; ++r)
            std::copy_n(one.data() + r * f, f,
                        block.data() + r * width + static_cast<std::int64_t>(k) * f);
        }
        crc.update(block.data(), static_cast<std::size_t>(rows * width) * sizeof(float));
        file.write_rows("/feat", begin, block.data(), rows);
      }
      h5::mark_dataset_checksums(file);
      h5::set_dataset_checksum(file, "/nodes/orig_id", part.orig_id.data(),
                               static_cast<std::size_t>(n) * sizeof(part.orig_id[0]));
      file.set_attr(h5::kDatasetCrcAttr, crc.str(), "/feat");
      file.close();
    }
    output.commit();
  });
  return result;
}

bool read_sign_features(const fs::path& dir, const partition::Part& part,
                        const PrecomputeOptions& options, std::vector<float>* hops) {
  const fs::path path = dir / sign_file_name(part.part_id);
  if (!fs::exists(path)) return false;
  h5::File file = h5::File::open_read(path);
  TESSEL_EXPECTS(file.has_attr("format") && file.attr_string("format") == kSignFormat,
                 "{}: not a Tessel SIGN feature file (format attribute)", path.string());
  const auto version = file.attr_int("version");
  TESSEL_EXPECTS(version == kSignVersion, "{}: version {}, this Tessel reads version {}",
                 path.string(), version, kSignVersion);
  const std::int64_t n = part.num_owned, f = part.feature_dim;
  TESSEL_EXPECTS(
      file.attr_int("part") == part.part_id && file.attr_int("num_parts") == part.num_parts &&
          file.attr_int("num_owned") == n && file.attr_int("feature_dim") == f,
      "{}: made for part {} of {} ({} nodes, {} features), this is part {} of {} ({} "
      "nodes, {} features); run tessel precompute again",
      path.string(), file.attr_int("part"), file.attr_int("num_parts"), file.attr_int("num_owned"),
      file.attr_int("feature_dim"), part.part_id, part.num_parts, n, f);
  TESSEL_EXPECTS(
      file.attr_int("hops") == options.hops && file.attr_string("operator") == option_word(options.op) &&
          file.attr_string("normalize_features") == option_word(options.normalize_features),
      "{}: holds --hops {} --operator {} --normalize-features {}, this run asks for "
      "--hops {} --operator {} --normalize-features {}",
      path.string(), file.attr_int("hops"), file.attr_string("operator"),
      file.attr_string("normalize_features"), options.hops, options.op, options.normalize_features);
  const auto ids = file.read<std::int64_t>("/nodes/orig_id", {n});
  h5::verify_dataset_checksum(file, "/nodes/orig_id", ids.data(), ids.size() * sizeof(ids[0]));
  for (std::int64_t i = 0; i < n; ++i)
    TESSEL_EXPECTS(ids[i] == part.orig_id[i],
                   "{}: row {} is node {}, the partition has node {} there (made from another "
                   "partition); run tessel precompute again",
                   path.string(), i, ids[i], part.orig_id[i]);
  *hops = file.read<float>("/feat", {n, (options.hops + 1) * f});
  h5::verify_dataset_checksum(file, "/feat", hops->data(), hops->size() * sizeof(float));
  const std::int64_t width = (options.hops + 1) * f;
  const auto bad = std::find_if(hops->begin(), hops->end(), [](float v) { return !std::isfinite(v); });
  if (bad != hops->end()) {
    const auto at = bad - hops->begin();
    TESSEL_FAIL("{}: /feat[{}, {}] is {}, expected a finite number (delete the file to compute "
                "it again with `tessel precompute`)",
                path.string(), at / width, at % width, *bad);
  }
  return true;
}

std::vector<float> load_or_precompute(comm::Communicator& comm, const partition::Part& part,
                                      const std::string& dataset, const PrecomputeOptions& options,
                                      const fs::path& dir, bool* computed) {
  check_options(options);
  std::vector<float> hops;
  const int have = read_sign_features(dir, part, options, &hops) ? 1 : 0;
  // Every rank takes the same branch: the computation is collective.
  const bool all = comm.allreduce_value(have, comm::ReduceOp::min) == 1;
  if (computed) *computed = !all;
  if (all) return hops;
  // The file is written as `tessel precompute` writes it (in row blocks), then read back.
  const std::span<const float> features(part.features);
  precompute_sign_folder(
      comm, part, [&](std::int64_t) { return sampling::rows_in_memory(features, part.feature_dim); },
      dataset, options, dir, -1);
  const bool read = read_sign_features(dir, part, options, &hops);
  TESSEL_ASSERT(read, "{}: written, then not found", (dir / sign_file_name(part.part_id)).string());
  return hops;
}

void write_sign_folder(comm::Communicator& comm, const fs::path& dir, const partition::Part& part,
                       const std::string& dataset, const PrecomputeOptions& options,
                       const std::vector<float>& hops) {
  with_sign_folder(comm, dir, [&] { write_sign_features(dir, part, dataset, options, hops); });
}

} // namespace tessel::dist
