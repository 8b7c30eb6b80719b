// Real ringsyncd, real trainer processes: every collective with 1..7 local ranks.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "daemon_fixture.h"

namespace test_integration_collectives {

using namespace ringsync::test;
using namespace std::chrono_literals;

namespace {

// Starts `ranks` copies of ringsync-test-rank with the scenario; true when all pass.
bool run_ranks(DaemonFixture& daemon, int ranks, const std::vector<std::string>& scenario,
               std::chrono::seconds timeout = 120s, const std::string& job = "test",
               const std::map<std::string, std::string>& extra_env = {}) {
  std::vector<Child> children;
  for (int r = 0; r < ranks; ++r) {
    std::vector<std::string> argv = {bin("ringsync-test-rank")};
    argv.insert(argv.end(), scenario.begin(), scenario.end());
    auto env = daemon.rank_env(r, ranks, job);
    env.insert(extra_env.begin(), extra_env.end());
    children.push_back(spawn(argv, env,
                                    daemon.dir().file("rank" + std::to_string(r) + ".log")));
  }
  bool ok = true;
  for (int r = 0; r < ranks; ++r) {
    if (!children[r].succeeded(timeout)) {
      ok = false;
      MESSAGE("rank ", r, " failed:\n", read_file(daemon.dir().file("rank" + std::to_string(r) + ".log")));
    }
  }
  return ok;
}

}  // namespace

TEST_CASE("every collective, dtype and op with 1, 2, 3, 4 and 7 local ranks") {
  DaemonFixture daemon;
  for (int ranks : {1, 2, 3, 4, 7}) {
    CAPTURE(ranks);
    CHECK(run_ranks(daemon, ranks, {"collectives", "0", "1", "2", "1001"}, 120s,
                    "job" + std::to_string(ranks)));
  }
  CHECK(daemon.running());
  CHECK(daemon.stop());
}

TEST_CASE("over the socket alone: a client that asks for no channel, and a daemon that offers none") {
  DaemonFixture daemon;
  CHECK(run_ranks(daemon, 3, {"collectives", "0", "1", "2", "1001"}, 120s, "plain",
                  {{"RINGSYNC_CHANNEL", "socket"}}));
  DaemonFixture socket_only({"--client-channel", "socket"});
  CHECK(run_ranks(socket_only, 2, {"collectives", "0", "1", "2", "1001"}, 120s, "asked"));
  CHECK(daemon.stop());
  CHECK(socket_only.stop());
}

TEST_CASE("64 MiB allreduce, zero copy and staged, with 2 and 4 ranks") {
  DaemonFixture daemon;
  for (int ranks : {2, 4}) {
    CAPTURE(ranks);
    CHECK(run_ranks(daemon, ranks, {"large"}, 300s, "large" + std::to_string(ranks)));
  }
  const std::string metrics = http_get(daemon.metrics_host_port(), "/metrics");
  // Both paths ran: staged bytes were counted for the heap buffers only.
  CHECK(metrics.find("ringsync_staged_bytes_total 402653184") != std::string::npos);
  CHECK(daemon.stop());
}

TEST_CASE("async requests submitted in different orders on each rank") {
  DaemonFixture daemon;
  CHECK(run_ranks(daemon, 3, {"async"}));
  CHECK(daemon.stop());
}

}  // namespace test_integration_collectives
