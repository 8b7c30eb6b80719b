// Rendezvous through a real etcd: daemons on three network-namespace hosts,
// started with --rendezvous and no job, whose trainers give only the job's
// size (RINGSYNC_NUM_NODES): the daemons register in etcd, take node ranks
// in arrival order and find each other. Then what goes wrong: a daemon
// killed and restarted (a new epoch), etcd dying while a ring forms (a clear
// error within the join timeout, other jobs unharmed), another job's token.
// Needs root (netns hosts) and etcd-server; CI has both.
#include <doctest/doctest.h>

#include <csignal>
#include <set>
#include <thread>

#include "cluster_fixture.h"
#include "etcd_server.h"
#include "netns.h"

namespace test_integration_etcd {

using namespace ringsync::test;
using namespace std::chrono_literals;

namespace {

constexpr int kHosts = 3;
constexpr std::uint16_t kControlPort = 29517;

#define REQUIRE_ETCD_HOSTS()                                          \
  do {                                                                \
    const std::string why = NetnsHosts::unavailable_reason();         \
    REQUIRE_MESSAGE(why.empty(), why);                                \
    const std::string no_etcd = EtcdServer::unavailable_reason();     \
    REQUIRE_MESSAGE(no_etcd.empty(), no_etcd);                        \
  } while (0)

// etcd on host 0, daemons on every host knowing only where etcd is.
struct EtcdCluster {
  NetnsHosts hosts{kHosts};
  EtcdServer etcd{hosts.address(0), 2379, 2380, hosts.launcher(0)};
  ClusterFixture cluster;

  explicit EtcdCluster(std::vector<std::string> flags = {}) : cluster(options(hosts, etcd, std::move(flags))) {}

  static ClusterOptions options(const NetnsHosts& hosts, const EtcdServer& etcd, std::vector<std::string> flags) {
    ClusterOptions o;
    o.nodes = hosts.size();
    o.service = true;
    o.job_id = "unused";
    for (int i = 0; i < hosts.size(); ++i) o.places.push_back({hosts.address(i), kControlPort, hosts.launcher(i)});
    o.extra_flags = {"--rendezvous", etcd.url(), "--rendezvous-lease", "2s"};
    o.extra_flags.insert(o.extra_flags.end(), flags.begin(), flags.end());
    return o;
  }

  ClusterFixture::JobRun job(const std::string& id, int local_size = 2, const std::string& token = "") const {
    ClusterFixture::JobRun run{id, local_size, token.empty() ? "token-of-" + id : token};
    run.rendezvous = true;
    return run;
  }

  // The job's epoch counter in etcd (node 0 numbers each ring from it); 0: none.
  double epoch(const std::string& job_id) {
    const std::string value = etcd.get("/ringsync/jobs/" + job_id + "/epoch");
    return value.empty() ? 0 : std::stod(value);
  }
};

bool passes(RankGroup& ranks, ClusterFixture& cluster, std::chrono::seconds timeout = 120s) {
  if (all_equal(ranks.wait(timeout), 0)) return true;
  MESSAGE("job '", ranks.job().job_id, "' failed:\n", ranks.report(), cluster.logs());
  return false;
}

}  // namespace

TEST_CASE("etcd rendezvous: 3 daemons on netns hosts find each other with no node list") {
  REQUIRE_ETCD_HOSTS();
  EtcdCluster e;
  RankGroup ranks(e.cluster, "found", e.job("found"));
  ranks.start_all({"collectives", "1", "1001", "262147"});
  REQUIRE(passes(ranks, e.cluster));
  // Every daemon registered, under its own rank.
  std::set<std::string> taken;
  for (int i = 0; i < kHosts; ++i) {
    const std::string log = e.cluster.log(i);
    const auto at = log.find("registered in " + e.etcd.url() + " as node ");
    REQUIRE_MESSAGE(at != std::string::npos, log);
    taken.insert(log.substr(at + ("registered in " + e.etcd.url() + " as node ").size(), 1));
  }
  CHECK(taken == std::set<std::string>{"0", "1", "2"});
  CHECK(e.epoch("found") >= 1);
  // Once the job is over its registrations are gone (the leases revoked).
  bool released = false;
  for (int i = 0; i < 100 && !released; ++i) {
    released = e.etcd.get("/ringsync/jobs/found/nodes/00000").empty();
    if (!released) std::this_thread::sleep_for(100ms);
  }
  CHECK(released);
  const std::string problems = e.cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, e.cluster.logs());
}

TEST_CASE("etcd rendezvous: a daemon killed and restarted rejoins, with a new epoch") {
  REQUIRE_ETCD_HOSTS();
  EtcdCluster e;
  const int victim = 2;
  {
    RankGroup ranks(e.cluster, "before", e.job("elastic"));
    ranks.start_all({"loop", "90", "was lost", "65536"});
    REQUIRE_MESSAGE(ranks.wait_marks("looping", 60s), ranks.report(), e.cluster.logs());
    e.cluster.signal(victim, SIGKILL);
    const auto survivors = ranks.wait(60s, ranks.not_on_node(victim));
    CHECK_MESSAGE(all_equal(survivors, rank_exit::kPeerLost), ranks.report(), e.cluster.logs());
    ranks.wait(30s, ranks.on_node(victim));
  }
  const double before = e.epoch("elastic");
  REQUIRE(before >= 1);
  e.cluster.restart(victim);
  RankGroup again(e.cluster, "after", e.job("elastic"));
  again.start_all({"collectives", "1", "1001"});
  CHECK(passes(again, e.cluster));
  const double after = e.epoch("elastic");
  CHECK_MESSAGE(after > before, "epoch before ", before, ", after ", after);
  const std::string problems = e.cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, e.cluster.logs());
}

TEST_CASE("etcd rendezvous: etcd dying while a ring forms is a clear error within the join timeout") {
  REQUIRE_ETCD_HOSTS();
  EtcdCluster e({"--join-timeout", "4s"});
  // Nodes 0 and 1 register; node 2's trainers never come, so the ring waits.
  RankGroup ranks(e.cluster, "partial", e.job("partial", 1));
  ranks.start(0, 0, {"expect-error", "peer lost", e.etcd.url()});
  ranks.start(1, 0, {"expect-error", "peer lost", e.etcd.url()});
  REQUIRE_MESSAGE(ranks.wait_marks("submitted", 60s), ranks.report(), e.cluster.logs());
  const auto killed = std::chrono::steady_clock::now();
  e.etcd.kill();
  const auto codes = ranks.wait(60s);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  MESSAGE("the waiting allreduces failed ", took, " s after etcd died (--join-timeout 4s)");
  CHECK_MESSAGE(all_equal(codes, 0), ranks.report(), e.cluster.logs());
  CHECK(took < 20.0);
  // A new job that needs etcd is refused with the reason, in bounded time.
  {
    RankGroup late(e.cluster, "late", e.job("late", 1));
    late.start(0, 0, {"collectives", "1"});
    CHECK(late.wait(60s) == std::vector<int>{rank_exit::kConnectFailed});
    CHECK_MESSAGE(late.report().find(e.etcd.url()) != std::string::npos, late.report());
  }
  // The daemons serve on: a job of one node, and one with a node list.
  {
    ClusterFixture::JobRun alone{"alone", 2, "t"};
    alone.one_node = true;
    RankGroup one(e.cluster, "alone", alone);
    one.start(0, 0, {"collectives", "1", "1001"});
    one.start(0, 1, {"collectives", "1", "1001"});
    CHECK(passes(one, e.cluster));
  }
  {
    RankGroup listed(e.cluster, "listed", ClusterFixture::JobRun{"listed", 1, "t"});
    listed.start_all({"collectives", "1", "1001"});
    CHECK(passes(listed, e.cluster));
  }
  for (int i = 0; i < kHosts; ++i) CHECK_MESSAGE(e.cluster.running(i), e.cluster.logs());
  const std::string problems = e.cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, e.cluster.logs());
}

TEST_CASE("etcd rendezvous: a node whose token differs from the job's in the store is refused") {
  REQUIRE_ETCD_HOSTS();
  EtcdCluster e;
  RankGroup ranks(e.cluster, "guarded", e.job("guarded", 1, "the-right-token"));
  ranks.start(0, 0, {"submit-wait", "x", "30"});
  REQUIRE_MESSAGE(ranks.wait_marks("submitted", 60s), ranks.report(), e.cluster.logs());
  RankGroup intruder(e.cluster, "intruder", e.job("guarded", 1, "a-wrong-token"));
  intruder.start(1, 0, {"collectives", "1"});
  CHECK(intruder.wait(60s) == std::vector<int>{rank_exit::kConnectFailed});
  CHECK_MESSAGE(intruder.report().find("holds job 'guarded' with another token") != std::string::npos,
                intruder.report());
  // The token itself is nowhere in the store.
  CHECK(e.etcd.get("/ringsync/jobs/guarded/meta").find("the-right-token") == std::string::npos);
  CHECK(e.etcd.get("/ringsync/jobs/guarded/meta").find("proof") != std::string::npos);
  ranks.signal(0, SIGKILL);
  const std::string problems = e.cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, e.cluster.logs());
}

TEST_CASE("etcd rendezvous: an etcd that takes connections but never answers is a bounded error") {
  REQUIRE_ETCD_HOSTS();
  EtcdCluster e({"--rendezvous-timeout", "1s"});
  e.etcd.pause();
  RankGroup ranks(e.cluster, "stuck", e.job("stuck", 1));
  const auto begun = std::chrono::steady_clock::now();
  ranks.start(0, 0, {"collectives", "1"});
  CHECK(ranks.wait(60s) == std::vector<int>{rank_exit::kConnectFailed});
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count();
  MESSAGE("the hello was refused ", took, " s after it was sent (--rendezvous-timeout 1s)");
  CHECK_MESSAGE(ranks.report().find("did not answer within 1.0 s") != std::string::npos, ranks.report());
  CHECK(took < 20.0);
  e.etcd.resume();
  // Once etcd answers again, the same job forms.
  RankGroup again(e.cluster, "unstuck", e.job("stuck", 1));
  again.start_all({"collectives", "1", "1001"});
  CHECK(passes(again, e.cluster));
  const std::string problems = e.cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, e.cluster.logs());
}

}  // namespace test_integration_etcd
