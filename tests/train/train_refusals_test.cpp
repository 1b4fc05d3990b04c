// Hostile input to `tessel train` and `tessel bench`: bad flags, edited part files and
// checkpoints, diverging runs and failed benches. Each must end with one clear line and a
// non-zero exit (2 for usage and input errors) and leave no half-written output behind.
#include "train_test_helpers.hpp"

#include "dataset_fixtures.hpp"

#include "tessel/core/mpi.hpp"
#include "tessel/partition/part.hpp"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>

using namespace tessel;
namespace fs = std::filesystem;
using test::read_metrics;
using test::run_ok;
using test::tessel_bin;

namespace {

struct RefusalData {
  static constexpr const char* kName = "refusals";
  static constexpr const char* kArgs =
      "--nodes 300 --avg-degree 6 --classes 3 --feat-dim 8 --seed 11";
};

class TrainRefusals : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir(RefusalData::kName);
    test::make_partitions(dir_->path(), RefusalData::kArgs, {1, 2});
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path parts(int p) { return dir_->path() / ("p" + std::to_string(p)); }
  static fs::path scratch(const std::string& name) { return dir_->path() / name; }

  // A copy of the P-part folder to edit.
  static fs::path copy_parts(int p, const std::string& name) {
    const fs::path to = scratch(name);
    fs::remove_all(to);
    fs::copy(parts(p), to, fs::copy_options::recursive);
    return to;
  }

  // Loads part p of `dir`, lets `edit` change it and writes it back. With `update_checksums`
  // partition.json records the edited part's checksums too (as if partition had written it),
  // so the structural checks are exercised rather than the checksums.
  template <class Edit>
  static void edit_part(const fs::path& dir, int p, Edit edit, bool update_checksums) {
    const partition::Manifest manifest = partition::read_manifest(dir);
    partition::LoadOptions load;
    partition::Part part = partition::load_part(dir, p, manifest, load);
    edit(part);
    partition::write_part(part, manifest.dataset, dir / partition::part_file_name(p));
    if (!update_checksums) return;
    nlohmann::json raw = manifest.raw;
    raw["parts"][p]["checksums"] = partition::part_checksums(part, true);
    std::ofstream(dir / "partition.json") << raw.dump(2);
  }

  static inline test::TempDir* dir_ = nullptr;
};

struct Outcome {
  int code = -1;
  std::string output;
};

Outcome run(const std::string& command) {
  Outcome r;
  r.code = test::run_command(command, &r.output);
  return r;
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Overwrites a numeric root attribute of an HDF5 file in place.
void set_attr(const fs::path& file, const char* name, double value) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << file;
  const hid_t a = H5Aopen(f, name, H5P_DEFAULT);
  ASSERT_GE(a, 0) << name;
  EXPECT_GE(H5Awrite(a, H5T_NATIVE_DOUBLE, &value), 0);
  H5Aclose(a);
  H5Fclose(f);
  test::drop_file_checksum(file);  // else refused as damaged before the attribute is read
}

// The summary line of a metrics file (null, failing the test, when there is none).
nlohmann::json summary_of(const fs::path& metrics) {
  const auto lines = read_metrics(metrics);
  if (lines.empty() || !lines.back().contains("summary")) {
    ADD_FAILURE() << metrics << " has no summary line";
    return nlohmann::json::object({{"best_epoch", -1}, {"best_valid_acc", -1.0}, {"test_acc", -1.0}});
  }
  return lines.back();
}

double get_attr(const fs::path& file, const char* name) {
  return h5::File::open_read(file).attr_double(name);
}

}  // namespace

// Every usage error, under mpirun with 2 ranks: exit code 2, one "tessel: error:" line printed
// by rank 0 only, naming the flag, and no MPI_Abort (the ranks never start MPI).
TEST_F(TrainRefusals, UsageErrorsAreOneLineFromRankZeroWithExitCodeTwo) {
  const std::string dir = parts(2).string();
  const std::string ck = scratch("usage-ck").string();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"train " + dir + " --hidden 0", "--hidden"},
      {"train " + dir + " --epochs 0", "--epochs"},
      {"train " + dir + " --dropout 1.5", "--dropout"},
      {"train " + dir + " --dropout nan", "--dropout"},
      {"train " + dir + " --batch-size 0", "--batch-size"},
      {"train " + dir + " --mode foo", "--mode"},
      {"train", "DIR"},
      {"train " + dir + " --no-such-flag", "--no-such-flag"},
      {"train " + dir + " --lr inf", "--lr"},
      {"train " + dir + " --lr 1e30", "--lr"},
      {"train " + dir + " --lr nan", "--lr"},
      {"train " + dir + " --weight-decay inf", "--weight-decay"},
      {"train " + dir + " --threads 0", "--threads"},
      {"train " + dir + " --threads -2", "--threads"},
      {"train " + dir + " --threads 65536", "--threads"},
      {"train " + dir + " --mode sampled --cache-size-mb -5", "--cache-size-mb"},
      {"train " + dir + " --mode sampled --cache-size-mb 10 --cache-ratio 0.5", "--cache-"},
      {"train " + dir + " --mode sampled --fanouts 5,x", "--fanouts"},
      {"train " + dir + " --eval-every 0 --patience 3", "--patience 3 needs evaluation"},
      {"train " + dir + " --eval-every -1", "--eval-every"},
      {"train " + dir + " --checkpoint " + ck + " --checkpoint-every 0", "--checkpoint-every"},
      {"train " + dir + " --checkpoint " + ck + " --checkpoint-every -3", "--checkpoint-every"},
      {"train " + dir + " --checkpoint-every 2", "--checkpoint"},
      {"bench " + dir + " --epochs 0 --out " + scratch("b0").string(), "--epochs"},
      {"bench " + dir + " --time-budget 0 --out " + scratch("b1").string(), "--time-budget"},
      {"bench " + dir + " --time-budget -1 --out " + scratch("b2").string(), "--time-budget"},
      {"bench " + dir + " --modes full,foo --out " + scratch("b3").string(), "--modes"},
      {"train " + dir + " --mode sampled --cache-admit-fraction 1.5", "--cache-admit-fraction"},
      {"train " + dir + " --mode sampled --device cpu --cache-admit-fraction 0.25",
       "--cache-admit-fraction"},
      // Seeds are whole numbers in [0, 2^64 - 1]: -1 does not wrap, 2^64 does not saturate.
      {"train " + dir + " --seed -1", "--seed"},
      {"train " + dir + " --seed 18446744073709551616", "--seed"},
      // The help says [0, 1): 1 is refused while parsing, naming the flag.
      {"train " + dir + " --optimizer sgd --momentum 1", "--momentum"},
      // A checkpoint folder that is a file, and outputs written over the partition itself.
      {"train " + dir + " --checkpoint " + scratch("a-file").string(), "--checkpoint"},
      {"train " + dir + " --predictions " + dir + "/part-1.h5", "part-1.h5"},
      {"train " + dir + " --metrics " + dir + "/partition.json", "--metrics"},
      // A typo names the nearest flag; an unknown command the nearest command.
      {"train " + dir + " --fanout 10,10", "did you mean --fanouts?"},
      {"trian " + dir, "did you mean train?"},
      {"precompute " + dir + " --threads -5", "--threads"},
      // A flag the mode does not read is refused, naming the mode it belongs to.
      {"train " + dir + " --fanouts 10,10", "--fanouts applies to --mode sampled, not --mode full"},
      {"train " + dir + " --mode sampled --stages 2", "--stages applies to --mode pipeline"},
      // A dataset store where its partition belongs: the message says how to make one.
      {"train " + scratch("synth.h5").string(),
       "is a file, expected a partition folder (make one with `tessel partition"},
  };
  test::write_text(scratch("a-file"), "not a folder\n");
  for (const auto& [args, flag] : cases) {
    const Outcome r = run(tessel_bin() + " " + args);
    SCOPED_TRACE(args + "\n" + r.output);
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.output.rfind("tessel: error: ", 0), 0u);
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1);
    EXPECT_NE(r.output.find(flag), std::string::npos);
  }
  // Under mpirun the line comes from rank 0 alone and no rank aborts the others.
  for (std::size_t i : {0u, 6u, 8u, 26u}) {
    const Outcome r = run(test::mpirun(2) + tessel_bin() + " " + cases[i].first);
    SCOPED_TRACE(cases[i].first + "\n" + r.output);
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(count_of(r.output, "tessel: error:"), 1u);
    EXPECT_NE(r.output.find(cases[i].second), std::string::npos);
    EXPECT_EQ(r.output.find("MPI_ABORT"), std::string::npos);
    EXPECT_EQ(r.output.find("error on rank"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(ck));
  for (const char* b : {"b0", "b1", "b2", "b3"}) EXPECT_FALSE(fs::exists(scratch(b))) << b;
  // The refused outputs destroyed nothing: the partition still checks, the file is a file.
  EXPECT_EQ(run(tessel_bin() + " partition --check " + dir).code, 0);
  EXPECT_EQ(test::read_file_bytes(scratch("a-file")), "not a folder\n");
}

// Range errors say the range in plain numbers, not CLI11's 309-digit bound.
TEST_F(TrainRefusals, RangeErrorsAreShort) {
  const Outcome r = run(tessel_bin() + " train " + parts(1).string() + " --batch-size 0");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--batch-size"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("0 is outside [1, "), std::string::npos) << r.output;
  EXPECT_LT(r.output.size(), 200u) << r.output;
}

// partition.json must list every part with its checksums: with "parts" emptied or cut short a
// changed part file would otherwise train unchecked.
TEST_F(TrainRefusals, ManifestWithoutItsPartsIsRefused) {
  for (const int keep : {0, 1}) {
    const fs::path dir = copy_parts(2, "parts-cut-" + std::to_string(keep));
    nlohmann::json raw = partition::read_manifest(dir).raw;
    raw["parts"].erase(raw["parts"].begin() + keep, raw["parts"].end());
    std::ofstream(dir / "partition.json") << raw.dump(2);
    const Outcome r = run(test::mpirun(2) + tessel_bin() + " train " + dir.string() +
                          " --epochs 1 --quiet");
    SCOPED_TRACE(r.output);
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.output.find("\"parts\" has " + std::to_string(keep) + " entries"),
              std::string::npos);
    EXPECT_EQ(count_of(r.output, "tessel: error:"), 1u);
    EXPECT_NE(run(tessel_bin() + " partition --check " + dir.string()).code, 0);
  }
}

// parts[p].file must name the part's file, and offsets are whole numbers (103.5 was read as
// 103 and the manifest accepted).
TEST_F(TrainRefusals, ManifestFileNamesAndOffsetsAreChecked) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"file", "parts[0].file is ../../etc/passwd, expected \"part-0.h5\""},
      {"offset", "offsets holds 103.5, expected whole numbers"}};
  for (const auto& [what, piece] : cases) {
    const fs::path dir = copy_parts(2, "manifest-" + what);
    nlohmann::json raw = partition::read_manifest(dir).raw;
    if (what == "file")
      raw["parts"][0]["file"] = "../../etc/passwd";
    else
      raw["offsets"][1] = 103.5;
    std::ofstream(dir / "partition.json") << raw.dump(2);
    const Outcome r = run(tessel_bin() + " partition --check " + dir.string());
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find(piece), std::string::npos) << r.output;
  }
}

// Finite features that overflow float32 as they are propagated are refused by precompute,
// instead of a file every later run refuses.
TEST_F(TrainRefusals, PrecomputeRefusesFeaturesThatOverflow) {
  const fs::path dir = copy_parts(1, "sign-overflow");
  edit_part(
      dir, 0,
      [](partition::Part& part) {
        for (float& x : part.features) x = 3e38f;
      },
      true);
  const Outcome r = run(tessel_bin() + " precompute " + dir.string() + " --hops 2");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("overflow float32 when propagated"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "sign-gcn-k2"));
}

// An input error every rank meets is one line from rank 0, with no abort banner; so is a part
// file that one rank alone cannot read, and the line names that rank, its host and the file.
TEST_F(TrainRefusals, ErrorsOfEveryRankArePrintedOnceAndOthersNameTheRank) {
  Outcome r = run(test::mpirun(2) + tessel_bin() + " train " + parts(2).string() +
                  " --mode pipeline --stages 2 --split 0,3 --epochs 1 --quiet");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(count_of(r.output, "tessel: error:"), 1u) << r.output;
  EXPECT_EQ(r.output.find("MPI_ABORT"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("error on rank"), std::string::npos) << r.output;
  const fs::path dir = copy_parts(2, "parts-one-bad");
  // Rank 1's part alone is unreadable.
  test::write_text(dir / "part-1.h5", "not an HDF5 file");
  r = run(test::mpirun(2) + tessel_bin() + " train " + dir.string() + " --epochs 1 --quiet");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(count_of(r.output, "tessel: error:"), 1u) << r.output;
  EXPECT_EQ(r.output.find("MPI_ABORT"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 of 2 ranks failed to read the partition: rank 1 (host " +
                          mpi::hostname() + "): " + (dir / "part-1.h5").string() +
                          ": not an HDF5 file"),
            std::string::npos)
      << r.output;
}

// NaN in precomputed SIGN features is refused naming the file, the row and the column.
TEST_F(TrainRefusals, NonFiniteSignFeaturesAreRefused) {
  const fs::path dir = copy_parts(1, "sign-nan");
  const std::string pipeline = " --mode pipeline --hops 1 --mlp-layers 2 --hidden 8 --epochs 1 "
                               "--quiet";
  run_ok(tessel_bin() + " train " + dir.string() + pipeline);
  const fs::path sign = dir / "sign-gcn-k1" / "sign-0.h5";
  ASSERT_TRUE(fs::exists(sign));
  {
    const hid_t f = H5Fopen(sign.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    const hid_t d = H5Dopen2(f, "/feat", H5P_DEFAULT);
    ASSERT_GE(d, 0);
    hsize_t dims[2] = {};
    const hid_t space = H5Dget_space(d);
    H5Sget_simple_extent_dims(space, dims, nullptr);
    std::vector<float> values(dims[0] * dims[1]);
    H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
    values[3 * dims[1] + 1] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_GE(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
    H5Sclose(space);
    H5Dclose(d);
    H5Fclose(f);
    test::drop_file_checksum(sign);  // else refused as damaged before /feat is read
  }
  // The edit no longer matches /feat's own checksum: refused as damaged.
  const Outcome damaged = run(tessel_bin() + " train " + dir.string() + pipeline);
  EXPECT_EQ(damaged.code, 2) << damaged.output;
  EXPECT_NE(damaged.output.find("sign-0.h5: /feat has checksum crc32:"), std::string::npos)
      << damaged.output;
  {
    // As a file written before per-dataset checksums: the values themselves are checked.
    const hid_t f = H5Fopen(sign.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    EXPECT_GE(H5Adelete(f, "dataset_checksums"), 0);
    H5Fclose(f);
  }
  const Outcome r = run(tessel_bin() + " train " + dir.string() + pipeline);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("sign-0.h5: /feat[3, 1] is nan"), std::string::npos) << r.output;
}

// --help under mpirun is printed once, not once per rank.
TEST_F(TrainRefusals, HelpIsPrintedOnceAndNamesTheFaultVariables) {
  const Outcome r = run(test::mpirun(2) + tessel_bin() + " train --help");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(count_of(r.output, "Fault injection"), 1u) << r.output;
  EXPECT_NE(r.output.find("TESSEL_FAULT_RANK"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("TESSEL_FAULT_EPOCH"), std::string::npos) << r.output;
}

// OMP_NUM_THREADS is bounded like --threads (OpenMP crashes or fails far beyond the cores).
TEST_F(TrainRefusals, HugeOmpNumThreadsIsRefused) {
  const Outcome r = run("OMP_NUM_THREADS=65536 " + tessel_bin() + " train " + parts(1).string() +
                        " --epochs 1 --quiet");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("OMP_NUM_THREADS=65536"), std::string::npos) << r.output;
}

// --checkpoint alone writes a checkpoint after the last epoch (and a resume can use it).
TEST_F(TrainRefusals, CheckpointWithoutEveryIsWrittenAfterTheLastEpoch) {
  const fs::path ck = scratch("last-ck");
  run_ok(test::mpirun(2) + tessel_bin() + " train " + parts(2).string() +
         " --epochs 3 --quiet --checkpoint " + ck.string());
  ASSERT_TRUE(fs::exists(ck / "checkpoint.h5"));
  EXPECT_EQ(get_attr(ck / "checkpoint.h5", "epoch"), 3);
  run_ok(test::mpirun(2) + tessel_bin() + " train " + parts(2).string() +
         " --epochs 4 --quiet --resume " + ck.string());
}

// The checkpoint carries the best-so-far: the resumed run's summary covers the whole run.
TEST_F(TrainRefusals, ResumedSummaryCoversTheWholeRun) {
  const std::string common = test::mpirun(2) + tessel_bin() + " train " + parts(2).string() +
                             " --mode full --dropout 0 --seed 4 --quiet";
  run_ok(common + " --epochs 6 --metrics " + scratch("whole.jsonl").string());
  const fs::path ck = scratch("best-ck");
  run_ok(common + " --epochs 3 --checkpoint " + ck.string());
  run_ok(common + " --epochs 6 --resume " + ck.string() + " --metrics " +
         scratch("resumed.jsonl").string());
  const auto whole = summary_of(scratch("whole.jsonl"));
  const auto resumed = summary_of(scratch("resumed.jsonl"));
  EXPECT_EQ(resumed.at("best_epoch"), whole.at("best_epoch"));
  EXPECT_DOUBLE_EQ(resumed.at("best_valid_acc").get<double>(),
                   whole.at("best_valid_acc").get<double>());
  EXPECT_DOUBLE_EQ(resumed.at("test_acc").get<double>(), whole.at("test_acc").get<double>());

  // A best epoch before the checkpoint must survive the resume: plant one no later epoch beats.
  set_attr(ck / "checkpoint.h5", "best_valid_acc", 1.0);
  set_attr(ck / "checkpoint.h5", "test_acc_at_best", 0.5);
  set_attr(ck / "checkpoint.h5", "best_epoch", 2);
  run_ok(common + " --epochs 5 --resume " + ck.string() + " --metrics " +
         scratch("planted.jsonl").string());
  const auto planted = summary_of(scratch("planted.jsonl"));
  EXPECT_EQ(planted.at("best_epoch"), 2);
  EXPECT_DOUBLE_EQ(planted.at("best_valid_acc").get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(planted.at("test_acc").get<double>(), 0.5);
}

// Resuming with another seed, with nothing left to train, or from a checkpoint whose
// attributes are out of range is one clear refusal.
TEST_F(TrainRefusals, ResumeRefusesOtherSeedNoEpochsLeftAndBadAttributes) {
  const fs::path ck = scratch("seed-ck");
  const std::string train = test::mpirun(2) + tessel_bin() + " train " + parts(2).string() +
                            " --quiet --resume " + ck.string();
  run_ok(test::mpirun(2) + tessel_bin() + " train " + parts(2).string() +
         " --epochs 3 --seed 5 --quiet --checkpoint " + ck.string());
  Outcome r = run(train + " --epochs 6 --seed 6");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--seed 5"), std::string::npos) << r.output;
  // Both ranks find it: reported once, and the job ends without MPI_Abort.
  EXPECT_EQ(count_of(r.output, "tessel: error:"), 1u) << r.output;
  EXPECT_EQ(r.output.find("MPI_ABORT"), std::string::npos) << r.output;
  for (const char* epochs : {"3", "2"}) {
    r = run(train + " --epochs " + epochs + " --seed 5");
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find("after epoch 3"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("nothing to train"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("best valid acc"), std::string::npos) << r.output;
  }
  const fs::path file = ck / "checkpoint.h5";
  set_attr(file, "epoch", -5);
  r = run(train + " --epochs 6 --seed 5");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("epoch = -5"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("epoch   -4"), std::string::npos) << r.output;
  set_attr(file, "epoch", 3);
  set_attr(file, "best_valid_acc", std::numeric_limits<double>::quiet_NaN());
  r = run(train + " --epochs 6 --seed 5");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("best_valid_acc"), std::string::npos) << r.output;
  set_attr(file, "best_valid_acc", 0.5);
  set_attr(file, "best_epoch", 7);
  r = run(train + " --epochs 6 --seed 5");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("best_epoch"), std::string::npos) << r.output;
}

// NaN or Inf in a part file's features is refused at load with file, row and column.
TEST_F(TrainRefusals, NonFiniteFeaturesAreRefusedAtLoad) {
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity()}) {
    const fs::path dir = copy_parts(1, "nan-feat");
    edit_part(dir, 0, [&](partition::Part& part) { part.features[5 * part.feature_dim + 3] = bad; },
              true);
    const Outcome r =
        run(tessel_bin() + " train " + dir.string() + " --epochs 2 --quiet --metrics " +
            (dir / "m.jsonl").string());
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find("part-0.h5: /node/feat row 5"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("column 3"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("loss"), std::string::npos) << r.output;
  }
}

// Finite but huge features overflow the forward pass: training stops at epoch 1, naming it
// and the first non-finite parameter, instead of printing nan every epoch and exiting 0. With 2
// ranks both find it (the loss is all-reduced) and it is reported once.
TEST_F(TrainRefusals, DivergingTrainingStopsNamingTheEpoch) {
  for (int p : {1, 2}) {
    const fs::path dir = copy_parts(p, "huge-feat");
    edit_part(
        dir, 0,
        [](partition::Part& part) { std::fill(part.features.begin(), part.features.end(), 3e38f); },
        true);
    const Outcome r = run(test::mpirun(p) + tessel_bin() + " train " + dir.string() +
                          " --epochs 5 --metrics " + (dir / "m.jsonl").string());
    SCOPED_TRACE("P = " + std::to_string(p) + "\n" + r.output);
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.output.find("training diverged at epoch 1"), std::string::npos);
    EXPECT_NE(r.output.find("first non-finite tensor: parameter layer0"), std::string::npos);
    EXPECT_EQ(count_of(r.output, "tessel: error:"), 1u);
    EXPECT_EQ(r.output.find("MPI_ABORT"), std::string::npos);
    EXPECT_EQ(r.output.find("epoch    2"), std::string::npos);
    EXPECT_EQ(r.output.find("best valid acc"), std::string::npos);
  }
}

// A part file edited after partitioning: its checksum no longer matches partition.json.
TEST_F(TrainRefusals, EditedPartFileFailsItsChecksum) {
  const fs::path dir = copy_parts(2, "edited");
  edit_part(dir, 1, [](partition::Part& part) { std::swap(part.orig_id[0], part.orig_id[1]); },
            false);
  const Outcome r = run(test::mpirun(2) + tessel_bin() + " train " + dir.string() +
                        " --epochs 2 --quiet");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("part-1.h5: /nodes/orig_id has checksum"), std::string::npos)
      << r.output;
  // partition records one checksum per dataset of every part.
  const auto manifest = partition::read_manifest(parts(2));
  for (int p = 0; p < 2; ++p) {
    const auto& sums = manifest.raw["parts"][p]["checksums"];
    EXPECT_EQ(sums.size(), 11u) << sums.dump();
    for (const auto& [name, value] : sums.items())
      EXPECT_EQ(value.get<std::string>().rfind("crc32:", 0), 0u) << name;
  }
}

// What load_part verifies beyond structure, each edit with matching checksums (so the
// structural check, not the checksum, has to catch it).
TEST_F(TrainRefusals, LoadPartVerifiesHaloOrderDegreesAndRowOrder) {
  auto load_error = [](const fs::path& dir, int p) {
    try {
      partition::load_part(dir, p, partition::read_manifest(dir));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // Untouched parts load.
  EXPECT_EQ(load_error(parts(2), 0), "");
  EXPECT_EQ(load_error(parts(2), 1), "");

  fs::path dir = copy_parts(2, "halo-order");
  edit_part(dir, 0, [](partition::Part& part) {
    ASSERT_GE(part.num_halo, 2);
    part.halo_owner_local[1] = part.halo_owner_local[0];
  }, true);
  EXPECT_NE(load_error(dir, 0).find("not in increasing (owner, owner_local) order"),
            std::string::npos);

  dir = copy_parts(2, "zero-degree");
  std::int64_t row = -1;
  edit_part(dir, 0, [&](partition::Part& part) {
    for (std::int64_t v = 0; v < part.num_owned && row < 0; ++v)
      if (part.graph.degree(v) > 0) row = v;
    ASSERT_GE(row, 0);
    part.degree[row] = 0;
  }, true);
  EXPECT_NE(load_error(dir, 0).find("owned node " + std::to_string(row) + " has"),
            std::string::npos);

  dir = copy_parts(2, "unsorted-row");
  row = -1;
  edit_part(dir, 0, [&](partition::Part& part) {
    for (std::int64_t v = 0; v < part.num_owned && row < 0; ++v)
      if (part.graph.degree(v) >= 2) row = v;
    ASSERT_GE(row, 0);
    const auto b = part.graph.indptr[row];
    std::swap(part.graph.indices[b], part.graph.indices[b + 1]);
  }, true);
  EXPECT_NE(load_error(dir, 0).find("row " + std::to_string(row) + " is not strictly increasing"),
            std::string::npos);

  dir = copy_parts(2, "halo-zero-degree");
  edit_part(dir, 1, [](partition::Part& part) {
    ASSERT_GE(part.num_halo, 1);
    part.degree[part.num_owned] = 0;
  }, true);
  EXPECT_NE(load_error(dir, 1).find("halo node 0"), std::string::npos);
}

// A bench that fails leaves neither a report nor its temporary folder, so the rerun needs no
// --force.
TEST_F(TrainRefusals, FailedBenchLeavesNoReport) {
  const fs::path out_parent = scratch("bench-out");
  fs::create_directories(out_parent);
  const fs::path report = out_parent / "report";
  const std::string bench = test::mpirun(2) + tessel_bin() + " bench " + parts(2).string() +
                            " --hidden 8 --fanouts 5,5 --batch-size 16 --quiet --out " +
                            report.string();
  // The fault hits epoch 2 of the first mode, after its metrics file got its first line.
  const Outcome failed = run("TESSEL_FAULT_RANK=0 TESSEL_FAULT_EPOCH=2 " + bench +
                             " --modes full,sampled --epochs 2");
  EXPECT_NE(failed.code, 0) << failed.output;
  EXPECT_NE(failed.output.find("injected fault"), std::string::npos) << failed.output;
  EXPECT_FALSE(fs::exists(report)) << failed.output;
  EXPECT_TRUE(fs::is_empty(out_parent)) << fs::directory_iterator(out_parent)->path();
  const Outcome rerun = run(bench + " --modes full,sampled --epochs 2");
  ASSERT_EQ(rerun.code, 0) << rerun.output;
  EXPECT_TRUE(fs::exists(report / "report.json"));
  EXPECT_TRUE(fs::exists(report / "full.jsonl"));
  EXPECT_TRUE(fs::exists(report / "sampled.jsonl"));
  // --force replaces a complete report with a new complete one, leaving nothing beside it.
  // (Without the sampled flags: a bench of full alone refuses them.)
  const Outcome forced = run(test::mpirun(2) + tessel_bin() + " bench " + parts(2).string() +
                             " --hidden 8 --quiet --out " + report.string() +
                             " --force --epochs 1 --modes full");
  ASSERT_EQ(forced.code, 0) << forced.output;
  EXPECT_EQ(read_metrics(report / "full.jsonl").size(), 2u);  // 1 epoch + summary
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(out_parent)) entries.push_back(e.path().filename());
  EXPECT_EQ(entries, std::vector<std::string>{"report"});
}

// A later mode failing on one rank only (its own error, not one every rank meets) ends the job
// with a partial report of the modes that finished: marked partial, naming the mode, the rank and
// its error, without the failed mode's metrics file or any temporary. Rank 0 writes it itself;
// another rank hands its error to rank 0 before the abort.
TEST_F(TrainRefusals, ModeFailingOnOneRankLeavesThePartialReport) {
  for (const int rank : {1, 0}) {
    const fs::path out_parent = scratch("bench-one-rank-" + std::to_string(rank));
    fs::create_directories(out_parent);
    const fs::path report = out_parent / "report";
    const Outcome failed =
        run("TESSEL_FAULT_MODE=sampled TESSEL_FAULT_RANK=" + std::to_string(rank) +
            " TESSEL_FAULT_EPOCH=2 " + test::mpirun(2) + tessel_bin() + " bench " +
            parts(2).string() + " --modes full,sampled --epochs 2 --hidden 8 --fanouts 5,5 "
            "--batch-size 16 --quiet --out " + report.string());
    EXPECT_NE(failed.code, 0) << failed.output;
    EXPECT_EQ(count_of(failed.output, "wrote the partial report " + report.string() +
                                          " (1 mode finished)"),
              1u)
        << failed.output;
    EXPECT_NE(failed.output.find("--mode sampled failed"), std::string::npos) << failed.output;
    ASSERT_TRUE(fs::exists(report / "report.json")) << failed.output;
    const auto j = nlohmann::json::parse(test::read_file_bytes(report / "report.json"));
    EXPECT_EQ(j.value("partial", false), true);
    ASSERT_EQ(j["modes"].size(), 1u);
    EXPECT_EQ(j["modes"][0]["mode"], "full");
    ASSERT_TRUE(j.contains("failed")) << j.dump(2);
    EXPECT_EQ(j["failed"]["mode"], "sampled");
    EXPECT_EQ(j["failed"]["rank"], rank);
    EXPECT_EQ(j["failed"]["host"], mpi::hostname());
    EXPECT_NE(j["failed"]["error"].get<std::string>().find("injected fault (TESSEL_FAULT_RANK=" +
                                                           std::to_string(rank)),
              std::string::npos);
    const std::string md = test::read_file_bytes(report / "report.md");
    EXPECT_NE(md.find("**Partial: --mode sampled failed on rank " + std::to_string(rank)),
              std::string::npos)
        << md;
    EXPECT_EQ(test::list_dir(report),
              (std::vector<std::string>{"full.jsonl", "report.json", "report.md"}));
    EXPECT_EQ(test::list_dir(out_parent), std::vector<std::string>{"report"});
  }
}

// An output under a path whose folder part is a file: one line naming the flag and the file
// (it was the filesystem library's "cannot create directories: Not a directory").
TEST_F(TrainRefusals, OutputUnderAFileNamesTheFlagAndTheFile) {
  const fs::path file = scratch("plain-file");
  { std::ofstream(file) << "x"; }
  for (const std::string flag : {"--metrics", "--predictions", "--embeddings"}) {
    const Outcome r = run(tessel_bin() + " train " + parts(1).string() +
                          " --epochs 1 --hidden 8 --quiet " + flag + " " + (file / "sub").string());
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_EQ(count_of(r.output, "tessel: error: " + flag + " " + (file / "sub").string() + ": " +
                                     file.string() + " is a file, not a folder"),
              1u)
        << r.output;
    EXPECT_EQ(count_of(r.output, "error"), 1u) << r.output;
  }
}

// Dynamic mode: --checkpoint alone writes after the last epoch there too, and a resume with
// nothing left to train is refused.
TEST_F(TrainRefusals, DynamicCheckpointWithoutEveryIsWrittenAfterTheLastEpoch) {
  const fs::path store = scratch("temporal.h5"), parts_dir = scratch("temporal-p1");
  run_ok(tessel_bin() + " convert synthetic-temporal --nodes 200 --snapshots 6 --avg-degree 4 "
                        "--feat-dim 4 --seed 2 " + store.string());
  run_ok(tessel_bin() + " partition " + store.string() + " --parts 1 --out " + parts_dir.string());
  const fs::path ck = scratch("temporal-ck");
  const std::string train = tessel_bin() + " train " + parts_dir.string() +
                            " --mode dynamic --model gcn-gru --layers 1 --hidden 8 --quiet";
  run_ok(train + " --epochs 2 --checkpoint " + ck.string());
  ASSERT_TRUE(fs::exists(ck / "checkpoint.h5"));
  EXPECT_EQ(get_attr(ck / "checkpoint.h5", "epoch"), 2);
  const Outcome r = run(train + " --epochs 2 --resume " + ck.string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("nothing to train"), std::string::npos) << r.output;
}

// Not built with AddressSanitizer (TESSEL_TEST_UNDER_ASAN): every other build runs this test.
#if !defined(TESSEL_TEST_UNDER_ASAN)
// Out of memory while the model is built names the flags that size it, not only the command.
TEST_F(TrainRefusals, OutOfMemoryNamesTheFlagsThatSizeTheModel) {
  const Outcome r = run("bash -c 'ulimit -v 4000000 && exec " + tessel_bin() + " train " +
                        parts(1).string() + " --layers 3 --hidden 65536 --epochs 1 --quiet'");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_EQ(count_of(r.output, "tessel: error: out of memory while setting up full training of a "
                               "3-layer gcn model with --hidden 65536"),
            1u)
      << r.output;
  EXPECT_NE(r.output.find("lower --hidden or --layers"), std::string::npos) << r.output;
}
#endif
