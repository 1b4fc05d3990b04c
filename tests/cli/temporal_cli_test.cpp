// The temporal commands through the binary: bad input to `convert temporal` (one error line
// naming the file, exit 2, nothing left behind); convert, partition and `train --mode dynamic`
// under mpirun with metrics, checkpoints (resume continues the same trajectory) and predictions.
#include "tessel/datasets/h5.hpp"
#include "tessel/datasets/temporal.hpp"

#include "test_support.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>

namespace tessel {
namespace {

namespace fs = std::filesystem;

using Result = test::CommandResult;
using test::quote;
using test::run_tessel;

void write_text(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

std::size_t files_in(const fs::path& dir) {
  return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

TEST(TemporalCli, BadInputIsOneLineExitTwoAndNothingLeft) {
  test::TempDir dir("temporal-cli-bad");
  const fs::path out = dir / "out";
  fs::create_directories(out);
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"keys.json", R"({"foo": [1]})", "keys found: foo"},
      {"missing.json", R"({"edge_mapping": {"edge_index": {"0": []}}, "y": [[1], [2]]})",
       "missing key \"1\""},
      {"ragged.json", R"({"edges": [[0, 1]], "FX": [[1, 2], [3]]})", "ragged"},
      {"range.json", R"({"edges": [[0, 9]], "FX": [[1, 2], [3, 4]]})", "not a node id"},
      {"text.json", R"({"edges": [[0, 1]], "FX": [[1, "a"], [3, 4]]})", "expected a number"},
      {"unsorted.csv", "0,1,5\n1,0,3\n", "unsorted.csv line 2"},
      {"fields.csv", "0,1\n", "expected src,dst,time"},
      // Nested 1e5 deep where a number is expected: refused by the parser's depth limit
      // before anything walks it (it crashed with SIGSEGV).
      {"deep.json",
       R"({"edge_mapping":{"edge_index":{}},"y":[[1]],"time_periods":)" +
           std::string(100000, '[') + std::string(100000, ']') + "}",
       "nested more than 64 levels deep"},
      // A number beyond a double: the file's name and the value, not the parser's raw text.
      {"huge.json", R"({"edges": [[0, 1]], "FX": [[1, 2], [3, 1e400]]})", "1e400"},
      // A top-level array is JSON (not an edge list), and the message says what it is.
      {"array.json", "[1, 2]", "(an array, not an object)"},
      {"array.txt", " [1, 2]", "(an array, not an object)"},
      // One-object-per-snapshot with a time_periods count that disagrees with the snapshots.
      {"periods.json",
       R"({"time_periods": 3, "0": {"index": 0, "edges": [[0, 1]], "weights": [1],
           "X": [[1], [2]], "y": [0, 1]}})",
       "time_periods is 3, but the file holds 1 snapshots"},
      {"index.json",
       R"({"time_periods": 1, "0": {"index": 4, "edges": [[0, 1]], "weights": [1],
           "X": [[1], [2]], "y": [0, 1]}})",
       "snapshot \"0\" has index 4"},
      {"series.json",
       R"({"nodes": [{"id": 0, "X": {"y": [1, 2, 3]}, "y": [1, 2, 3]},
                     {"id": 1, "X": {"z": [1, 2, 3]}, "y": [1, 2, 3]}], "links": []})",
       "nodes[1].X has no series \"y\""},
  };
  for (const auto& [name, text, piece] : cases) {
    write_text(dir / name, text);
    // --snapshots is an edge list's flag: refused on JSON input.
    const bool edge_list = name.ends_with(".csv");
    const Result r = run_tessel("convert temporal " + quote(dir / name) + " " +
                                quote(out / "x.h5") + (edge_list ? " --snapshots 2" : " --lags 1"));
    EXPECT_EQ(r.code, 2) << name << ": " << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_NE(r.output.find(name), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(piece), std::string::npos) << r.output;
    EXPECT_EQ(files_in(out), 0u) << name << " left output behind";
  }
}

// Flag values that overflow or name nothing: one line naming the flag (or file and line).
TEST(TemporalCli, OutOfRangeOptionsNameTheFlag) {
  test::TempDir dir("temporal-cli-flags");
  const fs::path out = dir / "out";
  fs::create_directories(out);
  write_text(dir / "e.csv", "0,1,0\n1,2,1\n2,0,2\n");
  write_text(dir / "nf.csv", "1,2\n1e39,3\n4,5\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"convert temporal " + quote(dir / "e.csv") + " " + quote(out / "x.h5") +
           " --snapshot-span 1e-300",
       "--snapshot-span 1e-300"},
      {"convert temporal " + quote(dir / "e.csv") + " " + quote(out / "x.h5") +
           " --snapshots 2 --node-features " + quote(dir / "nf.csv"),
       "nf.csv line 2: '1e39' is not a finite 32-bit float"},
      {"convert synthetic-temporal " + quote(out / "x.h5") + " --rewire 2",
       "--rewire must be in [0, 1], got 2"},
      {"convert synthetic-temporal " + quote(out / "x.h5") + " --seed -1", "--seed"},
      // Edge-list flags on JSON input were ignored without a word.
      {"convert temporal " + quote(dir / "s.json") + " " + quote(out / "x.h5") +
           " --snapshots 2 --node-features " + quote(dir / "nf.csv"),
       "s.json: --snapshots, --node-features apply only to edge lists, and this is a JSON file"},
      // One huge node id would size every snapshot's rows by it.
      {"convert temporal " + quote(dir / "wide.csv") + " " + quote(out / "x.h5") +
           " --snapshots 2",
       "wide.csv: edge 2 names node 999999999999"},
  };
  write_text(dir / "wide.csv", "0,1,0\n1,999999999999,1\n");
  write_text(dir / "s.json", R"({"edges": [[0, 1]], "FX": [[1, 2], [3, 4]]})");
  for (const auto& [args, piece] : cases) {
    const Result r = run_tessel(args);
    SCOPED_TRACE(args + "\n" + r.output);
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1);
    EXPECT_NE(r.output.find(piece), std::string::npos);
    EXPECT_EQ(files_in(out), 0u);
  }
}

// A JSON file beyond the size limit is refused before it is read (a sparse 3 GB file here).
TEST(TemporalCli, JsonBeyondTheSizeLimitIsRefused) {
  test::TempDir dir("temporal-cli-big");
  { std::ofstream(dir / "big.json") << "{"; }
  fs::resize_file(dir / "big.json", std::uintmax_t{3} << 30);
  const Result r = run_tessel("convert temporal " + quote(dir / "big.json") + " " +
                              quote(dir / "x.h5"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("big.json: 3.2 GB of JSON, more than the 2 GB"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir / "x.h5"));
}

// PyTorch Geometric Temporal's own shapes of two layouts (written here as its loaders read
// them): one object per snapshot with a "time_periods" count, an "index" per snapshot and a
// "node_ids" map beside them (the Twitter tennis files), and node-link nodes whose X is an
// object of named series (the Montevideo bus file); a UTF-8 byte-order mark in front is skipped.
TEST(TemporalCli, DistributedLayoutsConvert) {
  test::TempDir dir("temporal-cli-layouts");
  write_text(dir / "tennis.json",
             "\xEF\xBB\xBF" R"({"time_periods": 2,
               "0": {"index": 0, "edges": [[0, 1]], "weights": [1], "X": [[1], [2]], "y": [0, 1]},
               "1": {"index": 1, "edges": [[1, 0]], "weights": [2], "X": [[3], [4]], "y": [1, 0]},
               "node_ids": {"Nadal": 0, "Federer": 1}})");
  Result r = run_tessel("convert temporal " + quote(dir / "tennis.json") + " " +
                        quote(dir / "tennis.h5") + " --train-frac 0.5");
  ASSERT_EQ(r.code, 0) << r.output;
  // The summary names the key beside the snapshots that was not read.
  EXPECT_NE(r.output.find("\n  ignored keys (present, not read): node_ids\n"), std::string::npos)
      << r.output;
  {
    const auto d = datasets::read_temporal_store(dir / "tennis.h5");
    EXPECT_EQ(d.num_nodes, 2);
    EXPECT_EQ(d.num_snapshots(), 2);
    EXPECT_EQ(d.features, (std::vector<float>{1, 2, 3, 4}));
  }
  // Two nodes, series "a" and "b" of 5 steps each, target y; --lags 2: 3 snapshots whose
  // features are a's then b's two values from step s on, target y at s + 2.
  const std::string series = R"({"directed": false, "multigraph": false, "graph": {},
      "nodes": [{"id": "A", "X": {"b": [10, 11, 12, 13, 14], "a": [0, 1, 2, 3, 4]},
                 "y": [5, 6, 7, 8, 9]},
                {"id": "B", "X": {"a": [20, 21, 22, 23, 24], "b": [30, 31, 32, 33, 34]},
                 "y": [40, 41, 42, 43, 44]}],
      "links": [{"source": "A", "target": "B", "weight": 2}]})";
  write_text(dir / "bus.json", series);
  r = run_tessel("convert temporal " + quote(dir / "bus.json") + " " + quote(dir / "bus.h5") +
                 " --lags 2");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto d = datasets::read_temporal_store(dir / "bus.h5");
  EXPECT_EQ(d.num_snapshots(), 3);
  ASSERT_EQ(d.feature_dim, 4);
  EXPECT_EQ(std::vector<float>(d.features.begin(), d.features.begin() + 8),
            (std::vector<float>{0, 1, 10, 11, 20, 21, 30, 31}));
  EXPECT_EQ(std::vector<float>(d.targets.begin(), d.targets.begin() + 2),
            (std::vector<float>{7, 42}));
  // --features picks and orders the series.
  r = run_tessel("convert temporal " + quote(dir / "bus.json") + " " + quote(dir / "bus-b.h5") +
                 " --lags 2 --features b");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto b = datasets::read_temporal_store(dir / "bus-b.h5");
  ASSERT_EQ(b.feature_dim, 2);
  EXPECT_EQ(std::vector<float>(b.features.begin(), b.features.begin() + 4),
            (std::vector<float>{10, 11, 30, 31}));
}

std::vector<nlohmann::json> read_lines(const fs::path& p) {
  std::vector<nlohmann::json> out;
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// Overwrites one element of a dataset in place (row-major index `at`), as h5py would.
template <class T> void poke(const fs::path& file, const char* name, std::size_t at, T value) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << file;
  const hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  ASSERT_GE(d, 0) << name;
  const hid_t space = H5Dget_space(d);
  hsize_t dims[2] = {1, 1};
  const int rank = H5Sget_simple_extent_dims(space, dims, nullptr);
  const hsize_t cols = rank == 2 ? dims[1] : 1;
  hsize_t start[2] = {at / cols, at % cols}, count[2] = {1, 1};
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  const hid_t mem = H5Screate_simple(1, count, nullptr);
  EXPECT_GE(H5Dwrite(d, h5::native_type<T>(), mem, space, H5P_DEFAULT, &value), 0);
  H5Sclose(mem);
  H5Sclose(space);
  H5Dclose(d);
  H5Fclose(f);
  test::drop_file_checksum(file);  // else refused as damaged before the dataset is read
}

// `tessel info` on a temporal store checks what `partition` checks (it checked nothing), and
// a NaN in a temporal partition's store is refused naming the file and the row, not reported
// as a diverged loss.
TEST(TemporalCli, InfoAndTrainingCheckTheTemporalStore) {
  test::TempDir dir("temporal-cli-damage");
  const fs::path good = dir / "good.h5";
  Result r = run_tessel("convert synthetic-temporal --nodes 60 --snapshots 6 --avg-degree 4 "
                        "--feat-dim 3 --seed 2 " + quote(good));
  ASSERT_EQ(r.code, 0) << r.output;
  const std::vector<std::tuple<std::string, std::string, std::string>> damage = {
      {"/base/indices", "index", "outside [0, 60)"},
      {"/node/feat", "nan", "/node/feat row 4 (snapshot 0, node 4), column 1 is nan"},
      {"/node/target", "nan", "/node/target[0, 7]"},
  };
  for (const auto& [name, kind, piece] : damage) {
    const fs::path bad = dir / "bad.h5";
    fs::copy_file(good, bad, fs::copy_options::overwrite_existing);
    if (kind == "index")
      poke<std::int64_t>(bad, name.c_str(), 2, 300);
    else if (name == "/node/feat")
      poke<float>(bad, name.c_str(), 4 * 3 + 1, std::nanf(""));
    else
      poke<float>(bad, name.c_str(), 7, std::nanf(""));
    r = run_tessel("info " + quote(bad));
    SCOPED_TRACE(name + "\n" + r.output);
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1);
    EXPECT_NE(r.output.find("bad.h5"), std::string::npos);
    EXPECT_NE(r.output.find(piece), std::string::npos);
  }
  r = run_tessel("partition " + quote(good) + " --parts 2 --out " + quote(dir / "p"));
  ASSERT_EQ(r.code, 0) << r.output;
  // Full mode on a temporal partition points at --mode dynamic.
  r = run_tessel("train " + quote(dir / "p") + " --epochs 1 --quiet", 2);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("a partition of a temporal store; train it with --mode dynamic"),
            std::string::npos)
      << r.output;
  poke<float>(dir / "p" / "temporal.h5", "/node/feat", 10 * 3, std::nanf(""));
  r = run_tessel("train " + quote(dir / "p") + " --mode dynamic --model gcn-gru --epochs 2 --quiet",
                 2);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("temporal.h5: /node/feat row 10 (snapshot 0, node 10), column 0 is "
                          "nan"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("diverged"), std::string::npos) << r.output;
}

// The converter's summary says whether the series were standardized, and recommends it for
// count series; dynamic node regression defaults to 1 GCN layer without dropout unless given.
TEST(TemporalCli, SeriesScalingIsReportedAndDynamicDefaultsFitTheTask) {
  test::TempDir dir("temporal-cli-defaults");
  auto series = [](const std::string& a, const std::string& y) {
    return R"({"directed": false, "multigraph": false, "graph": {},
      "nodes": [{"id": "A", "X": {"a": )" + a + R"(}, "y": )" + y + R"(},
                {"id": "B", "X": {"a": [2, 1, 0, 1, 2, 3]}, "y": [1, 1, 2, 3, 5, 8]}],
      "links": [{"source": "A", "target": "B", "weight": 1}]})";
  };
  write_text(dir / "counts.json", series("[0, 1, 2, 3, 4, 5]", "[3, 0, 4, 1, 5, 9]"));
  write_text(dir / "real.json", series("[0, 1, 2, 3, 4, 5]", "[0.5, 1, 1.5, 2, 2.5, 3]"));
  const struct {
    const char* file;
    const char* flags;
    const char* line;
  } cases[] = {
      {"counts.json", "", "series not standardized, and they are counts: the usual recipe trains "
                          "on standardized series; convert again with --standardize"},
      {"counts.json", " --standardize", "series standardized per node (--standardize)"},
      {"real.json", "", "series not standardized (--standardize z-scores each node's series)"},
  };
  for (const auto& c : cases) {
    const Result r = run_tessel("convert temporal " + quote(dir / c.file) + " " +
                                quote(dir / "s.h5") + " --lags 2" + c.flags);
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find(c.line), std::string::npos) << c.file << c.flags << "\n" << r.output;
  }
  // Synthetic snapshots carry no series: no such line.
  Result r = run_tessel("convert synthetic-temporal --nodes 60 --snapshots 6 --feat-dim 3 --seed 1 " +
                        quote(dir / "g.h5"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("standardiz"), std::string::npos) << r.output;
  r = run_tessel("partition " + quote(dir / "g.h5") + " --parts 1 --out " + quote(dir / "p"));
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string train = "train " + quote(dir / "p") + " --mode dynamic --model gcn-gru --epochs 1 ";
  r = run_tessel(train);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("1 GCN layer hidden 16, dropout 0, task node-regression"),
            std::string::npos)
      << r.output;
  r = run_tessel(train + "--layers 2 --dropout 0.25");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("2 GCN layers hidden 16, dropout 0.25,"), std::string::npos) << r.output;
  // The last series store has no validation snapshots: its validation MSE is n/a in the epoch
  // lines, null in the records and the bench report, n/a in the report's table, never 0.
  r = run_tessel("partition " + quote(dir / "s.h5") + " --parts 1 --out " + quote(dir / "sp"));
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_tessel("bench " + quote(dir / "sp") + " --modes dynamic --model gcn-gru --epochs 2 --out " +
                 quote(dir / "report"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("valid n/a"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| best valid mse (lower is better) | n/a |"), std::string::npos)
      << r.output;
  std::ifstream report_file(dir / "report" / "report.json");
  const auto report = nlohmann::json::parse(report_file);
  EXPECT_TRUE(report["modes"][0]["best_valid"].is_null()) << report.dump(1);
  EXPECT_FALSE(report["modes"][0]["has_valid"].get<bool>());
  EXPECT_TRUE(report["modes"][0]["test_at_best_valid"].is_number());
  const auto lines = read_lines(dir / "report" / "dynamic.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(lines[i]["valid_mse"].is_null()) << lines[i].dump();
    EXPECT_TRUE(lines[i]["test_mse"].is_number()) << lines[i].dump();
  }
  EXPECT_TRUE(lines[2]["valid_mse"].is_null()) << lines[2].dump();
}

TEST(TemporalCli, TrainDynamicWritesMetricsCheckpointsAndPredictions) {
  test::TempDir dir("temporal-cli-train");
  Result r = run_tessel("convert synthetic-temporal --nodes 120 --snapshots 8 --avg-degree 4 "
                        "--feat-dim 3 --seed 2 " +
                        quote(dir / "s.h5"));
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_tessel("info " + quote(dir / "s.h5") + " --json");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["num_snapshots"], 8);
  r = run_tessel("partition " + quote(dir / "s.h5") + " --parts 2 --out " + quote(dir / "p"));
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string common = "train " + quote(dir / "p") +
                             " --mode dynamic --model gcn-lstm --hidden 8 --layers 1 --lr 0.02 "
                             "--temporal-partition snapshot --seed 4 ";
  r = run_tessel(common + "--epochs 6 --metrics " + quote(dir / "full.jsonl") + " --predictions " +
                     quote(dir / "pred.h5") + " --embeddings " + quote(dir / "emb.h5"),
                 2);
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_tessel(common + "--epochs 4 --checkpoint " + quote(dir / "ck") + " --checkpoint-every 2",
                 2);
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_tessel(common + "--epochs 6 --resume " + quote(dir / "ck") + " --metrics " +
                     quote(dir / "resumed.jsonl"),
                 2);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto full = read_lines(dir / "full.jsonl");
  const auto resumed = read_lines(dir / "resumed.jsonl");
  ASSERT_EQ(full.size(), 7u);     // 6 epochs + summary
  ASSERT_EQ(resumed.size(), 3u);  // epochs 5, 6 + summary
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(resumed[i]["epoch"], 5 + i);
    EXPECT_NEAR(resumed[i]["loss"].get<double>(), full[4 + i]["loss"].get<double>(),
                1e-6 * full[4 + i]["loss"].get<double>());
  }
  for (const char* key : {"test_mse", "train_mse", "transpose_bytes", "analytic_transpose_bytes"})
    EXPECT_TRUE(full[5].contains(key)) << key;
  EXPECT_EQ(full[5]["transpose_bytes"], full[5]["analytic_transpose_bytes"]);
  EXPECT_GT(full[5]["transpose_bytes"].get<std::int64_t>(), 0);
  // CPU seconds of the training pass's phases of the snapshot layout, beside the wall seconds.
  ASSERT_TRUE(full[5].contains("phases_cpu")) << full[5].dump();
  const auto& cpu = full[5]["phases_cpu"];
  EXPECT_EQ(cpu.size(), 3u) << cpu.dump();
  for (const char* phase : {"graph", "transpose", "recurrent"}) {
    ASSERT_TRUE(cpu.contains(phase)) << phase;
    EXPECT_GE(cpu[phase].get<double>(), 0.0) << phase;
  }
  // The graph and recurrent phases did work on every rank: their CPU clocks moved.
  EXPECT_GT(cpu["graph"].get<double>(), 0.0);
  EXPECT_GT(cpu["recurrent"].get<double>(), 0.0);
  // The training pass's page faults and the host blocks taken from the system so far.
  for (const char* key : {"minor_faults", "host_allocations"}) {
    ASSERT_TRUE(full[5].contains(key)) << key;
    EXPECT_GE(full[5][key].get<std::int64_t>(), 0) << key;
  }
  EXPECT_TRUE(full.back()["summary"].get<bool>());
  const h5::File pred = h5::File::open_read(dir / "pred.h5");
  EXPECT_EQ(pred.dims("/prediction"), (std::vector<std::int64_t>{8 * 120, 1}));
  const auto values = pred.read<float>("/prediction");
  EXPECT_TRUE(std::any_of(values.begin(), values.end(), [](float v) { return v != 0.0f; }));
  // The embeddings: the recurrence's hidden state of every node at every snapshot.
  const h5::File emb = h5::File::open_read(dir / "emb.h5");
  EXPECT_EQ(emb.attr_string("format"), "tessel-temporal-embeddings");
  EXPECT_EQ(emb.dims("/embedding"), (std::vector<std::int64_t>{8 * 120, 8}));
  const auto rows = emb.read<float>("/embedding");
  // An LSTM's hidden state is o * tanh(c): inside (-1, 1), and not all zero.
  EXPECT_TRUE(std::all_of(rows.begin(), rows.end(), [](float v) { return std::abs(v) < 1.0f; }));
  EXPECT_TRUE(std::any_of(rows.begin(), rows.end(), [](float v) { return v != 0.0f; }));
  // tessel bench runs the dynamic mode alone on a temporal partition.
  r = run_tessel("bench " + quote(dir / "p") +
                     " --modes dynamic --model gcn-gru --hidden 8 --layers 1 "
                     "--epochs 2 --quiet --out " +
                     quote(dir / "report"),
                 2);
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream report_file(dir / "report" / "report.json");
  const auto report = nlohmann::json::parse(report_file);
  ASSERT_EQ(report["modes"].size(), 1u);
  EXPECT_EQ(report["modes"][0]["mode"], "dynamic");
  EXPECT_TRUE(report["modes"][0]["mode_summary"].contains("final_test_mse"));
  // The report carries the task's metric: the lowest validation MSE of the run, not an accuracy.
  const auto bench_epochs = read_lines(dir / "report" / "dynamic.jsonl");
  auto check_metric = [](const nlohmann::json& mode, const std::vector<nlohmann::json>& epochs,
                         const std::string& metric, bool higher) {
    EXPECT_EQ(mode["metric"], metric);
    EXPECT_EQ(mode["higher_is_better"], higher);
    EXPECT_TRUE(mode["best_valid_acc"].is_null()) << mode.dump();
    double best = higher ? -1.0 : 1e300;
    for (const auto& e : epochs)
      if (e.contains("valid_" + metric)) {
        const double v = e["valid_" + metric].get<double>();
        best = higher ? std::max(best, v) : std::min(best, v);
      }
    EXPECT_GT(best, 0.0) << metric;
    EXPECT_DOUBLE_EQ(mode["best_valid"].get<double>(), best) << metric;
    EXPECT_DOUBLE_EQ(mode["test_at_best_valid"].get<double>(),
                     mode["mode_summary"]["test_" + metric].get<double>())
        << metric;
  };
  check_metric(report["modes"][0], bench_epochs, "mse", false);
  {
    std::ifstream md_file(dir / "report" / "report.md");
    const std::string md((std::istreambuf_iterator<char>(md_file)),
                         std::istreambuf_iterator<char>());
    EXPECT_NE(md.find("| best valid mse (lower is better) |"), std::string::npos) << md;
  }
  // Link prediction: the highest validation AUC.
  r = run_tessel("bench " + quote(dir / "p") +
                     " --modes dynamic --model gcn-gru --hidden 8 --layers 1 "
                     "--task link-prediction --epochs 3 --quiet --out " +
                     quote(dir / "report-link"),
                 2);
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream link_file(dir / "report-link" / "report.json");
  const auto link_report = nlohmann::json::parse(link_file);
  check_metric(link_report["modes"][0], read_lines(dir / "report-link" / "dynamic.jsonl"), "auc",
               true);
  r = run_tessel("bench " + quote(dir / "p") +
                     " --modes full,dynamic --model gcn-gru --epochs 1 --out " +
                     quote(dir / "report2"),
                 2);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("runs alone"), std::string::npos) << r.output;
  // A partition for 2 ranks refuses 1 rank with one line.
  r = run_tessel(common + "--epochs 1", 1);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("mpirun -np 2"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace tessel
