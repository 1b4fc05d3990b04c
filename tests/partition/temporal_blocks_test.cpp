// Tests of the snapshot layout's blocks: balanced_snapshot_blocks against every split into
// contiguous blocks of small cases, the blocks of the dynamic benchmark's store, and version 1
// partition manifests (which held even blocks) still read.
#include "tessel/core/error.hpp"
#include "tessel/partition/temporal.hpp"

#include "test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <vector>

namespace tessel::partition {
namespace {

struct Shares {
  std::int64_t max_train = 0, max_size = 0;
};

Shares shares_of(const std::vector<std::int64_t>& off, std::int64_t train_end) {
  Shares s;
  for (std::size_t p = 0; p + 1 < off.size(); ++p) {
    s.max_train = std::max(s.max_train,
                           std::max<std::int64_t>(0, std::min(off[p + 1], train_end) - off[p]));
    s.max_size = std::max(s.max_size, off[p + 1] - off[p]);
  }
  return s;
}

double cost_of(const Shares& s, double evaluations) {
  return 2.0 * static_cast<double>(s.max_train) + evaluations * static_cast<double>(s.max_size);
}

// Every split of [0, T) into P non-empty contiguous blocks in order.
void for_each_split(std::int64_t T, int P,
                    const std::function<void(const std::vector<std::int64_t>&)>& visit) {
  std::vector<std::int64_t> off(static_cast<std::size_t>(P + 1), 0);
  off[P] = T;
  std::function<void(int)> place = [&](int p) {
    if (p == P) {
      visit(off);
      return;
    }
    for (std::int64_t at = off[p - 1] + 1; at <= T - (P - p); ++at) {
      off[p] = at;
      place(p + 1);
    }
  };
  if (P == 1)
    visit(off);
  else
    place(1);
}

TEST(BalancedSnapshotBlocks, CheapestOfEverySplitWithTheSmallestTrainingShare) {
  for (std::int64_t T = 1; T <= 11; ++T)
    for (int P = 1; P <= std::min<std::int64_t>(T, 4); ++P)
      for (std::int64_t E = 0; E <= T; ++E)
        for (double evaluations : {0.0, 0.2, 1.0, 3.0}) {
          const auto off = balanced_snapshot_blocks(T, E, P, evaluations);
          const std::string what = "T " + std::to_string(T) + " train_end " + std::to_string(E) +
                                   " P " + std::to_string(P) + " evaluations " +
                                   std::to_string(evaluations);
          ASSERT_EQ(off.size(), static_cast<std::size_t>(P + 1)) << what;
          ASSERT_EQ(off.front(), 0) << what;
          ASSERT_EQ(off.back(), T) << what;
          for (int p = 0; p < P; ++p) ASSERT_LT(off[p], off[p + 1]) << what << " part " << p;
          double best = 1e300;
          std::int64_t best_train = T + 1;
          for_each_split(T, P, [&](const std::vector<std::int64_t>& split) {
            const double c = cost_of(shares_of(split, E), evaluations);
            if (c < best - 1e-12) {
              best = c;
              best_train = shares_of(split, E).max_train;
            } else if (c < best + 1e-12) {
              best_train = std::min(best_train, shares_of(split, E).max_train);
            }
          });
          const Shares got = shares_of(off, E);
          EXPECT_NEAR(cost_of(got, evaluations), best, 1e-12) << what;
          EXPECT_EQ(got.max_train, best_train) << what;
        }
}

// The dynamic benchmark's store: 32 snapshots, training [0, 22). Even blocks of all snapshots
// gave 16 and 6 training snapshots at P = 2.
TEST(BalancedSnapshotBlocks, BenchmarkStore) {
  // Evaluating once in a run: the training range splits evenly, the last block takes the rest.
  EXPECT_EQ(balanced_snapshot_blocks(32, 22, 2, 0.25), (std::vector<std::int64_t>{0, 11, 32}));
  EXPECT_EQ(balanced_snapshot_blocks(32, 22, 4, 0.25),
            (std::vector<std::int64_t>{0, 6, 12, 18, 32}));
  // Evaluating every epoch at P = 2: still 11 and 11 (2 * 11 + 21 = 43 against 2 * 16 + 16 = 48
  // for even blocks of all snapshots).
  EXPECT_EQ(balanced_snapshot_blocks(32, 22, 2, 1.0), (std::vector<std::int64_t>{0, 11, 32}));
  // At P = 4 the evaluation's forward over all snapshots outweighs: 2 * 8 + 8 = 24 against
  // 2 * 6 + 14 = 26, so the blocks are even.
  EXPECT_EQ(balanced_snapshot_blocks(32, 22, 4, 1.0),
            (std::vector<std::int64_t>{0, 8, 16, 24, 32}));
  EXPECT_EQ(balanced_snapshot_blocks(32, 32, 4, 1.0), snapshot_blocks(32, 4));
  EXPECT_EQ(balanced_snapshot_blocks(32, 22, 1, 1.0), (std::vector<std::int64_t>{0, 32}));
}

// A version 1 manifest (with its even snapshot blocks) still reads; a newer version is refused
// with one line naming the file.
TEST(TemporalManifest, VersionOneReadsAndNewerIsRefused) {
  test::TempDir dir("temporal-manifest");
  auto write = [&](int version) {
    nlohmann::json j = {{"format", kTemporalPartitionFormat},
                        {"version", version},
                        {"dataset", "d"},
                        {"num_parts", 2},
                        {"method", "metis"},
                        {"num_nodes", 10},
                        {"num_snapshots", 9},
                        {"feature_dim", 3},
                        {"num_classes", 0},
                        {"vertex_offsets", {0, 4, 10}},
                        {"store", "temporal.h5"}};
    if (version == 1) j["snapshot_offsets"] = {0, 4, 9};
    std::ofstream(dir.path() / "partition.json") << j.dump();
  };
  write(1);
  const TemporalManifest m = read_temporal_manifest(dir.path());
  EXPECT_EQ(m.version, 1);
  EXPECT_EQ(m.vertex_offsets, (std::vector<NodeId>{0, 4, 10}));
  EXPECT_EQ(m.num_snapshots, 9);
  write(kTemporalPartitionVersion + 1);
  try {
    read_temporal_manifest(dir.path());
    ADD_FAILURE() << "a newer manifest was read";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("partition.json"), std::string::npos) << what;
    EXPECT_NE(what.find("version " + std::to_string(kTemporalPartitionVersion + 1)),
              std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace tessel::partition
