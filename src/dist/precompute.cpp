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

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

namespace tessel::dist {
namespace fs = std::filesystem;

namespace {

void check_options(const PrecomputeOptions& o) {
  TESSEL_EXPECTS(o.hops >= 0 && o.hops <= 16, "--hops {}: expected 0 to 16", o.hops);
}

} // namespace

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
    file.write("/feat", hops.data(), {n, width},
               "hop k of node i at columns [k F, (k+1) F): (A^k X)[i]", 4096);
    // Each dataset's own checksum: damage behind a wiped whole-file header is still caught.
    h5::mark_dataset_checksums(file);
    h5::set_dataset_checksum(file, "/nodes/orig_id", part.orig_id.data(),
                             static_cast<std::size_t>(n) * sizeof(part.orig_id[0]));
    h5::set_dataset_checksum(file, "/feat", hops.data(), hops.size() * sizeof(float));
    file.close();
  }
  output.commit();
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
  hops = precompute_hops(comm, part, options);
  write_sign_folder(comm, dir, part, dataset, options, hops);
  return hops;
}

void write_sign_folder(comm::Communicator& comm, const fs::path& dir, const partition::Part& part,
                       const std::string& dataset, const PrecomputeOptions& options,
                       const std::vector<float>& hops) {
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
  write_sign_features(dir, part, dataset, options, hops);
  comm.barrier();
  cleanup.armed = false;
  if (created) created->release();
}

} // namespace tessel::dist
