// The programs a user runs first: the example trainer and `ringsync demo`.
#include <doctest/doctest.h>

#include <fstream>
#include <tuple>
#include <vector>

#include "daemon_fixture.h"

namespace test_integration_programs {

using namespace ringsync::test;
using namespace std::chrono_literals;

TEST_CASE("the example trainer passes its own checks with 1, 2 and 4 ranks") {
  DaemonFixture daemon;
  for (int ranks : {1, 2, 4}) {
    CAPTURE(ranks);
    std::vector<Child> children;
    for (int r = 0; r < ranks; ++r)
      children.push_back(spawn({bin("ringsync-example-trainer"), "--steps", "2"},
                               daemon.rank_env(r, ranks, "example" + std::to_string(ranks)),
                               daemon.dir().file("example" + std::to_string(r) + ".log")));
    for (int r = 0; r < ranks; ++r)
      CHECK_MESSAGE(children[r].succeeded(120s),
                    read_file(daemon.dir().file("example" + std::to_string(r) + ".log")));
  }
  CHECK(daemon.stop());
}

TEST_CASE("ringsync demo on one node prints a verified table and shuts its daemon down") {
  TempDir dir;
  const std::string log = dir.file("demo.log");
  Child demo = spawn({bin("ringsync"), "demo", "--ranks", "3", "--max-bytes", "1M"}, {}, log);
  REQUIRE_MESSAGE(demo.succeeded(300s), read_file(log));
  const std::string out = read_file(log);
  CHECK(out.find("1 node(s) x 3 slot(s) = 3 ranks") != std::string::npos);
  CHECK(out.find("allreduce, 3 ranks (1 node(s) x 3 local)") != std::string::npos);
  CHECK(out.find("#wrong") != std::string::npos);
  // Rank 0's table is the demo's output: no rank prefix on it.
  CHECK(out.find("\n      1048576       262144  float    sum") != std::string::npos);
  CHECK(out.find("# Out of bounds values : 0 OK") != std::string::npos);
  CHECK(out.find("# Avg bus bandwidth") != std::string::npos);
  CHECK(out.find("ringsync_collectives_total{job_id=\"demo\",op=\"allreduce\",status=\"ok\"}") != std::string::npos);
  CHECK(out.find("ringsyncd shut down cleanly (1 node(s))") != std::string::npos);
  CHECK(out.find("[rank ") == std::string::npos);  // no other rank had anything to say
}

TEST_CASE("ringsync demo by default: 2 nodes x 2 slots, one allreduce across all 4 ranks") {
  TempDir dir;
  const std::string log = dir.file("demo.log");
  Child demo = spawn({bin("ringsync"), "demo", "--max-bytes", "256K"}, {}, log);
  REQUIRE_MESSAGE(demo.succeeded(300s), read_file(log));
  const std::string out = read_file(log);
  CHECK(out.find("2 node(s) x 2 slot(s) = 4 ranks") != std::string::npos);
  CHECK(out.find("ringsyncd started for node 1") != std::string::npos);
  // Printed once, by global rank 0, with sums over all 4 ranks checked.
  CHECK(out.find("allreduce, 4 ranks (2 node(s) x 2 local)") != std::string::npos);
  CHECK(out.find("#wrong") == out.rfind("#wrong"));
  CHECK(out.find("\n       262144        65536  float    sum") != std::string::npos);
  CHECK(out.find("# Out of bounds values : 0 OK") != std::string::npos);
  CHECK(out.find("Node 0's daemon served Prometheus metrics") != std::string::npos);
  CHECK(out.find("ringsyncd shut down cleanly (2 node(s))") != std::string::npos);
}

TEST_CASE("ringsync demo refuses impossible shapes") {
  auto [rc, out] = run_command(bin("ringsync") + " demo --nodes 0");
  CHECK(rc == 2);
  CHECK(out.find("ranks (--nodes x --slots") != std::string::npos);
  std::tie(rc, out) = run_command(bin("ringsync") + " demo --ranks 2 --nodes 2");
  CHECK(rc == 2);
  CHECK(out.find("--ranks N means --nodes 1 --slots N") != std::string::npos);
}

TEST_CASE("ringsyncd --help lists every setting; bad settings fail clearly") {
  auto [rc, help] = run_command(bin("ringsyncd") + " --help");
  CHECK(rc == 0);
  for (const char* flag : {"--socket", "--metrics-address", "--collective-timeout", "--stall-warning",
                           "--max-frame-bytes", "--reduce-threads", "RINGSYNC_SOCKET"})
    CHECK_MESSAGE(help.find(flag) != std::string::npos, flag);
  // The transports are UCX's choice unless pinned: verbs on a fabric that has them.
  const auto transports = help.find("--ucx-transports TEXT");
  REQUIRE(transports != std::string::npos);
  const std::string entry = help.substr(transports, help.find("--ucx-net-devices") - transports);
  CHECK_MESSAGE(entry.find("UCX picks the best") != std::string::npos, entry);
  CHECK_MESSAGE(entry.find("default: \"\"") != std::string::npos, entry);
  auto [bad_rc, bad] = run_command(bin("ringsyncd") + " --collective-timeout soon");
  CHECK(bad_rc == 2);
  CHECK(bad.find("collective-timeout") != std::string::npos);
  auto [unknown_rc, unknown] = run_command(bin("ringsyncd") + " --sockt /tmp/x");
  CHECK(unknown_rc == 2);
  CHECK(unknown.find("--socket") != std::string::npos);  // suggests the closest flag
}

TEST_CASE("ringsync wait returns once a daemon serves the socket, and fails naming it when none does") {
  DaemonFixture daemon;
  auto [rc, out] = run_command(bin("ringsync") + " wait --timeout 10s --socket " + daemon.socket());
  CHECK_MESSAGE(rc == 0, out);
  CHECK(out.find("ringsyncd serves " + daemon.socket()) != std::string::npos);
  CHECK(daemon.running());
  CHECK(daemon.log().find("WARN") == std::string::npos);  // a probe is no misbehaving client

  const std::string missing = daemon.dir().file("nobody.sock");
  std::tie(rc, out) = run_command(bin("ringsync") + " wait --timeout 300ms --socket " + missing);
  CHECK(rc == 1);
  CHECK_MESSAGE(out.find("accepted a connection at " + missing + " within 0.3 s") != std::string::npos, out);
  std::tie(rc, out) = run_command(bin("ringsync") + " wait --timeout soon");
  CHECK(rc == 2);
  CHECK(out.find("--timeout 'soon'") != std::string::npos);
  // Under Slurm the job's own daemon's socket is the one waited for.
  std::tie(rc, out) = run_command("env -u RINGSYNC_SOCKET XDG_RUNTIME_DIR=" + daemon.dir().path() +
                                  " SLURM_JOB_ID=31 " + bin("ringsync") + " wait --timeout 200ms");
  CHECK(rc == 1);
  CHECK_MESSAGE(out.find(daemon.dir().path() + "/ringsync/ringsyncd-slurm-31.sock") != std::string::npos, out);
}

TEST_CASE("a second daemon on the same socket refuses to start; the first keeps serving") {
  DaemonFixture daemon;
  auto [rc, out] = run_command(bin("ringsyncd") + " --metrics-address off --socket " + daemon.socket());
  CHECK(rc == 1);
  CHECK(out.find("another ringsyncd is already listening") != std::string::npos);
  CHECK(daemon.running());
  CHECK(daemon.stop());
}

TEST_CASE("--socket naming a file that is not a socket is refused, and the file kept") {
  TempDir dir;
  const std::string path = dir.file("precious.txt");
  { std::ofstream(path) << "data"; }
  auto [rc, out] = run_command(bin("ringsyncd") + " --metrics-address off --socket " + path);
  CHECK(rc == 1);
  CHECK(out.find("is not a socket") != std::string::npos);
  CHECK(read_file(path) == "data");
}

}  // namespace test_integration_programs
