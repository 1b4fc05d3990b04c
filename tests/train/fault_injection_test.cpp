// The fault-injection hook of the library (TESSEL_FAULT_*): its values are parsed strictly, so a
// program that trains through the library without the command line's checks never reads junk as
// rank 0 or epoch 1 (atoi did).
#include "tessel/core/error.hpp"
#include "tessel/train/trainer.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace tessel {
namespace {

class FaultInjection : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    for (const char* name :
         {"TESSEL_FAULT_RANK", "TESSEL_FAULT_EPOCH", "TESSEL_FAULT_KIND", "TESSEL_FAULT_MODE"})
      ::unsetenv(name);
  }
  // The InputError's message for the environment `env`, or "" when nothing is thrown.
  static std::string refusal(const std::vector<std::pair<const char*, const char*>>& env) {
    clear();
    for (const auto& [name, value] : env) ::setenv(name, value, 1);
    try {
      train::maybe_inject_fault(0, 1, "full");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(FaultInjection, JunkValuesAreRefusedNamingTheVariable) {
  const std::vector<std::pair<std::vector<std::pair<const char*, const char*>>, std::string>>
      cases = {
          {{{"TESSEL_FAULT_RANK", "x"}, {"TESSEL_FAULT_EPOCH", "1"}},
           "TESSEL_FAULT_RANK=x: expected a whole number from 0 to 2147483647"},
          {{{"TESSEL_FAULT_RANK", "1x"}, {"TESSEL_FAULT_EPOCH", "1"}}, "TESSEL_FAULT_RANK=1x:"},
          {{{"TESSEL_FAULT_RANK", "0"}, {"TESSEL_FAULT_EPOCH", ""}}, "TESSEL_FAULT_EPOCH=:"},
          {{{"TESSEL_FAULT_RANK", "-1"}, {"TESSEL_FAULT_EPOCH", "1"}}, "TESSEL_FAULT_RANK=-1:"},
          {{{"TESSEL_FAULT_RANK", " 0"}, {"TESSEL_FAULT_EPOCH", "1"}}, "TESSEL_FAULT_RANK= 0:"},
          {{{"TESSEL_FAULT_RANK", "0"}, {"TESSEL_FAULT_EPOCH", "99999999999"}},
           "TESSEL_FAULT_EPOCH=99999999999:"},
          {{{"TESSEL_FAULT_EPOCH", "1"}}, "only TESSEL_FAULT_EPOCH is set"},
          {{{"TESSEL_FAULT_RANK", "0"}, {"TESSEL_FAULT_EPOCH", "1"}, {"TESSEL_FAULT_KIND", "kil"}},
           "TESSEL_FAULT_KIND=kil: expected kill"},
          {{{"TESSEL_FAULT_RANK", "0"}, {"TESSEL_FAULT_EPOCH", "1"}, {"TESSEL_FAULT_MODE", ""}},
           "TESSEL_FAULT_MODE=: an empty value"},
      };
  for (const auto& [env, piece] : cases) {
    const std::string what = refusal(env);
    EXPECT_NE(what.find(piece), std::string::npos) << piece << " | " << what;
  }
}

TEST_F(FaultInjection, WellFormedValuesFireOnlyAtTheirRankEpochAndMode) {
  ::setenv("TESSEL_FAULT_RANK", "0", 1);
  ::setenv("TESSEL_FAULT_EPOCH", "2", 1);
  EXPECT_NO_THROW(train::maybe_inject_fault(0, 1, "full"));
  EXPECT_NO_THROW(train::maybe_inject_fault(1, 2, "full"));
  EXPECT_THROW(train::maybe_inject_fault(0, 2, "full"), LibraryError);
  ::setenv("TESSEL_FAULT_MODE", "sampled", 1);
  EXPECT_NO_THROW(train::maybe_inject_fault(0, 2, "full"));
  EXPECT_THROW(train::maybe_inject_fault(0, 2, "sampled"), LibraryError);
  // Nothing set: nothing happens.
  clear();
  EXPECT_NO_THROW(train::maybe_inject_fault(0, 2, "full"));
}

}  // namespace
}  // namespace tessel
