// gtest main for MPI tests: every rank runs every test; rank 0 prints the usual report, other
// ranks print only their failures; the exit code is non-zero if any rank failed.
#include "tessel/core/log.hpp"
#include "tessel/core/mpi.hpp"

#include <gtest/gtest.h>

#include <cstdio>

namespace {

class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  tessel::mpi::Environment env(&argc, &argv);
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (env.rank() != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(env.rank()));
  }
  const int local_failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&local_failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any_failed;
}
