// SIGN precomputation: the propagated features [X, ÂX, ..., Â^K X] of every owned node,
// computed with the halo exchange and SpMM, stored per part in HDF5 and reused across runs.
#pragma once

#include "tessel/comm/communicator.hpp"
#include "tessel/partition/part.hpp"
#include "tessel/nn/aggregator.hpp"

#include <cstdint>
#include <filesystem>
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

// Reads every rank's file when all of them are present, else computes and writes them (dir is
// created). Collective. Returns this rank's [n_owned, (K+1) F] block; *computed tells which.
std::vector<float> load_or_precompute(comm::Communicator& comm, const partition::Part& part,
                                      const std::string& dataset, const PrecomputeOptions& options,
                                      const std::filesystem::path& dir, bool* computed = nullptr);

} // namespace tessel::dist
