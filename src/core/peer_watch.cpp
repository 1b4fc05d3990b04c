// The peer watch: TCP connections from every rank to rank 0, heartbeats, and the line that
// names a lost host.
#include "tessel/core/peer_watch.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/interrupt.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/mpi.hpp"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <deque>
#include <thread>

namespace tessel::mpi::peer_watch {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint32_t kMagic = 0x5453'4c57; // "TSLW"
constexpr int kMaxAddresses = 8;
constexpr char kHeartbeat = 'H';
constexpr char kGoodbye = 'B';
// A failure: 'F', its length (4 bytes, little-endian), its text; a goodbye follows.
constexpr char kFailure = 'F';
constexpr std::size_t kMaxFailure = 4096;

// What rank 0 broadcasts: where to connect and the job's token (so a stray connection to the
// port is not taken for a rank).
struct Rendezvous {
  std::uint64_t token[2] = {}; // 128 bits from getrandom
  std::uint32_t addresses[kMaxAddresses] = {}; // IPv4, network byte order
  std::int32_t count = 0;                      // 0: rank 0 could not listen; no watch
  std::uint16_t port = 0;                      // network byte order
};

struct Hello {
  std::uint32_t magic = kMagic;
  std::int32_t rank = 0;
  std::uint64_t token[2] = {};
};

// Rank 0's answer to a hello it refuses because another connection already holds the rank.
constexpr char kDuplicate = 'D';

// "10.0.0.2:40312": where a connection comes from.
std::string endpoint(const sockaddr_in& address) {
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &address.sin_addr, text, sizeof text);
  return fmt::format("{}:{}", text, ntohs(address.sin_port));
}

// 128 bits from the kernel's random source.
void random_token(std::uint64_t (&token)[2]) {
  auto* bytes = reinterpret_cast<unsigned char*>(token);
  std::size_t got = 0;
  while (got < sizeof token) {
    const ssize_t n = ::getrandom(bytes + got, sizeof token - got, 0);
    TESSEL_EXPECTS(n >= 0 || errno == EINTR, "peer watch: getrandom failed: {}",
                   std::strerror(errno));
    if (n > 0) got += static_cast<std::size_t>(n);
  }
}

struct Peer {
  int fd = -1;
  sockaddr_in address{}; // where its connection comes from: its host
  bool open = false;
  bool said_goodbye = false;
  Clock::time_point last_heard;
  Clock::time_point closed_at;
  std::string unread;  // bytes received and not yet understood (a failure in parts)
  std::string failure; // the error the rank handed over with its goodbye
};

// Never destroyed: the watch threads run until the process ends.
struct State {
  std::mutex mutex;
  std::atomic<bool> started{false};
  std::atomic<bool> stopping{false};
  std::atomic<int> client_fd{-1};
  int rank = 0;
  Settings settings;
  std::vector<std::string> host_of_rank;
  std::map<int, Peer> peers; // rank 0: by rank
  bool reported_cut_off = false;
  std::atomic<bool> failures_on_one_host{false}; // carry_failures_on_one_host() was called
  bool watching = true; // false: connections for failures only (one host)
};

State& state() {
  static State* s = new State;
  return *s;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// This host's IPv4 addresses, those of interfaces that are up, loopback last (it reaches rank 0
// only from its own host).
std::vector<std::uint32_t> local_addresses() {
  std::vector<std::uint32_t> outside, loopback;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET || !(a->ifa_flags & IFF_UP))
      continue;
    const auto address = reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr;
    ((a->ifa_flags & IFF_LOOPBACK) ? loopback : outside).push_back(address);
  }
  freeifaddrs(list);
  outside.insert(outside.end(), loopback.begin(), loopback.end());
  if (outside.size() > kMaxAddresses) outside.resize(kMaxAddresses);
  return outside;
}

// Rank 0's listening socket on an ephemeral port of every address; -1 when it cannot have one.
int listen_socket(std::uint16_t& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof(any);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&any), sizeof(any)) != 0 || ::listen(fd, 1024) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&any), &length) != 0) {
    ::close(fd);
    return -1;
  }
  port = any.sin_port;
  return fd;
}

// Connects to one of rank 0's addresses, each tried for at most `timeout_s`; -1 when none
// answers.
int connect_to(const Rendezvous& where, double timeout_s) {
  for (int i = 0; i < where.count; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = where.port;
    to.sin_addr.s_addr = where.addresses[i];
    int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to));
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int error = 0;
      socklen_t length = sizeof(error);
      rc = (::poll(&p, 1, static_cast<int>(timeout_s * 1000)) == 1 &&
            ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0)
               ? 0
               : -1;
    }
    if (rc == 0) return fd;
    ::close(fd);
  }
  return -1;
}

// True when the host at `address` answers a TCP connection attempt within `timeout_s`, accepted
// or refused: it is up and reachable, whatever its processes do.
bool answers(sockaddr_in address, double timeout_s) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  int error = rc == 0 ? 0 : errno;
  if (rc != 0 && error == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    socklen_t length = sizeof(error);
    error = ETIMEDOUT;
    if (::poll(&p, 1, static_cast<int>(timeout_s * 1000)) == 1)
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
  }
  ::close(fd);
  return error == 0 || error == ECONNREFUSED;
}

bool send_all(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  for (std::size_t done = 0; done < size;) {
    const ssize_t n = ::send(fd, p + done, size - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// The lost ranks as rank 0 sees them now: closed without a goodbye for longer than the grace
// (or at all, with `any_closed`), and silent past the limit. Call with the mutex held.
void lost_now(State& s, bool any_closed, std::vector<int>& ended, std::vector<int>& silent) {
  for (const auto& [rank, peer] : s.peers) {
    if (!peer.open && !peer.said_goodbye &&
        (any_closed || seconds_since(peer.closed_at) >= s.settings.grace_s))
      ended.push_back(rank);
    else if (s.watching && peer.open && !peer.said_goodbye &&
             seconds_since(peer.last_heard) > s.settings.silence_s) // no heartbeats otherwise
      silent.push_back(rank);
  }
}

// Reads everything a connection holds now, without waiting: heartbeats, a goodbye, its close.
// Call with the mutex held.
void drain(Peer& peer) {
  while (peer.open) {
    char bytes[64];
    const ssize_t n = ::recv(peer.fd, bytes, sizeof(bytes), MSG_DONTWAIT);
    if (n > 0) {
      peer.last_heard = Clock::now();
      peer.unread.append(bytes, static_cast<std::size_t>(n));
      std::size_t at = 0;
      while (at < peer.unread.size()) {
        const char c = peer.unread[at];
        if (c == kFailure) {
          if (peer.unread.size() < at + 5) break; // the rest is on its way
          std::uint32_t length = 0;
          for (int i = 0; i < 4; ++i)
            length |= static_cast<std::uint32_t>(static_cast<unsigned char>(peer.unread[at + 1 + i]))
                      << (8 * i);
          length = std::min<std::uint32_t>(length, kMaxFailure);
          if (peer.unread.size() < at + 5 + length) break;
          if (peer.failure.empty()) peer.failure = peer.unread.substr(at + 5, length);
          at += 5 + length;
          continue;
        }
        if (c == kGoodbye) peer.said_goodbye = true;
        ++at;
      }
      peer.unread.erase(0, at);
    } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      peer.open = false;
      peer.closed_at = Clock::now();
      ::close(peer.fd);
      peer.fd = -1;
    } else {
      return;
    }
  }
}

// Reads what every open connection has for up to 200 ms: heartbeats, goodbyes and closes.
void read_connections(State& s) {
  std::vector<pollfd> fds;
  std::vector<int> ranks;
  {
    std::lock_guard lock(s.mutex);
    for (const auto& [rank, peer] : s.peers)
      if (peer.open) {
        fds.push_back({peer.fd, POLLIN, 0});
        ranks.push_back(rank);
      }
  }
  if (fds.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return;
  }
  ::poll(fds.data(), fds.size(), 200);
  std::lock_guard lock(s.mutex);
  for (std::size_t i = 0; i < fds.size(); ++i)
    if (fds[i].revents != 0) drain(s.peers[ranks[i]]);
}

// Silent ranks whose host still answers hang (or are stopped): mpirun does not notice them, so
// rank 0 ends the job. A host that does not answer is cut off, and then ending rank 0 would
// leave mpirun waiting on the lost daemon for good (Open MPI 4 does): rank 0 says what it sees,
// once, and leaves the end to mpirun's daemon keepalive.
void judge_silence(State& s, const std::vector<int>& silent) {
  std::vector<int> hung, cut_off;
  std::map<std::string, bool> host_answers;
  for (const int r : silent) {
    const std::string& host = s.host_of_rank[static_cast<std::size_t>(r)];
    if (!host_answers.count(host)) {
      sockaddr_in address;
      {
        std::lock_guard lock(s.mutex);
        address = s.peers[r].address;
      }
      host_answers[host] = answers(address, 2.0);
    }
    (host_answers[host] ? hung : cut_off).push_back(r);
  }
  const std::string what = describe_lost(s.host_of_rank, {}, cut_off, hung, s.settings.silence_s);
  if (!hung.empty()) interrupt::fail_now(what);
  s.reported_cut_off = true;
  interrupt::say(fmt::format("error: {}; mpirun ends the job once its daemons' TCP keepalive "
                             "gives up on the host (OMPI_MCA_oob_tcp_keepalive_time and _intvl, "
                             "_probes)",
                             what));
}

// Rank 0's thread: reads every connection, and ends the job (or says so) when a rank is lost.
// The ranks of one host close or fall silent within a heartbeat of each other: a decision
// waits that long after the first, so that the line names them together.
void watch() {
  State& s = state();
  Clock::time_point first_silent = Clock::time_point::max(); // none silent yet
  for (;;) {
    read_connections(s);
    std::vector<int> ended, silent;
    {
      std::lock_guard lock(s.mutex);
      if (s.stopping.load()) return;
      lost_now(s, false, ended, silent);
    }
    if (!ended.empty())
      interrupt::fail_now(describe_lost(s.host_of_rank, ended, silent, {}, s.settings.silence_s));
    if (silent.empty() || s.reported_cut_off) {
      first_silent = Clock::time_point::max();
      continue;
    }
    if (first_silent == Clock::time_point::max()) first_silent = Clock::now();
    if (seconds_since(first_silent) >= s.settings.heartbeat_s + s.settings.grace_s)
      judge_silence(s, silent);
  }
}

// Every other rank's thread: a byte to rank 0 every heartbeat until the process ends.
void beat(int fd, double heartbeat_s) {
  State& s = state();
  while (!s.stopping.load()) {
    const char byte = kHeartbeat;
    if (::send(fd, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN &&
        errno != EWOULDBLOCK)
      return; // rank 0 is gone: mpirun ends this process
    std::this_thread::sleep_for(std::chrono::duration<double>(heartbeat_s));
  }
}

void say_goodbye_at_exit() {
  goodbye();
}

std::string rank_list(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
}

} // namespace

Settings settings_from_environment() {
  Settings settings;
  if (const char* value = std::getenv("TESSEL_PEER_TIMEOUT_S"); value && *value) {
    char* end = nullptr;
    const double s = std::strtod(value, &end);
    TESSEL_EXPECTS(end != value && *end == '\0' && s >= 0 && s <= 86400,
                   "TESSEL_PEER_TIMEOUT_S={}: expected seconds from 0 (no watch) to 86400", value);
    settings.silence_s = s;
  }
  return settings;
}

namespace {

// Fault injection for the tests (TESSEL_PEER_WATCH_FAULT=RANK:ACTION): the action this rank
// plays at start-up, "" for none. skip: never connects; idle:N: opens N connections that send
// nothing first; impostor: a second connection claims this rank with the job's token first.
std::string fault_action(int rank) {
  const char* value = std::getenv("TESSEL_PEER_WATCH_FAULT");
  if (value == nullptr) return "";
  const std::string text = value;
  const auto colon = text.find(':');
  if (colon == std::string::npos || std::atoi(text.substr(0, colon).c_str()) != rank) return "";
  return text.substr(colon + 1);
}

void inject_faults(const Rendezvous& where, int rank, std::vector<int>& fds) {
  const std::string action = fault_action(rank);
  if (action.rfind("idle:", 0) == 0) {
    for (int i = 0, n = std::atoi(action.c_str() + 5); i < n; ++i)
      if (const int fd = connect_to(where, 2.0); fd >= 0) fds.push_back(fd);
  } else if (action == "impostor") {
    const int fd = connect_to(where, 2.0);
    const Hello hello{kMagic, rank, {where.token[0], where.token[1]}};
    if (fd >= 0 && send_all(fd, &hello, sizeof(hello))) fds.push_back(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(200)); // read first
  }
}

// The end of start() on every rank, after rank 0 accepted the hellos: a duplicate stops the
// job (the refused rank says so, rank 0 names both connections in one line); otherwise the
// threads start, and rank 0 warns of the ranks that did not connect.
void finish_start(const int (&verdict)[2], const std::string& duplicate, int listener,
                  const std::vector<int>& connected_of_rank, std::vector<int>& test_fds) {
  State& s = state();
  if (verdict[0] != 0) {
    const int fd = s.client_fd.load();
    if (s.rank == verdict[1] && fd >= 0) {
      pollfd p{fd, POLLIN, 0};
      char answer = 0;
      if (::poll(&p, 1, 1000) == 1 && ::recv(fd, &answer, 1, MSG_DONTWAIT) == 1 &&
          answer == kDuplicate)
        interrupt::say(fmt::format("peer watch: rank 0 refused this rank's connection: another "
                                   "connection already claimed rank {} with the job's token",
                                   s.rank));
    }
    TESSEL_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (s.rank == 0) interrupt::fail_now(duplicate);
    // rank 0's exit ends the job: mpirun stops this rank.
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  for (const int fd : test_fds) ::close(fd);
  if (s.rank != 0) {
    if (s.client_fd.load() >= 0 && s.watching)
      std::thread(beat, s.client_fd.load(), s.settings.heartbeat_s).detach();
    return;
  }
  ::close(listener);
  // Fewer ranks than expected: a warning (the job runs, those ranks unwatched), naming them.
  std::string missing;
  for (int r = 1; r < static_cast<int>(s.host_of_rank.size()); ++r)
    if (s.peers.count(r) == 0)
      missing += fmt::format("{}rank {} (host {}{})", missing.empty() ? "" : ", ", r,
                             s.host_of_rank[static_cast<std::size_t>(r)],
                             connected_of_rank[static_cast<std::size_t>(r)] != 0
                                 ? ""
                                 : ", which could not connect");
  if (!missing.empty())
    log::warn("peer watch: {} of {} ranks connected to rank 0; not watched: {} (a loss there is "
              "named by mpirun alone)",
              s.peers.size() + 1, s.host_of_rank.size(), missing);
  if (s.watching) std::thread(watch).detach();
}

} // namespace

void start(const std::vector<std::string>& host_of_rank, const Settings& settings) {
  State& s = state();
  int rank = 0, size = 1;
  TESSEL_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  TESSEL_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  TESSEL_EXPECTS(static_cast<int>(host_of_rank.size()) == size,
                 "peer watch: {} host names for {} ranks", host_of_rank.size(), size);
  const bool one_host = std::all_of(host_of_rank.begin(), host_of_rank.end(),
                                    [&](const std::string& h) { return h == host_of_rank[0]; });
  if (s.started.load() || settings.silence_s <= 0) return;
  if (one_host && !s.failures_on_one_host.load()) return;
  s.watching = !one_host;

  Rendezvous where;
  int listener = -1;
  if (rank == 0) {
    listener = listen_socket(where.port);
    const auto addresses = listener >= 0 ? local_addresses() : std::vector<std::uint32_t>{};
    where.count = static_cast<std::int32_t>(addresses.size());
    std::copy(addresses.begin(), addresses.end(), where.addresses);
    random_token(where.token);
    if (where.count == 0)
      log::warn("peer watch: rank 0 cannot listen on a TCP port; a lost host is named by "
                "mpirun alone");
  }
  TESSEL_CHECK_MPI(MPI_Bcast(&where, sizeof(where), MPI_BYTE, 0, MPI_COMM_WORLD));
  if (where.count == 0) {
    if (listener >= 0) ::close(listener);
    return;
  }
  int connected = 0;
  std::vector<int> test_fds; // fault injection's extra connections, closed after the start
  if (rank != 0) inject_faults(where, rank, test_fds);
  const bool skip = rank != 0 && fault_action(rank) == "skip";
  if (rank != 0 && !skip) {
    const int fd = connect_to(where, 2.0);
    Hello hello{kMagic, rank, {where.token[0], where.token[1]}};
    if (fd >= 0 && send_all(fd, &hello, sizeof(hello))) {
      s.client_fd.store(fd);
      connected = 1;
    } else {
      if (fd >= 0) ::close(fd);
      log::warn("peer watch: rank {} (host {}) cannot reach rank 0 over TCP; it runs "
                "unwatched",
                rank, host_of_rank[static_cast<std::size_t>(rank)]);
    }
  }
  std::vector<int> connected_of_rank(static_cast<std::size_t>(size));
  TESSEL_CHECK_MPI(
      MPI_Gather(&connected, 1, MPI_INT, connected_of_rank.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
  s.rank = rank;
  s.settings = settings;
  s.host_of_rank = host_of_rank;
  s.started.store(true);
  std::atexit(say_goodbye_at_exit);
  if (rank != 0) {
    int verdict[2] = {0, -1};
    TESSEL_CHECK_MPI(MPI_Bcast(verdict, 2, MPI_INT, 0, MPI_COMM_WORLD));
    finish_start(verdict, "", -1, connected_of_rank, test_fds);
    return;
  }
  // Every rank that connected has sent its hello before the gather: accept them all now. Many
  // connections are read at once (poll), each for at most 2 s, and the first valid hello per
  // rank takes it: idle connections cannot hold the listener, and a stranger cannot stop a
  // rank's hello from being read.
  const int expected =
      static_cast<int>(std::count(connected_of_rank.begin() + 1, connected_of_rank.end(), 1));
  struct Pending {
    int fd;
    sockaddr_in from;
    Clock::time_point since;
    Hello hello;
    std::size_t got = 0;
  };
  std::deque<Pending> pending;
  constexpr std::size_t kMaxPending = 4096;
  // Accepted in bursts: the listener must not block once its queue is empty.
  ::fcntl(listener, F_SETFL, ::fcntl(listener, F_GETFL) | O_NONBLOCK);
  std::string duplicate; // the line that stops the job
  int refused_rank = -1;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  // Two short passes after the last expected rank: a second claim of a rank, already queued
  // (every hello was sent before the gather), is read too.
  int sweeps = 2;
  while ((static_cast<int>(s.peers.size()) < expected || sweeps-- > 0) && duplicate.empty() &&
         Clock::now() < deadline) {
    std::vector<pollfd> fds{{listener, POLLIN, 0}};
    for (const Pending& c : pending) fds.push_back({c.fd, POLLIN, 0});
    const int wait_ms = static_cast<int>(s.peers.size()) < expected ? 100 : 20;
    if (::poll(fds.data(), fds.size(), wait_ms) < 0 && errno != EINTR) break;
    std::vector<bool> drop(pending.size(), false);
    for (std::size_t i = 0; i < pending.size(); ++i) {
      Pending& c = pending[i];
      if (fds[i + 1].revents != 0) {
        const ssize_t n = ::recv(c.fd, reinterpret_cast<char*>(&c.hello) + c.got,
                                 sizeof(Hello) - c.got, MSG_DONTWAIT);
        if (n > 0) c.got += static_cast<std::size_t>(n);
        else if (n == 0 || (errno != EAGAIN && errno != EINTR)) drop[i] = true;
      }
      if (c.got == sizeof(Hello)) {
        const Hello& h = c.hello;
        drop[i] = true;
        if (h.magic != kMagic || h.token[0] != where.token[0] || h.token[1] != where.token[1] ||
            h.rank <= 0 || h.rank >= size)
          continue;
        const auto taken = s.peers.find(h.rank);
        if (taken != s.peers.end()) {
          // The job's token, twice for one rank: a stranger read it, or a rank runs twice.
          const char no = kDuplicate;
          (void)::send(c.fd, &no, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
          refused_rank = h.rank;
          duplicate = fmt::format(
              "peer watch: two connections claim rank {} with the job's token: {} (taken first) "
              "and {} (refused); a stranger holds the token or the rank runs twice; stopping "
              "the job",
              h.rank, endpoint(taken->second.address), endpoint(c.from));
          continue;
        }
        std::lock_guard lock(s.mutex);
        s.peers[h.rank] = Peer{c.fd, c.from, true, false, Clock::now(), {}, {}, {}};
        drop[i] = false;
        c.fd = -1; // kept by the peer
      } else if (seconds_since(c.since) > 2.0) {
        drop[i] = true;
      }
    }
    std::deque<Pending> kept;
    for (std::size_t i = 0; i < pending.size(); ++i) {
      if (pending[i].fd < 0) continue;
      if (drop[i]) ::close(pending[i].fd);
      else kept.push_back(pending[i]);
    }
    pending.swap(kept);
    if (fds[0].revents & POLLIN) {
      for (int burst = 0; burst < 256; ++burst) {
        sockaddr_in from{};
        socklen_t from_length = sizeof(from);
        const int fd = ::accept4(listener, reinterpret_cast<sockaddr*>(&from), &from_length,
                                 SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) break;
        if (pending.size() >= kMaxPending) { // the oldest gives way
          ::close(pending.front().fd);
          pending.pop_front();
        }
        pending.push_back(Pending{fd, from, Clock::now(), {}, 0});
      }
    }
  }
  for (const Pending& c : pending) ::close(c.fd);
  // Agreed by every rank: a duplicate stops the job (the refused rank, if it is the real one,
  // says so first); ranks that did not connect are a warning on rank 0.
  int verdict[2] = {duplicate.empty() ? 0 : 1, refused_rank};
  TESSEL_CHECK_MPI(MPI_Bcast(verdict, 2, MPI_INT, 0, MPI_COMM_WORLD));
  finish_start(verdict, duplicate, listener, connected_of_rank, test_fds);
}


bool running() {
  return state().started.load();
}

void goodbye() noexcept {
  goodbye(std::string());
}

void goodbye(const std::string& failure) noexcept {
  State& s = state();
  if (!s.started.load() || s.stopping.exchange(true)) return;
  const int fd = s.client_fd.load();
  if (fd < 0) return;
  try {
    // One send: the heartbeat thread's bytes never land inside the failure.
    std::string bytes;
    if (!failure.empty()) {
      const auto length = static_cast<std::uint32_t>(std::min(failure.size(), kMaxFailure));
      bytes += kFailure;
      for (int i = 0; i < 4; ++i) bytes += static_cast<char>((length >> (8 * i)) & 0xff);
      bytes.append(failure, 0, length);
    }
    bytes += kGoodbye;
    (void)send_all(fd, bytes.data(), bytes.size());
  } catch (...) {
    const char byte = kGoodbye;
    (void)::send(fd, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
}

void carry_failures_on_one_host() {
  state().failures_on_one_host.store(true);
}

Failure first_failure(double wait_s) {
  State& s = state();
  if (!s.started.load() || s.rank != 0) return {};
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(wait_s));
  for (;;) {
    {
      std::lock_guard lock(s.mutex);
      for (auto& [rank, peer] : s.peers) {
        drain(peer);
        if (!peer.failure.empty())
          return {rank, s.host_of_rank[static_cast<std::size_t>(rank)], peer.failure};
      }
    }
    if (Clock::now() >= deadline) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

std::string lost_note(double wait_s) {
  State& s = state();
  if (!s.started.load() || s.rank != 0) return "";
  // mpirun signals the survivors as soon as its daemon on the lost host is gone, which can be
  // before the lost ranks' connections close here: read the connections now (the watch thread
  // may not have run since they closed), waiting at most `wait_s` for a first close to show
  // (mpirun's SIGKILL follows its SIGTERM after a second), then 20 ms for its host's others.
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(wait_s));
  auto end = deadline;
  for (;;) {
    std::vector<int> ended, silent;
    {
      std::lock_guard lock(s.mutex);
      for (auto& [rank, peer] : s.peers)
        drain(peer);
      lost_now(s, true, ended, silent);
    }
    if ((!ended.empty() || !silent.empty()) && end == deadline)
      end = std::min(deadline, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::milliseconds(20)));
    if (Clock::now() >= end)
      return describe_lost(s.host_of_rank, ended, silent, {}, s.settings.silence_s);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::string describe_lost(const std::vector<std::string>& host_of_rank,
                          const std::vector<int>& ended, const std::vector<int>& silent,
                          const std::vector<int>& hung, double silence_s) {
  const auto in = [](const std::vector<int>& list, int r) {
    return std::find(list.begin(), list.end(), r) != list.end();
  };
  // Hosts in the order of their first rank; rank 0's host is never lost (rank 0 writes this).
  std::vector<std::string> hosts;
  for (const auto& h : host_of_rank)
    if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  std::vector<std::string> clauses;
  for (const auto* group : {&ended, &silent, &hung}) {
    if (group->empty()) continue;
    std::vector<std::string> names;
    for (const auto& host : hosts) {
      std::vector<int> on_host, lost;
      for (int r = 0; r < static_cast<int>(host_of_rank.size()); ++r)
        if (host_of_rank[static_cast<std::size_t>(r)] == host) {
          on_host.push_back(r);
          if (in(*group, r)) lost.push_back(r);
        }
      if (lost.empty()) continue;
      if (lost == on_host && host != host_of_rank[0])
        names.push_back(fmt::format("host {} ({})", host, rank_list(lost)));
      else
        for (const int r : lost)
          names.push_back(fmt::format("rank {} on host {} ({} {} there)", r, host,
                                      rank_list(on_host), on_host.size() == 1 ? "runs" : "run"));
    }
    const bool one = group->size() == 1;
    const std::string who = fmt::format("{}", fmt::join(names, ", "));
    if (group == &ended)
      clauses.push_back(fmt::format("{}: {} ended without a word (killed, crashed, or the host "
                                    "went down)",
                                    who, one ? "its process" : "their processes"));
    else if (group == &silent)
      clauses.push_back(fmt::format("{}: no word from {} for {:g} s (the host or its network "
                                    "link is down)",
                                    who, one ? "it" : "them", silence_s));
    else
      clauses.push_back(fmt::format("{}: no word from {} for {:g} s, though the host answers "
                                    "(the {} or {} stopped)",
                                    who, one ? "it" : "them", silence_s,
                                    one ? "process hangs" : "processes hang", one ? "is" : "are"));
  }
  if (clauses.empty()) return "";
  return "the job lost " + fmt::format("{}", fmt::join(clauses, "; and lost "));
}

} // namespace tessel::mpi::peer_watch
