// Tests of temporal datasets: store round trips (base + differences rebuild every snapshot,
// full snapshots too), corrupt differences, each PyTorch Geometric Temporal JSON layout, edge
// lists, bad input, and the synthetic generator's determinism.
#include "tessel/core/error.hpp"
#include "tessel/datasets/temporal.hpp"

#include "test_support.hpp"

#include <gtest/gtest.h>

#include <hdf5.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <functional>

#include <zlib.h>

namespace tessel {
namespace {

namespace fs = std::filesystem;
using datasets::TemporalDataset;

datasets::SyntheticTemporalOptions small_options() {
  datasets::SyntheticTemporalOptions o;
  o.num_nodes = 300;
  o.num_snapshots = 7;
  o.avg_degree = 6;
  o.feature_dim = 4;
  o.seed = 5;
  o.rewire = 0.2;
  return o;
}

void expect_same_graphs(const std::vector<Csr>& a, const std::vector<Csr>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t t = 0; t < a.size(); ++t) {
    EXPECT_EQ(a[t].indptr, b[t].indptr) << "snapshot " << t;
    EXPECT_EQ(a[t].indices, b[t].indices) << "snapshot " << t;
    EXPECT_EQ(a[t].values, b[t].values) << "snapshot " << t;
  }
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

// Sets the first value of a float dataset of an HDF5 file.
void set_first_float(const fs::path& file, const char* dataset, float value) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  const hid_t d = H5Dopen2(f, dataset, H5P_DEFAULT);
  ASSERT_GE(d, 0);
  const hid_t space = H5Dget_space(d);
  const hsize_t start = 0, count = 1;
  H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, nullptr, &count, nullptr);
  const hid_t mem = H5Screate_simple(1, &count, nullptr);
  EXPECT_GE(H5Dwrite(d, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, &value), 0);
  H5Sclose(mem);
  H5Sclose(space);
  H5Dclose(d);
  H5Fclose(f);
}

// The trainer's reader refuses a negative edge weight as `info` and `partition` do (it read
// the snapshot and trained on it).
TEST(TemporalStore, ReaderRefusesNegativeWeightsAsTheWholeReadDoes) {
  const TemporalDataset d = datasets::make_synthetic_temporal(small_options());
  test::TempDir dir("temporal-weight");
  for (bool full : {false, true}) {
    const fs::path path = dir / (full ? "full.h5" : "delta.h5");
    datasets::write_temporal_store(d, path, {full});
    test::drop_file_checksum(path); // edited in place below: the header no longer matches
    set_first_float(path, full ? "/full/weight" : "/base/weight", -1.0f);
    EXPECT_NE(test::input_error([&] { (void)datasets::read_temporal_store(path); })
                  .find("edge weight -1 is not a finite value >= 0"),
              std::string::npos);
    datasets::TemporalStoreReader reader(path);
    const std::string error = test::input_error([&] { (void)reader.snapshots(0, 1); });
    EXPECT_NE(error.find("edge weight -1 is not a finite value >= 0"), std::string::npos)
        << (full ? "full: " : "delta: ") << error;
  }
}

TEST(TemporalStore, BasePlusDifferencesRebuildEverySnapshot) {
  const TemporalDataset d = datasets::make_synthetic_temporal(small_options());
  // The generator rewires edges every step: the differences are not empty.
  EXPECT_NE(d.snapshots[0].indices, d.snapshots[1].indices);
  test::TempDir dir("temporal");
  for (bool full : {false, true}) {
    const fs::path path = dir / (full ? "full.h5" : "delta.h5");
    datasets::write_temporal_store(d, path, {full});
    datasets::TemporalStoreReader reader(path);
    EXPECT_EQ(reader.info().full_snapshots, full);
    EXPECT_GT(reader.info().added_edges, 0);
    EXPECT_GT(reader.info().removed_edges, 0);
    expect_same_graphs(reader.snapshots(0, d.num_snapshots()), d.snapshots);
    expect_same_graphs(reader.rebuild_snapshots(0, d.num_snapshots()), d.snapshots);
    // A later range alone, then an earlier one (the reader restarts from the base).
    expect_same_graphs(reader.rebuild_snapshots(4, 6), {d.snapshots[4], d.snapshots[5]});
    expect_same_graphs(reader.rebuild_snapshots(1, 2), {d.snapshots[1]});
    const TemporalDataset back = datasets::read_temporal_store(path);
    EXPECT_EQ(back.features, d.features);
    EXPECT_EQ(back.targets, d.targets);
    EXPECT_EQ(back.train, d.train);
    EXPECT_EQ(back.test, d.test);
    std::int64_t total = 0;
    for (const auto& s : d.snapshots) total += s.num_edges();
    EXPECT_EQ(reader.info().total_edges, total);
  }
}

TEST(TemporalStore, DifferencesAreCheckedWhenApplied) {
  const TemporalDataset d = datasets::make_synthetic_temporal(small_options());
  datasets::SnapshotDelta delta = datasets::snapshot_delta(d.snapshots[0], d.snapshots[1]);
  expect_same_graphs({datasets::apply_delta(d.snapshots[0], delta, "x")}, {d.snapshots[1]});
  ASSERT_FALSE(delta.removed_src.empty());
  datasets::SnapshotDelta missing = delta;
  missing.removed_src[0] = (missing.removed_src[0] + 1) % d.num_nodes;  // not an edge, or out of order
  EXPECT_THROW(datasets::apply_delta(d.snapshots[0], missing, "x"), InputError);
  datasets::SnapshotDelta again = delta;
  again.removed_src.clear();
  again.removed_dst.clear();
  // Re-adding edges that stay would duplicate them.
  again.added_src.assign(1, d.snapshots[0].indices[0]);
  again.added_dst.assign(1, 0);
  again.added_weight.assign(1, 1.0f);
  if (d.snapshots[0].degree(0) > 0) {
    EXPECT_THROW(datasets::apply_delta(d.snapshots[0], again, "x"), InputError);
  }
}

TEST(TemporalSynthetic, DeterministicFromTheSeed) {
  const TemporalDataset a = datasets::make_synthetic_temporal(small_options());
  const TemporalDataset b = datasets::make_synthetic_temporal(small_options());
  expect_same_graphs(a.snapshots, b.snapshots);
  EXPECT_EQ(a.features, b.features);
  EXPECT_EQ(a.targets, b.targets);
  auto other = small_options();
  other.seed = 6;
  EXPECT_NE(datasets::make_synthetic_temporal(other).targets, a.targets);
}

// england_covid's layout in miniature: 3 nodes, 5 steps, lags 2 -> 3 snapshots.
const char* kDynamicEdges = R"({"time_periods": 5,
  "edge_mapping": {"edge_index": {"0": [[0, 1], [1, 2]], "1": [[2, 0]], "2": [[0, 1], [0, 1]],
                                  "3": [], "4": [[1, 1]]},
                   "edge_weight": {"0": [2.0, 3.0], "1": [1.5], "2": [1, 4], "3": [], "4": [1]}},
  "y": [[1, 2, 3], [2, 3, 4], [3, 4, 5], [4, 5, 6], [5, 6, 7]]})";

TEST(TemporalConvert, DynamicEdgesLayout) {
  test::TempDir dir("temporal-json");
  write_text(dir / "d.json", kDynamicEdges);
  datasets::TemporalConvertOptions o;
  o.lags = 2;
  o.train_frac = 0.67;
  const TemporalDataset d = datasets::read_pyg_temporal_json(dir / "d.json", o);
  EXPECT_EQ(d.num_nodes, 3);
  EXPECT_EQ(d.num_snapshots(), 3);
  EXPECT_EQ(d.feature_dim, 2);
  // Snapshot 0: edges of step 0 (0 -> 1 weight 2, 1 -> 2 weight 3) as in-neighbor rows.
  EXPECT_EQ(d.snapshots[0].indptr, (std::vector<EdgeId>{0, 0, 1, 2}));
  EXPECT_EQ(d.snapshots[0].values, (std::vector<float>{2.0f, 3.0f}));
  // Snapshot 2: the repeated pair 0 -> 1 merges into one edge of weight 5.
  EXPECT_EQ(d.snapshots[2].values, (std::vector<float>{5.0f}));
  // Features of (snapshot 1, node 2): y[1][2], y[2][2]; target y[3][2].
  EXPECT_EQ(d.features[(1 * 3 + 2) * 2], 4.0f);
  EXPECT_EQ(d.features[(1 * 3 + 2) * 2 + 1], 5.0f);
  EXPECT_EQ(d.targets[1 * 3 + 2], 6.0f);
  EXPECT_EQ(d.train, (datasets::SnapshotRange{0, 2}));
  EXPECT_EQ(d.test, (datasets::SnapshotRange{2, 3}));
}

// Without --valid-frac the last 15% of a training span of 5 or more snapshots validate (at
// least one); --valid-frac 0 turns that off and a given fraction takes the snapshots after the
// span, as before; a shorter span keeps no validation.
TEST(TemporalConvert, DefaultValidationComesFromTheEndOfTheTrainingSpan) {
  test::TempDir dir("temporal-json-split");
  std::string fx;
  for (int t = 0; t < 42; ++t) fx += (t ? ", [" : "[") + std::to_string(t) + ", " + std::to_string(2 * t) + "]";
  write_text(dir / "s.json", R"({"edges": [[0, 1], [1, 0]], "FX": [)" + fx + "]}");
  datasets::TemporalConvertOptions o;
  o.lags = 2;  // 40 snapshots, a training span of 32
  auto d = datasets::read_pyg_temporal_json(dir / "s.json", o);
  ASSERT_EQ(d.num_snapshots(), 40);
  EXPECT_EQ(d.train, (datasets::SnapshotRange{0, 27}));  // round(0.15 * 32) = 5 validate
  EXPECT_EQ(d.valid, (datasets::SnapshotRange{27, 32}));
  EXPECT_EQ(d.test, (datasets::SnapshotRange{32, 40}));
  o.valid_frac = 0.0;
  d = datasets::read_pyg_temporal_json(dir / "s.json", o);
  EXPECT_EQ(d.train, (datasets::SnapshotRange{0, 32}));
  EXPECT_EQ(d.valid, (datasets::SnapshotRange{32, 32}));
  o.valid_frac = 0.1;
  d = datasets::read_pyg_temporal_json(dir / "s.json", o);
  EXPECT_EQ(d.train, (datasets::SnapshotRange{0, 32}));
  EXPECT_EQ(d.valid, (datasets::SnapshotRange{32, 36}));
  EXPECT_EQ(d.test, (datasets::SnapshotRange{36, 40}));
  // A span of 5 keeps 4 for training and 1 to validate; a span of 4 none.
  o.valid_frac.reset();
  o.train_frac = 5.0 / 40;
  d = datasets::read_pyg_temporal_json(dir / "s.json", o);
  EXPECT_EQ(d.train, (datasets::SnapshotRange{0, 4}));
  EXPECT_EQ(d.valid, (datasets::SnapshotRange{4, 5}));
  o.train_frac = 4.0 / 40;
  d = datasets::read_pyg_temporal_json(dir / "s.json", o);
  EXPECT_EQ(d.train, (datasets::SnapshotRange{0, 4}));
  EXPECT_EQ(d.valid, (datasets::SnapshotRange{4, 4}));
}

TEST(TemporalConvert, StaticSignalPerSnapshotAndNodeLinkLayouts) {
  test::TempDir dir("temporal-json");
  datasets::TemporalConvertOptions o;
  o.lags = 1;
  write_text(dir / "s.json",
             R"({"edges": [[0, 1], [1, 0]], "weights": [1, 2], "FX": [[1, 2], [3, 4], [5, 6]]})");
  TemporalDataset s = datasets::read_pyg_temporal_json(dir / "s.json", o);
  EXPECT_EQ(s.num_snapshots(), 2);
  EXPECT_EQ(s.targets, (std::vector<float>{3, 4, 5, 6}));
  EXPECT_EQ(s.snapshots[1].values, (std::vector<float>{2, 1}));

  write_text(dir / "p.json", R"({"0": {"index": 0, "edges": [[0, 1]], "weights": [1],
      "X": [[1, 0], [0, 1]], "y": [0.5, 1.5]},
      "1": {"index": 1, "edges": [[1, 0]], "X": [[2, 0], [0, 2]], "y": [2.5, 3.5]}})");
  TemporalDataset p = datasets::read_pyg_temporal_json(dir / "p.json", o);
  EXPECT_EQ(p.num_snapshots(), 2);
  EXPECT_EQ(p.feature_dim, 2);
  EXPECT_EQ(p.targets, (std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f}));
  EXPECT_EQ(p.snapshots[1].indptr, (std::vector<EdgeId>{0, 1, 1}));

  write_text(dir / "n.json", R"({"directed": false, "multigraph": false, "graph": {},
      "nodes": [{"id": "a", "X": [1, 2, 3], "y": [0, 1, 0]}, {"id": "b", "X": [4, 5, 6],
                 "y": [1, 1, 1]}],
      "links": [{"source": "a", "target": "b", "weight": 2}]})");
  TemporalDataset n = datasets::read_pyg_temporal_json(dir / "n.json", o);
  EXPECT_EQ(n.num_snapshots(), 3);
  EXPECT_EQ(n.feature_dim, 1);
  EXPECT_EQ(n.snapshots[0].num_edges(), 2);  // undirected: both directions
  EXPECT_EQ(n.features, (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

void expect_refused(const std::string& text, const std::string& piece) {
  test::TempDir dir("temporal-bad");
  write_text(dir / "bad.json", text);
  datasets::TemporalConvertOptions o;
  o.lags = 1;
  try {
    datasets::read_pyg_temporal_json(dir / "bad.json", o);
    ADD_FAILURE() << "accepted: " << text;
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("bad.json"), std::string::npos) << what;
    EXPECT_NE(what.find(piece), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(TemporalConvert, BadJsonIsRefusedWithOneLine) {
  expect_refused(R"({"foo": 1, "bar": [2]})", "keys found: bar, foo");
  expect_refused(R"({"edge_mapping": {"edge_index": {"0": [[0, 1]]}}, "y": [[1, 2], [1, 2]]})",
                 "missing key \"1\"");
  expect_refused(R"({"edges": [[0, 1]], "FX": [[1, 2], [1]]})", "ragged");
  expect_refused(R"({"edges": [[0, 5]], "FX": [[1, 2], [1, 2]]})", "not a node id in [0, 2)");
  expect_refused(R"({"edges": [[0, 1]], "FX": [[1, "x"], [1, 2]]})", "expected a number");
  expect_refused(R"({"edges": [[0, 1]], "FX": [[1, 2)", "not valid JSON");
}

// Real files carry metadata nobody planned for. PyTorch Geometric Temporal's Twitter tennis
// files hold, beside the numbered snapshots, "time_periods" and "node_ids" (a map from a player's
// name to a node id): converted, with node_ids listed as ignored.
TEST(TemporalConvert, TennisWithNodeIdsConverts) {
  test::TempDir dir("temporal-tennis");
  write_text(dir / "t.json", R"({"time_periods": 2,
      "0": {"index": 0, "edges": [[0, 1]], "weights": [1], "X": [[1], [2]], "y": [0, 1]},
      "1": {"index": 1, "edges": [[1, 0]], "weights": [2], "X": [[3], [4]], "y": [1, 0]},
      "node_ids": {"Nadal": 0, "Federer": 1}})");
  datasets::TemporalConvertOptions o;
  o.train_frac = 0.5;
  const TemporalDataset d = datasets::read_pyg_temporal_json(dir / "t.json", o);
  EXPECT_EQ(d.num_snapshots(), 2);
  EXPECT_EQ(d.features, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(d.targets, (std::vector<float>{0, 1, 1, 0}));
  EXPECT_EQ(d.snapshots[1].values, (std::vector<float>{2}));
  EXPECT_EQ(d.ignored_keys, (std::vector<std::string>{"node_ids"}));
  // What is read is still checked: a count that disagrees, an index out of place, a snapshot
  // that is not an object, a ragged X, all with node_ids beside them.
  const std::string ids = R"("node_ids": {"a": 0, "b": 1})";
  expect_refused("{" + ids + R"(, "time_periods": 3, "0": {"index": 0, "edges": [[0, 1]],
      "X": [[1], [2]], "y": [0, 1]}})", "time_periods is 3, but the file holds 1 snapshots");
  expect_refused("{" + ids + R"(, "0": {"index": 2, "edges": [[0, 1]], "X": [[1], [2]],
      "y": [0, 1]}})", "snapshot \"0\" has index 2");
  expect_refused("{" + ids + R"(, "0": {"edges": [[0, 1]], "X": [[1], [2]], "y": [0, 1]},
      "1": "later"})", "snapshot \"1\" is \"later\", expected an object");
  expect_refused("{" + ids + R"(, "0": {"edges": [[0, 1]], "X": [[1], [2]], "y": [0, 1]},
      "2": {"edges": [], "X": [[1], [2]], "y": [0, 1]}})", "missing key \"1\"");
  expect_refused("{" + ids + R"(, "0": {"edges": [[0, 1]], "X": [[1], [2, 3]], "y": [0, 1]}})",
                 "0.X[1] has 2 values, expected 1");
}

// One key of each kind (string, number, object, list) added at every level of every layout:
// the conversion is the same as without them, and the summary lists exactly the keys added.
TEST(TemporalConvert, UnknownKeysOfEveryKindAreIgnoredAndListed) {
  using nlohmann::json;
  const json extras = {{"note", "made by hand"},
                       {"scale", 2.5},
                       {"meta", {{"source", "x"}, {"n", 3}}},
                       {"tags", {1, "two", nullptr}}};
  const auto add = [&](json& obj) {
    for (const auto& [k, v] : extras.items()) obj[k] = v;
  };
  const auto listed = [&](const std::vector<std::string>& prefixes) {
    std::vector<std::string> out;
    for (const auto& p : prefixes)
      for (const auto& [k, v] : extras.items()) out.push_back(p + k);
    std::sort(out.begin(), out.end());
    return out;
  };
  struct Case {
    std::string name, text;
    std::function<void(json&)> decorate;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {"dynamic", kDynamicEdges,
       [&](json& j) {
         add(j);
         add(j["edge_mapping"]);
       },
       listed({"", "edge_mapping."})},
      {"static",
       R"({"edges": [[0, 1], [1, 0]], "weights": [1, 2], "FX": [[1, 2], [3, 4], [5, 6]]})",
       [&](json& j) { add(j); }, listed({""})},
      {"per-snapshot", R"({"0": {"index": 0, "edges": [[0, 1]], "weights": [1],
           "X": [[1, 0], [0, 1]], "y": [0.5, 1.5]},
           "1": {"index": 1, "edges": [[1, 0]], "X": [[2, 0], [0, 2]], "y": [2.5, 3.5]}})",
       [&](json& j) {
         add(j);
         add(j["0"]);
         add(j["1"]);
       },
       listed({"", "<snapshot>."})},
      {"node-link", R"({"directed": false, "nodes": [{"id": "a", "X": [1, 2, 3], "y": [0, 1, 0]},
           {"id": "b", "X": [4, 5, 6], "y": [1, 1, 1]}],
           "links": [{"source": "a", "target": "b", "weight": 2}]})",
       [&](json& j) {
         add(j);
         add(j["nodes"][0]);
         add(j["nodes"][1]);
         add(j["links"][0]);
       },
       listed({"", "links[].", "nodes[]."})},
  };
  test::TempDir dir("temporal-extra-keys");
  datasets::TemporalConvertOptions o;
  o.lags = 1;
  o.train_frac = 0.5;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    write_text(dir / "plain.json", c.text);
    json decorated = json::parse(c.text);
    c.decorate(decorated);
    write_text(dir / "extra.json", decorated.dump());
    const TemporalDataset plain = datasets::read_pyg_temporal_json(dir / "plain.json", o);
    const TemporalDataset extra = datasets::read_pyg_temporal_json(dir / "extra.json", o);
    EXPECT_TRUE(plain.ignored_keys.empty());
    EXPECT_EQ(extra.ignored_keys, c.expected);
    expect_same_graphs(extra.snapshots, plain.snapshots);
    EXPECT_EQ(extra.features, plain.features);
    EXPECT_EQ(extra.targets, plain.targets);
    EXPECT_EQ(extra.train, plain.train);
  }
  // Keys no summary could show on one line are escaped and cut.
  write_text(dir / "odd.json", R"({"edges": [[0, 1]], "FX": [[1, 2], [3, 4], [5, 6]],
      "line\nbreak": 1, "long": {"x": 1}, ")" + std::string(100, 'k') + R"(": 0})");
  const auto odd = datasets::read_pyg_temporal_json(dir / "odd.json", o).ignored_keys;
  ASSERT_EQ(odd.size(), 3u);
  for (const auto& k : odd) {
    EXPECT_EQ(k.find('\n'), std::string::npos) << k;
    EXPECT_LE(k.size(), 40u) << k;
  }
  EXPECT_EQ(odd[0], "\"line\\nbreak\"");
  // Read values stay strict beside unknown keys: a non-boolean "directed" is refused.
  expect_refused(R"({"directed": "yes", "extra": 1, "nodes": [{"id": 0, "X": [1, 2], "y": [1, 2]}],
      "links": []})", "directed is \"yes\", expected true or false");
  expect_refused(R"({"extra": [1], "edges": [[0, 1]], "weights": [-1], "FX": [[1, 2], [3, 4]]})",
                 "negative weight");
}

TEST(TemporalConvert, EdgeListsBinnedIntoSnapshots) {
  test::TempDir dir("temporal-csv");
  write_text(dir / "e.csv", "# src dst time weight\n0,1,10,2\n1,2,11\n2 0 20\n0,2,39,1.5\n");
  datasets::TemporalConvertOptions o;
  o.snapshots = 3;
  o.train_frac = 0.67;
  const TemporalDataset d = datasets::read_temporal_edge_list(dir / "e.csv", o);
  EXPECT_EQ(d.num_nodes, 3);
  ASSERT_EQ(d.num_snapshots(), 3);
  EXPECT_EQ(d.snapshots[0].num_edges(), 2);  // times 10, 11
  EXPECT_EQ(d.snapshots[1].num_edges(), 1);  // time 20
  EXPECT_EQ(d.snapshots[2].num_edges(), 1);  // time 39
  EXPECT_EQ(d.feature_dim, 2);               // degree features
  o.snapshots = 0;
  o.snapshot_span = 10;
  EXPECT_EQ(datasets::read_temporal_edge_list(dir / "e.csv", o).num_snapshots(), 3);

  // The same edges gzip-compressed (SNAP ships .txt.gz) give the same snapshots.
  {
    gzFile gz = gzopen((dir / "e.csv.gz").c_str(), "wb");
    ASSERT_NE(gz, nullptr);
    const std::string text = "0,1,10,2\n1,2,11\n2 0 20\n0,2,39,1.5\n";
    gzwrite(gz, text.data(), static_cast<unsigned>(text.size()));
    gzclose(gz);
    const TemporalDataset z = datasets::read_temporal_edge_list(dir / "e.csv.gz", o);
    ASSERT_EQ(z.num_snapshots(), 3);
    for (int t = 0; t < 3; ++t) EXPECT_EQ(z.snapshots[t].indices, d.snapshots[t].indices);
  }
  write_text(dir / "unsorted.csv", "0,1,10\n1,2,5\n");
  try {
    datasets::read_temporal_edge_list(dir / "unsorted.csv", o);
    ADD_FAILURE() << "unsorted timestamps accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("unsorted.csv line 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sorted"), std::string::npos) << e.what();
  }
  write_text(dir / "text.csv", "0,1,10\n1,x,11\n");
  EXPECT_THROW(datasets::read_temporal_edge_list(dir / "text.csv", o), InputError);
  write_text(dir / "feat.csv", "1,2\n3,4\n");  // 2 rows, but node 2 appears
  o.node_features = dir / "feat.csv";
  EXPECT_THROW(datasets::read_temporal_edge_list(dir / "e.csv", o), InputError);
}

}  // namespace
}  // namespace tessel
