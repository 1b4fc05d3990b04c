// SIGN precomputation: the propagated features [X, ÂX, ..., Â^K X] of every owned node,
// computed with the halo exchange and SpMM, stored per part in HDF5 and reused across runs.
#pragma once

#include "tessel/comm/communicator.hpp"
#include "tessel/partition/part.hpp"
#include "tessel/nn/aggregator.hpp"
#include "tessel/sampling/feature_rows.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tessel::dist {

constexpr const char* kSignFormat = "tessel-sign-features";
constexpr int kSignVersion = 1;

struct PrecomputeOptions {
  int hops = 2;           // K
  nn::Norm op = nn::Norm::gcn;  // gcn: D^-1/2 (A+I) D^-1/2; mean: row mean of in-neighbors
  partition::FeatureNormalization normalize_features = partition::FeatureNormalization::none;  // applied to X first
};

// "sign-<op>-k<K>[-row]" inside the partition folder: where `tessel precompute` writes by
// default and where `--mode pipeline` looks (and computes when missing).
std::filesystem::path default_sign_dir(const std::filesystem::path& part_dir,
                                       const PrecomputeOptions& options);
// "sign-<p>.h5".
std::string sign_file_name(int part);

// [n_owned, (K + 1) F] f32, row-major, hop-major column blocks (hop k at columns [kF, (k+1)F)).
// part.features must be loaded (and already normalized if requested). Collective over the
// ranks of the partition (rank p holds part p): P ranks compute what one rank computes.
std::vector<float> precompute_hops(comm::Communicator& comm, const partition::Part& part,
                                   const PrecomputeOptions& options);

// Writes dir/sign-<p>.h5 atomically (dir must exist).
void write_sign_features(const std::filesystem::path& dir, const partition::Part& part,
                         const std::string& dataset, const PrecomputeOptions& options,
                         const std::vector<float>& hops);
// Reads dir/sign-<p>.h5 into *hops if it exists and was computed from this part with these
// options; returns false when it is absent; throws InputError when it exists but is corrupt or
// was made from another partition or with other options.
bool read_sign_features(const std::filesystem::path& dir, const partition::Part& part,
                        const PrecomputeOptions& options, std::vector<float>* hops);

// Every rank writes its dir/sign-<p>.h5; rank 0 creates dir when missing. Collective. A folder
// this call created is removed again if the job is interrupted, or rank 0's write fails,
// before every rank's file is in place, so no empty or partial folder is left behind.
void write_sign_folder(comm::Communicator& comm, const std::filesystem::path& dir,
                       const partition::Part& part, const std::string& dataset,
                       const PrecomputeOptions& options, const std::vector<float>& hops);

// Opens a reader of this rank's owned rows X as precompute propagates them (already normalized
// when --normalize-features asks), with a cache of at most `cache_bytes` bytes where it reads
// from a file (a reader in memory holds every row whatever it is given).
using InputRowsOpener =
    std::function<std::unique_ptr<sampling::OwnedFeatureRows>(std::int64_t cache_bytes)>;

// Rows of one block of precompute at a row width: TESSEL_INFER_BLOCK_ELEMENTS (default 2^20)
// values, at least one row. Depends on the width alone, never on a memory budget.
std::int64_t sign_block_rows(std::int64_t width);

struct StreamedPrecompute {
  int hops_on_disk = 0;  // hop outputs that went to scratch files (over the budget)
};

// Computes [X, AX, ..., A^K X] of the owned rows a block of rows at a time and writes
// dir/sign-<p>.h5 (the file write_sign_folder writes, bit for bit). X is read through
// open_input's reader; each hop aggregates a block of destination rows from the previous hop's
// rows (owned ones through its reader, halo ones from one exchange per hop in rounds of
// sign_block_rows(F) rows per peer). budget_bytes < 0 holds every hop in memory; otherwise a
// hop's output is held in memory only while the rows held (X's reader and the hops kept) stay
// within the budget, else it is written block by block to a scratch file in dir (removed when
// done, on an error and on SIGINT/SIGTERM/SIGHUP) and read back out of core within what is left
// of the budget. The file is then assembled row block by row block, its CRC-32 computed as it
// is written. Block rows depend on widths only, so every budget writes the same bits. Dir is
// created and removed again as write_sign_folder does. Collective.
StreamedPrecompute precompute_sign_folder(comm::Communicator& comm, const partition::Part& part,
                                          const InputRowsOpener& open_input,
                                          const std::string& dataset,
                                          const PrecomputeOptions& options,
                                          const std::filesystem::path& dir,
                                          std::int64_t budget_bytes);

// Reads every rank's file when all of them are present, else computes and writes them (dir is
// created). Collective. Returns this rank's [n_owned, (K+1) F] block; *computed tells which.
std::vector<float> load_or_precompute(comm::Communicator& comm, const partition::Part& part,
                                      const std::string& dataset, const PrecomputeOptions& options,
                                      const std::filesystem::path& dir, bool* computed = nullptr);

} // namespace tessel::dist
