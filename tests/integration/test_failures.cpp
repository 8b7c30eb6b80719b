// What ranks see when other ranks misbehave: mismatches, a rank killed
// mid-collective, a rank that never submits (timeout, stall report).
#include <doctest/doctest.h>

#include <csignal>
#include <filesystem>
#include <thread>
#include <vector>

#include "daemon_fixture.h"
#include "raw_client.h"

namespace test_integration_failures {

using namespace ringsync::test;
using namespace std::chrono_literals;
namespace wire = ringsync::wire;

namespace {

bool wait_for_file(const std::string& path, std::chrono::seconds timeout = 30s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

struct Ranks {
  DaemonFixture& daemon;
  std::string job;
  std::vector<Child> children;

  void start(int rank, int size, const std::vector<std::string>& scenario) {
    std::vector<std::string> argv = {bin("ringsync-test-rank")};
    argv.insert(argv.end(), scenario.begin(), scenario.end());
    auto env = daemon.rank_env(rank, size, job);
    env["RINGSYNC_TEST_MARK_DIR"] = daemon.dir().path();
    children.push_back(spawn(argv, env, log(rank)));
  }
  std::string log(int rank) const { return daemon.dir().file(job + ".rank" + std::to_string(rank) + ".log"); }
  std::string mark(const std::string& what, int rank) const {
    return daemon.dir().file(what + "." + std::to_string(rank));
  }
};

}  // namespace

TEST_CASE("ranks that disagree all get a mismatch error naming tensor and field") {
  DaemonFixture daemon;
  for (int size : {2, 3}) {
    Ranks ranks{daemon, "mismatch" + std::to_string(size), {}};
    for (int r = 0; r < size; ++r) ranks.start(r, size, {"mismatch"});
    for (int r = 0; r < size; ++r) {
      CHECK_MESSAGE(ranks.children[r].succeeded(60s), read_file(ranks.log(r)));
    }
  }
  CHECK(daemon.log().find("disagree on tensor 'mixed'") != std::string::npos);
  CHECK(daemon.stop());
}

TEST_CASE("a rank killed mid-collective: the others get peer lost, the daemon serves on") {
  DaemonFixture daemon;
  Ranks ranks{daemon, "killed", {}};
  ranks.start(0, 3, {"expect-error", "peer lost", "local rank 2"});
  ranks.start(1, 3, {"expect-error", "peer lost", "disconnected while tensor 'doomed'"});
  ranks.start(2, 3, {"hang"});
  REQUIRE(wait_for_file(ranks.mark("submitted", 0)));
  REQUIRE(wait_for_file(ranks.mark("submitted", 1)));
  REQUIRE(wait_for_file(ranks.mark("connected", 2)));
  ranks.children[2].signal(SIGKILL);
  CHECK_MESSAGE(ranks.children[0].succeeded(30s), read_file(ranks.log(0)));
  CHECK_MESSAGE(ranks.children[1].succeeded(30s), read_file(ranks.log(1)));

  // The same job id forms again once every old rank is gone, and works.
  Ranks again{daemon, "killed", {}};
  for (int r = 0; r < 2; ++r) again.start(r, 2, {"collectives", "3"});
  for (int r = 0; r < 2; ++r) CHECK_MESSAGE(again.children[r].succeeded(60s), read_file(again.log(r)));
  CHECK(daemon.stop());
}

TEST_CASE("a rank that never submits: stall report, then a timeout naming it") {
  DaemonFixture daemon({"--collective-timeout", "3s", "--stall-warning", "500ms"});
  Ranks ranks{daemon, "slow", {}};
  ranks.start(0, 2, {"expect-error", "timeout", "local rank(s) 1 never submitted"});
  ranks.start(1, 2, {"hang"});
  REQUIRE(wait_for_file(ranks.mark("submitted", 0)));

  // The stall inspector reports before the timeout fires.
  bool stalled = false;
  for (int i = 0; i < 400 && !stalled; ++i) {
    stalled = http_get(daemon.metrics_host_port(), "/metrics").find("ringsync_stalled_tensors 1") !=
              std::string::npos;
    if (!stalled) std::this_thread::sleep_for(10ms);
  }
  CHECK(stalled);
  CHECK_MESSAGE(ranks.children[0].succeeded(30s), read_file(ranks.log(0)));
  const std::string log = daemon.log();
  CHECK(log.find("tensor 'doomed' of job 'slow' is waiting for local rank(s) 1") != std::string::npos);
  CHECK(http_get(daemon.metrics_host_port(), "/metrics").find("ringsync_errors_total{kind=\"timeout\"} 1") !=
        std::string::npos);
  ranks.children[1].signal(SIGKILL);
  CHECK(daemon.stop());
}

TEST_CASE("SIGTERM answers pending collectives with a clear error, then exits cleanly") {
  DaemonFixture daemon;
  Ranks ranks{daemon, "shutdown", {}};
  ranks.start(0, 2, {"expect-error", "closed", "ringsyncd is shutting down"});
  ranks.start(1, 2, {"hang"});
  REQUIRE(wait_for_file(ranks.mark("submitted", 0)));
  REQUIRE(wait_for_file(ranks.mark("connected", 1)));
  CHECK(daemon.stop());
  CHECK_MESSAGE(ranks.children[0].succeeded(30s), read_file(ranks.log(0)));
  CHECK_FALSE(std::filesystem::exists(daemon.socket()));
  ranks.children[1].signal(SIGKILL);
}

namespace {

// Two raw ranks of one job on a daemon that checks liveness every second.
struct TwoRanks {
  explicit TwoRanks(const std::string& job) {
    REQUIRE(a.connected());
    REQUIRE(b.connected());
    a.hello(job, 0, 2);
    b.hello(job, 1, 2);
  }
  static wire::Collective barrier(std::uint64_t id) {
    wire::Collective c;
    c.request_id = id;
    c.kind = wire::CollectiveKind::kBarrier;
    c.name = "b";
    return c;
  }
  DaemonFixture daemon{{"--rank-liveness-timeout", "1s"}};
  RawClient a{daemon.socket()};
  RawClient b{daemon.socket()};
};

}  // namespace

TEST_CASE("a rank that waits but stops sending heartbeats fails its job after --rank-liveness-timeout") {
  TwoRanks job("beats");
  RawClient& waiting = job.a;
  RawClient& other = job.b;
  waiting.send(TwoRanks::barrier(7));
  // Says it waits for request 7, then goes silent: a hung process (its
  // threads no longer run), though not one the kernel shows as stopped.
  waiting.send(wire::Heartbeat{7});
  const auto begun = std::chrono::steady_clock::now();
  auto done = waiting.expect<wire::Completion>();  // the daemon answers it with the verdict
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count();
  CHECK(done.request_id == 7);
  CHECK(done.status.code() == ringsync::StatusCode::kPeerLost);
  CHECK_MESSAGE(done.status.message().find("stopped answering") != std::string::npos, done.status.message());
  CHECK(took >= 0.9);
  CHECK(took < 8.0);
  // The job is failed for its other rank too, naming the silent one.
  other.send(TwoRanks::barrier(8));
  auto refused = other.expect<wire::Completion>();
  CHECK(refused.status.code() == ringsync::StatusCode::kPeerLost);
  CHECK_MESSAGE(refused.status.message().find("local rank 0") != std::string::npos, refused.status.message());
  CHECK(job.daemon.running());
}

TEST_CASE("a rank that said it stopped waiting (Heartbeat 0) may then be silent without failing its job") {
  // Heartbeat{0}: rs_wait_timeout ran out and it went on with other work.
  TwoRanks job("quiet");
  job.a.send(TwoRanks::barrier(3));
  job.a.send(wire::Heartbeat{3});
  job.a.send(wire::Heartbeat{0});
  std::this_thread::sleep_for(2500ms);
  job.b.send(TwoRanks::barrier(4));
  CHECK(job.b.expect<wire::Completion>().status.ok());
  CHECK(job.a.expect<wire::Completion>().status.ok());
}

}  // namespace test_integration_failures
