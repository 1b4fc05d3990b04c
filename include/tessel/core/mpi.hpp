// Thin typed MPI wrapper: datatypes from C++ types, checked calls, RAII environment.
#pragma once

#include "tessel/core/error.hpp"

#include <mpi.h>

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace tessel::mpi {

std::string error_string(int code);

}  // namespace tessel::mpi

// TESSEL_CHECK_MPI(call): throws LibraryError with MPI's message when call fails.
#define TESSEL_CHECK_MPI(call)                                                             \
  do {                                                                                     \
    const int tessel_mpi_rc_ = (call);                                                     \
    if (tessel_mpi_rc_ != MPI_SUCCESS) [[unlikely]]                                        \
      TESSEL_LIB_FAIL("MPI call {} failed: {}", #call,                                     \
                      ::tessel::mpi::error_string(tessel_mpi_rc_));                        \
  } while (0)

namespace tessel::mpi {

template <class T>
MPI_Datatype datatype() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>) return MPI_FLOAT;
  else if constexpr (std::is_same_v<U, double>) return MPI_DOUBLE;
  else if constexpr (std::is_same_v<U, std::int8_t>) return MPI_INT8_T;
  else if constexpr (std::is_same_v<U, std::uint8_t>) return MPI_UINT8_T;
  else if constexpr (std::is_same_v<U, char>) return MPI_CHAR;
  else if constexpr (std::is_same_v<U, std::int32_t>) return MPI_INT32_T;
  else if constexpr (std::is_same_v<U, std::uint32_t>) return MPI_UINT32_T;
  else if constexpr (std::is_same_v<U, std::int64_t>) return MPI_INT64_T;
  else if constexpr (std::is_same_v<U, std::uint64_t>) return MPI_UINT64_T;
  else static_assert(sizeof(T) == 0, "no MPI datatype for this type");
}

// Initializes MPI (thread level FUNNELED) for the lifetime of the object, installs
// MPI_ERRORS_RETURN on MPI_COMM_WORLD so failures become exceptions, and tells the logger
// this process's rank. Finalizes on destruction unless the job was aborted.
class Environment {
 public:
  Environment(int* argc, char*** argv);
  ~Environment();
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  int rank_ = 0;
  int size_ = 1;
};

bool initialized();
// For each rank r of `comm`, 1 when r runs on another host than this rank (another shared-memory
// node, as MPI_COMM_TYPE_SHARED sees nodes), else 0. Collective over `comm`.
std::vector<std::uint8_t> ranks_on_other_hosts(MPI_Comm comm);
// Rank and size in MPI_COMM_WORLD (0 and 1 when MPI is not initialized).
int world_rank();
int world_size();
std::string hostname();

// Prints one line naming rank and host, then takes the whole job down (MPI_Abort when MPI is
// running, exit otherwise). Never returns.
[[noreturn]] void abort_job(const std::string& message, int exit_code);
// For an error every rank raises at the same point: once all ranks have arrived (a barrier),
// rank 0 prints one line and every rank finalizes MPI and exits with exit_code, so the job
// ends without an abort. A rank still missing after a few seconds means the ranks did not
// agree after all: then this falls back to abort_job. `wait_s` is that wait: long for an error
// known to be agreed, short for one that may be this rank's alone. Never returns.
[[noreturn]] void exit_agreed(const std::string& message, int exit_code, double wait_s = 5.0);
// True when every rank reaches this call within `wait_s` seconds of this rank (a non-blocking
// barrier tested until then): an error met by all ranks alike, not by this one alone. With one
// rank or without MPI, true.
bool all_arrive(double wait_s);

// A count as MPI's int, or an error naming what overflowed.
int as_count(std::int64_t n, const char* what);

}  // namespace tessel::mpi
