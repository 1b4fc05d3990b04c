// End-to-end tests of partition_dataset / partition_store and check_partition: invariants of the
// written folder, determinism, refusals, and detection of corrupted folders.
#include "tessel/partition/partitioner.hpp"

#include "partition_testing.hpp"
#include "steps.hpp"
#include "tessel/core/error.hpp"
#include "tessel/datasets/dataset.hpp"
#include "tessel/datasets/ogb.hpp"
#include "tessel/partition/part.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

namespace tessel::partition {
namespace {

namespace fs = std::filesystem;

PartitionOptions options_for(int k, Method method, std::uint64_t seed = 0) {
  PartitionOptions o;
  o.num_parts = k;
  o.method = method;
  o.seed = seed;
  return o;
}

// Names in `dir` that start with a dot (temporaries left behind).
std::vector<std::string> hidden_entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const auto name = entry.path().filename().string();
    if (!name.empty() && name[0] == '.') names.push_back(name);
  }
  return names;
}

struct InvariantCase {
  int k;
  Method method;
  bool directed;   // the dataset's edges are directed
  bool symmetrize; // --symmetrize / --no-symmetrize
};

std::string case_name(const ::testing::TestParamInfo<InvariantCase>& info) {
  const auto& c = info.param;
  return fmt::format("k{}_{}_{}_{}", c.k, to_string(c.method),
                     c.directed ? "directed" : "undirected", c.symmetrize ? "sym" : "nosym");
}

class PartitionInvariants : public ::testing::TestWithParam<InvariantCase> {};

TEST_P(PartitionInvariants, FolderMatchesSource) {
  const auto c = GetParam();
  test::PlantedOptions po;
  po.num_nodes = 600;
  po.directed = c.directed;
  const auto data = test::planted_dataset(po);
  test::TempDir tmp;
  auto o = options_for(c.k, c.method, 11);
  o.symmetrize = c.symmetrize;
  const auto stats = partition_dataset(data, tmp / "parts", o);
  const bool symmetrized = c.symmetrize || !c.directed;
  EXPECT_EQ(stats.symmetrized, symmetrized);
  std::int64_t cut = -1;
  test::verify_partition(tmp / "parts", data, symmetrized, &cut);
  EXPECT_EQ(stats.edge_cut, cut);
  EXPECT_EQ(static_cast<int>(stats.parts.size()), c.k);
  if (c.k == 1) {
    EXPECT_EQ(cut, 0);
    EXPECT_EQ(stats.parts[0].halo, 0);
  }
  // The checker agrees, alone and against the source.
  const auto report = check_partition(tmp / "parts");
  EXPECT_EQ(report.edge_cut, cut);
  CheckOptions with_source;
  with_source.source_data = &data;
  EXPECT_TRUE(check_partition(tmp / "parts", with_source).compared_with_source);
  EXPECT_TRUE(hidden_entries(tmp.path()).empty());
}

std::vector<InvariantCase> invariant_cases() {
  std::vector<InvariantCase> cases;
  for (int k : {1, 2, 3, 8})
    for (Method m : {Method::metis, Method::random}) {
      cases.push_back({k, m, false, true});
      cases.push_back({k, m, true, true});
      cases.push_back({k, m, true, false});
    }
  cases.push_back({4, Method::metis, false, false}); // undirected: symmetrized anyway
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Planted, PartitionInvariants, ::testing::ValuesIn(invariant_cases()),
                         case_name);

// Cora (OGB raw layout, undirected, each edge once): every invariant for K = 1, 2, 3, 8.
TEST(PartitionCora, InvariantsHold) {
  const auto cora = test::sample_dataset("cora");
  const auto data = datasets::read_ogb_folder(cora);
  ASSERT_EQ(data.num_nodes, 2708);
  for (int k : {1, 2, 3, 8}) {
    for (Method method : {Method::metis, Method::random}) {
      if (k == 1 && method == Method::random) continue;
      test::TempDir tmp;
      const auto stats = partition_dataset(data, tmp / "parts", options_for(k, method, 1));
      EXPECT_EQ(stats.num_edges, 10556);
      std::int64_t cut = -1;
      test::verify_partition(tmp / "parts", data, true, &cut);
      EXPECT_EQ(stats.edge_cut, cut);
      CheckOptions with_source;
      with_source.source_data = &data;
      EXPECT_EQ(check_partition(tmp / "parts", with_source).edge_cut, cut);
      if (k > 1 && method == Method::metis) {
        EXPECT_LT(stats.edge_cut_fraction, 0.25) << "k = " << k;
        EXPECT_LT(stats.node_balance, 1.1);
        EXPECT_LT(stats.train_balance, 1.25);
      }
    }
  }
}

TEST(Partition, ManifestRecordsStatistics) {
  test::PlantedOptions po;
  po.num_nodes = 800;
  const auto data = test::planted_dataset(po);
  test::TempDir tmp;
  const auto stats = partition_dataset(data, tmp / "parts", options_for(4, Method::metis, 3));
  const auto m = read_manifest(tmp / "parts");
  EXPECT_EQ(m.dataset, "planted");
  EXPECT_EQ(m.num_parts, 4);
  EXPECT_EQ(m.method, "metis");
  EXPECT_EQ(m.seed, 3u);
  EXPECT_EQ(m.num_train, static_cast<std::int64_t>(data.train.size()));
  EXPECT_EQ(m.offsets, stats.offsets);
  const auto& j = m.raw;
  for (const char* key : {"edge_cut", "balance", "replication_factor", "halo_sizes", "timings_s",
                          "peak_rss_bytes", "source", "parts", "metis"})
    EXPECT_TRUE(j.contains(key)) << key;
  for (const char* phase : {"read", "symmetrize", "metis", "build", "features", "write", "total"})
    EXPECT_TRUE(j["timings_s"].contains(phase)) << phase;
  EXPECT_EQ(j["source"]["checksum_of"], "content");
  EXPECT_EQ(j["source"]["checksum"].get<std::string>().rfind("crc32:", 0), 0u);
  std::int64_t local = 0;
  for (const auto& p : stats.parts)
    local += p.owned + p.halo;
  EXPECT_DOUBLE_EQ(j["replication_factor"].get<double>(), static_cast<double>(local) / 800.0);
  EXPECT_GE(j["balance"]["nodes"].get<double>(), 1.0);
  EXPECT_LT(j["balance"]["nodes"].get<double>(), 1.1);
  EXPECT_FALSE(stats.summary().empty());
}

TEST(Partition, MetisCutsPlantedGraphBelowHalfOfRandom) {
  const auto data = test::planted_dataset({.num_nodes = 4000, .blocks = 8, .avg_degree = 16});
  for (int k : {4, 8}) {
    test::TempDir tmp;
    const auto metis = partition_dataset(data, tmp / "metis", options_for(k, Method::metis));
    const auto random = partition_dataset(data, tmp / "random", options_for(k, Method::random));
    EXPECT_LT(2 * metis.edge_cut, random.edge_cut) << "k = " << k;
    EXPECT_LT(metis.replication_factor, random.replication_factor);
  }
}

// A malformed checksum string in partition.json is the manifest's fault: refused when the
// manifest is read, naming partition.json and the entry, not blamed on the part file.
TEST(Partition, MalformedChecksumStringBlamesTheManifest) {
  const auto data = test::planted_dataset({.num_nodes = 200, .blocks = 2, .avg_degree = 6});
  test::TempDir tmp;
  partition_dataset(data, tmp / "parts", options_for(2, Method::random));
  const fs::path manifest = tmp / "parts" / "partition.json";
  auto j = nlohmann::json::parse(std::ifstream(manifest));
  for (const nlohmann::json& bad : {nlohmann::json("crc32:XYZ"), nlohmann::json("md5:00000000"),
                                   nlohmann::json(12345)}) {
    auto edited = j;
    edited["parts"][1]["checksums"]["/graph/indptr"] = bad;
    std::ofstream(manifest) << edited.dump();
    try {
      read_manifest(tmp / "parts");
      ADD_FAILURE() << "accepted " << bad.dump();
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("partition.json: parts[1].checksums[\"/graph/indptr\"] is " +
                          bad.dump()),
                std::string::npos)
          << what;
      EXPECT_EQ(what.find("part-1.h5"), std::string::npos) << what;
    }
  }
}

// A graph above --metis-max-edges goes through Tessel's coarsening: the folder still satisfies
// every invariant, the manifest records the levels, and the run is reproducible.
TEST(Partition, CoarsenedPathKeepsInvariantsAndRecordsLevels) {
  const auto data = test::planted_dataset({.num_nodes = 6000, .blocks = 8, .avg_degree = 12});
  for (int k : {2, 3, 8}) {
    test::TempDir tmp;
    auto o = options_for(k, Method::metis, 4);
    o.metis_max_edges = 5000;
    const auto stats = partition_dataset(data, tmp / "parts", o);
    std::int64_t cut = -1;
    test::verify_partition(tmp / "parts", data, true, &cut);
    EXPECT_EQ(stats.edge_cut, cut);
    ASSERT_FALSE(stats.coarse_levels.empty()) << "k = " << k;
    EXPECT_EQ(2 * stats.refined_cut, cut) << "refined cut is undirected";
    EXPECT_LT(stats.node_balance, 1.04) << "k = " << k;
    const auto j = read_manifest(tmp / "parts").raw;
    EXPECT_EQ(j["metis"]["max_edges"], 5000);
    EXPECT_EQ(j["metis"]["coarse_levels"].size(), stats.coarse_levels.size());
    EXPECT_EQ(j["metis"]["refined_cut"], stats.refined_cut);
    for (const char* phase : {"coarsen", "metis", "refine"})
      EXPECT_TRUE(j["timings_s"].contains(phase)) << phase;
    EXPECT_NE(stats.summary().find("coarsened to"), std::string::npos);

    // Same seed, same bytes.
    partition_dataset(data, tmp / "again", o);
    for (int p = 0; p < k; ++p)
      EXPECT_TRUE(test::file_bytes(tmp / "parts" / part_file_name(p)) ==
                  test::file_bytes(tmp / "again" / part_file_name(p)))
          << "part " << p;
  }
}

// A directed dataset kept directed: METIS's input (and so the coarsening) is the symmetrized
// graph, the stored graph and the edges constraint follow the directed one.
TEST(Partition, CoarsenedPathOnADirectedGraphKeptDirected) {
  const auto data =
      test::planted_dataset({.num_nodes = 5000, .blocks = 8, .avg_degree = 12, .directed = true});
  test::TempDir tmp;
  auto o = options_for(4, Method::metis, 1);
  o.metis_max_edges = 5000;
  o.symmetrize = false;
  const auto stats = partition_dataset(data, tmp / "parts", o);
  ASSERT_FALSE(stats.coarse_levels.empty());
  EXPECT_FALSE(stats.symmetrized);
  std::int64_t cut = -1;
  test::verify_partition(tmp / "parts", data, false, &cut);
  EXPECT_EQ(stats.edge_cut, cut);
  const auto random = partition_dataset(data, tmp / "random", options_for(4, Method::random));
  EXPECT_LT(2 * cut, random.edge_cut);
  EXPECT_LT(stats.edge_balance, 1.05);
}

TEST(Partition, SameSeedGivesByteIdenticalParts) {
  test::PlantedOptions po;
  po.num_nodes = 1500;
  const auto data = test::planted_dataset(po);
  for (Method method : {Method::metis, Method::random}) {
    test::TempDir tmp;
    partition_dataset(data, tmp / "a", options_for(3, method, 9));
    partition_dataset(data, tmp / "b", options_for(3, method, 9));
    for (int p = 0; p < 3; ++p) {
      const auto a = test::file_bytes(tmp / "a" / part_file_name(p));
      const auto b = test::file_bytes(tmp / "b" / part_file_name(p));
      ASSERT_FALSE(a.empty());
      EXPECT_TRUE(a == b) << to_string(method) << " part " << p << " differs";
    }
  }
}

TEST(Partition, NumPartsEqualToNodesWorks) {
  test::PlantedOptions po;
  po.num_nodes = 24;
  po.avg_degree = 4;
  const auto data = test::planted_dataset(po);
  for (Method method : {Method::metis, Method::random}) {
    test::TempDir tmp;
    partition_dataset(data, tmp / "parts", options_for(24, method));
    test::verify_partition(tmp / "parts", data, true);
  }
}

TEST(Partition, GraphWithoutEdges) {
  datasets::Dataset data;
  data.name = "isolated";
  data.num_nodes = 10;
  data.graph.num_rows = data.graph.num_cols = 10;
  data.graph.indptr.assign(11, 0);
  data.labels.assign(10, 0);
  data.num_classes = 1;
  test::TempDir tmp;
  const auto stats = partition_dataset(data, tmp / "parts", options_for(3, Method::metis));
  EXPECT_EQ(stats.edge_cut, 0);
  test::verify_partition(tmp / "parts", data, true);
  EXPECT_EQ(check_partition(tmp / "parts").num_edges, 0);
}

TEST(Partition, FromStoreReadsFeatureRowsAndRecordsFileChecksum) {
  test::PlantedOptions po;
  po.num_nodes = 700;
  po.feature_dim = 9;
  const auto data = test::planted_dataset(po);
  test::TempDir tmp;
  const auto store = tmp / "planted.h5";
  datasets::write_store(data, store);
  const auto stats = partition_store(store, tmp / "parts", options_for(3, Method::metis, 1));
  EXPECT_EQ(stats.source_checksum_of, "file");
  EXPECT_EQ(stats.source_checksum, detail::file_checksum(store));
  test::verify_partition(tmp / "parts", data, true);
  CheckOptions with_store;
  with_store.source_store = store;
  EXPECT_TRUE(check_partition(tmp / "parts", with_store).compared_with_source);
  const auto m = read_manifest(tmp / "parts");
  EXPECT_EQ(m.raw["source"]["file"], "planted.h5");
  // Features streamed from the store: still byte-identical for the same seed.
  partition_store(store, tmp / "again", options_for(3, Method::metis, 1));
  for (int p = 0; p < 3; ++p)
    EXPECT_TRUE(test::file_bytes(tmp / "parts" / part_file_name(p)) ==
                test::file_bytes(tmp / "again" / part_file_name(p)))
        << "part " << p;

  // Small blocks: rows are fetched across many block boundaries.
  detail::StoreFeatures features(store, 9, 9 * 4 * 7);
  EXPECT_EQ(features.block_rows(), 7);
  const std::vector<std::int32_t> ids = {0, 3, 6, 7, 20, 21, 699};
  std::vector<float> got(ids.size() * 9);
  features.gather(ids, got.data());
  for (std::size_t i = 0; i < ids.size(); ++i)
    for (int j = 0; j < 9; ++j)
      EXPECT_EQ(got[i * 9 + j], data.features[ids[i] * 9 + j]);
}

// --order renumbers each part's nodes: every invariant and the source comparison still hold
// (the checker covers reordered parts), each part owns the same nodes as without an order, and
// the feature rows land right also when written in windows of a few rows (several passes).
TEST(PartitionOrder, EveryOrderKeepsTheInvariantsAndThePartsNodes) {
  test::PlantedOptions po;
  po.num_nodes = 500;
  for (const bool directed : {false, true}) {
    po.directed = directed;
    const auto data = test::planted_dataset(po);
    for (const int k : {1, 3}) {
      test::TempDir tmp;
      auto plain = options_for(k, Method::metis, 5);
      plain.symmetrize = !directed;
      partition_dataset(data, tmp / "none", plain);
      const auto m_none = read_manifest(tmp / "none");
      EXPECT_EQ(m_none.raw["order"], "none");
      for (const Order order : {Order::rcm, Order::bfs, Order::community}) {
        SCOPED_TRACE(fmt::format("{} k={} {}", to_string(order), k,
                                 directed ? "directed" : "undirected"));
        auto o = plain;
        o.order = order;
        o.feature_window_bytes = 30 * 5 * 4; // 30 rows of 5 features: several passes
        const auto dir = tmp / to_string(order);
        const auto stats = partition_dataset(data, dir, o);
        EXPECT_EQ(stats.order, order);
        EXPECT_GT(stats.times.get("order"), 0.0);
        test::verify_partition(dir, data, !directed);
        CheckOptions with_source;
        with_source.source_data = &data;
        EXPECT_TRUE(check_partition(dir, with_source).compared_with_source);
        const auto m = read_manifest(dir);
        EXPECT_EQ(m.raw["order"], to_string(order));
        EXPECT_EQ(m.offsets, m_none.offsets);
        bool renumbered = false;
        for (int p = 0; p < k; ++p) {
          const Part a = load_part(tmp / "none", p, m_none), b = load_part(dir, p, m);
          std::vector<NodeId> owned_a(a.orig_id.begin(), a.orig_id.begin() + a.num_owned);
          std::vector<NodeId> owned_b(b.orig_id.begin(), b.orig_id.begin() + b.num_owned);
          EXPECT_TRUE(std::is_sorted(owned_a.begin(), owned_a.end()));
          renumbered = renumbered || owned_a != owned_b;
          std::sort(owned_b.begin(), owned_b.end());
          EXPECT_EQ(owned_a, owned_b) << "part " << p;
          EXPECT_EQ(a.num_halo, b.num_halo);
          EXPECT_EQ(a.graph.num_edges(), b.graph.num_edges());
        }
        EXPECT_TRUE(renumbered);
      }
    }
  }
}

// From a store (features streamed in blocks) in windows: the checker compares with the store.
TEST(PartitionOrder, FromStoreInWindowsMatchesTheStore) {
  test::PlantedOptions po;
  po.num_nodes = 400;
  po.feature_dim = 7;
  const auto data = test::planted_dataset(po);
  test::TempDir tmp;
  const auto store = tmp / "planted.h5";
  datasets::write_store(data, store);
  auto o = options_for(2, Method::metis, 1);
  o.order = Order::rcm;
  o.feature_window_bytes = 50 * 7 * 4;
  partition_store(store, tmp / "parts", o);
  CheckOptions with_store;
  with_store.source_store = store;
  EXPECT_TRUE(check_partition(tmp / "parts", with_store).compared_with_source);
  test::verify_partition(tmp / "parts", data, true);
}

TEST(PartitionOrder, UnknownOrderIsRefusedAndAnUnsortedPlainPartIsCaught) {
  EXPECT_EQ(parse_order("community"), Order::community);
  EXPECT_EQ(test::input_error([] { parse_order("metis"); }),
            "unknown node order \"metis\" (expected none, rcm, bfs or community)");
  // A reordered folder whose manifest claims no order: the checker names the part.
  const auto data = test::planted_dataset({});
  test::TempDir tmp;
  auto o = options_for(2, Method::metis, 1);
  o.order = Order::rcm;
  partition_dataset(data, tmp / "parts", o);
  const auto manifest = tmp / "parts" / "partition.json";
  auto j = nlohmann::json::parse(test::file_bytes(manifest));
  j["order"] = "none";
  std::ofstream(manifest) << j.dump(2);
  EXPECT_NE(test::input_error([&] { check_partition(tmp / "parts"); })
                .find("owned nodes are not in increasing source id order"),
            std::string::npos);
  j["order"] = "zigzag";
  std::ofstream(manifest) << j.dump(2);
  EXPECT_NE(test::input_error([&] { check_partition(tmp / "parts"); })
                .find("unknown node order \"zigzag\""),
            std::string::npos);
}

TEST(PartitionRefusals, NumPartsBelowOne) {
  const auto data = test::planted_dataset({});
  test::TempDir tmp;
  const auto msg = test::input_error(
      [&] { partition_dataset(data, tmp / "parts", options_for(0, Method::metis)); });
  EXPECT_NE(msg.find("--parts must be at least 1"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(tmp / "parts"));
  EXPECT_TRUE(hidden_entries(tmp.path()).empty());
}

TEST(PartitionRefusals, MorePartsThanNodes) {
  test::PlantedOptions po;
  po.num_nodes = 30;
  const auto data = test::planted_dataset(po);
  test::TempDir tmp;
  const auto msg = test::input_error(
      [&] { partition_dataset(data, tmp / "parts", options_for(31, Method::metis)); });
  EXPECT_NE(msg.find("more than the 30 nodes"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(tmp / "parts"));
  EXPECT_TRUE(hidden_entries(tmp.path()).empty());
}

TEST(PartitionRefusals, NonEmptyOutputWithoutForce) {
  const auto data = test::planted_dataset({});
  test::TempDir tmp;
  fs::create_directories(tmp / "parts");
  std::ofstream(tmp / "parts" / "keep.txt") << "mine";
  const auto msg = test::input_error(
      [&] { partition_dataset(data, tmp / "parts", options_for(2, Method::metis)); });
  EXPECT_NE(msg.find("exists and is not empty"), std::string::npos) << msg;
  EXPECT_TRUE(fs::exists(tmp / "parts" / "keep.txt"));
  EXPECT_TRUE(hidden_entries(tmp.path()).empty());

  // An empty folder is fine; --force replaces a non-empty one.
  fs::create_directories(tmp / "empty");
  partition_dataset(data, tmp / "empty", options_for(2, Method::metis));
  EXPECT_TRUE(fs::exists(tmp / "empty" / "partition.json"));
  auto forced = options_for(2, Method::metis);
  forced.force = true;
  partition_dataset(data, tmp / "parts/", forced);
  EXPECT_FALSE(fs::exists(tmp / "parts" / "keep.txt"));
  test::verify_partition(tmp / "parts", data, true);
  EXPECT_TRUE(hidden_entries(tmp.path()).empty());
}

TEST(PartitionRefusals, OutputIsAFile) {
  const auto data = test::planted_dataset({});
  test::TempDir tmp;
  std::ofstream(tmp / "parts") << "not a folder";
  auto o = options_for(2, Method::metis);
  o.force = true;
  const auto msg = test::input_error([&] { partition_dataset(data, tmp / "parts", o); });
  EXPECT_NE(msg.find("not a directory"), std::string::npos) << msg;
}

TEST(PartitionRefusals, GraphTooLargeForMetisLeavesNothing) {
  test::TempDir tmp;
  auto o = options_for(2, Method::metis);
  o.max_index = 100; // stands in for 2^31 - 1: the same checks, reachable in a test
  auto msg =
      test::input_error([&] { partition_dataset(test::planted_dataset({}), tmp / "parts", o); });
  EXPECT_NE(msg.find("nodes; partitioning needs node ids that fit in 32 bits"), std::string::npos)
      << msg;
  // Nodes fit, edges do not, and coarsening cannot bring 60 nodes under the limit.
  test::PlantedOptions dense;
  dense.num_nodes = 60;
  dense.avg_degree = 20;
  o.max_index = 500;
  msg =
      test::input_error([&] { partition_dataset(test::planted_dataset(dense), tmp / "parts", o); });
  EXPECT_NE(msg.find("METIS (32-bit idx_t) takes at most 500"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(tmp / "parts"));
  EXPECT_TRUE(hidden_entries(tmp.path()).empty());
}

// More directed edges than METIS's idx_t can count (max_index stands in for 2^31 - 1): Tessel
// coarsens until METIS can take the graph, scaling the weight totals down for it.
TEST(Partition, EdgesBeyondMetisIndexAreCoarsenedFirst) {
  const auto data = test::planted_dataset({.num_nodes = 6000, .blocks = 8, .avg_degree = 12});
  for (int k : {2, 4}) {
    test::TempDir tmp;
    auto o = options_for(k, Method::metis, 2);
    o.max_index = 10000;
    const auto stats = partition_dataset(data, tmp / "parts", o);
    ASSERT_GT(stats.num_edges, 4 * o.max_index); // the edges constraint's total too
    ASSERT_FALSE(stats.coarse_levels.empty());
    EXPECT_LE(stats.coarse_levels.back().second, o.max_index);
    std::int64_t cut = -1;
    test::verify_partition(tmp / "parts", data, true, &cut);
    EXPECT_EQ(cut, 2 * stats.refined_cut);
    const auto random = partition_dataset(data, tmp / "random", options_for(k, Method::random));
    EXPECT_LT(2 * cut, random.edge_cut) << "k = " << k;
    EXPECT_LT(stats.node_balance, 1.05) << "k = " << k;
    EXPECT_LT(stats.edge_balance, 1.05) << "k = " << k;
  }
}

TEST(PartitionRefusals, BadMethodAndBalance) {
  EXPECT_NE(test::input_error([] { parse_method("kahip"); }).find("expected metis or random"),
            std::string::npos);
  EXPECT_NE(test::input_error([] { parse_balance("nodes,weight"); }).find("\"weight\""),
            std::string::npos);
  EXPECT_FALSE(test::input_error([] { parse_balance(""); }).empty());
  const auto b = parse_balance("train,edges");
  EXPECT_FALSE(b.nodes);
  EXPECT_TRUE(b.train && b.edges);
  EXPECT_EQ(to_string(b), "train,edges");
}

// A partition folder of 3 parts to corrupt, and its source.
class CheckDetects : public ::testing::Test {
protected:
  void SetUp() override {
    test::PlantedOptions po;
    po.num_nodes = 500;
    data_ = test::planted_dataset(po);
    partition_dataset(data_, dir(), options_for(3, Method::metis, 2));
    ASSERT_NO_THROW(check_partition(dir()));
    manifest_ = read_manifest(dir());
  }
  fs::path dir() const { return tmp_ / "parts"; }
  Part load(int p) const { return load_part(dir(), p, manifest_); }
  void save(const Part& part) const {
    write_part(part, manifest_.dataset, dir() / part_file_name(part.part_id));
  }
  std::string check_error(bool with_source = false) const {
    CheckOptions o;
    if (with_source) o.source_data = &data_;
    return test::input_error([&] { check_partition(dir(), o); });
  }

  test::TempDir tmp_;
  datasets::Dataset data_;
  Manifest manifest_;
};

TEST_F(CheckDetects, RewrittenPartUnchangedPasses) {
  save(load(1));
  EXPECT_EQ(check_error(true), "");
}

TEST_F(CheckDetects, TamperedEdgeIndex) {
  Part part = load(1);
  // Point the last edge of some row at a different (still valid, still larger) local id.
  for (std::int64_t i = 0; i < part.num_owned; ++i) {
    const auto b = part.graph.indptr[i], e = part.graph.indptr[i + 1];
    if (e > b && part.graph.indices[e - 1] + 1 < part.num_local() &&
        part.graph.indices[e - 1] + 1 != i) {
      ++part.graph.indices[e - 1];
      break;
    }
  }
  save(part);
  EXPECT_FALSE(check_error().empty());
}

TEST_F(CheckDetects, TamperedHaloOwnerLocal) {
  Part part = load(2);
  // Point one halo node at its owner's previous node, keeping the (owner, local) order intact.
  bool tampered = false;
  for (std::int64_t h = 0; h < part.num_halo && !tampered; ++h) {
    const auto moved = std::pair(part.halo_owner[h], part.halo_owner_local[h] - 1);
    if (moved.second >= 0 &&
        (h == 0 || std::pair(part.halo_owner[h - 1], part.halo_owner_local[h - 1]) < moved)) {
      part.halo_owner_local[h] = moved.second;
      tampered = true;
    }
  }
  ASSERT_TRUE(tampered);
  save(part);
  const auto msg = check_error();
  EXPECT_NE(msg.find("its owner"), std::string::npos) << msg;
}

TEST_F(CheckDetects, NodeOwnedTwice) {
  Part part = load(0);
  part.orig_id[1] = load(1).orig_id[0];
  save(part);
  const auto msg = check_error();
  EXPECT_NE(msg.find("owned by another part"), std::string::npos) << msg;
}

TEST_F(CheckDetects, DroppedEdge) {
  Part part = load(0);
  // Remove the first edge of row 0 (and fix indptr and the degree so the file is well-formed).
  ASSERT_GT(part.graph.degree(0), 0);
  part.graph.indices.erase(part.graph.indices.begin());
  for (std::size_t i = 1; i < part.graph.indptr.size(); ++i)
    --part.graph.indptr[i];
  --part.degree[0];
  save(part);
  EXPECT_FALSE(check_error().empty());
}

TEST_F(CheckDetects, ChangedLabelAgainstSource) {
  Part part = load(1);
  part.labels[0] = (part.labels[0] + 1) % manifest_.num_classes;
  save(part);
  // Without the source, the label checksum partition.json records catches the edit.
  EXPECT_NE(check_error(false).find("/node/label has checksum"), std::string::npos);
  EXPECT_NE(check_error(true).find("label"), std::string::npos);
}

TEST_F(CheckDetects, ChangedFeaturesAgainstSource) {
  Part part = load(2);
  part.features[3] += 1.0f;
  save(part);
  EXPECT_NE(check_error(true).find("features"), std::string::npos);
}

TEST_F(CheckDetects, EditedManifestEdgeCut) {
  auto j = manifest_.raw;
  j["edge_cut"]["edges"] = j["edge_cut"]["edges"].get<std::int64_t>() + 2;
  std::ofstream(dir() / "partition.json") << j.dump(2);
  EXPECT_NE(check_error().find("edge cut"), std::string::npos);
}

TEST_F(CheckDetects, MissingPartFile) {
  fs::remove(dir() / part_file_name(2));
  EXPECT_NE(check_error().find("part-2.h5"), std::string::npos);
}

} // namespace
} // namespace tessel::partition
