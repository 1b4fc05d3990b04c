// MPI environment, error strings and whole-job abort.
#include "tessel/core/mpi.hpp"

#include "tessel/core/log.hpp"
#include "tessel/core/peer_watch.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <exception>

namespace tessel::mpi {

std::string error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<std::size_t>(len));
}

Environment::Environment(int* argc, char*** argv) {
  int provided = 0;
  TESSEL_CHECK_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
  TESSEL_CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  TESSEL_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  TESSEL_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  log::set_rank(rank_, size_);
  if (size_ > 1) {
    // A job over several hosts watches its ranks (peer_watch.hpp): every rank's host name.
    std::array<char, 256> mine{};
    const std::string host = hostname();
    std::copy_n(host.begin(), std::min(host.size(), mine.size() - 1), mine.begin());
    std::vector<char> all(mine.size() * static_cast<std::size_t>(size_));
    TESSEL_CHECK_MPI(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_CHAR,
                                   all.data(), static_cast<int>(mine.size()), MPI_CHAR,
                                   MPI_COMM_WORLD));
    std::vector<std::string> host_of_rank;
    for (int r = 0; r < size_; ++r) host_of_rank.emplace_back(&all[r * mine.size()]);
    peer_watch::start(host_of_rank, peer_watch::settings_from_environment());
  }
}

Environment::~Environment() {
  // While an exception unwinds, a collective MPI_Finalize could wait forever for ranks that
  // are still working; the handler up the stack aborts the job instead.
  if (std::uncaught_exceptions() > 0) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

bool initialized() {
  int flag = 0, finalized = 0;
  MPI_Initialized(&flag);
  MPI_Finalized(&finalized);
  return flag && !finalized;
}

std::vector<std::uint8_t> ranks_on_other_hosts(MPI_Comm comm) {
  int size = 1;
  TESSEL_CHECK_MPI(MPI_Comm_size(comm, &size));
  std::vector<std::uint8_t> other(static_cast<std::size_t>(size), 1);
  MPI_Comm node = MPI_COMM_NULL;
  TESSEL_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  MPI_Group node_group = MPI_GROUP_NULL, comm_group = MPI_GROUP_NULL;
  MPI_Comm_group(node, &node_group);
  MPI_Comm_group(comm, &comm_group);
  int local = 0;
  MPI_Group_size(node_group, &local);
  std::vector<int> local_ranks(static_cast<std::size_t>(local)), in_comm(local_ranks.size());
  for (int i = 0; i < local; ++i) local_ranks[static_cast<std::size_t>(i)] = i;
  const int rc = MPI_Group_translate_ranks(node_group, local, local_ranks.data(), comm_group,
                                           in_comm.data());
  MPI_Group_free(&node_group);
  MPI_Group_free(&comm_group);
  MPI_Comm_free(&node);
  TESSEL_CHECK_MPI(rc);
  for (const int r : in_comm)
    if (r >= 0 && r < size) other[static_cast<std::size_t>(r)] = 0;
  return other;
}

int world_rank() {
  if (!initialized()) return 0;
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  if (!initialized()) return 1;
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

std::string hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

void abort_job(const std::string& message, int exit_code) {
  const int size = world_size();
  if (size > 1)
    std::fprintf(stderr, "tessel: error on rank %d of %d (host %s): %s\n", world_rank(), size,
                 hostname().c_str(), message.c_str());
  else
    std::fprintf(stderr, "tessel: error: %s\n", message.c_str());
  std::fflush(stderr);
  peer_watch::goodbye(message); // rank 0 may name it (bench's partial report)
  if (size > 1) {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  } else if (initialized()) {
    MPI_Finalize();
  }
  std::_Exit(exit_code);
}

void exit_agreed(const std::string& message, int exit_code, double wait_s) {
  if (world_size() <= 1 || !all_arrive(wait_s)) abort_job(message, exit_code);
  peer_watch::goodbye();
  if (world_rank() == 0) {
    std::fprintf(stderr, "tessel: error: %s\n", message.c_str());
    std::fflush(stderr);
  }
  MPI_Finalize();
  std::_Exit(exit_code);
}

bool all_arrive(double wait_s) {
  if (!initialized() || world_size() <= 1) return true;
  MPI_Request barrier = MPI_REQUEST_NULL;
  int done = 0;
  if (MPI_Ibarrier(MPI_COMM_WORLD, &barrier) != MPI_SUCCESS) return false;
  const double deadline = MPI_Wtime() + wait_s;
  while (!done && MPI_Wtime() < deadline) {
    if (MPI_Test(&barrier, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
    if (!done) usleep(1000);
  }
  return done != 0;
}

int as_count(std::int64_t n, const char* what) {
  TESSEL_EXPECTS(n >= 0 && n <= INT_MAX, "{} of {} elements exceeds what one MPI call can carry",
                 what, n);
  return static_cast<int>(n);
}

}  // namespace tessel::mpi
