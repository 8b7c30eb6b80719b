// ringsyncd as a long-running service: daemons started with no job serve
// every job their trainers describe (RINGSYNC_NODES, RINGSYNC_NODE_RANK),
// one after another and at the same time, each isolated; a rank that dies
// fails its own job on every node at once and leaves the others alone.
#include <doctest/doctest.h>

#include <csignal>
#include <functional>
#include <map>
#include <thread>

#include "cluster_fixture.h"
#include "daemon_fixture.h"
#include "raw_client.h"

namespace test_integration_jobs {

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

TEST_CASE("jobs: limits refuse one job too many, too many ranks, too much memory; the others run on") {
  DaemonFixture daemon({"--max-jobs", "2", "--max-job-ranks", "2", "--max-job-buffer-bytes", "64KiB"});
  RawClient a(daemon.socket()), b(daemon.socket());
  a.hello("limit-a");
  b.hello("limit-b");
  {
    RawClient c(daemon.socket());
    c.send(ringsync::wire::Hello{ringsync::wire::kProtocolVersion, "limit-c", 0, 1, 1});
    auto reply = c.expect<ringsync::wire::HelloReply>();
    CHECK(reply.status.code() == ringsync::StatusCode::kInvalidArgument);
    CHECK_MESSAGE(reply.status.message().find("--max-jobs 2") != std::string::npos, reply.status.message());
  }
  {
    RawClient wide(daemon.socket());
    wide.send(ringsync::wire::Hello{ringsync::wire::kProtocolVersion, "limit-a", 0, 3, 1});
    auto reply = wide.expect<ringsync::wire::HelloReply>();
    CHECK(reply.status.code() == ringsync::StatusCode::kInvalidArgument);
    CHECK_MESSAGE(reply.status.message().find("--max-job-ranks") != std::string::npos, reply.status.message());
  }
  // Shared memory per job: 40 KiB fits in 64 KiB once, not twice; the other job has its own.
  a.send(ringsync::wire::AllocBuffer{1, 40 * 1024});
  CHECK(a.expect<ringsync::wire::AllocReply>().status.ok());
  a.send(ringsync::wire::AllocBuffer{2, 40 * 1024});
  auto refused = a.expect<ringsync::wire::AllocReply>();
  CHECK(refused.status.code() == ringsync::StatusCode::kOutOfMemory);
  CHECK_MESSAGE(refused.status.message().find("--max-job-buffer-bytes") != std::string::npos, refused.status.message());
  b.send(ringsync::wire::AllocBuffer{3, 40 * 1024});
  CHECK(b.expect<ringsync::wire::AllocReply>().status.ok());
  // Both jobs still serve; once one ends, a third is welcome.
  a.expect_serves(10);
  b.expect_serves(11);
  b.send(ringsync::wire::Leave{"test"});
  ::shutdown(b.fd(), SHUT_RDWR);
  bool admitted = false;
  for (int i = 0; i < 100 && !admitted; ++i) {
    RawClient c(daemon.socket());
    c.send(ringsync::wire::Hello{ringsync::wire::kProtocolVersion, "limit-c", 0, 1, 1});
    admitted = c.expect<ringsync::wire::HelloReply>().status.ok();
    if (!admitted) std::this_thread::sleep_for(20ms);
  }
  CHECK(admitted);
  a.expect_serves(12);
  CHECK(daemon.running());
}

TEST_CASE("jobs: trainers started with only torchrun, Open MPI or Slurm variables find their ranks") {
  ClusterFixture cluster(service());
  const int L = 2;
  // Each launcher's variables for global rank g = node * L + local; the
  // daemons are found through RINGSYNC_NODES. RINGSYNC_RANK and RINGSYNC_SIZE
  // are read only by the test rank, to check what the daemon told it.
  const auto launchers = std::map<std::string, std::function<std::map<std::string, std::string>(int, int)>>{
      {"torchrun",
       [&](int node, int local) {
         return std::map<std::string, std::string>{{"RANK", std::to_string(node * L + local)},
                                                   {"LOCAL_RANK", std::to_string(local)},
                                                   {"WORLD_SIZE", std::to_string(2 * L)},
                                                   {"LOCAL_WORLD_SIZE", std::to_string(L)},
                                                   {"GROUP_RANK", std::to_string(node)},
                                                   {"TORCHELASTIC_RUN_ID", "tr-1"}};
       }},
      {"openmpi",
       [&](int node, int local) {
         return std::map<std::string, std::string>{{"OMPI_COMM_WORLD_RANK", std::to_string(node * L + local)},
                                                   {"OMPI_COMM_WORLD_SIZE", std::to_string(2 * L)},
                                                   {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(local)},
                                                   {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(L)},
                                                   {"PMIX_NAMESPACE", "prterun-1@1"}};
       }},
      {"slurm",
       [&](int node, int local) {
         return std::map<std::string, std::string>{{"SLURM_PROCID", std::to_string(node * L + local)},
                                                   {"SLURM_LOCALID", std::to_string(local)},
                                                   {"SLURM_NODEID", std::to_string(node)},
                                                   {"SLURM_NTASKS", std::to_string(2 * L)},
                                                   {"SLURM_NNODES", "2"},
                                                   {"SLURM_JOB_ID", "4242"},
                                                   {"SLURM_STEP_ID", "0"}};
       }}};
  for (const auto& [name, variables] : launchers) {
    CAPTURE(name);
    RankGroup ranks(cluster, name, ClusterFixture::JobRun{"unused-" + name, L, ""});
    for (int node = 0; node < 2; ++node)
      for (int local = 0; local < L; ++local) {
        auto env = variables(node, local);
        env["RINGSYNC_NODES"] = cluster.node_list();
        env["RINGSYNC_RANK"] = std::to_string(node * L + local);
        env["RINGSYNC_SIZE"] = std::to_string(2 * L);
        env["RINGSYNC_TEST_ID"] = std::to_string(node * L + local);
        ranks.start_with_env(node, local, {"collectives", "1", "1001"}, env);
      }
    CHECK(passes(ranks, cluster));
  }
  // The job ids came from the launchers.
  const std::string log = cluster.log(0);
  CHECK_MESSAGE(log.find("joined job 'torchrun-tr-1'") != std::string::npos, log);
  CHECK_MESSAGE(log.find("joined job 'mpi-prterun-1@1'") != std::string::npos, log);
  CHECK_MESSAGE(log.find("joined job 'slurm-4242.0'") != std::string::npos, log);
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

TEST_CASE("jobs: ringsync launch --daemon runs jobs on daemons that run already, one after another and at once") {
  ClusterFixture cluster(service());
  const auto launch = [&](const std::string& job, const std::string& log, const std::vector<std::string>& scenario) {
    std::vector<std::string> argv = {bin("ringsync"), "launch", "--slots", "2", "--job-id", job};
    for (int i = 0; i < cluster.nodes(); ++i) {
      argv.push_back("--daemon");
      argv.push_back(cluster.socket(i) + "@" + cluster.control_address(i));
    }
    argv.push_back("--");
    argv.push_back(bin("ringsync-test-rank"));
    argv.insert(argv.end(), scenario.begin(), scenario.end());
    return spawn(argv, {}, cluster.dir().file(log));
  };
  Child first = launch("launched-1", "launch1.log", {"collectives", "1", "1001"});
  CHECK_MESSAGE(first.succeeded(120s), read_file(cluster.dir().file("launch1.log")));
  CHECK(read_file(cluster.dir().file("launch1.log")).find("on running daemons") != std::string::npos);
  Child a = launch("launched-a", "launch-a.log", {"verify-loop", "f32", "65537", "20"});
  Child b = launch("launched-b", "launch-b.log", {"verify-loop", "bf16", "4097", "20"});
  CHECK_MESSAGE(a.succeeded(120s), read_file(cluster.dir().file("launch-a.log")));
  CHECK_MESSAGE(b.succeeded(120s), read_file(cluster.dir().file("launch-b.log")));
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

}  // namespace test_integration_jobs
