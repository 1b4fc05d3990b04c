// Error macros: message text, type, and the source location.
#include "tessel/core/error.hpp"

#include <gtest/gtest.h>

using namespace tessel;

TEST(Error, ExpectsThrowsInputErrorWithMessage) {
  try {
    TESSEL_EXPECTS(1 + 1 == 3, "file {} row {}: expected {}", "a.csv", 7, "2 columns");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "file a.csv row 7: expected 2 columns");
    EXPECT_NE(e.where().find("error_test.cpp"), std::string::npos);
    EXPECT_NE(e.where().find("rank 0"), std::string::npos);
  }
  EXPECT_NO_THROW(TESSEL_EXPECTS(true, "never"));
}

TEST(Error, AssertThrowsInternalError) {
  EXPECT_THROW(TESSEL_ASSERT(false, "broken {}", 1), InternalError);
}
