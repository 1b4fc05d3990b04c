// The mode table: every mode's traits come from one entry, and no other source spells a mode's
// name (the command line and the trainers ask the table instead).
#include "tessel/core/error.hpp"
#include "tessel/train/train.hpp"
#include "tessel/modes/modes.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

using namespace tessel;
namespace fs = std::filesystem;

namespace {

TEST(Modes, EveryNameHasItsOwnTraits) {
  const auto names = train::mode_names();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  for (const auto& name : names) EXPECT_EQ(train::mode_traits(name).name, name);
  // The defaults the command line relies on.
  EXPECT_EQ(train::default_bench_modes(), (std::vector<std::string>{"full", "sampled"}));
  EXPECT_TRUE(train::mode_traits("dynamic").temporal);
  EXPECT_FALSE(train::mode_traits("full").temporal);
  EXPECT_EQ(train::mode_traits("pipeline").only_model, nn::ModelKind::sign_mlp);
  EXPECT_TRUE(train::mode_traits("full").runs_on_gpu);
  EXPECT_TRUE(train::mode_traits("sampled").runs_on_gpu);
}

TEST(Modes, UnknownNameNamesTheKnownOnes) {
  try {
    (void)train::mode_traits("fullbatch");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("fullbatch"), std::string::npos) << what;
    for (const auto& name : train::mode_names())
      EXPECT_NE(what.find(name), std::string::npos) << what;
  }
}

// A mode's name as a string literal appears only in the mode table (each mode's registration
// line, in its folder's <mode>_flags.cpp) and, for the temporal mode, in its file (its run
// description and train_dynamic name it), and as the default of TrainOptions::mode.
TEST(Modes, NamesAreWrittenOnlyInTheTable) {
  const fs::path root = TESSEL_SOURCE_DIR;
  const std::set<std::string> allowed_files = {
      "src/modes/modes.cpp",           "src/modes/full/full_flags.cpp",
      "src/modes/sampled/sampled_flags.cpp", "src/modes/pipeline/pipeline_flags.cpp",
      "src/modes/dynamic/dynamic_flags.cpp", "src/modes/dynamic/dynamic.cpp",
      "include/tessel/train/train.hpp"};
  std::vector<std::string> offenders;
  for (const char* top : {"src", "include"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      if (!entry.is_regular_file()) continue;
      const auto ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".hpp" && ext != ".cu") continue;
      const std::string rel = fs::relative(entry.path(), root).generic_string();
      if (allowed_files.count(rel)) continue;
      std::ifstream in(entry.path());
      std::string line;
      for (int number = 1; std::getline(in, line); ++number)
        for (const auto& name : train::mode_names())
          if (line.find('"' + name + '"') != std::string::npos)
            offenders.push_back(rel + ":" + std::to_string(number) + ": " + line);
    }
  }
  std::ostringstream list;
  for (const auto& o : offenders) list << o << "\n";
  EXPECT_TRUE(offenders.empty()) << "mode names outside the mode table (ask train::mode_traits):\n"
                                 << list.str();
}

} // namespace
