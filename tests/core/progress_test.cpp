// The progress line: its text, plain lines (or silence) when the output is not a terminal, and
// the redraw on one.
#include "tessel/core/progress.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace tessel {
namespace {

TEST(Progress, FormatsCountRateAndEta) {
  EXPECT_EQ(format_progress("epoch 3", 5, 20, 10.0, "12.0 M sampled edges/s"),
            "epoch 3: 5/20 25% | 12.0 M sampled edges/s | 0:10 elapsed, ETA 0:30");
  EXPECT_EQ(format_progress("evaluate", 0, 3, 1.2), "evaluate: 0/3 0% | 0:01 elapsed, ETA ?");
  EXPECT_EQ(format_progress("write", 4, 4, 61.0), "write: 4/4 100% | 1:01 elapsed, ETA 0:00");
  EXPECT_EQ(format_progress("partition: METIS", 0, 0, 3725.0), "partition: METIS: 1:02:05 elapsed");
}

TEST(Progress, WritesNothingWhenNotATerminal) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    ProgressLine counted("epoch 1", 3, file);
    EXPECT_FALSE(counted.enabled());
    for (int i = 1; i <= 3; ++i) counted.update(i, "detail");
    ProgressLine open_ended("partition: METIS", 0, file);
    EXPECT_FALSE(open_ended.enabled());
  }
  EXPECT_EQ(std::ftell(file), 0);
  std::fseek(file, 0, SEEK_END);
  EXPECT_EQ(std::ftell(file), 0);
  std::fclose(file);
}

// Not on a terminal (mpirun forwards stderr through a pipe) a long task still shows it is
// alive: plain lines with a newline, no '\r' or escapes, at most one per period.
TEST(Progress, PrintsPlainLinesWhenNotATerminal) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    ProgressLine line("epoch 1", 3, file, 0.05);
    EXPECT_TRUE(line.enabled());
    line.update(1, "x");  // too early: nothing yet
    std::this_thread::sleep_for(std::chrono::milliseconds(80));
    line.update(2, "step");
    line.update(3, "step");  // within the period: not printed
  }
  std::rewind(file);
  char buffer[512] = {};
  const std::size_t n = std::fread(buffer, 1, sizeof(buffer) - 1, file);
  const std::string text(buffer, n);
  EXPECT_EQ(text.rfind("epoch 1: 2/3 67% | step | 0:00 elapsed, ETA 0:00\n", 0), 0u) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
  std::fclose(file);
}

TEST(Progress, RedrawsAndClearsOnATerminal) {
  const int master = posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0)
    GTEST_SKIP() << "no pseudo-terminal available here";
  const int follower = open(ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_GE(follower, 0);
  std::FILE* tty = fdopen(follower, "w");
  ASSERT_NE(tty, nullptr);
  {
    ProgressLine line("evaluate", 2, tty);
    ASSERT_TRUE(line.enabled());
    line.update(2); // the last unit is always drawn
  }
  std::fclose(tty);
  std::string seen;
  char buffer[256];
  fcntl(master, F_SETFL, O_NONBLOCK);
  for (ssize_t got; (got = read(master, buffer, sizeof buffer)) > 0;) seen.append(buffer, got);
  close(master);
  EXPECT_NE(seen.find("\revaluate: 2/2 100%"), std::string::npos) << seen;
  EXPECT_EQ(seen.substr(seen.size() - 4), "\r\033[K") << seen;
}

}  // namespace
}  // namespace tessel
