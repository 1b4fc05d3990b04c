// Reading a rank's partition: the manifest and part file every rank reads and agrees on, the
// model's widths from them, and where the feature rows live (--feature-memory).
#include "tessel/train/train.hpp"

#include "tessel/train/feature_memory.hpp"
#include "tessel/train/trainer.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/mpi.hpp"
#include "tessel/core/spill.hpp"
#include "tessel/kernels/dense.hpp"
#include "tessel/sampling/feature_rows.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace tessel::train {
namespace fs = std::filesystem;

namespace {

// A string of each rank (an error message, empty where it succeeded; a host name), gathered on
// every rank. Collective.
std::vector<std::string> gather_strings(comm::Communicator& comm, const std::string& mine) {
  constexpr std::size_t kLongest = 1000;
  const std::string cut = mine.size() > kLongest ? mine.substr(0, kLongest) + "..." : mine;
  const auto lengths = comm.allgather_value<std::int64_t>(static_cast<std::int64_t>(cut.size()));
  const std::int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::vector<std::string> out(lengths.size());
  if (longest == 0) return out;
  std::vector<char> padded(static_cast<std::size_t>(longest), '\0');
  std::copy(cut.begin(), cut.end(), padded.begin());
  std::vector<char> all(padded.size() * lengths.size());
  comm.allgather(padded.data(), longest, all.data(), DType::u8);
  for (std::size_t r = 0; r < lengths.size(); ++r)
    out[r].assign(all.data() + r * padded.size(), static_cast<std::size_t>(lengths[r]));
  return out;
}

// Every rank's host name. Collective.
std::vector<std::string> gather_hosts(comm::Communicator& comm) {
  return gather_strings(comm, mpi::hostname());
}

// Runs `read` on every rank and agrees on the outcome: when it failed with an InputError on
// any rank, every rank throws one AgreedInputError naming each failing rank and its host (or,
// when every rank failed alike, the one message). `hint` ends the message. Collective.
template <class F>
void read_on_every_rank(comm::Communicator& comm, const std::string& hint, F&& read) {
  std::string error;
  try {
    read();
  } catch (const InputError& e) {
    error = e.what();
    if (error.empty()) error = "failed";
  }
  const auto errors = gather_strings(comm, error);
  std::vector<int> failed;
  for (int r = 0; r < comm.size(); ++r)
    if (!errors[static_cast<std::size_t>(r)].empty()) failed.push_back(r);
  if (failed.empty()) return;
  const auto hosts = gather_hosts(comm);
  const bool alike = static_cast<int>(failed.size()) == comm.size() &&
                     std::all_of(errors.begin(), errors.end(),
                                 [&](const std::string& e) { return e == errors[0]; });
  if (alike) throw AgreedInputError(errors[0], "");
  constexpr std::size_t kNamed = 8;
  std::string list;
  for (std::size_t i = 0; i < failed.size() && i < kNamed; ++i) {
    const auto r = static_cast<std::size_t>(failed[i]);
    list += fmt::format("{}rank {} (host {}): {}", i == 0 ? "" : "; ", r, hosts[r], errors[r]);
  }
  if (failed.size() > kNamed) list += fmt::format("; and {} more ranks", failed.size() - kNamed);
  throw AgreedInputError(fmt::format("{} of {} ranks failed to read the partition: {}{}",
                                     failed.size(), comm.size(), list, hint),
                         "");
}

}  // namespace

RankPartition read_rank_partition(
    comm::Communicator& comm, const fs::path& dir, bool features,
    const std::function<bool(const partition::Manifest&)>& spill_graph) {
  const std::string hint =
      fmt::format(" (each rank reads partition.json and part-<rank>.h5 from {} on its own host)",
                  dir.string());
  RankPartition out;
  read_on_every_rank(comm, hint, [&] { out.manifest = partition::read_manifest(dir); });
  // Copies of the folder on several hosts must be copies of one partition.
  const auto sums = comm.allgather_value<std::int64_t>(
      static_cast<std::int64_t>(std::hash<std::string>{}(out.manifest.raw.dump())));
  std::vector<int> differ;
  for (int r = 0; r < comm.size(); ++r)
    if (sums[static_cast<std::size_t>(r)] != sums[0]) differ.push_back(r);
  if (!differ.empty()) {
    const auto hosts = gather_hosts(comm);
    std::set<std::string> where;
    for (const int r : differ) where.insert(hosts[static_cast<std::size_t>(r)]);
    throw AgreedInputError(
        fmt::format("{}: the copy on {} {} (ranks {}) differs from the one on host {} (rank 0); "
                    "copy the same partition folder to every host",
                    (dir / "partition.json").string(), where.size() == 1 ? "host" : "hosts",
                    fmt::join(where, ", "), fmt::join(differ, ", "), hosts[0]),
        "");
  }
  if (out.manifest.num_parts != comm.size())
    throw AgreedInputError(
        fmt::format(
            "{} holds a partition into {} parts, but {} ranks are running: run mpirun -np {}",
            dir.string(), out.manifest.num_parts, comm.size(), out.manifest.num_parts),
        "");
  const bool spill = spill_graph && spill_graph(out.manifest);
  read_on_every_rank(comm, hint, [&] {
    std::optional<spill::Scope> scope;
    if (spill) scope.emplace(scratch_folder());
    partition::LoadOptions load;
    load.features = features;
    out.part = partition::load_part(dir, comm.rank(), out.manifest, load);
  });
  return out;
}

namespace {

// Ranks that run on this rank's host (they share its memory). Collective.
int ranks_on_my_host(comm::Communicator& comm) {
  const auto hosts = gather_hosts(comm);
  return static_cast<int>(
      std::count(hosts.begin(), hosts.end(), hosts[static_cast<std::size_t>(comm.rank())]));
}

// The reader of this rank's feature rows within `budget` bytes (part.features stays empty).
// TESSEL_FEATURE_IO (pread or hdf5), TESSEL_FEATURE_PAGE_CACHE=keep and TESSEL_FEATURE_RECENT
// (the recency tier's share) choose what scripts/bench/out_of_core.sh compares.
void open_feature_rows(const TrainOptions& options, int rank, std::int64_t budget,
                       LoadedPart& loaded) {
  const partition::Part& part = loaded.part;
  sampling::OutOfCoreOptions ooc;
  ooc.budget_bytes = budget;
  ooc.normalize_rows = options.normalize_features == FeatureNormalization::row;
  ooc.checksum = partition::recorded_feature_checksum(loaded.manifest, rank);
  if (const char* io = std::getenv("TESSEL_FEATURE_IO"); io != nullptr) {
    const std::string word = io;
    TESSEL_EXPECTS(word == "pread" || word == "hdf5",
                   "TESSEL_FEATURE_IO={}: expected pread or hdf5", word);
    ooc.io = word == "hdf5" ? sampling::FeatureIo::hdf5 : sampling::FeatureIo::pread;
  }
  if (const char* keep = std::getenv("TESSEL_FEATURE_PAGE_CACHE"); keep != nullptr)
    ooc.drop_page_cache = std::string(keep) != "keep";
  if (const char* recent = std::getenv("TESSEL_FEATURE_RECENT"); recent != nullptr)
    ooc.recent_fraction = std::atof(recent);
  std::span<const std::int64_t> degree(part.degree.data(),
                                       static_cast<std::size_t>(part.num_owned));
  loaded.feature_rows = sampling::open_rows_out_of_core(
      options.part_dir / partition::part_file_name(rank), part.num_owned,
      loaded.manifest.feature_dim, degree, ooc);
}

// Where this rank's feature rows go (--feature-memory), decided from the manifest alone, before
// the part is read: an out-of-core rank reads its graph's column ids into a scratch-file mapping
// too (read_rank_partition's spill_graph).
struct FeaturePlacement {
  bool out_of_core = false;
  std::int64_t budget = 0;
  std::int64_t feature_bytes = 0;  // this rank's, float32
  std::int64_t choice = 0;         // ranks out of core
  std::string why;
};

// --feature-memory for a part to be loaded without its features: either they are read whole
// into part.features, or (sampled mode, a budget that does not hold them) read from the part
// file (place_features). Collective.
FeaturePlacement decide_features(comm::Communicator& comm, const TrainOptions& options,
                                 bool out_of_core_ok, const partition::Manifest& manifest) {
  const FeatureMemory& memory = options.feature_memory;
  const auto rank = static_cast<std::size_t>(comm.rank());
  const std::int64_t num_owned = manifest.offsets[rank + 1] - manifest.offsets[rank];
  const std::int64_t feature_bytes = num_owned * manifest.feature_dim *
                                     static_cast<std::int64_t>(sizeof(float));
  const std::int64_t largest = comm.allreduce_value(feature_bytes, comm::ReduceOp::max);
  if (!out_of_core_ok && memory.kind == FeatureMemory::Kind::bytes && memory.bytes < largest)
    throw AgreedInputError(
        fmt::format("--feature-memory {}: {} mode holds all of a rank's feature rows in memory "
                    "({} on the largest part, {} bytes); give at least that, or train out of "
                    "core with --mode sampled",
                    memory.text, options.mode, format_mib(largest), largest),
        "");
  bool out_of_core = false;
  std::int64_t budget = 0;
  std::string why;
  if (!out_of_core_ok || memory.kind == FeatureMemory::Kind::all) {
    why = out_of_core_ok ? "--feature-memory all" : fmt::format("{} mode holds them", options.mode);
  } else if (memory.kind == FeatureMemory::Kind::bytes) {
    out_of_core = memory.bytes < feature_bytes;
    budget = memory.bytes;
    why = fmt::format("--feature-memory {}", memory.text);
  } else {
    // auto: everything when the features (twice: the part's rows and evaluation's copy) and the
    // model's parameters, gradients and two Adam moments fit this rank's share of the room left.
    const MemoryHeadroom room = memory_headroom();
    const int sharing = ranks_on_my_host(comm);
    const double weights =
        static_cast<double>(options.model.hidden) *
        (static_cast<double>(manifest.feature_dim) + static_cast<double>(manifest.num_classes) +
         std::max(0, options.model.layers - 2) * static_cast<double>(options.model.hidden));
    const auto model_bytes = static_cast<std::int64_t>(16.0 * weights);
    const std::int64_t need = 2 * feature_bytes + model_bytes;
    // The part is not read yet: its graph comes out of the same room (partition.json's counts:
    // 4-byte column ids; 8-byte row offsets, ids, degrees and labels; halo owners).
    const auto r = static_cast<std::size_t>(comm.rank());
    const nlohmann::json* counts =
        manifest.raw.contains("parts") && manifest.raw["parts"].is_array() &&
                manifest.raw["parts"].size() > r
            ? &manifest.raw["parts"][r]
            : nullptr;
    auto count = [&](const char* key, std::int64_t otherwise) {
      return counts != nullptr && counts->contains(key) && (*counts)[key].is_number_integer()
                 ? (*counts)[key].get<std::int64_t>()
                 : otherwise;
    };
    const std::int64_t edges = count("edges", manifest.num_edges / std::max(manifest.num_parts, 1));
    const std::int64_t halo = count("halo", 0);
    const std::int64_t graph_bytes = 4 * edges + 32 * num_owned + 24 * halo;
    if (room.bytes < 0) {
      why = "auto, no memory limit could be read";
    } else {
      const std::int64_t share = room.bytes / std::max(sharing, 1) - graph_bytes;
      out_of_core = need > share;
      // A quarter of the share: evaluation still reads every row for its duration.
      budget = std::max<std::int64_t>(0, share - model_bytes) / 4;
      why = fmt::format("auto: {} of features and model {} this rank's {} of {} after its "
                        "graph's {}{}",
                        format_mib(need), out_of_core ? "exceed" : "fit in",
                        format_mib(share), room.source, format_mib(graph_bytes),
                        sharing > 1 ? fmt::format(" ({} ranks share the host)", sharing) : "");
    }
  }
  const auto choice = comm.allreduce_value<std::int64_t>(out_of_core ? 1 : 0);
  return {out_of_core, budget, feature_bytes, choice, why};
}

// Reads the features of a part loaded without them as decided (decide_features): whole into
// part.features, or through loaded.feature_rows. Logs the choice and why. Collective.
void place_features(comm::Communicator& comm, const TrainOptions& options,
                    const FeaturePlacement& placement, LoadedPart& loaded) {
  const partition::Manifest& manifest = loaded.manifest;
  partition::Part& part = loaded.part;
  // Plain references, not a structured binding: lambdas below capture them (clang 14 cannot
  // capture a binding).
  const bool out_of_core = placement.out_of_core;
  const std::int64_t budget = placement.budget, feature_bytes = placement.feature_bytes;
  const std::int64_t choice = placement.choice;
  const std::string& why = placement.why;
  read_on_every_rank(comm, "", [&] {
    if (!out_of_core) {
      partition::load_part_features(options.part_dir, comm.rank(), manifest, part);
      return;
    }
    open_feature_rows(options, comm.rank(), budget, loaded);
  });
  if (!out_of_core) {
    log::info("features: in memory on {}, {} on rank 0 ({})",
              choice == 0 ? std::string("every rank")
                          : fmt::format("{} of {} ranks", comm.size() - choice, comm.size()),
              format_mib(feature_bytes), why);
    return;
  }
  log::info("features: out of core on {}: rank 0 holds {} of its {} in a budget of {} ({}); "
            "the rest is read from its part file{}",
            choice == comm.size() ? std::string("every rank")
                                  : fmt::format("{} of {} ranks", choice, comm.size()),
            format_mib(loaded.feature_rows ? loaded.feature_rows->held_bytes() : 0),
            format_mib(feature_bytes), format_mib(budget), why,
            part.feature_dtype == datasets::FeatureDtype::float32
                ? std::string()
                : fmt::format(" (stored as {}, widened to float32 as read)",
                              datasets::to_string(part.feature_dtype)));
}

LoadedPart load_part_with(comm::Communicator& comm, TrainOptions& options, bool out_of_core_ok) {
  const bool decide = options.feature_memory.kind != FeatureMemory::Kind::all;
  FeaturePlacement placement;
  RankPartition read = read_rank_partition(
      comm, options.part_dir, !decide, [&](const partition::Manifest& manifest) {
        if (!decide) return false;
        placement = decide_features(comm, options, out_of_core_ok, manifest);
        return placement.out_of_core;
      });
  LoadedPart loaded;
  loaded.manifest = std::move(read.manifest);
  loaded.part = std::move(read.part);
  const partition::Manifest& manifest = loaded.manifest;
  partition::Part& part = loaded.part;
  options.model.in_dim = manifest.feature_dim;
  options.model.seed = options.seed;
  if (options.task == DynamicTask::link_prediction) {
    // Link prediction (full mode's --task link): the encoder outputs node embeddings.
    options.model.out_dim = options.link_out_dim;
    TESSEL_EXPECTS(manifest.link.present,
                   "{}: --task link needs a partition of a link store (tessel convert ... "
                   "--edge-split, or an ogbl dataset)",
                   options.part_dir.string());
  } else {
    options.model.out_dim = manifest.num_classes;
    TESSEL_EXPECTS(manifest.num_classes >= 2, "{}: the dataset has {} classes; need at least 2",
                   options.part_dir.string(), manifest.num_classes);
    TESSEL_EXPECTS(manifest.num_train > 0, "{}: the dataset has no training nodes",
                   options.part_dir.string());
  }
  if (decide) {
    place_features(comm, options, placement, loaded);
    if (placement.out_of_core && spill::write_back(part.graph.indices.data()))
      log::info("graph: rank 0's {} of column ids in a scratch file in {} that the kernel "
                "pages in and out (out of core)",
                format_mib(static_cast<std::int64_t>(part.graph.indices.size() * sizeof(LocalId))),
                scratch_folder().string());
  }
  if (options.normalize_features == FeatureNormalization::row && !part.features.empty()) {
    // The kernel op (L1: each row divided by the sum of its absolute values), then back into
    // the part's rows, which every mode reads its features from.
    Tensor features = Tensor::from_vector(part.features, {part.num_owned, part.feature_dim});
    kernels::normalize_rows(features);
    std::copy_n(features.data<float>(), features.numel(), part.features.data());
  }
  // An allocation that fails while the trainer is built is named with the flags that size it.
  const double weights_gb =
      4e-9 * options.model.hidden *
      (static_cast<double>(manifest.feature_dim) + static_cast<double>(manifest.num_classes) +
       std::max(0, options.model.layers - 2) * static_cast<double>(options.model.hidden));
  loaded.activity =
      fmt::format("setting up {} training of a {}-layer {} model with --hidden {} on {} nodes "
                  "x {} features (weights alone {:.2g} GB; lower --hidden or --layers)",
                  options.mode, options.model.layers, options.model.kind, options.model.hidden,
                  part.num_owned, manifest.feature_dim, weights_gb);
  return loaded;
}

}  // namespace

LoadedPart load_graph_part(comm::Communicator& comm, TrainOptions& options) {
  return load_part_with(comm, options, false);
}

LoadedPart load_sampled_part(comm::Communicator& comm, TrainOptions& options) {
  return load_part_with(comm, options, true);
}

}  // namespace tessel::train
