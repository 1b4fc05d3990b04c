// Owned feature rows in memory, or read from the part file within a budget: a static tier of the
// highest in-degree rows, a CLOCK tier of rows read recently, and sorted batched reads of the
// rest (pread at the rows' file offsets from a few threads, or HDF5 hyperslabs), started ahead of
// the step that needs them on a thread of their own (pread only).
#include "tessel/sampling/feature_rows.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/core/timer.hpp"
#include "tessel/datasets/dataset.hpp"
#include "tessel/datasets/h5.hpp"
#include "tessel/kernels/dense.hpp"
#include "tessel/partition/part.hpp"
#include "tessel/sampling/feature_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <numeric>
#include <thread>
#include <utility>

namespace tessel::sampling {
namespace {

// Whether this HDF5 library's chunk addresses leave a file's user block out (1) or count it
// (2), once a file has shown it; 0 until then. See chunk_addresses_include_user_block().
std::atomic<int> g_user_block_layout{0};

constexpr const char* kFeat = "/node/feat";

class RowsInMemory final : public OwnedFeatureRows {
public:
  RowsInMemory(std::span<const float> features, std::int64_t feature_dim)
      : features_(features), feature_dim_(feature_dim),
        num_rows_(feature_dim > 0 ? static_cast<std::int64_t>(features.size()) / feature_dim : 0) {}

  std::int64_t num_rows() const override { return num_rows_; }
  std::int64_t feature_dim() const override { return feature_dim_; }
  bool in_memory() const override { return true; }
  void resolve(std::span<const LocalId> locals, std::vector<const float*>& rows) override {
    rows.resize(locals.size());
    for (std::size_t i = 0; i < locals.size(); ++i)
      rows[i] = features_.data() + static_cast<std::int64_t>(locals[i]) * feature_dim_;
  }
  void read_block(std::int64_t begin, std::int64_t end, float* out) override {
    std::copy(features_.data() + begin * feature_dim_, features_.data() + end * feature_dim_, out);
  }
  std::int64_t held_bytes() const override {
    return static_cast<std::int64_t>(features_.size() * sizeof(float));
  }

private:
  std::span<const float> features_;
  std::int64_t feature_dim_;
  std::int64_t num_rows_;
};

// A file descriptor closed on destruction.
class Fd {
public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

private:
  int fd_ = -1;
};

// A run of consecutive rows [begin, begin + count) that lie back to back in the file, landing at
// row `out_row` of the output.
struct Run {
  std::int64_t begin = 0;
  std::int64_t count = 0;
  std::int64_t out_row = 0;
};

class RowsOutOfCore final : public OwnedFeatureRows {
public:
  RowsOutOfCore(const std::filesystem::path& path, std::int64_t num_rows, std::int64_t feature_dim,
                std::span<const std::int64_t> degree, const OutOfCoreOptions& options)
      : name_(path.string()), num_rows_(num_rows), feature_dim_(feature_dim),
        row_bytes_(feature_dim * static_cast<std::int64_t>(sizeof(float))), options_(options),
        file_(h5::File::open_read(path)) {
    dtype_ = feature_dim > 0 ? file_.feature_dtype(kFeat) : datasets::FeatureDtype::float32;
    stored_row_bytes_ = feature_dim * datasets::stored_bytes(dtype_);
    TESSEL_EXPECTS(options.budget_bytes >= 0, "--feature-memory: a budget of {} bytes",
                   options.budget_bytes);
    TESSEL_EXPECTS(static_cast<std::int64_t>(degree.size()) == num_rows,
                   "out-of-core features: {} degrees for {} rows", degree.size(), num_rows);
    const auto dims = file_.dims(kFeat);
    TESSEL_EXPECTS(dims == std::vector<std::int64_t>({num_rows, feature_dim}),
                   "{}: {} has shape [{}], expected [{}, {}]", name_, kFeat, fmt::join(dims, ", "),
                   num_rows, feature_dim);
    dataset_ = h5::Handle(TESSEL_CHECK_HDF5(H5Dopen2(file_.id(), kFeat, H5P_DEFAULT)));
    watch_ = std::make_unique<Fd>(::open(name_.c_str(), O_RDONLY | O_CLOEXEC));
    TESSEL_EXPECTS(watch_->get() >= 0 && ::fstat(watch_->get(), &opened_) == 0,
                   "{}: cannot open for reading ({})", name_, std::strerror(errno));
    locate_rows();
    if (options_.io == FeatureIo::pread || options_.drop_page_cache) {
      fd_ = std::make_unique<Fd>(::open(name_.c_str(), O_RDONLY | O_CLOEXEC));
      TESSEL_EXPECTS(fd_->get() >= 0, "{}: cannot open for reading ({})", name_,
                     std::strerror(errno));
    }
    if (!direct_)
      io_ = FeatureIo::hdf5;
    else
      io_ = options_.io;
    log::debug("{}: {} rows of {} read {}", name_, num_rows_, feature_dim_,
               io_ == FeatureIo::pread ? "with pread at located offsets"
               : direct_               ? "through HDF5 (asked)"
                                       : "through HDF5 (offsets not located)");
    size_tiers(degree);
    scan_and_fill();
  }

  ~RowsOutOfCore() override {
    if (ahead_thread_.joinable()) ahead_thread_.join();
  }

  std::int64_t num_rows() const override { return num_rows_; }
  std::int64_t feature_dim() const override { return feature_dim_; }
  bool in_memory() const override { return false; }
  FeatureReadStats stats() const override { return stats_; }
  void reset_stats() override { stats_ = {}; }
  bool reads_at_offsets() const override { return io_ == FeatureIo::pread; }
  std::int64_t held_bytes() const override {
    return static_cast<std::int64_t>((static_rows_.size() + recent_rows_.size()) * sizeof(float) +
                                     where_.size() * sizeof(std::int32_t));
  }

  void read_ahead(std::span<const LocalId> locals) override {
    finish_ahead();
    ahead_ids_.clear();
    if (io_ != FeatureIo::pread) return;
    for (const LocalId l : locals) {
      TESSEL_ASSERT(l >= 0 && l < num_rows_, "feature row {} outside [0, {})", l, num_rows_);
      // Rows of the recency tier are read too: the resolves before the next step's may evict
      // them.
      if (where_[static_cast<std::size_t>(l)] < 0) ahead_ids_.push_back(l);
    }
    std::sort(ahead_ids_.begin(), ahead_ids_.end());
    ahead_ids_.erase(std::unique(ahead_ids_.begin(), ahead_ids_.end()), ahead_ids_.end());
    if (ahead_ids_.empty()) return;
    const auto need = ahead_ids_.size() * static_cast<std::size_t>(feature_dim_);
    if (ahead_rows_.size() < need) ahead_rows_.resize(need);
    ahead_stats_ = {};
    ahead_error_ = nullptr;
    ahead_thread_ = std::thread([this] {
      try {
        read_sorted(ahead_ids_, ahead_rows_.data(), ahead_stats_);
      } catch (...) {
        ahead_error_ = std::current_exception();
      }
    });
  }

  void resolve(std::span<const LocalId> locals, std::vector<const float*>& rows) override {
    finish_ahead();
    ++call_;
    rows.resize(locals.size());
    miss_pos_.clear();
    misses_.clear();
    for (std::size_t i = 0; i < locals.size(); ++i) {
      const LocalId l = locals[i];
      TESSEL_ASSERT(l >= 0 && l < num_rows_, "feature row {} outside [0, {})", l, num_rows_);
      const std::int32_t w = where_[static_cast<std::size_t>(l)];
      if (w >= 0) {
        rows[i] = static_rows_.data() + static_cast<std::int64_t>(w) * feature_dim_;
        ++stats_.static_hits;
      } else if (w <= -2) {
        const auto s = static_cast<std::size_t>(-w - 2);
        rows[i] = recent_rows_.data() + static_cast<std::int64_t>(s) * feature_dim_;
        recent_ref_[s] = 1;
        recent_pin_[s] = call_; // pointed at in this call: not evicted by its admissions
        ++stats_.recent_hits;
      } else {
        miss_pos_.push_back(static_cast<std::int64_t>(i));
        misses_.push_back(l);
      }
    }
    stats_.requests += static_cast<std::int64_t>(locals.size());
    if (misses_.empty()) return;
    std::sort(misses_.begin(), misses_.end());
    misses_.erase(std::unique(misses_.begin(), misses_.end()), misses_.end());
    const auto count = static_cast<std::int64_t>(misses_.size());
    const auto width = static_cast<std::size_t>(feature_dim_);
    miss_rows_.resize(misses_.size());
    if (!ahead_ids_.empty() && !options_.normalize_rows) {
      // Rows the read-ahead holds are pointed at where they are; only the rest is read now,
      // into a buffer of their size. A step's rows are thus held once, not also copied.
      rest_.clear();
      rest_pos_.clear();
      for (std::size_t k = 0; k < misses_.size(); ++k) {
        const auto it = std::lower_bound(ahead_ids_.begin(), ahead_ids_.end(), misses_[k]);
        if (it != ahead_ids_.end() && *it == misses_[k]) {
          miss_rows_[k] =
              ahead_rows_.data() + static_cast<std::size_t>(it - ahead_ids_.begin()) * width;
          ++stats_.ahead_hits;
        } else {
          rest_.push_back(misses_[k]);
          rest_pos_.push_back(static_cast<std::int64_t>(k));
        }
      }
      if (!rest_.empty()) {
        if (staging_rows_.size() < rest_.size() * width) staging_rows_.resize(rest_.size() * width);
        read_sorted(rest_, staging_rows_.data(), stats_);
        for (std::size_t j = 0; j < rest_.size(); ++j)
          miss_rows_[static_cast<std::size_t>(rest_pos_[j])] = staging_rows_.data() + j * width;
      }
    } else {
      // A buffer of this reader's own, kept between steps: step-sized tensors of varying sizes
      // would each stay in the host block cache.
      float* out = nullptr;
      if (options_.normalize_rows) {
        staging_ = Tensor::empty({count, feature_dim_}, DType::f32);
        out = staging_.data<float>();
      } else {
        const auto need = static_cast<std::size_t>(count) * width;
        if (staging_rows_.size() < need) staging_rows_.resize(need);
        out = staging_rows_.data();
      }
      if (ahead_ids_.empty()) {
        read_sorted(misses_, out, stats_);
      } else {
        // Rows the read-ahead holds are copied from there (to be normalized), the rest read now.
        rest_.clear();
        rest_pos_.clear();
        for (std::size_t k = 0; k < misses_.size(); ++k) {
          const auto it = std::lower_bound(ahead_ids_.begin(), ahead_ids_.end(), misses_[k]);
          if (it != ahead_ids_.end() && *it == misses_[k]) {
            std::copy_n(
                ahead_rows_.data() + static_cast<std::size_t>(it - ahead_ids_.begin()) * width,
                width, out + k * width);
            ++stats_.ahead_hits;
          } else {
            rest_.push_back(misses_[k]);
            rest_pos_.push_back(static_cast<std::int64_t>(k));
          }
        }
        if (!rest_.empty()) {
          rest_rows_.resize(rest_.size() * width);
          read_sorted(rest_, rest_rows_.data(), stats_);
          for (std::size_t j = 0; j < rest_.size(); ++j)
            std::copy_n(rest_rows_.data() + j * width, width,
                        out + static_cast<std::size_t>(rest_pos_[j]) * width);
        }
      }
      if (options_.normalize_rows) kernels::normalize_rows(staging_);
      for (std::size_t k = 0; k < misses_.size(); ++k) miss_rows_[k] = out + k * width;
    }
    for (const std::int64_t i : miss_pos_) {
      const auto k = std::lower_bound(misses_.begin(), misses_.end(), locals[i]) - misses_.begin();
      rows[static_cast<std::size_t>(i)] = miss_rows_[static_cast<std::size_t>(k)];
    }
    admit();
  }

  void read_block(std::int64_t begin, std::int64_t end, float* out) override {
    finish_ahead();
    TESSEL_ASSERT(begin >= 0 && begin <= end && end <= num_rows_, "rows [{}, {}) of {}", begin, end,
                  num_rows_);
    if (begin == end) return;
    read_range(begin, end, out);
    if (options_.normalize_rows) {
      Tensor block = Tensor::empty({end - begin, feature_dim_}, DType::f32);
      std::copy_n(out, (end - begin) * feature_dim_, block.data<float>());
      kernels::normalize_rows(block);
      std::copy_n(block.data<float>(), (end - begin) * feature_dim_, out);
    }
    drop_cached(begin, end);
  }

private:
  // Where each row's bytes are: a contiguous dataset's address, or each unfiltered chunk's.
  // Anything else (filters, chunks not written) is read through HDF5.
  void locate_rows() {
    h5::Handle dcpl(TESSEL_CHECK_HDF5(H5Dget_create_plist(dataset_.get())));
    const H5D_layout_t layout = H5Pget_layout(dcpl.get());
    h5::Handle type(TESSEL_CHECK_HDF5(H5Dget_type(dataset_.get())));
    const bool native_f32 = H5Tequal(type.get(), H5T_NATIVE_FLOAT) > 0;
    const bool sixteen = dtype_ != datasets::FeatureDtype::float32;
    if (!(native_f32 || sixteen) || num_rows_ == 0 || feature_dim_ == 0) return;
    if (layout == H5D_CONTIGUOUS) {
      const haddr_t base = H5Dget_offset(dataset_.get());
      if (base == HADDR_UNDEF) return;
      chunk_rows_ = num_rows_;
      chunk_addr_ = {static_cast<std::int64_t>(base)};
    } else if (layout == H5D_CHUNKED) {
      if (H5Pget_nfilters(dcpl.get()) != 0) return;
      hsize_t chunk[2] = {0, 0};
      if (H5Pget_chunk(dcpl.get(), 2, chunk) != 2 || chunk[1] != static_cast<hsize_t>(feature_dim_))
        return;
      chunk_rows_ = static_cast<std::int64_t>(chunk[0]);
      const std::int64_t chunks = (num_rows_ + chunk_rows_ - 1) / chunk_rows_;
      chunk_addr_.assign(static_cast<std::size_t>(chunks), -1);
      h5::Handle space(TESSEL_CHECK_HDF5(H5Dget_space(dataset_.get())));
      hsize_t stored = 0;
      TESSEL_CHECK_HDF5(H5Dget_num_chunks(dataset_.get(), space.get(), &stored));
      for (hsize_t c = 0; c < stored; ++c) {
        hsize_t offset[2] = {0, 0};
        unsigned mask = 0;
        haddr_t addr = HADDR_UNDEF;
        hsize_t size = 0;
        TESSEL_CHECK_HDF5(
            H5Dget_chunk_info(dataset_.get(), space.get(), c, offset, &mask, &addr, &size));
        const auto index = static_cast<std::int64_t>(offset[0]) / chunk_rows_;
        if (addr == HADDR_UNDEF || mask != 0 || index >= chunks ||
            size != static_cast<hsize_t>(chunk_rows_ * stored_row_bytes_))
          return;
        chunk_addr_[static_cast<std::size_t>(index)] = static_cast<std::int64_t>(addr);
      }
      if (std::find(chunk_addr_.begin(), chunk_addr_.end(), -1) != chunk_addr_.end()) return;
      if (!chunk_addresses_include_user_block()) return;
    } else {
      return;
    }
    // A file that ends before a chunk does is named now, not at the first read of that chunk.
    std::error_code ec;
    const auto file_size = static_cast<std::int64_t>(std::filesystem::file_size(name_, ec));
    for (std::size_t c = 0; c < chunk_addr_.size(); ++c) {
      const std::int64_t first = static_cast<std::int64_t>(c) * chunk_rows_;
      const std::int64_t rows = std::min(chunk_rows_, num_rows_ - first);
      TESSEL_EXPECTS(!ec && chunk_addr_[c] + rows * stored_row_bytes_ <= file_size,
                     "{}: {} row {} lies past the end of the file ({} bytes; truncated?)", name_,
                     kFeat, first + rows - 1, file_size);
    }
    direct_ = true;
  }

  // H5Dget_chunk_info leaves the user block (Tessel's files carry a 512-byte one: the
  // whole-file checksum) out of a chunk's address in HDF5 1.10 and counts it in later versions,
  // where H5Dget_offset always counts it. A chunk is read through HDF5 and at both places; the
  // one that matches decides. A chunk equal at both places (bytes repeating every 512, as a
  // chunk of zero rows does: a layer's outputs after a dead ReLU) decides nothing, so the next
  // chunk is tried, and the answer, the library's and the same for every file, is remembered
  // for the process. Undecided: reads go through HDF5, which is always right.
  bool chunk_addresses_include_user_block() {
    hsize_t user_block = 0;
    const hid_t file = H5Iget_file_id(dataset_.get());
    if (file < 0) return false;
    const hid_t fcpl = H5Fget_create_plist(file);
    H5Fclose(file);
    if (fcpl < 0) return false;
    const herr_t rc = H5Pget_userblock(fcpl, &user_block);
    H5Pclose(fcpl);
    if (rc < 0) return false;
    if (user_block == 0) return true;
    const int fd = ::open(name_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    constexpr std::int64_t kMostBytes = std::int64_t{8} << 20;
    const std::int64_t rows_per_probe =
        std::max<std::int64_t>(1, std::min(chunk_rows_, kMostBytes / stored_row_bytes_));
    // A few chunks, and at least 1 MiB of them: the bytes before the first chunk may be zeros
    // too, so small chunks of zero rows take more than 512 bytes past the zeros to decide.
    int decided = 0;
    std::int64_t probed = 0;
    for (std::size_t c = 0;
         c < chunk_addr_.size() && (c < 4 || probed < (std::int64_t{1} << 20)) && decided == 0;
         ++c) {
      const std::int64_t first = static_cast<std::int64_t>(c) * chunk_rows_;
      const std::int64_t rows = std::min(rows_per_probe, num_rows_ - first);
      const auto bytes = static_cast<std::size_t>(rows * stored_row_bytes_);
      probed += static_cast<std::int64_t>(bytes);
      std::vector<char> expected(bytes), found(bytes + user_block);
      read_run_hdf5(Run{first, rows, 0}, expected.data(), /*as_stored=*/true);
      const auto got = ::pread(fd, found.data(), found.size(), static_cast<off_t>(chunk_addr_[c]));
      const bool plain_ok = got >= static_cast<ssize_t>(bytes) &&
                            std::memcmp(found.data(), expected.data(), bytes) == 0;
      const bool whole = got == static_cast<ssize_t>(found.size());
      const bool shifted_ok =
          whole && std::memcmp(found.data() + user_block, expected.data(), bytes) == 0;
      if (!plain_ok && !shifted_ok) {
        decided = -1; // at neither place: not a layout this reader knows
      } else if (whole && plain_ok != shifted_ok) {
        decided = shifted_ok ? 1 : 2;
      }
    }
    ::close(fd);
    if (decided < 0) return false;
    if (decided == 0) decided = g_user_block_layout.load();
    if (decided == 0) return false;
    g_user_block_layout.store(decided);
    if (decided == 1)
      for (auto& address : chunk_addr_) address += static_cast<std::int64_t>(user_block);
    return true;
  }

  std::int64_t offset_of(std::int64_t row) const {
    return chunk_addr_[static_cast<std::size_t>(row / chunk_rows_)] +
           (row % chunk_rows_) * stored_row_bytes_;
  }

  void size_tiers(std::span<const std::int64_t> degree) {
    const std::int64_t index = out_of_core_index_bytes(num_rows_);
    const std::int64_t rows =
        row_bytes_ > 0 ? std::max<std::int64_t>(0, options_.budget_bytes - index) / row_bytes_ : 0;
    std::int64_t recent = static_cast<std::int64_t>(static_cast<double>(rows) *
                                                    std::clamp(options_.recent_fraction, 0.0, 1.0));
    std::int64_t hot = std::min(num_rows_, rows - recent);
    if (hot == num_rows_) recent = 0; // everything fits the static tier
    where_.assign(static_cast<std::size_t>(num_rows_), -1);
    std::vector<NodeId> ids(static_cast<std::size_t>(num_rows_));
    std::iota(ids.begin(), ids.end(), NodeId{0});
    std::vector<NodeId> ranked = rank_candidates(ids, degree);
    ranked.resize(static_cast<std::size_t>(hot));
    std::sort(ranked.begin(), ranked.end());
    for (std::size_t s = 0; s < ranked.size(); ++s)
      where_[static_cast<std::size_t>(ranked[s])] = static_cast<std::int32_t>(s);
    static_rows_.resize(static_cast<std::size_t>(hot * feature_dim_));
    recent_rows_.resize(static_cast<std::size_t>(recent * feature_dim_));
    recent_id_.assign(static_cast<std::size_t>(recent), -1);
    recent_ref_.assign(static_cast<std::size_t>(recent), 0);
    recent_pin_.assign(static_cast<std::size_t>(recent), 0);
  }

  // One pass over the dataset in blocks: its CRC-32 and finite values checked, the static tier
  // filled. Nothing else of it stays in memory.
  void scan_and_fill() {
    const std::int64_t block_rows =
        std::max<std::int64_t>(1, (std::int64_t{8} << 20) / std::max<std::int64_t>(row_bytes_, 1));
    std::vector<float> block;
    std::vector<std::uint16_t> stored;
    partition::Crc32 crc;
    for (std::int64_t begin = 0; begin < num_rows_; begin += block_rows) {
      const std::int64_t end = std::min(num_rows_, begin + block_rows);
      block.resize(static_cast<std::size_t>((end - begin) * feature_dim_));
      if (dtype_ == datasets::FeatureDtype::float32) {
        read_range(begin, end, block.data());
        crc.update(block);
      } else {
        // The checksum covers the values as stored; the rows are widened after it.
        stored.resize(static_cast<std::size_t>((end - begin) * feature_dim_));
        read_runs(runs_of(begin, end), stored.data(), /*as_stored=*/true);
        check_unchanged(begin, end - 1);
        crc.update(stored);
        datasets::widen_features(stored.data(), block.data(),
                                 static_cast<std::int64_t>(stored.size()), dtype_);
      }
      datasets::check_feature_values(name_, block.data(), begin, end - begin, feature_dim_);
      if (options_.normalize_rows && !block.empty()) {
        Tensor t = Tensor::from_vector(block, {end - begin, feature_dim_});
        kernels::normalize_rows(t);
        std::copy_n(t.data<float>(), block.size(), block.data());
      }
      for (std::int64_t r = begin; r < end; ++r) {
        const std::int32_t w = where_[static_cast<std::size_t>(r)];
        if (w >= 0)
          std::copy_n(block.data() + (r - begin) * feature_dim_, feature_dim_,
                      static_rows_.data() + static_cast<std::int64_t>(w) * feature_dim_);
      }
      drop_cached(begin, end);
    }
    if (!options_.checksum.empty() && feature_dim_ > 0)
      TESSEL_EXPECTS(crc.str() == options_.checksum,
                     "{}: {} has checksum {}, partition.json records {} (the part file was "
                     "changed after partitioning, or belongs to another partition)",
                     name_, kFeat, crc.str(), options_.checksum);
  }

  // Rows [begin, end) in order into out.
  void read_range(std::int64_t begin, std::int64_t end, float* out) {
    read_runs(runs_of(begin, end), out);
    check_unchanged(begin, end - 1);
  }

  // Rows [begin, end) as runs that never cross a chunk (where chunks are read directly).
  std::vector<Run> runs_of(std::int64_t begin, std::int64_t end) const {
    std::vector<Run> runs;
    for (std::int64_t r = begin; r < end;) {
      const std::int64_t stop = direct_ ? std::min(end, (r / chunk_rows_ + 1) * chunk_rows_) : end;
      runs.push_back({r, stop - r, r - begin});
      r = stop;
    }
    return runs;
  }

  // Sorted distinct rows into out, row k of out = rows[k]: one run per stretch of consecutive
  // rows that are back to back in the file.
  // Waits for a read-ahead still running, counts its reads and rethrows its error.
  void finish_ahead() {
    if (!ahead_thread_.joinable()) return;
    Stopwatch watch;
    ahead_thread_.join();
    stats_.ahead_wait_s += watch.seconds();
    stats_.rows_read += ahead_stats_.rows_read;
    stats_.bytes_read += ahead_stats_.bytes_read;
    stats_.read_s += ahead_stats_.read_s;
    if (ahead_error_) {
      ahead_ids_.clear();
      std::rethrow_exception(std::exchange(ahead_error_, nullptr));
    }
  }

  void read_sorted(std::span<const LocalId> rows, float* out, FeatureReadStats& stats) {
    Stopwatch watch;
    std::vector<Run> runs;
    for (std::size_t k = 0; k < rows.size();) {
      std::size_t e = k + 1;
      while (e < rows.size() && rows[e] == rows[e - 1] + 1 &&
             (!direct_ || rows[e] % chunk_rows_ != 0))
        ++e;
      runs.push_back({rows[k], static_cast<std::int64_t>(e - k), static_cast<std::int64_t>(k)});
      k = e;
    }
    read_runs(runs, out);
    if (!rows.empty()) check_unchanged(rows.front(), rows.back());
    if (options_.drop_page_cache) {
      for (const Run& run : runs)
        drop_cached(run.begin, run.begin + run.count);
    }
    stats.rows_read += static_cast<std::int64_t>(rows.size());
    stats.bytes_read += static_cast<std::int64_t>(rows.size()) * stored_row_bytes_;
    stats.read_s += watch.seconds();
  }

  // as_stored: out receives the rows as the file stores them (16-bit values not widened), row k
  // of a run at out_row + k of stored_row_bytes_ each; else float32 rows.
  void read_runs(const std::vector<Run>& runs, void* out, bool as_stored = false) {
    if (io_ == FeatureIo::hdf5) {
      for (const Run& run : runs)
        read_run_hdf5(run, out, as_stored);
      return;
    }
    // pread is thread-safe on one descriptor; a few threads keep several requests in flight.
    std::string error;
    const auto n = static_cast<std::int64_t>(runs.size());
#pragma omp parallel for schedule(dynamic, 16)                                                     \
    num_threads(std::max(1, options_.io_threads)) if (n >= 8)
    for (std::int64_t i = 0; i < n; ++i) {
      const std::string failed =
          read_run_pread(runs[static_cast<std::size_t>(i)], out, as_stored);
      if (!failed.empty()) {
#pragma omp critical(tessel_feature_rows_error)
        if (error.empty()) error = failed;
      }
    }
    if (!error.empty()) TESSEL_FAIL("{}", error);
  }

  // Empty, or the error message (threads of the pool must not throw).
  std::string read_run_pread(const Run& run, void* out, bool as_stored) const {
    float* rows = static_cast<float*>(out) + run.out_row * feature_dim_;
    auto* dst = as_stored ? static_cast<char*>(out) + run.out_row * stored_row_bytes_
                          : reinterpret_cast<char*>(rows);
    const bool widen = !as_stored && dtype_ != datasets::FeatureDtype::float32;
    // 16-bit rows land in a buffer of this thread's and are widened into place after the read.
    thread_local std::vector<std::uint16_t> stored;
    if (widen) {
      stored.resize(static_cast<std::size_t>(run.count * feature_dim_));
      dst = reinterpret_cast<char*>(stored.data());
    }
    std::int64_t want = run.count * stored_row_bytes_;
    std::int64_t at = offset_of(run.begin);
    std::int64_t done = 0;
    while (done < want) {
      const ssize_t got = ::pread(fd_->get(), dst + done, static_cast<std::size_t>(want - done),
                                  static_cast<off_t>(at + done));
      if (got < 0 && errno == EINTR) continue;
      const std::int64_t row = run.begin + done / stored_row_bytes_;
      if (got < 0)
        return fmt::format("{}: reading {} row {} failed: {}", name_, kFeat, row,
                           std::strerror(errno));
      if (got == 0)
        return fmt::format("{}: {} row {} lies past the end of the file (truncated while the job "
                           "ran?)",
                           name_, kFeat, row);
      done += got;
    }
    if (widen) datasets::widen_features(stored.data(), rows, run.count * feature_dim_, dtype_);
    return {};
  }

  void read_run_hdf5(const Run& run, void* out, bool as_stored = false) const {
    hsize_t start[2] = {static_cast<hsize_t>(run.begin), 0};
    hsize_t count[2] = {static_cast<hsize_t>(run.count), static_cast<hsize_t>(feature_dim_)};
    h5::Handle file_space(TESSEL_CHECK_HDF5(H5Dget_space(dataset_.get())));
    TESSEL_CHECK_HDF5(
        H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr));
    h5::Handle mem_space(TESSEL_CHECK_HDF5(H5Screate_simple(2, count, nullptr)));
    float* rows = static_cast<float*>(out) + run.out_row * feature_dim_;
    if (as_stored) {
      h5::Handle type(TESSEL_CHECK_HDF5(H5Dget_type(dataset_.get())));
      if (H5Dread(dataset_.get(), type.get(), mem_space.get(), file_space.get(), H5P_DEFAULT,
                  static_cast<char*>(out) + run.out_row * stored_row_bytes_) >= 0)
        return;
    } else if (dtype_ != datasets::FeatureDtype::float32) {
      // Read as stored, widened here (the same conversion as the pread path's).
      std::vector<std::uint16_t> stored(static_cast<std::size_t>(run.count * feature_dim_));
      h5::Handle type(TESSEL_CHECK_HDF5(H5Dget_type(dataset_.get())));
      if (H5Dread(dataset_.get(), type.get(), mem_space.get(), file_space.get(), H5P_DEFAULT,
                  stored.data()) >= 0) {
        datasets::widen_features(stored.data(), rows, run.count * feature_dim_, dtype_);
        return;
      }
    } else if (H5Dread(dataset_.get(), H5T_NATIVE_FLOAT, mem_space.get(), file_space.get(),
                       H5P_DEFAULT, rows) >= 0) {
      return;
    }
    TESSEL_FAIL("{}: reading {} rows {} to {} failed (truncated or changed while the job ran?)",
                name_, kFeat, run.begin, run.begin + run.count - 1);
  }

  // Rows first..last were just read: the file must still be the one opened and scanned. A write
  // into it (same size or not) moves its modification time before its bytes change, so rows read
  // before this check are never used once the file was modified; the granularity is the file
  // system's timestamps (a write within one tick of the open goes unseen).
  void check_unchanged(std::int64_t first, std::int64_t last) const {
    struct stat now {};
    if (::fstat(watch_->get(), &now) != 0)
      TESSEL_FAIL("{}: cannot stat while reading {} rows {} to {}: {}", name_, kFeat, first, last,
                  std::strerror(errno));
    const bool same = now.st_size == opened_.st_size &&
                      now.st_mtim.tv_sec == opened_.st_mtim.tv_sec &&
                      now.st_mtim.tv_nsec == opened_.st_mtim.tv_nsec;
    TESSEL_EXPECTS(same,
                   "{}: the file changed while the job ran (modified after it was opened); {} rows "
                   "{} to {} read after the change cannot be trusted",
                   name_, kFeat, first, last);
  }

  // Drops rows [begin, end)'s pages from the page cache (only where this reader put them: the
  // budget covers the rows held, not a second copy in the kernel's cache).
  void drop_cached(std::int64_t begin, std::int64_t end) const {
    if (!options_.drop_page_cache || fd_ == nullptr || begin >= end) return;
    if (direct_) {
      for (std::int64_t r = begin; r < end;) {
        const std::int64_t stop = std::min(end, (r / chunk_rows_ + 1) * chunk_rows_);
        ::posix_fadvise(fd_->get(), static_cast<off_t>(offset_of(r)),
                        static_cast<off_t>((stop - r) * stored_row_bytes_), POSIX_FADV_DONTNEED);
        r = stop;
      }
    } else {
      ::posix_fadvise(fd_->get(), 0, 0, POSIX_FADV_DONTNEED);
    }
  }

  // The rows just read go into the recency tier (CLOCK: a hit marks a row; the hand clears marks
  // and replaces the first unmarked row). Rows pointed at in this call are never replaced.
  void admit() {
    const auto capacity = static_cast<std::int64_t>(recent_id_.size());
    if (capacity == 0) return;
    for (std::size_t k = 0; k < misses_.size(); ++k) {
      std::int64_t victim = -1;
      for (std::int64_t tries = 0; tries < 2 * capacity; ++tries) {
        const auto s = static_cast<std::size_t>(hand_);
        hand_ = (hand_ + 1) % capacity;
        if (recent_pin_[s] == call_) continue;
        if (recent_ref_[s] != 0) {
          recent_ref_[s] = 0;
          continue;
        }
        victim = static_cast<std::int64_t>(s);
        break;
      }
      if (victim < 0) return;
      const auto s = static_cast<std::size_t>(victim);
      if (recent_id_[s] >= 0) where_[static_cast<std::size_t>(recent_id_[s])] = -1;
      recent_id_[s] = misses_[k];
      recent_ref_[s] = 0;
      recent_pin_[s] = call_;
      where_[static_cast<std::size_t>(misses_[k])] = -static_cast<std::int32_t>(s) - 2;
      std::copy_n(miss_rows_[k], feature_dim_, recent_rows_.data() + victim * feature_dim_);
    }
  }

  std::string name_;
  std::int64_t num_rows_;
  std::int64_t feature_dim_;
  std::int64_t row_bytes_;        // a float32 row, as the cache tiers hold it
  std::int64_t stored_row_bytes_; // a row as the file stores it (float32 or 16-bit)
  datasets::FeatureDtype dtype_ = datasets::FeatureDtype::float32;
  OutOfCoreOptions options_;
  h5::File file_;
  h5::Handle dataset_;
  std::unique_ptr<Fd> fd_;
  std::unique_ptr<Fd> watch_; // the file as opened, for check_unchanged()
  struct stat opened_ {};
  bool direct_ = false; // every row's file offset is known (pread possible)
  FeatureIo io_ = FeatureIo::hdf5;
  std::int64_t chunk_rows_ = 1;
  std::vector<std::int64_t> chunk_addr_;

  // Row l: where_[l] >= 0 is its static slot, <= -2 its recent slot -(where + 2), -1 not held.
  std::vector<std::int32_t> where_;
  std::vector<float> static_rows_;
  std::vector<float> recent_rows_;
  std::vector<LocalId> recent_id_;
  std::vector<std::uint8_t> recent_ref_;
  std::vector<std::uint64_t> recent_pin_;
  std::int64_t hand_ = 0;
  std::uint64_t call_ = 0;

  std::vector<std::int64_t> miss_pos_;
  std::vector<LocalId> misses_;
  std::vector<const float*> miss_rows_; // where the last resolve() left each of misses_
  Tensor staging_;                  // the rows read by the last resolve(), normalized
  std::vector<float> staging_rows_; // the same, not normalized (without a read-ahead's rows)
  FeatureReadStats stats_;

  // The read-ahead: its thread, the sorted rows it reads (valid until the next read_ahead()),
  // their values, its reads' statistics and its error, both taken over by finish_ahead().
  std::thread ahead_thread_;
  std::vector<LocalId> ahead_ids_;
  std::vector<float> ahead_rows_;
  FeatureReadStats ahead_stats_;
  std::exception_ptr ahead_error_;
  std::vector<LocalId> rest_;
  std::vector<std::int64_t> rest_pos_;
  std::vector<float> rest_rows_;
};

} // namespace

std::unique_ptr<OwnedFeatureRows> rows_in_memory(std::span<const float> features,
                                                 std::int64_t feature_dim) {
  return std::make_unique<RowsInMemory>(features, feature_dim);
}

std::unique_ptr<OwnedFeatureRows> open_rows_out_of_core(const std::filesystem::path& part_file,
                                                        std::int64_t num_rows,
                                                        std::int64_t feature_dim,
                                                        std::span<const std::int64_t> degree,
                                                        const OutOfCoreOptions& options) {
  return std::make_unique<RowsOutOfCore>(part_file, num_rows, feature_dim, degree, options);
}

void forget_user_block_layout() { g_user_block_layout.store(0); }

} // namespace tessel::sampling
