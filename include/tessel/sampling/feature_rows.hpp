// A part's owned feature rows as the sampler reads them: held in memory, or read from the part
// file on demand within a memory budget (out of core) through a two-tier cache.
#pragma once

#include "tessel/core/types.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tessel::sampling {

// What the out-of-core reader did since the last reset_stats(): rows asked for (after removing
// repeats within one request), those served by each cache tier, those read from the file, the
// bytes read and the seconds the reads took (wall time of the request's read phase).
struct FeatureReadStats {
  std::int64_t requests = 0;
  std::int64_t static_hits = 0;
  std::int64_t recent_hits = 0;
  std::int64_t rows_read = 0;
  std::int64_t bytes_read = 0;
  double read_s = 0;
  // Read-ahead (read_ahead()): missed rows found already read there, and the seconds resolve()
  // waited for a read-ahead still running (read_s counts the read-ahead's own reads).
  std::int64_t ahead_hits = 0;
  double ahead_wait_s = 0;

  std::int64_t hits() const { return static_hits + recent_hits; }
  double hit_rate() const {
    return requests > 0 ? static_cast<double>(hits()) / static_cast<double>(requests) : 0.0;
  }
};

// The owned rows of a part ([num_rows, feature_dim] f32 row-major, host memory), addressed by
// owned local id. The sampler reads every owned row through this, so the rows can live in
// memory or on disk behind it. Not thread-safe: one caller at a time.
class OwnedFeatureRows {
public:
  virtual ~OwnedFeatureRows() = default;
  virtual std::int64_t num_rows() const = 0;
  virtual std::int64_t feature_dim() const = 0;
  // Whether every row is in memory (no reads, no statistics).
  virtual bool in_memory() const = 0;

  // Makes the rows of `locals` (owned local ids, any order, repeats allowed) readable:
  // rows[i] points at the feature_dim floats of locals[i]. The pointers stay valid until the
  // next call of resolve(), read_block() or read_ahead() (rows a read-ahead brought in are
  // pointed at in its buffer, not copied).
  virtual void resolve(std::span<const LocalId> locals, std::vector<const float*>& rows) = 0;
  // Copies rows [begin, end) into out ([end - begin, feature_dim] row-major).
  virtual void read_block(std::int64_t begin, std::int64_t end, float* out) = 0;
  // Starts reading, on a thread of its own, the rows of `locals` (the next step's) that no
  // cache tier holds, so the reads overlap the caller's compute; the next resolve() waits for
  // them and takes those rows from there. Only when a row is read changes, never its value.
  // One read-ahead at a time (a new one waits for the last); nothing in memory or where reads
  // go through HDF5 (which is not thread-safe).
  virtual void read_ahead(std::span<const LocalId> locals) {}

  // Whether rows not held are read with pread at their file offsets (else through HDF5, for a
  // filtered dataset or one whose chunks could not be located).
  virtual bool reads_at_offsets() const { return false; }

  virtual FeatureReadStats stats() const { return {}; }
  virtual void reset_stats() {}
  // Bytes of memory the rows and their cache hold (the budget's side of the ledger).
  virtual std::int64_t held_bytes() const = 0;
};

// The rows of `features` ([num_rows, feature_dim], kept by the caller) as they are.
std::unique_ptr<OwnedFeatureRows> rows_in_memory(std::span<const float> features,
                                                 std::int64_t feature_dim);

// How out-of-core reads reach the file. pread: each sorted run of rows read with pread() at its
// file offset (the dataset's chunks are unfiltered, so a row's bytes sit at the chunk's address
// plus its offset in the chunk), from a few threads. hdf5: an H5Dread of each run's hyperslab
// (also what a filtered, e.g. compressed, dataset gets).
enum class FeatureIo { pread, hdf5 };

struct OutOfCoreOptions {
  std::int64_t budget_bytes = 0; // rows of both tiers plus their index; >= 0
  // Share of the budget's rows kept for rows read recently (CLOCK replacement); the rest is the
  // static tier, filled once with the highest in-degree rows. 0 by default: with uniform
  // neighbor sampling consecutive steps share few rows, and on a 1M-node synthetic graph at a
  // quarter budget a quarter of recency rows hit 44.9% against 47.4% for the static tier alone
  // (scripts/bench/out_of_core.sh).
  double recent_fraction = 0.0;
  bool normalize_rows = false; // --normalize-features row, applied to each row as it is read
  FeatureIo io = FeatureIo::pread;
  int io_threads = 4;
  // posix_fadvise(POSIX_FADV_DONTNEED) over what was read, so the page cache does not keep a
  // second copy of the rows beside the budget.
  bool drop_page_cache = true;
  // "crc32:<8 hex>" of /node/feat as partition.json records it (empty: not checked). Opening
  // streams the dataset once to check it and that every value is finite.
  std::string checksum;
};

// Opens /node/feat of a part file ([num_rows, feature_dim] f32) for out-of-core reads. `degree`
// (the owned nodes' in-degrees) ranks rows for the static tier. A file that ends before a row
// it is asked for, or a read that fails, throws InputError naming the file and the row.
std::unique_ptr<OwnedFeatureRows> open_rows_out_of_core(const std::filesystem::path& part_file,
                                                        std::int64_t num_rows,
                                                        std::int64_t feature_dim,
                                                        std::span<const std::int64_t> degree,
                                                        const OutOfCoreOptions& options);

// Bytes of the out-of-core reader's index (one slot number per row) that come off the budget
// before any row is cached.
inline std::int64_t out_of_core_index_bytes(std::int64_t num_rows) {
  return num_rows * static_cast<std::int64_t>(sizeof(std::int32_t));
}

// What the readers learned of the HDF5 library's chunk addresses (whether they count a file's
// user block) is kept for the process; this forgets it (tests of how a file decides it).
void forget_user_block_layout();

} // namespace tessel::sampling
