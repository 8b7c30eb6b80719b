// ringsyncd as a long-running service: daemons started with no job serve
// every job their trainers describe (RINGSYNC_NODES, RINGSYNC_NODE_RANK),
// one after another and at the same time, each isolated; a rank that dies
// fails its own job on every node at once and leaves the others alone.
#include <doctest/doctest.h>

#include <csignal>
#include <thread>

#include "cluster_fixture.h"

using namespace ringsync::test;
using namespace std::chrono_literals;

namespace {

ClusterOptions service(int nodes = 2) {
  ClusterOptions o;
  o.nodes = nodes;
  o.service = true;
  o.job_id = "unused";
  return o;
}

ClusterFixture::JobRun job(ClusterFixture& cluster, const std::string& id, int local_size) {
  ClusterFixture::JobRun run{id, local_size, "token-of-" + id};
  (void)cluster;
  return run;
}

bool passes(RankGroup& ranks, ClusterFixture& cluster, std::chrono::seconds timeout = 120s) {
  if (all_equal(ranks.wait(timeout), 0)) return true;
  MESSAGE("job '", ranks.job().job_id, "' failed:\n", ranks.report(), cluster.logs());
  return false;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

TEST_CASE("jobs: daemons with no job serve two jobs one after another, then at the same time") {
  ClusterFixture cluster(service());
  {
    RankGroup a(cluster, "a-alone", job(cluster, "job-a", 2));
    a.start_all({"collectives", "0", "1", "1001", "786433"});
    CHECK(passes(a, cluster));
  }
  {
    RankGroup b(cluster, "b-alone", job(cluster, "job-b", 1));
    b.start_all({"verify-loop", "bf16", "4097", "20"});
    CHECK(passes(b, cluster));
  }
  {
    // Both at once, with different slot counts and dtypes, each verified.
    RankGroup a(cluster, "a-together", job(cluster, "job-a", 2));
    RankGroup b(cluster, "b-together", job(cluster, "job-b", 1));
    a.start_all({"verify-loop", "f32", "262147", "30"});
    b.start_all({"verify-loop", "bf16", "65537", "30"});
    CHECK(passes(a, cluster));
    CHECK(passes(b, cluster));
  }
  // The id can be used again once a job is over.
  {
    RankGroup again(cluster, "a-again", job(cluster, "job-a", 2));
    again.start_all({"verify-loop", "i32", "1001", "5"});
    CHECK(passes(again, cluster));
  }
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

TEST_CASE("jobs: a rank killed mid-collective fails its job on every node at once; the other job completes") {
  ClusterFixture cluster(service());
  RankGroup a(cluster, "a", job(cluster, "job-a", 2));
  RankGroup b(cluster, "b", job(cluster, "job-b", 1));
  // Job a loops on 4 MiB allreduces until an error naming its dead rank;
  // job b runs a fixed number of checked ones meanwhile.
  a.start_all({"loop", "90", "rank 3 of job 'job-a'", "1048576"});
  b.start_all({"verify-loop", "bf16", "262144", "150"});
  REQUIRE_MESSAGE(a.wait_marks("looping", 60s), a.report(), cluster.logs());
  REQUIRE_MESSAGE(b.wait_marks("looping", 60s), b.report(), cluster.logs());
  // Rank 3 = node 1, local rank 1: the others are on both nodes.
  const int victim = 3;
  const auto killed = std::chrono::steady_clock::now();
  a.signal(victim, SIGKILL);
  const auto survivors = a.wait(60s, {0, 1, 2});
  const double detected = seconds_since(killed);
  MESSAGE("every other rank of job-a got its error ", detected, " s after the kill");
  CHECK_MESSAGE(all_equal(survivors, rank_exit::kPeerLost),
                "every surviving rank of job-a should get peer lost naming rank 3 (exit ", rank_exit::kPeerLost,
                "):\n", a.report(), cluster.logs());
  // A generous bound that only catches the old wait for --collective-timeout (30 s here).
  CHECK(detected < 10.0);
  CHECK(passes(b, cluster));
  // The message names the rank's node and pid.
  const std::string report = a.report();
  CHECK_MESSAGE(report.find("pid " + std::to_string(a.pid(victim))) != std::string::npos, report);
  CHECK_MESSAGE(report.find("node 1 at " + cluster.control_address(1)) != std::string::npos, report);
  // The daemons serve on, and job-a can run again.
  {
    RankGroup again(cluster, "a-again", job(cluster, "job-a", 2));
    again.start_all({"verify-loop", "f32", "1001", "5"});
    CHECK(passes(again, cluster));
  }
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

TEST_CASE("jobs: a rank whose process is stopped fails its job after --rank-liveness-timeout") {
  ClusterOptions o = service();
  o.extra_flags = {"--rank-liveness-timeout", "2s"};
  ClusterFixture cluster(o);
  RankGroup a(cluster, "a", job(cluster, "job-a", 2));
  a.start_all({"loop", "90", "rank 2 of job 'job-a'", "65536"});
  REQUIRE_MESSAGE(a.wait_marks("looping", 60s), a.report(), cluster.logs());
  const int victim = 2;  // node 1, local rank 0
  const auto stopped = std::chrono::steady_clock::now();
  a.signal(victim, SIGSTOP);
  const auto survivors = a.wait(60s, {0, 1, 3});
  const double detected = seconds_since(stopped);
  MESSAGE("the other ranks of job-a got their error ", detected, " s after SIGSTOP (timeout 2 s)");
  CHECK_MESSAGE(all_equal(survivors, rank_exit::kPeerLost), a.report(), cluster.logs());
  CHECK_MESSAGE(a.report().find("is stopped") != std::string::npos, a.report());
  CHECK(detected >= 1.5);
  CHECK(detected < 20.0);
  a.signal(victim, SIGCONT);
  a.signal(victim, SIGKILL);
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

TEST_CASE("jobs: ranks that wait long for a late rank keep their job (heartbeats), and so does the late one") {
  ClusterOptions o = service();
  o.extra_flags = {"--rank-liveness-timeout", "1s"};
  ClusterFixture cluster(o);
  RankGroup a(cluster, "late", job(cluster, "job-late", 2));
  // Rank 0 computes for 3 s before each of its two allreduces; the others wait.
  a.start_all({"late", "3000", "2"});
  CHECK(passes(a, cluster));
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

TEST_CASE("jobs: every job's series carry its job_id, and go a while after the job ended") {
  ClusterOptions o = service();
  o.extra_flags = {"--job-metrics-linger", "1s"};
  ClusterFixture cluster(o);
  RankGroup a(cluster, "a", job(cluster, "job-a", 1));
  a.start_all({"verify-loop", "f32", "1001", "3"});
  REQUIRE(passes(a, cluster));
  const std::string series = "ringsync_collectives_total{job_id=\"job-a\",op=\"allreduce\",status=\"ok\"}";
  const std::string before = cluster.metrics(1);
  CHECK_MESSAGE(metric_value(before, series).value_or(0) >= 3, before);
  CHECK_MESSAGE(before.find("ringsync_ring_epoch{job_id=\"job-a\"}") != std::string::npos, before);
  // The job is over: after the linger its series are gone from every node.
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    std::this_thread::sleep_for(100ms);
    gone = cluster.metrics(0).find("job_id=\"job-a\"") == std::string::npos &&
           cluster.metrics(1).find("job_id=\"job-a\"") == std::string::npos;
  }
  CHECK_MESSAGE(gone, cluster.metrics(0));
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}
