// SIGN precomputation: P ranks compute the hop features one rank computes (1e-6), which equal
// a double-precision reference of D^-1/2 (A+I) D^-1/2 and of the neighbor mean; the files
// round-trip and refuse other options or partitions.
#include "tessel/comm/mpi_communicator.hpp"
#include "tessel/core/error.hpp"
#include "tessel/datasets/h5.hpp"
#include "tessel/partition/part.hpp"
#include "tessel/dist/precompute.hpp"

#include "test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>

using namespace tessel;
namespace fs = std::filesystem;

namespace {

// Rank 0 makes a dataset and its partitions into 1 and P parts; everyone waits for it.
fs::path prepare(comm::Communicator& comm) {
  const fs::path dir =
      fs::path(TESSEL_BINARY_DIR) / "test-tmp" / ("precompute.np" + std::to_string(comm.size()));
  if (comm.rank() == 0) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string tessel = test::tessel_binary().string();
    std::string out;
    EXPECT_EQ(test::run_command(tessel +
                                    " convert synthetic --nodes 400 --avg-degree 7 "
                                    "--classes 3 --feat-dim 5 --seed 4 " +
                                    (dir / "g.h5").string(),
                                &out),
              0)
        << out;
    for (int p : {1, comm.size()})
      EXPECT_EQ(test::run_command(tessel + " partition " + (dir / "g.h5").string() + " --parts " +
                                      std::to_string(p) + " --out " +
                                      (dir / ("p" + std::to_string(p))).string() + " --force",
                                  &out),
                0)
          << out;
  }
  comm.barrier();
  return dir;
}

// [X, AX, ..., A^K X] of a whole graph held as one part, in double.
std::vector<double> reference(const partition::Part& whole, const dist::PrecomputeOptions& o) {
  const std::int64_t n = whole.num_owned, f = whole.feature_dim, width = (o.hops + 1) * f;
  std::vector<double> cur(whole.features.begin(), whole.features.end()), out(n * width);
  for (int k = 0;; ++k) {
    for (std::int64_t v = 0; v < n; ++v)
      for (std::int64_t j = 0; j < f; ++j)
        out[v * width + k * f + j] = cur[v * f + j];
    if (k == o.hops) break;
    std::vector<double> next(cur.size(), 0.0);
    for (std::int64_t v = 0; v < n; ++v) {
      const EdgeId b = whole.graph.indptr[v], e = whole.graph.indptr[v + 1];
      const double dv = static_cast<double>(whole.degree[v]) + 1.0;
      if (o.op == nn::Norm::gcn)
        for (std::int64_t j = 0; j < f; ++j)
          next[v * f + j] = cur[v * f + j] / dv;
      for (EdgeId i = b; i < e; ++i) {
        const LocalId u = whole.graph.indices[i];
        const double w = o.op == nn::Norm::gcn ? 1.0 / std::sqrt((whole.degree[u] + 1.0) * dv)
                                       : 1.0 / static_cast<double>(e - b);
        for (std::int64_t j = 0; j < f; ++j)
          next[v * f + j] += w * cur[u * f + j];
      }
    }
    cur = std::move(next);
  }
  return out;
}

} // namespace

TEST(Precompute, RanksComputeWhatOneRankComputesAndTheReference) {
  auto comm = comm::make_mpi_communicator();
  const fs::path dir = prepare(*comm);
  const int P = comm->size();
  const fs::path parts = dir / ("p" + std::to_string(P));
  const partition::Manifest manifest = partition::read_manifest(parts);
  partition::Part part = partition::load_part(parts, comm->rank(), manifest);
  for (const std::string op : {"gcn", "mean"}) {
    SCOPED_TRACE(op);
    const dist::PrecomputeOptions o{3, option_value<nn::Norm>(op)};
    const std::vector<float> mine = dist::precompute_hops(*comm, part, o);
    const std::int64_t width = (o.hops + 1) * part.feature_dim;
    ASSERT_EQ(static_cast<std::int64_t>(mine.size()), part.num_owned * width);
    // Everyone's rows, keyed by source id, at rank 0.
    std::vector<std::int64_t> to_root(P, 0), rows_to_root(P, 0);
    to_root[0] = part.num_owned;
    rows_to_root[0] = part.num_owned * width;
    const std::vector<std::int64_t> ids(part.orig_id.begin(),
                                        part.orig_id.begin() + part.num_owned);
    const auto all_ids = comm->alltoallv<std::int64_t>(ids, to_root);
    const auto all_rows = comm->alltoallv<float>(mine, rows_to_root);

    // Rank 0 alone computes on the partition into one part.
    auto alone = comm->split(comm->rank() == 0 ? 0 : 1, comm->rank());
    if (comm->rank() != 0) continue;
    const fs::path one = dir / "p1";
    const partition::Manifest m1 = partition::read_manifest(one);
    partition::Part whole = partition::load_part(one, 0, m1);
    const std::vector<float> single = dist::precompute_hops(*alone, whole, o);
    const std::vector<double> exact = reference(whole, o);
    std::map<NodeId, std::int64_t> row_of;
    for (std::int64_t v = 0; v < whole.num_owned; ++v)
      row_of[whole.orig_id[v]] = v;
    ASSERT_EQ(static_cast<std::int64_t>(all_ids.size()), whole.num_owned);
    double worst_ranks = 0, worst_reference = 0;
    for (std::size_t i = 0; i < all_ids.size(); ++i) {
      const std::int64_t v = row_of.at(all_ids[i]);
      for (std::int64_t j = 0; j < width; ++j) {
        const double got = all_rows[i * width + j];
        worst_ranks = std::max(worst_ranks, std::fabs(got - single[v * width + j]));
        worst_reference =
            std::max(worst_reference, std::fabs(got - exact[v * width + j]) /
                                          std::max(1.0, std::fabs(exact[v * width + j])));
      }
    }
    EXPECT_LE(worst_ranks, 1e-6) << P << " ranks against 1";
    EXPECT_LE(worst_reference, 1e-5) << "against the double-precision reference";
    // Hop 0 is X itself, exactly.
    for (std::int64_t j = 0; j < part.feature_dim; ++j)
      EXPECT_EQ(single[j], whole.features[j]);
  }
}

TEST(Precompute, FilesRoundTripAndRefuseOtherOptionsOrPartitions) {
  auto comm = comm::make_mpi_communicator();
  const fs::path dir = prepare(*comm);
  const int P = comm->size();
  const fs::path parts = dir / ("p" + std::to_string(P));
  const partition::Manifest manifest = partition::read_manifest(parts);
  partition::Part part = partition::load_part(parts, comm->rank(), manifest);
  const dist::PrecomputeOptions o{2, nn::Norm::gcn};
  const fs::path out = dist::default_sign_dir(parts, o);
  EXPECT_EQ(out.filename(), "sign-gcn-k2");
  bool computed = false;
  const auto first = dist::load_or_precompute(*comm, part, manifest.dataset, o, out, &computed);
  EXPECT_TRUE(computed);
  EXPECT_TRUE(fs::exists(out / dist::sign_file_name(comm->rank())));
  const auto again = dist::load_or_precompute(*comm, part, manifest.dataset, o, out, &computed);
  EXPECT_FALSE(computed); // reused, not recomputed
  EXPECT_EQ(first, again);
  // The file is written in row blocks; its values are the whole-part SpMM's, bit for bit.
  const std::vector<float> whole = dist::precompute_hops(*comm, part, o);
  ASSERT_EQ(first.size(), whole.size());
  EXPECT_EQ(std::memcmp(first.data(), whole.data(), whole.size() * sizeof(float)), 0);

  std::vector<float> ignored;
  {
    // Each rank's file with its whole-file checksum header wiped and a low mantissa bit of its
    // first value flipped (still finite): its dataset checksum refuses it, naming /feat.
    const fs::path damaged = dir / ("damaged-" + std::to_string(P) + "-" + std::to_string(comm->rank()));
    fs::create_directories(damaged);
    const fs::path file = damaged / dist::sign_file_name(comm->rank());
    fs::copy_file(out / dist::sign_file_name(comm->rank()), file, fs::copy_options::overwrite_existing);
    std::string bytes;
    {
      std::ifstream in(file, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    std::fill(bytes.begin(), bytes.begin() + 64, '\0');
    {
      std::ofstream(file, std::ios::binary) << bytes;
    }
    EXPECT_TRUE(dist::read_sign_features(damaged, part, o, &ignored)) << "the wiped header alone";
    ASSERT_GE(first.size(), 4u);
    const std::string first_values(reinterpret_cast<const char*>(first.data()),
                                   std::min<std::size_t>(first.size(), 4) * sizeof(float));
    const auto at = bytes.find(first_values);
    ASSERT_NE(at, std::string::npos);
    bytes[at + 1] = static_cast<char>(bytes[at + 1] ^ 0x01);
    {
      std::ofstream(file, std::ios::binary) << bytes;
    }
    try {
      dist::read_sign_features(damaged, part, o, &ignored);
      ADD_FAILURE() << "damaged /feat was read";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("/feat has checksum crc32:"), std::string::npos)
          << e.what();
    }
  }
  dist::PrecomputeOptions other = o;
  other.hops = 3;
  EXPECT_THROW(dist::read_sign_features(out, part, other, &ignored), InputError);
  other = o;
  other.op = nn::Norm::mean;
  EXPECT_THROW(dist::read_sign_features(out, part, other, &ignored), InputError);
  EXPECT_FALSE(dist::read_sign_features(dir / "nowhere", part, o, &ignored));
  comm->barrier();
  if (P > 1 && comm->rank() == 0) {
    // Part 1's file read as part 0: another partition's rows.
    fs::copy_file(out / dist::sign_file_name(1), out / dist::sign_file_name(0),
                  fs::copy_options::overwrite_existing);
    EXPECT_THROW(dist::read_sign_features(out, part, o, &ignored), InputError);
  }
  comm->barrier();
}

// Streamed in blocks of 3 rows (halo rows in rounds of 3 per peer), with X read from the part
// file and hops through scratch files at budgets of no row and of a few rows, with X in memory
// and the hops on disk, and unbounded: the file holds the whole-part SpMM's values bit for bit.
TEST(Precompute, StreamedWithinABudgetEqualsTheWholePartSpmm) {
  auto comm = comm::make_mpi_communicator();
  const fs::path dir = prepare(*comm);
  const int P = comm->size();
  const fs::path parts = dir / ("p" + std::to_string(P));
  const partition::Manifest manifest = partition::read_manifest(parts);
  partition::Part part = partition::load_part(parts, comm->rank(), manifest);
  const std::int64_t x_bytes = part.num_owned * part.feature_dim * 4;
  ::setenv("TESSEL_INFER_BLOCK_ELEMENTS", "15", 1);
  for (const std::string op : {"gcn", "mean"}) {
    const dist::PrecomputeOptions o{3, option_value<nn::Norm>(op)};
    const std::vector<float> whole = dist::precompute_hops(*comm, part, o);
    for (const std::int64_t budget : {std::int64_t{-1}, std::int64_t{0},
                                      part.num_owned * 4 + 5 * 20, x_bytes, x_bytes * 3}) {
      SCOPED_TRACE(op + " budget " + std::to_string(budget));
      const bool in_memory = budget < 0 || budget >= x_bytes;
      const fs::path out = dir / ("streamed-" + std::to_string(P) + "-" + op + "-" +
                                  std::to_string(budget));
      const auto streamed = dist::precompute_sign_folder(
          *comm, part,
          [&](std::int64_t cache) -> std::unique_ptr<sampling::OwnedFeatureRows> {
            if (in_memory) return sampling::rows_in_memory(part.features, part.feature_dim);
            sampling::OutOfCoreOptions ooc;
            ooc.budget_bytes = cache;
            ooc.checksum = partition::recorded_feature_checksum(manifest, comm->rank());
            return sampling::open_rows_out_of_core(
                parts / partition::part_file_name(comm->rank()), part.num_owned,
                part.feature_dim,
                std::span<const std::int64_t>(part.degree.data(),
                                              static_cast<std::size_t>(part.num_owned)),
                ooc);
          },
          manifest.dataset, o, out, budget);
      // X in memory and two hops beside it fit three times X; the third hop does not.
      EXPECT_EQ(streamed.hops_on_disk, budget < 0 ? 0 : budget == x_bytes * 3 ? 1 : 3);
      std::vector<float> read;
      ASSERT_TRUE(dist::read_sign_features(out, part, o, &read));
      ASSERT_EQ(read.size(), whole.size());
      EXPECT_EQ(std::memcmp(read.data(), whole.data(), whole.size() * sizeof(float)), 0);
      for (const auto& entry : fs::directory_iterator(out))
        EXPECT_EQ(entry.path().filename().string().rfind(".sign-", 0), std::string::npos)
            << entry.path();
    }
  }
  ::unsetenv("TESSEL_INFER_BLOCK_ELEMENTS");
}
