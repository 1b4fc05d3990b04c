// A watch over the ranks of a job that spans several hosts: each rank keeps a TCP connection
// to rank 0 and writes a byte on it every second; rank 0 notices a connection that closes
// without a goodbye (the process was killed, or its host went down) or falls silent (its link
// is down) and names the lost host and its ranks in one line, ending the job where mpirun
// would not (a process that hangs).
#pragma once

#include <string>
#include <vector>

namespace tessel::mpi::peer_watch {

struct Settings {
  double heartbeat_s = 1.0; // how often each rank writes to rank 0
  double silence_s = 10.0;  // a rank not heard from for this long is lost; 0 turns the watch off
  double grace_s = 1.0;     // after a connection closes, how long to collect the others that close
};

// The settings of a run: the defaults, with TESSEL_PEER_TIMEOUT_S (seconds, 0 = off) as the
// silence. An unreadable value is an InputError naming the variable.
Settings settings_from_environment();

// Collective over MPI_COMM_WORLD; `host_of_rank` is every rank's host name, the same on all
// ranks. Starts the watch when the ranks run on more than one host (and silence_s > 0; on one
// host, after carry_failures_on_one_host(), the connections alone, without threads): rank 0
// listens on an ephemeral TCP port, broadcasts its addresses, every other rank connects, and
// one thread per process watches or writes. A rank that cannot reach rank 0 says so in one
// warning and runs unwatched; nothing else changes. Idempotent: a second call does nothing.
void start(const std::vector<std::string>& host_of_rank, const Settings& settings);

// True once start() has started the watch in this process.
bool running();

// This process ends on purpose (a finished run, an error it reports itself, an interrupt):
// a rank tells rank 0 so that its closing connection is not taken for a lost rank; on rank 0
// it stops the watch. Safe to call more than once and from any thread. With `failure`, a rank
// other than 0 also hands rank 0 the error that ends it (first_failure reads it there).
void goodbye() noexcept;
void goodbye(const std::string& failure) noexcept;

// Asks, before start(), for the connections to rank 0 on a job whose ranks all run on one host
// too: there they carry only the goodbyes and their failures (no heartbeat, no watch thread;
// mpirun sees a lost process on its own host). `tessel bench` asks, so that rank 0 can name in
// its partial report the rank whose error ended the job and why.
void carry_failures_on_one_host();

// On rank 0: the first failure another rank handed over with goodbye(failure), waiting up to
// `wait_s` for one to arrive; rank -1 when none did (and on every other rank).
struct Failure {
  int rank = -1;
  std::string host;
  std::string message;
};
Failure first_failure(double wait_s);

// On rank 0 while the watch runs: what it knows of lost ranks, waiting up to `wait_s` for a
// closing connection to show ("the job lost host hostb (ranks 2, 3): ..."); "" when it knows
// of none, and on every other rank.
std::string lost_note(double wait_s);

// The sentence for lost ranks: a host all of whose ranks are lost is named as a lost host with
// its ranks, otherwise each rank with its host. `ended`: connections closed without a goodbye;
// `silent`: ranks not heard from for `silence_s` (their host does not answer, or was not asked);
// `hung`: silent ranks whose host answers. "" when all are empty.
std::string describe_lost(const std::vector<std::string>& host_of_rank,
                          const std::vector<int>& ended, const std::vector<int>& silent,
                          const std::vector<int>& hung, double silence_s);

} // namespace tessel::mpi::peer_watch
