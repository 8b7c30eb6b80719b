// Three "hosts" as network namespaces on one bridge (netns.h), one ringsyncd and
// two trainer ranks in each, talking over 198.18.0.0/24 as separate machines
// would: a correct allreduce across all six ranks, then a daemon killed (or
// frozen, or its host's link cut) mid-loop and the other hosts' ranks told
// which node was lost.
// Needs root: without it these cases fail and say so (CI runs them as root).
// The daemons' sockets are files in a temp dir, visible from every namespace.
#include <doctest/doctest.h>

#include <csignal>
#include <vector>

#include "cluster_fixture.h"
#include "netns.h"

namespace test_integration_multihost {

using namespace ringsync::test;
using namespace std::chrono_literals;

namespace {

constexpr int kHosts = 3;
constexpr std::uint16_t kControlPort = 29517;  // every host has its own port space

ClusterOptions on_hosts(const NetnsHosts& hosts) {
  ClusterOptions o;
  o.nodes = hosts.size();
  o.local_size = 2;
  o.job_id = "multihost";
  for (int i = 0; i < hosts.size(); ++i)
    o.places.push_back({hosts.address(i), kControlPort, hosts.launcher(i)});
  return o;
}

// Hosts for one test case, or a failed REQUIRE saying why there are none.
#define REQUIRE_NETNS()                                                  \
  do {                                                                   \
    const std::string why = NetnsHosts::unavailable_reason();            \
    REQUIRE_MESSAGE(why.empty(), why);                                   \
  } while (0)

void check_all_stop(ClusterFixture& cluster) {
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

}  // namespace

TEST_CASE("multihost: netns hosts reach each other over TCP and are removed afterwards") {
  REQUIRE_NETNS();
  std::vector<std::string> names;
  {
    NetnsHosts hosts(kHosts);
    for (int i = 0; i < kHosts; ++i) names.push_back(hosts.name(i));
    for (int from = 0; from < kHosts; ++from)
      for (int to = 0; to < kHosts; ++to)
        if (from != to) {
          const std::string error = hosts.tcp_check(from, to);
          CHECK_MESSAGE(error.empty(), error);
        }
    auto [code, output] = hosts.run(1, NetnsHosts::ip_path() + " -4 addr show dev eth0");
    CHECK_MESSAGE(code == 0, output);
    CHECK_MESSAGE(output.find("198.18.0.2/24") != std::string::npos, output);
  }
  for (const auto& name : names) CHECK_MESSAGE(!NetnsHosts::exists(name), name);
}

TEST_CASE("multihost: 3 hosts x 2 ranks: allreduce then a daemon killed mid-loop") {
  REQUIRE_NETNS();
  NetnsHosts hosts(kHosts);
  ClusterFixture cluster(on_hosts(hosts));
  {
    RankGroup ranks(cluster, "allreduce");
    ranks.start_all({"collectives", "1", "1001"});
    CHECK_MESSAGE(all_equal(ranks.wait(120s), 0), ranks.report(), cluster.logs());
  }
  // The data crossed the hosts' links: UCX's only lane to every peer is tcp over
  // eth0, as each daemon logs it (their /metrics are on the hosts' own loopback).
  for (int node = 0; node < kHosts; ++node)
    for (int peer = 0; peer < kHosts; ++peer)
      if (peer != node) {
        const std::string said = "node " + std::to_string(peer) + " (" + cluster.control_address(peer) +
                                 ") over tcp/eth0";
        const std::string log = cluster.log(node);
        const bool logged = log.find(said + ";") != std::string::npos || log.find(said + "\n") != std::string::npos;
        CHECK_MESSAGE(logged, "node ", node, " should log '", said, "':\n", cluster.logs());
      }
  const int victim = 1;
  {
    RankGroup ranks(cluster, "killed");
    const NodeLossRun out = hurt_node_mid_loop(cluster, ranks, victim, SIGKILL);
    REQUIRE_MESSAGE(out.looping, "not every rank got through a first allreduce:\n",
                    ranks.report(), cluster.logs());
    MESSAGE("the ranks on the other hosts had their error ", out.survivors_seconds, " s after the fault");
    CHECK_MESSAGE(all_equal(out.survivors, rank_exit::kPeerLost),
                  "every rank on hosts 0 and 2 should get peer lost naming node 1 (exit ",
                  rank_exit::kPeerLost, "):\n", ranks.report(), cluster.logs());
    for (int code : out.victims) CHECK_MESSAGE(code >= 0, ranks.report());
    // Every survivor reads the same verdict: a death, not a network timeout.
    const std::string problems = ranks.same_error(
        ranks.not_on_node(victim),
        {"node 1 (" + hosts.address(1) + ":29517) of job 'multihost' was lost: its connection closed"});
    CHECK_MESSAGE(problems.empty(), problems, ranks.report());
    CHECK(ranks.error_of(0).find("UCX") == std::string::npos);
  }
  CHECK_MESSAGE(cluster.running(0), cluster.logs());
  CHECK_MESSAGE(cluster.running(2), cluster.logs());
  check_all_stop(cluster);
}

TEST_CASE("multihost: 3 hosts x 2 ranks: a host's link cut mid-loop") {
  REQUIRE_NETNS();
  NetnsHosts hosts(kHosts);
  ClusterFixture cluster(on_hosts(hosts));
  const int victim = 1;
  {
    RankGroup ranks(cluster, "cut");
    const auto set_link = [&](const char* state) {
      const auto [code, output] = hosts.run(victim, std::string("ip link set eth0 ") + state);
      CHECK_MESSAGE(code == 0, output);
    };
    // The victim's ranks lose their ring too (their daemon loses everyone) and
    // stop; the link comes back once they have. (Not before: the victim's own
    // watchdog may fire a heartbeat interval after the survivors', and it
    // tells a cut-off node from a lost peer by its interface being down.)
    const NodeLossRun out = hurt_node_mid_loop(cluster, ranks, victim, [&] { set_link("down"); }, {});
    set_link("up");
    REQUIRE_MESSAGE(out.looping, "not every rank got through a first allreduce:\n",
                    ranks.report(), cluster.logs());
    MESSAGE("the ranks on the other hosts had their error ", out.survivors_seconds, " s after the fault");
    CHECK_MESSAGE(all_equal(out.survivors, rank_exit::kPeerLost),
                  "every rank on hosts 0 and 2 should get peer lost naming node 1 (exit ",
                  rank_exit::kPeerLost, "):\n", ranks.report(), cluster.logs());
    for (int code : out.victims) CHECK_MESSAGE(code >= 0, ranks.report());
    // The survivors blame node 1's silence; node 1 blames itself.
    std::string problems = ranks.same_error(
        ranks.not_on_node(victim), {"node 1 (" + hosts.address(1) + ":29517) of job 'multihost' was lost: it sent nothing"});
    CHECK_MESSAGE(problems.empty(), problems, ranks.report());
    problems = ranks.same_error(ranks.on_node(victim), {"this node (node 1 at " + hosts.address(1) + ":29517)"});
    CHECK_MESSAGE(problems.empty(), problems, ranks.report(), cluster.logs());
  }
  for (int i = 0; i < kHosts; ++i) CHECK_MESSAGE(cluster.running(i), cluster.logs());
  check_all_stop(cluster);
}

TEST_CASE("multihost: 3 hosts x 2 ranks: a daemon stopped mid-loop") {
  REQUIRE_NETNS();
  NetnsHosts hosts(kHosts);
  ClusterFixture cluster(on_hosts(hosts));
  const int victim = 2;
  {
    RankGroup ranks(cluster, "stopped");
    const NodeLossRun out = hurt_node_mid_loop(cluster, ranks, victim, SIGSTOP,
                                               [&] { cluster.signal(victim, SIGCONT); });
    REQUIRE_MESSAGE(out.looping, "not every rank got through a first allreduce:\n",
                    ranks.report(), cluster.logs());
    MESSAGE("the ranks on the other hosts had their error ", out.survivors_seconds, " s after the fault");
    CHECK_MESSAGE(all_equal(out.survivors, rank_exit::kPeerLost),
                  "every rank on hosts 0 and 1 should get peer lost naming node 2 (exit ",
                  rank_exit::kPeerLost, "):\n", ranks.report(), cluster.logs());
    for (int code : out.victims) CHECK_MESSAGE(code >= 0, ranks.report());
    // The survivors blame node 2's silence; node 2, once it runs again, itself.
    std::string problems = ranks.same_error(
        ranks.not_on_node(victim), {"node 2 (" + hosts.address(2) + ":29517) of job 'multihost' was lost: it sent nothing"});
    CHECK_MESSAGE(problems.empty(), problems, ranks.report());
    problems = ranks.same_error(ranks.on_node(victim), {"this node (node 2 at " + hosts.address(2) + ":29517)"});
    CHECK_MESSAGE(problems.empty(), problems, ranks.report(), cluster.logs());
  }
  CHECK_MESSAGE(cluster.running(0), cluster.logs());
  CHECK_MESSAGE(cluster.running(1), cluster.logs());
  check_all_stop(cluster);
}

TEST_CASE("multihost: 3 hosts x 2 ranks: a trainer killed mid 64 MiB allreduce fails the job on every host") {
  REQUIRE_NETNS();
  NetnsHosts hosts(kHosts);
  ClusterFixture cluster(on_hosts(hosts));
  RankGroup ranks(cluster, "trainer-killed");
  // 16M floats: 64 MiB per allreduce; every rank loops until an error naming rank 3.
  ranks.start_all({"loop", "90", "rank 3 of job 'multihost'", "16777216"});
  REQUIRE_MESSAGE(ranks.wait_marks("looping", 90s), ranks.report(), cluster.logs());
  const int victim = 3;  // host 1, local rank 1; its node-mate and both other hosts must notice
  const auto killed = std::chrono::steady_clock::now();
  ranks.signal(victim, SIGKILL);
  const auto others = ranks.wait(60s, {0, 1, 2, 4, 5});
  const double detected = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  MESSAGE("every other rank, on all 3 hosts, got its error ", detected, " s after the kill");
  CHECK_MESSAGE(all_equal(others, rank_exit::kPeerLost),
                "every other rank should get peer lost naming rank 3 (exit ", rank_exit::kPeerLost, "):\n",
                ranks.report(), cluster.logs());
  // A bound that catches only the old wait for --collective-timeout (30 s here).
  CHECK(detected < 10.0);
  for (int i = 0; i < kHosts; ++i) CHECK_MESSAGE(cluster.running(i), cluster.logs());
  // The job runs again on the same daemons.
  {
    RankGroup again(cluster, "again");
    again.start_all({"collectives", "1", "1001"});
    CHECK_MESSAGE(all_equal(again.wait(120s), 0), again.report(), cluster.logs());
  }
  check_all_stop(cluster);
}

}  // namespace test_integration_multihost
