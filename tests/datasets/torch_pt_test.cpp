// Tests of the .pt reader: files written by torch (tests/data/ogbl, made by make_fixtures.py),
// files built here the same way, and one clear refusal per kind of bad input.
#include "torch_pt.hpp"

#include "dataset_fixtures.hpp"
#include "pt_fixtures.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>

#include <fstream>

namespace tessel {
namespace {

namespace fs = std::filesystem;
using datasets::detail::PtDtype;
using datasets::detail::PtFile;

fs::path fixture(const std::string& relative) {
  return fs::path(TESSEL_SOURCE_DIR) / "tests" / "data" / "ogbl" / relative;
}

std::string pt_error(const fs::path& path) {
  return test::input_error([&] { (void)PtFile(path); });
}

TEST(TorchPt, ReadsTorchSavedCollabSplit) {
  const PtFile pt(fixture("ogbl-collab-tiny/split/time/valid.pt"));
  EXPECT_EQ(pt.keys(), (std::vector<std::string>{"edge", "weight", "year", "edge_neg"}));
  EXPECT_EQ(pt.info("edge").dtype, PtDtype::int64);
  EXPECT_EQ(pt.info("edge").shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(pt.read_int64("edge"), (std::vector<std::int64_t>{0, 2, 1, 3}));
  EXPECT_EQ(pt.read_int64("edge_neg"), (std::vector<std::int64_t>{0, 5, 1, 5, 2, 5}));
  EXPECT_EQ(pt.read_int64("year"), (std::vector<std::int64_t>{2018, 2018}));
  EXPECT_EQ(pt.read_float("weight"), (std::vector<float>{1, 3}));
}

TEST(TorchPt, ReadsViewsAndDtypesAsTorchWroteThem) {
  const PtFile pt(fixture("pt/views.pt"));
  // base = arange(12).reshape(4, 3); its transpose and base[1:, 1:] share its storage.
  EXPECT_EQ(pt.info("transposed").shape, (std::vector<std::int64_t>{3, 4}));
  EXPECT_EQ(pt.info("transposed").stride, (std::vector<std::int64_t>{1, 3}));
  EXPECT_EQ(pt.read_int64("transposed"),
            (std::vector<std::int64_t>{0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11}));
  EXPECT_EQ(pt.info("offset").storage_offset, 4);
  EXPECT_EQ(pt.read_int64("offset"), (std::vector<std::int64_t>{4, 5, 7, 8, 10, 11}));
  EXPECT_EQ(pt.read_int64("shared").size(), 12u);
  EXPECT_EQ(pt.read_int64("int32"), (std::vector<std::int64_t>{1, -2, 3, 4}));
  EXPECT_EQ(pt.read_float("float32"), (std::vector<float>{0.5f, -1.25f, 3.0f}));
  EXPECT_EQ(pt.read_float("float64"), (std::vector<float>{0.1f, 2.5f}));
  EXPECT_EQ(pt.info("empty").shape, (std::vector<std::int64_t>{0, 2}));
  EXPECT_TRUE(pt.read_int64("empty").empty());
  const std::string e = test::input_error([&] { (void)pt.read_int64("float32"); });
  EXPECT_NE(e.find("views.pt: tensor \"float32\" is float32 [3], expected integers"),
            std::string::npos)
      << e;
  const std::string missing = test::input_error([&] { (void)pt.info("edge"); });
  EXPECT_NE(missing.find("no tensor \"edge\" (the file holds: transposed, offset"),
            std::string::npos)
      << missing;
}

// PyTorch before 1.6 wrote pickles followed by the raw storages (torch.save with
// _use_new_zipfile_serialization=False still does).
TEST(TorchPt, ReadsTheLegacyFormat) {
  const PtFile pt(fixture("pt/legacy.pt"));
  EXPECT_EQ(pt.keys(), std::vector<std::string>{"edge"});
  EXPECT_EQ(pt.read_int64("edge"), (std::vector<std::int64_t>{0, 1}));

  test::TempDir dir;
  const std::string bytes = test::read_file_bytes(fixture("pt/legacy.pt"));
  std::ofstream(dir / "cut.pt", std::ios::binary) << bytes.substr(0, bytes.size() - 4);
  const std::string cut = pt_error(dir / "cut.pt");
  EXPECT_NE(cut.find("cut.pt: truncated (storage"), std::string::npos) << cut;
  // The storage's element count (the 8 bytes before its data) disagrees with the pickle.
  std::string count = bytes;
  count[count.size() - 24] = 5;
  std::ofstream(dir / "count.pt", std::ios::binary) << count;
  const std::string e = pt_error(dir / "count.pt");
  EXPECT_NE(e.find("holds 5 elements, but the pickle says 2"), std::string::npos) << e;
}

TEST(TorchPt, ReadsFilesBuiltWithoutTorch) {
  test::TempDir dir;
  test::write_pt(dir / "train.pt", {test::pt_long("edge", {3, 2}, {0, 1, 1, 2, 300, 70000}),
                                    test::pt_long("year", {3}, {2010, 2011, -1})});
  const PtFile pt(dir / "train.pt");
  EXPECT_EQ(pt.read_int64("edge"), (std::vector<std::int64_t>{0, 1, 1, 2, 300, 70000}));
  EXPECT_EQ(pt.read_int64("year"), (std::vector<std::int64_t>{2010, 2011, -1}));

  // A contiguous view at an offset, over more than one read block (2^20 elements): a storage
  // of 1,500,003 values viewed as [750000, 2] from element 3.
  std::vector<std::int64_t> values(1500003);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<std::int64_t>(i) * 7;
  auto big = test::pt_long("edge", {750000, 2}, values);
  std::string pickle = test::pt_pickle({big});
  const std::string offset_zero("tQK\x00", 4);
  ASSERT_NE(pickle.find(offset_zero), std::string::npos);
  pickle.replace(pickle.find(offset_zero), 4, std::string("tQK\x03", 4));
  test::write_pt(dir / "big.pt", {big}, pickle);
  const PtFile view(dir / "big.pt");
  EXPECT_EQ(view.info("edge").storage_offset, 3);
  const auto got = view.read_int64("edge");
  ASSERT_EQ(got.size(), 1500000u);
  EXPECT_EQ(got.front(), 21);
  EXPECT_EQ(got[1048573], 1048576 * 7); // the first element of the second block
  EXPECT_EQ(got.back(), 1500002 * 7);
}

TEST(TorchPt, RefusesWhatItDoesNotRead) {
  struct Case {
    const char* file;
    const char* expect;
  };
  for (const Case& c : {
           Case{"pt/half.pt", "storage type torch.HalfStorage is not supported"},
           Case{"pt/list.pt", "\"names\" is a list, expected a tensor"},
           Case{"pt/not_dict.pt", "holds a list, expected a dict of tensors"},
           Case{"make_fixtures.py", "not a .pt file: expected the zip archive torch.save writes"},
       }) {
    const std::string e = pt_error(fixture(c.file));
    EXPECT_NE(e.find(fixture(c.file).string()), std::string::npos) << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.file << ": " << e;
  }
}

TEST(TorchPt, RefusesTruncatedAndCorruptFiles) {
  test::TempDir dir;
  const std::string bytes = test::read_file_bytes(fixture("pt/views.pt"));
  const fs::path cut = dir / "cut.pt";
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  EXPECT_NE(pt_error(cut).find("cut.pt: not a zip archive, or truncated"), std::string::npos)
      << pt_error(cut);

  // One bit of a storage flipped: the member's CRC no longer matches.
  test::write_pt(dir / "flip.pt", {test::pt_long("edge", {1, 2}, {0, 1})});
  std::string flip = test::read_file_bytes(dir / "flip.pt");
  const auto at = flip.find(std::string("\x01\0\0\0\0\0\0\0", 8));
  ASSERT_NE(at, std::string::npos);
  flip[at] = 3;
  std::ofstream(dir / "flip.pt", std::ios::binary) << flip;
  const PtFile pt(dir / "flip.pt");
  const std::string crc = test::input_error([&] { (void)pt.read_int64("edge"); });
  EXPECT_NE(crc.find("flip.pt member flip/data/0: CRC mismatch"), std::string::npos) << crc;
}

TEST(TorchPt, RefusesHostilePickles) {
  test::TempDir dir;
  const auto edge = test::pt_long("edge", {2, 2}, {0, 1, 1, 2});
  const std::string good = test::pt_pickle({edge});
  struct Case {
    std::string name, pickle, expect;
    std::vector<test::PtEntry> entries;
  };
  std::string no_stop = good.substr(0, good.size() - 1);
  std::string opcode = good;
  opcode.insert(2, "I1\n"); // INT (protocol 0 text integer): not something torch.save writes
  std::string protocol = good;
  protocol[1] = 4;
  std::string callable = good;
  callable.replace(callable.find("_rebuild_tensor_v2"), 18, "_rebuild_tensor_v9");
  auto too_short = edge;
  too_short.bytes.resize(24); // 3 of the 4 elements the storage claims
  auto wrong_type = edge;
  wrong_type.storage_type = "BFloat16Storage";
  std::vector<Case> cases = {
      {"nostop", no_stop, "pickle ends early (no STOP opcode)", {edge}},
      {"opcode", opcode, "byte 2: pickle opcode 0x49 is not supported", {edge}},
      {"protocol", protocol, "byte 0: pickle protocol 4, expected 2", {edge}},
      {"callable",
       callable,
       "pickle calls torch._utils._rebuild_tensor_v9, expected only "
       "torch._utils._rebuild_tensor_v2",
       {edge}},
      {"short",
       good,
       "holds 24 bytes, but tensor \"edge\" needs a storage of 4 int64 elements",
       {too_short}},
      {"dtype", "", "storage type torch.BFloat16Storage is not supported", {wrong_type}},
  };
  for (const auto& c : cases) {
    const fs::path path = dir / (c.name + ".pt");
    test::write_pt(path, c.entries, c.pickle);
    const std::string e = pt_error(path);
    EXPECT_NE(e.find(path.string()), std::string::npos) << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.name << ": " << e;
  }
  // An expanded view (stride 0): 4 elements over a storage of 2.
  const auto pair = test::pt_long("edge", {2, 2}, {0, 1});
  std::string expanded = test::pt_pickle({pair});
  const std::string strides("(K\x02K\x01t", 6);
  ASSERT_NE(expanded.find(strides), std::string::npos);
  expanded.replace(expanded.find(strides), 6, std::string("(K\x00K\x01t", 6));
  test::write_pt(dir / "expanded.pt", {pair}, expanded);
  const std::string x = pt_error(dir / "expanded.pt");
  EXPECT_NE(x.find("tensor \"edge\" (int64 [2, 2]) has more elements than its storage of 2"),
            std::string::npos)
      << x;
  // A view reaching past its storage: shape [3, 2] over a storage of 4 elements.
  auto small = test::pt_long("edge", {3, 2}, {0, 1, 1, 2});
  const fs::path path = dir / "past.pt";
  test::write_pt(path, {small});
  const std::string e = pt_error(path);
  EXPECT_NE(e.find("tensor \"edge\" (int64 [3, 2], offset 0) reaches past its storage of 4 "
                   "elements"),
            std::string::npos)
      << e;
}

} // namespace
} // namespace tessel
