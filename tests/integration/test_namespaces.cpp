// Daemons that share one machine but not its namespaces, as simulated hosts
// and pods do, on UCX's default transports (docs/ucx.md, "Daemons that share
// a machine"). UCX offers its shared memory between any two processes of one
// kernel; across network namespaces its wake-ups are lost and a collective
// crawls for minutes. Each daemon must see that from its peers' localities and
// reach them over the network instead, while two daemons in one namespace keep
// shared memory.
// Needs root (network and UTS namespaces); CI runs it as root.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cluster_fixture.h"
#include "daemon_fixture.h"
#include "netns.h"

namespace test_integration_namespaces {

using namespace ringsync::test;
using namespace std::chrono_literals;

namespace {

constexpr std::uint16_t kControlPort = 29517;

// Two daemons of job "ev" on UCX's own choice of transports, at `places`.
ClusterOptions on_default_transports(std::vector<NodePlace> places, std::vector<std::string> flags) {
  ClusterOptions o;
  o.nodes = 2;
  o.local_size = 2;
  o.job_id = "ev";
  o.extra_flags = {"--ucx-transports="};
  o.extra_flags.insert(o.extra_flags.end(), flags.begin(), flags.end());
  o.places = std::move(places);
  return o;
}

std::uint64_t counter(const NetnsHosts& hosts, int host, const char* name) {
  const auto [code, out] = hosts.run(host, std::string("cat /sys/class/net/eth0/statistics/") + name);
  REQUIRE_MESSAGE(code == 0, out);
  return std::stoull(out);
}

// ringsync-bench on every rank: f32 sum allreduces from 128 KiB to 2 MiB,
// every result checked; true when all exit 0 within 150 s.
bool bench_every_rank(ClusterFixture& cluster, const std::string& tag, const std::string& iterations) {
  RankGroup ranks(cluster, tag);
  for (int node = 0; node < cluster.nodes(); ++node)
    for (int r = 0; r < cluster.local_size(); ++r)
      ranks.start_program(node, r,
                          {std::string(RINGSYNC_BIN_DIR) + "/ringsync-bench", "-b", "128K", "-e", "2M", "-f", "2",
                           "-n", iterations, "-w", "2"},
                          cluster.rank_env(node, r));
  const auto codes = ranks.wait(150s);
  const bool ok = all_equal(codes, 0);
  CHECK_MESSAGE(ok, ranks.report(), cluster.logs());
  if (ok) CHECK_MESSAGE(ranks.output(0).find("Out of bounds values : 0 OK") != std::string::npos, ranks.report());
  return ok;
}

}  // namespace

TEST_CASE("namespaces: 2 hosts with their own network and UTS namespaces, default transports: 128 KiB-2 MiB over the network") {
  const std::string why = NetnsHosts::unavailable_reason();
  REQUIRE_MESSAGE(why.empty(), why);
  NetnsHosts hosts(2);
  std::vector<NodePlace> places;
  for (int i = 0; i < 2; ++i)
    places.push_back({hosts.address(i), kControlPort, hosts.launcher(i, "rs-host" + std::to_string(i))});
  ClusterFixture cluster(on_default_transports(places, {"--ucx-net-devices", "eth0"}));

  const std::uint64_t sent_before = counter(hosts, 0, "tx_bytes");
  REQUIRE(bench_every_rank(cluster, "bench", "20"));
  // 22 rounds (2 of warm-up) of 128 KiB + ... + 2 MiB (3.875 MiB); host 0 sends at least half
  // of each allreduce's bytes to host 1 whatever the algorithm.
  const std::uint64_t sent = counter(hosts, 0, "tx_bytes") - sent_before;
  CHECK_MESSAGE(sent >= 22ull * 3968 * 1024 / 2, "host 0's eth0 sent only ", sent, " bytes: the data did not cross the link");

  for (int node = 0; node < 2; ++node) {
    const int peer = 1 - node;
    const std::string said = "node " + std::to_string(peer) + " (" + cluster.control_address(peer) +
                             ") over tcp/eth0 (no shared memory: node ";
    CHECK_MESSAGE(cluster.log(node).find(said) != std::string::npos, "node ", node, " should log '", said, "':\n",
                  cluster.logs());
    CHECK_MESSAGE(cluster.log(node).find("(hostname rs-host") != std::string::npos, cluster.logs());
    // The metric says the same, with why.
    std::string metrics;
    hosts.inside(node, [&] { metrics = http_get(cluster.metrics_host_port(node), "/metrics"); });
    const std::string series = "ringsync_peer_transports_info{job_id=\"ev\",peer=\"" + std::to_string(peer) + "\"";
    const auto at = metrics.find(series);
    REQUIRE_MESSAGE(at != std::string::npos, metrics);
    const std::string line = metrics.substr(at, metrics.find('\n', at) - at);
    CHECK_MESSAGE(line.find("transports=\"tcp/eth0\"") != std::string::npos, line);
    CHECK_MESSAGE(line.find("does not share its network namespace, which") != std::string::npos, line);
  }
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

TEST_CASE("namespaces: 2 daemons in one network namespace, each with its own hostname, keep shared memory") {
  const std::string why = NetnsHosts::unavailable_reason();
  REQUIRE_MESSAGE(why.empty(), why);
  NetnsHosts hosts(1);
  std::vector<NodePlace> places;
  for (int i = 0; i < 2; ++i)
    places.push_back({"127.0.0.1", static_cast<std::uint16_t>(kControlPort + i),
                      hosts.launcher(0, "rs-host" + std::to_string(i))});
  ClusterFixture cluster(on_default_transports(places, {}));
  REQUIRE(bench_every_rank(cluster, "bench", "5"));
  for (int node = 0; node < 2; ++node) {
    const std::string log = cluster.log(node);
    CHECK_MESSAGE(log.find("no shared memory") == std::string::npos, cluster.logs());
    const auto at = log.find(") over ");
    REQUIRE_MESSAGE(at != std::string::npos, cluster.logs());
    const std::string lanes = log.substr(at + 7, log.find_first_of(" \n", at + 7) - at - 7);
    MESSAGE("node ", node, " reaches its peer over ", lanes);
    CHECK_MESSAGE(lanes.find("tcp") == std::string::npos, lanes);
  }
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

}  // namespace test_integration_namespaces
