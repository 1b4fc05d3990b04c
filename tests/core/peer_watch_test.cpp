// The peer watch: its sentence for lost ranks, and jobs under mpirun that pose as several hosts
// (host names given to the watch) where ranks are killed, stopped or leave with a goodbye.
#include "tessel/core/peer_watch.hpp"

#include "test_support.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <string>

namespace tessel {
namespace {

using mpi::peer_watch::describe_lost;

TEST(PeerWatch, NamesALostHostWhenAllItsRanksAreLostAndRanksOtherwise) {
  const std::vector<std::string> hosts{"hosta", "hosta", "hostb", "hostb"};
  EXPECT_EQ(describe_lost(hosts, {2, 3}, {}, {}, 10),
            "the job lost host hostb (ranks 2, 3): their processes ended without a word "
            "(killed, crashed, or the host went down)");
  EXPECT_EQ(describe_lost(hosts, {3}, {}, {}, 10),
            "the job lost rank 3 on host hostb (ranks 2, 3 run there): its process ended "
            "without a word (killed, crashed, or the host went down)");
  EXPECT_EQ(describe_lost(hosts, {}, {2, 3}, {}, 7.5),
            "the job lost host hostb (ranks 2, 3): no word from them for 7.5 s (the host or "
            "its network link is down)");
  // Rank 0's host is never lost: rank 0 is the one writing.
  EXPECT_EQ(describe_lost(hosts, {1}, {2}, {}, 10),
            "the job lost rank 1 on host hosta (ranks 0, 1 run there): its process ended "
            "without a word (killed, crashed, or the host went down); and lost rank 2 on host "
            "hostb (ranks 2, 3 run there): no word from it for 10 s (the host or its network "
            "link is down)");
  EXPECT_EQ(describe_lost({"a", "b", "c"}, {1, 2}, {}, {}, 10),
            "the job lost host b (rank 1), host c (rank 2): their processes ended without a "
            "word (killed, crashed, or the host went down)");
  EXPECT_EQ(describe_lost(hosts, {}, {}, {3}, 10),
            "the job lost rank 3 on host hostb (ranks 2, 3 run there): no word from it for 10 s, "
            "though the host answers (the process hangs or is stopped)");
  EXPECT_EQ(describe_lost(hosts, {}, {}, {}, 10), "");
}

struct Probe {
  int code = -1;
  std::string output;
  double seconds = 0;
};

Probe probe(int np, const std::string& action, const std::string& hosts, const std::string& victims,
            double silence_s = 5, const std::string& fault = "") {
  const auto start = std::chrono::steady_clock::now();
  Probe p;
  const std::string launcher =
      fault.empty() ? test::mpirun(np)
                    : "TESSEL_PEER_WATCH_FAULT=" + fault + " " + test::mpirun(np) +
                          " -x TESSEL_PEER_WATCH_FAULT";
  p.code = test::run_command(fmt::format("{} {} {} {} {} {}", launcher,
                                         test::quote(TESSEL_PEER_WATCH_PROBE), action, hosts,
                                         victims, silence_s),
                             &p.output);
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return p;
}

TEST(PeerWatch, AKilledHostIsNamedWithItsRanks) {
  const Probe p = probe(4, "kill", "hosta,hosta,hostb,hostb", "2,3");
  EXPECT_NE(p.code, 0) << p.output;
  EXPECT_NE(p.output.find("watching: yes"), std::string::npos) << p.output;
  // mpirun may signal rank 0 between the two closes: then rank 0 names the rank it saw close,
  // with its host and that host's ranks.
  EXPECT_TRUE(std::regex_search(p.output,
                                std::regex("the job lost (host hostb \\(ranks 2, 3\\)|rank [23] on "
                                           "host hostb \\(ranks 2, 3 run there\\)): the.* "
                                           "ended without a word")))
      << p.output;
  EXPECT_EQ(p.output.find("no loss seen"), std::string::npos) << p.output;
}

TEST(PeerWatch, AKilledRankOfAHostThatLivesOnIsNamedAsARank) {
  const Probe p = probe(4, "kill", "hosta,hosta,hostb,hostb", "3");
  EXPECT_NE(p.code, 0) << p.output;
  EXPECT_NE(p.output.find("the job lost rank 3 on host hostb (ranks 2, 3 run there)"),
            std::string::npos)
      << p.output;
  EXPECT_EQ(p.output.find("lost host hostb"), std::string::npos) << p.output;
}

TEST(PeerWatch, ASilentRankEndsTheJobAfterTheTimeout) {
  // A stopped process keeps its connection open and writes nothing, while its host answers;
  // mpirun does not notice a stopped process, so only the watch ends this job.
  const Probe p = probe(3, "stop", "hosta,hosta,hostb", "2", 2);
  EXPECT_NE(p.code, 0) << p.output;
  EXPECT_NE(p.output.find("error: the job lost host hostb (rank 2): no word from it for 2 s, "
                          "though the host answers (the process hangs or is stopped)"),
            std::string::npos)
      << p.output;
  EXPECT_EQ(p.output.find("no loss seen"), std::string::npos) << p.output;
  EXPECT_LT(p.seconds, 15) << p.output;
}

TEST(PeerWatch, ARankThatSaysGoodbyeIsNotLost) {
  // mpirun ends this job too (a rank exited with 3 without MPI_Finalize), but the watch must not
  // take the goodbye for a loss.
  const Probe p = probe(3, "goodbye", "hosta,hosta,hostb", "2");
  EXPECT_NE(p.code, 0) << p.output;
  EXPECT_EQ(p.output.find("lost"), std::string::npos) << p.output;
}

TEST(PeerWatch, AFinishedJobOnSeveralHostsEndsQuietlyAndOneHostIsNotWatched) {
  Probe p = probe(3, "none", "hosta,hosta,hostb", "-");
  EXPECT_EQ(p.code, 0) << p.output;
  EXPECT_NE(p.output.find("watching: yes"), std::string::npos) << p.output;
  EXPECT_EQ(p.output.find("lost"), std::string::npos) << p.output;
  p = probe(2, "none", "hosta,hosta", "-");
  EXPECT_EQ(p.code, 0) << p.output;
  EXPECT_NE(p.output.find("watching: no"), std::string::npos) << p.output;
}

// A stranger with the job's token claims rank 2 before it: the real rank 2 says it was refused,
// and the job stops with one line naming both connections (before: refused without a word, and
// rank 2 blamed as lost 10 s later).
TEST(PeerWatch, ADuplicateRankStopsTheJobNamingBothConnections) {
  const Probe p = probe(3, "none", "hosta,hosta,hostb", "-", 5, "2:impostor");
  EXPECT_NE(p.code, 0) << p.output;
  EXPECT_NE(p.output.find("rank 0 refused this rank's connection: another connection already "
                          "claimed rank 2"),
            std::string::npos)
      << p.output;
  EXPECT_TRUE(std::regex_search(
      p.output, std::regex("error: peer watch: two connections claim rank 2 with the job's token: "
                           "[0-9.]+:[0-9]+ \\(taken first\\) and [0-9.]+:[0-9]+ \\(refused\\)")))
      << p.output;
  EXPECT_EQ(p.output.find("watching: yes"), std::string::npos) << p.output;
  EXPECT_EQ(p.output.find("lost"), std::string::npos) << p.output;
}

// A rank that never connects is a warning on rank 0 naming it; the job runs.
TEST(PeerWatch, ARankThatDoesNotConnectIsNamedInAWarning) {
  const Probe p = probe(3, "none", "hosta,hosta,hostb", "-", 5, "2:skip");
  EXPECT_EQ(p.code, 0) << p.output;
  EXPECT_NE(p.output.find("warning: peer watch: 2 of 3 ranks connected to rank 0; not watched: "
                          "rank 2 (host hostb, which could not connect)"),
            std::string::npos)
      << p.output;
}

// 200 idle connections (opened with the job's address before rank 2's hello) neither hold the
// listener nor switch the watch off: rank 2 is watched, and its loss is named.
TEST(PeerWatch, IdleConnectionsDoNotSilenceTheWatch) {
  const Probe p = probe(3, "kill", "hosta,hosta,hostb", "2", 5, "2:idle:200");
  EXPECT_NE(p.code, 0) << p.output;
  EXPECT_NE(p.output.find("watching: yes"), std::string::npos) << p.output;
  EXPECT_EQ(p.output.find("not watched"), std::string::npos) << p.output;
  EXPECT_NE(p.output.find("the job lost host hostb (rank 2)"), std::string::npos) << p.output;
  EXPECT_LT(p.seconds, 15) << p.output;
}

} // namespace
} // namespace tessel
