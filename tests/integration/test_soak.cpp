// The soak: random collectives of every kind, dtype and op, sizes from 1 B to
// 8 MiB (every route: inline, direct exchange, halving-doubling, ring), every
// result checked, on real daemons — two jobs at once over tcp, the shared-
// memory transports, UCX's default choice on loopback, and network-namespace
// hosts with their own hostnames. A collective not ended within a generous
// bound fails the test, which prints every daemon's in-flight view
// (/debug/inflight) as it was just before.
//
// RINGSYNC_SOAK_SECONDS (default 25; ctest sets 20, 10 under ASan) is each configuration's length;
// RINGSYNC_SOAK_SEED repeats a run (every run prints its seed). An hour:
//   RINGSYNC_SOAK_SECONDS=900 build/bin/test_integration --source-file='*test_soak.cpp'
// Needs root for the namespace case (CI runs as root).
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <random>
#include <thread>

#include "cluster_fixture.h"
#include "daemon_fixture.h"
#include "netns.h"

namespace test_integration_soak {

using namespace ringsync::test;
using namespace std::chrono_literals;

namespace {

constexpr const char* kMaxBytes = "8388608";
constexpr int kBoundSeconds = 120;  // one collective: only a hang takes this long

int soak_seconds() {
  const char* v = std::getenv("RINGSYNC_SOAK_SECONDS");
  return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : 25;
}

std::uint64_t soak_seed() {
  if (const char* v = std::getenv("RINGSYNC_SOAK_SEED")) return std::strtoull(v, nullptr, 10);
  return std::random_device{}();
}

// Every daemon's /debug/inflight, as a fetch function sees it (on loopback, or
// from inside a namespace host), taken every 2 s while the ranks run: the
// last one before a failure says what was waiting.
class InFlightWatch {
 public:
  using Fetch = std::function<std::string(int node)>;
  InFlightWatch(int nodes, Fetch fetch) : nodes_(nodes), fetch_(std::move(fetch)), thread_([this] { run(); }) {}
  ~InFlightWatch() {
    stop_ = true;
    thread_.join();
  }
  std::string last() {
    std::lock_guard lock(mu_);
    return last_;
  }

 private:
  void run() {
    while (!stop_) {
      std::string views;
      for (int node = 0; node < nodes_; ++node) {
        std::string answer;
        try {
          answer = fetch_(node);
        } catch (const std::exception& e) {
          answer = e.what();
        }
        const auto body = answer.find("\r\n\r\n");
        views += "--- node " + std::to_string(node) + " /debug/inflight:\n" +
                 (body == std::string::npos ? answer : answer.substr(body + 4)) + "\n";
      }
      {
        std::lock_guard lock(mu_);
        last_ = std::move(views);
      }
      for (int i = 0; i < 20 && !stop_; ++i) std::this_thread::sleep_for(100ms);
    }
  }
  int nodes_;
  Fetch fetch_;
  std::mutex mu_;
  std::string last_;
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: starts once the rest is set
};

struct Job {
  std::string id;
  int local_size;
};

struct SoakRun {
  bool passed = true;
  std::string report;  // why not: the ranks' ends, and the daemons' in-flight views just before
};

// The soak on every rank of `jobs` (service daemons: each job described by its
// trainers), or of the fixture's own job when `jobs` is empty; each collective
// bounded by `bound` seconds.
SoakRun soak(ClusterFixture& cluster, const std::string& label, const std::vector<Job>& jobs,
             const InFlightWatch::Fetch& fetch, int bound = kBoundSeconds) {
  const std::uint64_t seed = soak_seed();
  const int seconds = soak_seconds();
  MESSAGE(label, ": soak seed ", seed, ", ", seconds, " s (repeat with RINGSYNC_SOAK_SEED=", seed, ")");
  std::vector<std::unique_ptr<RankGroup>> groups;
  std::vector<std::string> scenario = {"soak", "", std::to_string(seconds), kMaxBytes, std::to_string(bound)};
  if (jobs.empty()) {
    groups.push_back(std::make_unique<RankGroup>(cluster, "soak"));
    scenario[1] = std::to_string(seed);
    groups.back()->start_all(scenario);
  }
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    groups.push_back(std::make_unique<RankGroup>(
        cluster, "soak-" + jobs[j].id, ClusterFixture::JobRun{jobs[j].id, jobs[j].local_size, "token-" + jobs[j].id}));
    scenario[1] = std::to_string(seed + j);
    groups.back()->start_all(scenario);
  }
  SoakRun run;
  InFlightWatch watch(cluster.nodes(), fetch);
  // A rank's own bound ends a hung collective; this only bounds the test.
  const auto limit = std::chrono::seconds(seconds + 2 * bound + 60);
  for (auto& group : groups) {
    const auto codes = group->wait(limit);
    if (all_equal(codes, 0)) {
      MESSAGE(label, ": ", group->output(0).substr(group->output(0).rfind("rank 0: soak seed")));
      continue;
    }
    run.passed = false;
    run.report += label + ": " + group->report() + "\nthe daemons' in-flight views just before:\n" + watch.last();
  }
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
  if (!run.passed) run.report += cluster.logs();
  return run;
}

void check_passes(const SoakRun& run) { CHECK_MESSAGE(run.passed, run.report); }

InFlightWatch::Fetch on_loopback(ClusterFixture& cluster) {
  return [&cluster](int node) { return http_get(cluster.metrics_host_port(node), "/debug/inflight"); };
}

ClusterOptions service_daemons(int nodes, std::vector<std::string> flags) {
  ClusterOptions o = cluster_options(nodes, 2, std::move(flags));
  o.service = true;
  o.job_id = "unused";
  return o;
}

}  // namespace

TEST_CASE("soak: 3 daemons over tcp, two jobs at once (2 and 1 ranks a node)") {
  ClusterFixture cluster(service_daemons(3, {"--ucx-transports", "tcp,self"}));
  check_passes(soak(cluster, "tcp", {{"soak-a", 2}, {"soak-b", 1}}, on_loopback(cluster)));
}

TEST_CASE("soak: 2 daemons over UCX's shared memory") {
  ClusterFixture cluster(cluster_options(2, 2, {"--ucx-transports", "sm,self"}));
  check_passes(soak(cluster, "shared memory", {}, on_loopback(cluster)));
}

TEST_CASE("soak: 4 daemons on UCX's default transports") {
  ClusterFixture cluster(cluster_options(4, 1, {"--ucx-transports=", "--ucx-net-devices="}));
  check_passes(soak(cluster, "default transports", {}, on_loopback(cluster)));
}

TEST_CASE("soak: 2 namespace hosts with their own hostnames, default transports, two jobs at once") {
  const std::string why = NetnsHosts::unavailable_reason();
  REQUIRE_MESSAGE(why.empty(), why);
  NetnsHosts hosts(2);
  ClusterOptions o = service_daemons(2, {"--ucx-transports=", "--ucx-net-devices", "eth0"});
  for (int i = 0; i < 2; ++i) o.places.push_back({hosts.address(i), 29517, hosts.launcher(i, "soak-host" + std::to_string(i))});
  ClusterFixture cluster(o);
  check_passes(soak(cluster, "namespace hosts", {{"soak-a", 2}, {"soak-b", 1}}, [&](int node) {
    std::string answer;
    hosts.inside(node, [&] { answer = http_get(cluster.metrics_host_port(node), "/debug/inflight"); });
    return answer;
  }));
}

TEST_CASE("soak: a collective that never ends fails the soak at its bound, with what each daemon waited for") {
  // The daemons' own deadlines are off (far away), so only the soak's bound can end it.
  ClusterOptions o = cluster_options(2, 1, {"--progress-timeout", "0", "--collective-timeout", "600s"});
  o.daemon_env["RINGSYNC_TEST_DROP_SEND"] = "1:1";
  ClusterFixture cluster(o);
  const SoakRun run = soak(cluster, "a lost message", {}, on_loopback(cluster), /*bound=*/8);
  REQUIRE_FALSE(run.passed);
  CHECK_MESSAGE(run.report.find("still pending at the deadline") != std::string::npos, run.report);
  CHECK_MESSAGE(run.report.find("\"phase\": \"data plane\"") != std::string::npos, run.report);
  CHECK_MESSAGE(run.report.find("\"link\": \"tcp/lo\"") != std::string::npos, run.report);
}

}  // namespace test_integration_soak
