// Partitions of temporal stores for `--mode dynamic`: snapshot blocks (rank r owns consecutive
// snapshots, whole graphs) and vertex ranges (METIS on the union graph, per-snapshot halos).
#pragma once

#include "tessel/core/types.hpp"
#include "tessel/partition/partitioner.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tessel::partition {

constexpr const char* kTemporalPartitionFormat = "tessel-temporal-partition";
// Version 2 dropped the snapshot blocks (version 1's `snapshot_offsets`, ignored when read): the
// trainer chooses them, since the best blocks depend on the training range and on how often a
// run evaluates.
constexpr int kTemporalPartitionVersion = 2;

// partition.json of a temporal partition folder. The folder also holds temporal.h5: the
// source store with nodes relabeled so that part p owns [vertex_offsets[p],
// vertex_offsets[p+1]) (its /node/orig_id maps back), which both layouts read from.
struct TemporalManifest {
  int num_parts = 0;
  int version = kTemporalPartitionVersion;
  std::string dataset, method;
  std::int64_t num_nodes = 0, num_snapshots = 0, feature_dim = 0, num_classes = 0;
  std::vector<NodeId> vertex_offsets;            // [num_parts + 1]
  std::filesystem::path store;                   // dir / "temporal.h5"
  nlohmann::json stats;                          // what the partitioner measured
};

// Snapshot block of each part: [offsets[p], offsets[p+1]), as even as T / parts allows.
std::vector<std::int64_t> snapshot_blocks(std::int64_t num_snapshots, int num_parts);

// The snapshot blocks of the snapshot layout that minimize the graph phase of an average epoch.
// The ranks meet at every transposition, so a phase lasts as long as its busiest rank: a
// training epoch runs the graph phase forward and backward (about twice the forward's work)
// over the snapshots [0, train_end), and an evaluation runs it forward over all snapshots. The
// blocks minimize 2 * max_r |block_r & [0, train_end)| + evaluations_per_epoch * max_r |block_r|;
// among equal costs, the smaller largest training share, then the smaller largest block. Blocks
// are contiguous and in rank order, and none is empty when num_snapshots >= num_parts.
// Returns offsets [num_parts + 1]: part p owns [off[p], off[p+1]).
std::vector<std::int64_t> balanced_snapshot_blocks(std::int64_t num_snapshots,
                                                   std::int64_t train_end, int num_parts,
                                                   double evaluations_per_epoch);

// Reads the store, assigns vertices (METIS on the symmetrized union of all snapshots without
// self-loops, or random), relabels, writes out_dir/temporal.h5 and out_dir/partition.json (the
// folder appears complete or not at all). Returns the manifest, stats filled.
TemporalManifest partition_temporal_store(const std::filesystem::path& store,
                                          const std::filesystem::path& out_dir, int num_parts,
                                          Method method, std::uint64_t seed, bool force);

bool is_temporal_partition(const std::filesystem::path& dir);
// Reads and checks dir/partition.json. Throws InputError naming the file.
TemporalManifest read_temporal_manifest(const std::filesystem::path& dir);

}  // namespace tessel::partition
