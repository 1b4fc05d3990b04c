// Test helpers for the partition layer: small synthetic datasets (planted partitions) and an
// independent verifier of a partition folder against its source dataset.
#pragma once

#include "tessel/datasets/dataset.hpp"
#include "tessel/partition/part.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tessel::test {

struct PlantedOptions {
  std::int64_t num_nodes = 400;
  int blocks = 4;        // planted communities: node v is in block v * blocks / n
  double avg_degree = 8; // undirected edges drawn per node (before cleaning)
  double inside = 0.9;   // fraction of edges drawn inside the node's block
  std::int64_t feature_dim = 5;
  std::int64_t num_classes = 3;
  bool directed = false;                 // store edges as directed (otherwise each once, like OGB)
  bool self_loops_and_duplicates = true; // sprinkle some in, to be cleaned by the partitioner
  std::uint64_t seed = 7;
  std::string name = "planted";
};

// A dataset whose nodes are shuffled across communities (so contiguous ids do not give a good
// partition by themselves), with features, labels (some -1) and disjoint splits.
datasets::Dataset planted_dataset(const PlantedOptions& options);

// The expected training edges (src, dst) of `data`: self-loops and duplicates dropped, both
// directions when symmetrized; sorted.
std::vector<std::pair<NodeId, NodeId>> expected_edges(const datasets::Dataset& data,
                                                      bool symmetrized);

// Verifies a partition folder against its source with plain containers (no library helpers
// beyond read_manifest/load_part): ownership, edge set, halos, owners, degrees, edge cut,
// features, labels and splits. Reports failures through gtest; *cut gets the recomputed cut.
void verify_partition(const std::filesystem::path& dir, const datasets::Dataset& source,
                      bool symmetrized, std::int64_t* cut = nullptr);

// Edges u -> v of g (rows are in-neighbors) whose endpoints are in different parts.
std::int64_t directed_cut(const CsrT<std::int32_t>& g, const std::vector<std::int32_t>& part);

// Bytes of a file.
std::string file_bytes(const std::filesystem::path& file);

} // namespace tessel::test
