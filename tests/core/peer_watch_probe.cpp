// A job for the peer watch's tests, run under mpirun: starts the watch with host names given on
// the command line (so one machine can pose as several hosts), then the ranks named as victims
// are killed, stopped, or leave with a goodbye, while the others wait for the job to end.
//   peer_watch_probe ACTION HOSTS VICTIMS SILENCE_S
//   ACTION: kill | stop | goodbye | none;  HOSTS: a host name per rank, comma-separated;
//   VICTIMS: ranks, comma-separated (or -).
#include "tessel/core/interrupt.hpp"
#include "tessel/core/peer_watch.hpp"

#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');)
    parts.push_back(part);
  return parts;
}

} // namespace

int main(int argc, char** argv) {
  using namespace tessel;
  if (argc != 5) {
    std::fprintf(stderr, "usage: peer_watch_probe ACTION HOSTS VICTIMS SILENCE_S\n");
    return 2;
  }
  interrupt::install();
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string action = argv[1];
  bool victim = false;
  for (const auto& r : split(argv[3]))
    if (r != "-" && std::atoi(r.c_str()) == rank) victim = true;
  mpi::peer_watch::Settings settings;
  settings.heartbeat_s = 0.2;
  settings.silence_s = std::atof(argv[4]);
  settings.grace_s = 0.3;
  mpi::peer_watch::start(split(argv[2]), settings);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) std::printf("watching: %s\n", mpi::peer_watch::running() ? "yes" : "no");
  std::fflush(stdout);
  if (action == "none") {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
  }
  if (victim) {
    if (action == "kill") raise(SIGKILL);
    if (action == "stop") raise(SIGSTOP);
    if (action == "goodbye") {
      mpi::peer_watch::goodbye();
      _exit(3);
    }
  }
  // No MPI call from here: the job ends only through the watch or mpirun.
  std::this_thread::sleep_for(std::chrono::seconds(20));
  std::printf("rank %d: no loss seen in 20 s\n", rank);
  std::fflush(stdout);
  _exit(0);
}
