// Several ringsyncd daemons on loopback as the nodes of one job, with real
// trainer processes on each: collectives across nodes, fusion, the response
// cache, nodes killed or frozen, and junk on the control port (disagreements
// and stalls: test_cluster_disagreement.cpp). Deadlines are generous and only bound the test;
// no assertion is about how fast something happened.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <functional>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "cluster_fixture.h"
#include "common/peer_wire.h"
#include "common/wire.h"
#include "daemon_fixture.h"

namespace test_integration_cluster {

using namespace ringsync;
using namespace ringsync::test;
using namespace std::chrono_literals;

namespace {

constexpr auto kJobDeadline = 120s;   // one run of every rank of a job

// A raw TCP connection to a daemon's control port, as a stranger would open it.
class RawPeer {
 public:
  explicit RawPeer(const std::string& host_port) {
    const auto colon = host_port.rfind(':');
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(std::stoi(host_port.substr(colon + 1))));
    ::inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &addr.sin_addr);
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    timeval tv{10, 0};  // every read gives up after 10 s
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawPeer() { ::close(fd_); }
  bool connected() const { return connected_; }
  void send(const std::vector<std::uint8_t>& bytes) {
    ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
  // The next frame from the daemon other than a heartbeat; nullopt on close,
  // junk or 10 s of silence.
  std::optional<peer_wire::Message> receive() {
    for (;;) {
      std::array<std::uint8_t, wire::kFrameHeaderBytes> header;
      if (!read_exact(header.data(), header.size())) return std::nullopt;
      auto length = wire::frame_length(header, wire::kMaxFrameBytes);
      if (!length.ok()) return std::nullopt;
      std::vector<std::uint8_t> body(*length);
      if (!read_exact(body.data(), body.size())) return std::nullopt;
      auto message = peer_wire::decode(body);
      if (!message.ok()) return std::nullopt;
      if (!std::holds_alternative<peer_wire::Heartbeat>(*message)) return *message;
    }
  }
  // True when the daemon closed the connection within 10 s (anything it sent first is skipped).
  bool closed_by_peer() {
    char buf[256];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
  }

 private:
  bool read_exact(std::uint8_t* p, std::size_t n) {
    while (n > 0) {
      const ssize_t got = ::recv(fd_, p, n, 0);
      if (got <= 0) return false;
      p += got;
      n -= static_cast<std::size_t>(got);
    }
    return true;
  }
  int fd_ = -1;
  bool connected_ = false;
};

// Waits (up to `timeout`) for a warning or error logged by `node` after byte `from`.
std::string new_warning(ClusterFixture& cluster, int node, std::size_t from,
                        std::chrono::seconds timeout) {
  const std::regex level(R"( (WARN|ERROR) )");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const std::string log = cluster.log(node);
    const std::string line = find_line(log.size() > from ? log.substr(from) : "", "", level);
    if (!line.empty() || std::chrono::steady_clock::now() > deadline) return line;
    std::this_thread::sleep_for(20ms);
  }
}

}  // namespace

TEST_CASE("cluster: daemons start and form the ring and stop cleanly") {
  ClusterFixture cluster(cluster_options(3, 2));
  CHECK(all_running(cluster));
  CHECK_MESSAGE(wait_for_ring(cluster, 30s),
                "ringsync_ring_nodes did not reach 3 on every node:\n",
                node_metric_summary(cluster, {"ringsync_ring_nodes", "ringsync_ring_epoch"}),
                cluster.logs());
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

TEST_CASE("cluster: /readyz is 503 while the ring is not formed, 200 once it is") {
  ClusterFixture cluster(cluster_options(2, 1));
  // Polls node's /readyz until its status line has `status`, for up to 20 s.
  const auto readyz_becomes = [&](int node, const std::string& status) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    std::string answer;
    while (std::chrono::steady_clock::now() < deadline) {
      answer = http_get(cluster.metrics_host_port(node), "/readyz");
      if (answer.rfind("HTTP/1.1 " + status, 0) == 0) return answer;
      std::this_thread::sleep_for(50ms);
    }
    FAIL_CHECK("node ", node, "'s /readyz never answered ", status, "; last:\n", answer, cluster.logs());
    return answer;
  };
  REQUIRE(wait_for_ring(cluster, 30s));
  readyz_becomes(0, "200");
  CHECK(readyz_becomes(1, "200").find("ready") != std::string::npos);

  cluster.signal(1, SIGKILL);  // node 0 loses its peer: its ring is broken until node 1 is back
  const std::string lost = readyz_becomes(0, "503");
  CHECK_MESSAGE(lost.find("the ring of the pre-configured job 'cluster' is not formed") != std::string::npos, lost);
  CHECK(http_get(cluster.metrics_host_port(0), "/healthz").rfind("HTTP/1.1 200", 0) == 0);  // alive all along

  cluster.restart(1);
  readyz_becomes(0, "200");
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

TEST_CASE("cluster: the log and /metrics say which UCX transports link the nodes") {
  SUBCASE("pinned to tcp over loopback, as simulated nodes are (whatever else is up here)") {
    ClusterFixture cluster(cluster_options(2, 1));
    REQUIRE(wait_for_ring(cluster, 30s));
    for (int node : {0, 1}) {
      const std::string line = cluster.peer_transports(node, 1 - node);
      CHECK_MESSAGE(line.find("tcp/lo") != std::string::npos, line, cluster.logs());
    }
    CHECK_MESSAGE(cluster.log(0).find("node 1 (" + cluster.control_address(1) + ") over tcp/lo") != std::string::npos,
                  cluster.logs());
    CHECK(run_job(cluster, "pinned", {"collectives", "1", "1001"}));
  }
  SUBCASE("left to UCX (the default): it links two daemons on one machine and the job runs") {
    ClusterFixture cluster([] {
      auto o = cluster_options(2, 1);
      o.extra_flags = {"--ucx-transports=", "--ucx-net-devices="};
      return o;
    }());
    REQUIRE(wait_for_ring(cluster, 30s));
    const std::string line = cluster.peer_transports(0, 1);
    CHECK_MESSAGE(!line.empty(), cluster.metrics(0), cluster.logs());
    MESSAGE("UCX's own choice between two daemons here: ", line);
    CHECK(run_job(cluster, "chosen", {"collectives", "1", "1001"}));
  }
}

TEST_CASE("cluster: 2 nodes x 2 ranks: every collective") {
  ClusterFixture cluster(cluster_options(2, 2));
  // 786433 f32 is 3 MiB and odd, so ring segments are uneven. The 1001-element
  // allreduces are exchanged directly between the nodes (up to --inline-bytes,
  // 256 KiB, on 2 nodes), the 3 MiB ones run the ring.
  CHECK(run_job(cluster, "collectives", {"collectives", "0", "1", "3", "1001", "786433"}));
  CHECK(all_running(cluster));
  for (int node = 0; node < cluster.nodes(); ++node) {
    CHECK_MESSAGE(
        metric_value(cluster.metrics(node), "ringsync_inline_operations_total{path=\"direct\"}").value_or(0) > 0,
        node_metric_summary(cluster, {"ringsync_inline_operations_total"}));
    // Two local ranks: the ring's input is their reduction, gathered first.
    CHECK_MESSAGE(metric_value(cluster.metrics(node), "ringsync_gathered_bytes_total").value_or(0) > 0,
                  node_metric_summary(cluster, {"ringsync_gathered_bytes_total"}));
  }
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

TEST_CASE("cluster: 2 nodes x 1 rank: a ring allreduce reads each rank's input where it lies") {
  ClusterFixture cluster(cluster_options(2, 1));
  // Four 4 MiB f32 sums (past --rhd-max-bytes: the ring), in place and out of
  // place in turn; each result is checked, and each out-of-place input is
  // checked unchanged.
  CHECK(run_job(cluster, "one-input", {"verify-loop", "f32", "1048576", "4"}));
  for (int node = 0; node < cluster.nodes(); ++node) {
    CAPTURE(node);
    const std::string metrics = cluster.metrics(node);
    const std::string summary =
        node_metric_summary(cluster, {"ringsync_data_plane_operations_total", "ringsync_gathered_bytes_total"});
    CHECK_MESSAGE(metric_value(metrics, "ringsync_data_plane_operations_total{algorithm=\"ring\"}").value_or(0) >= 4,
                  summary);
    // Nothing was copied into a ring buffer first.
    CHECK_MESSAGE(metric_value(metrics, "ringsync_gathered_bytes_total").value_or(-1) == 0, summary);
  }
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

// The sum of the series of `name` whose labels contain every one of `labels` (absent: none).
std::optional<double> series_sum(const std::string& metrics, const std::string& name,
                                 const std::vector<std::string>& labels) {
  std::optional<double> sum;
  std::istringstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + "{", 0) != 0) continue;
    const std::string label_text = line.substr(0, line.rfind(' '));
    if (!std::all_of(labels.begin(), labels.end(),
                     [&](const std::string& l) { return label_text.find(l) != std::string::npos; }))
      continue;
    sum = sum.value_or(0) + std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

TEST_CASE("cluster: 2 nodes, only small allreduces (exchanged directly): their bytes count on the links, busbw exists") {
  ClusterFixture cluster(cluster_options(2, 2));
  // 1001 f32 and smaller go by the direct exchange over the control links: no ring operation at all.
  CHECK(run_job(cluster, "collectives", {"collectives", "1", "3", "1001"}));
  for (int node = 0; node < cluster.nodes(); ++node) {
    const std::string peer = "peer=\"" + std::to_string(1 - node) + "\"";
    std::string metrics;
    // The last bytes are added when the job's ring is released, just after its ranks leave.
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    do {
      metrics = cluster.metrics(node);
      if (series_sum(metrics, "ringsync_link_bytes_total", {peer, "direction=\"tx\"", "plane=\"control\""})
              .value_or(0) > 1001 * 4)
        break;
      std::this_thread::sleep_for(100ms);
    } while (std::chrono::steady_clock::now() < deadline);
    INFO("node ", node, ":\n", metrics);
    CHECK(metric_value(metrics, "ringsync_inline_operations_total{path=\"direct\"}").value_or(0) > 0);
    // Every direct contribution crossed the control link: at least the 1001-float ones, both ways.
    for (const char* direction : {"direction=\"tx\"", "direction=\"rx\""})
      CHECK(series_sum(metrics, "ringsync_link_bytes_total", {peer, direction, "plane=\"control\""}).value_or(0) >
            1001 * 4);
    // The link is named by the peer's address too, and the data plane's series exist.
    CHECK(series_sum(metrics, "ringsync_link_bytes_total", {peer, "peer_address=\"127.0.0.1:", "plane=\"data\""})
              .has_value());
    CHECK(series_sum(metrics, "ringsync_link_send_busy_seconds_total", {peer}).has_value());
    // The bus bandwidth gauge exists although no collective reached 1 MiB, and so does its counter.
    CHECK(series_sum(metrics, "ringsync_bus_bandwidth_bytes_per_second", {"op=\"allreduce\""}).value_or(0) > 0);
    CHECK(series_sum(metrics, "ringsync_bus_bytes_total", {"op=\"allreduce\""}).value_or(0) > 0);
    CHECK(series_sum(metrics, "ringsync_peers_lost_total", {}).value_or(-1) == 0);
    CHECK(metric_value(metrics, "ringsync_errors_total{kind=\"peer_lost\"}") == 0);
    CHECK(metric_value(metrics, "ringsync_gpu_devices").has_value());
    // 2 local ranks: one of them was the last of each collective.
    CHECK(series_sum(metrics, "ringsync_rank_last_total", {}).value_or(0) > 0);
  }
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

TEST_CASE("cluster: 3 nodes x 2 ranks: every collective by halving-doubling, every result compared across the nodes") {
  // 3 nodes is not a power of two: under rhd node 1 folds into node 0 and gets
  // the result back. Every result is also compared across the nodes
  // (--verify-results all). Every path, dtype and op, with the direct
  // algorithm too: tests/service/cluster/test_job_ring_collectives.cpp.
  ClusterFixture cluster(cluster_options(3, 2, {"--algorithm", "rhd", "--inline-bytes", "0", "--verify-results", "all"}));
  CHECK(run_job(cluster, "collectives", {"collectives", "0", "7", "4000"}));
  CHECK(all_running(cluster));
  for (int node = 0; node < cluster.nodes(); ++node) {
    const std::string metrics = cluster.metrics(node);
    const std::string summary = node_metric_summary(cluster, {"ringsync_data_plane_operations_total"});
    CHECK_MESSAGE(metric_value(metrics, "ringsync_data_plane_operations_total{algorithm=\"halving-doubling\"}")
                          .value_or(0) > 0,
                  summary);
    // Allgathers and broadcasts still take the ring.
    CHECK_MESSAGE(metric_value(metrics, "ringsync_data_plane_operations_total{algorithm=\"ring\"}").value_or(0) > 0,
                  summary);
  }
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

TEST_CASE("cluster: 2 nodes x 2 ranks: small allreduces over the ring (--inline-bytes 0)") {
  ClusterFixture cluster(cluster_options(2, 2, {"--inline-bytes", "0"}));
  CHECK(run_job(cluster, "collectives", {"collectives", "1", "3", "1001"}));
  for (int node = 0; node < cluster.nodes(); ++node) {
    const std::string metrics = cluster.metrics(node);
    const std::string summary =
        node_metric_summary(cluster, {"ringsync_inline_operations_total", "ringsync_ring_operations_total"});
    CHECK_MESSAGE(metric_value(metrics, "ringsync_inline_operations_total").value_or(0) == 0, summary);
    CHECK_MESSAGE(metric_value(metrics, "ringsync_ring_operations_total").value_or(0) > 0, summary);
  }
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

TEST_CASE("cluster: 200 small tensors exchanged directly, each answered without the ring") {
  ClusterFixture cluster(cluster_options(2, 2, {"--cycle-time", "5ms"}));
  REQUIRE(run_job(cluster, "fusion", {"fusion", "200"}));
  for (int node = 0; node < cluster.nodes(); ++node)
    CHECK_MESSAGE(
        metric_value(cluster.metrics(node), "ringsync_inline_operations_total{path=\"direct\"}").value_or(0) >= 200,
        node_metric_summary(cluster, {"ringsync_inline_operations_total", "ringsync_ring_operations_total"}));
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

TEST_CASE("cluster: 200 small tensors fuse into fewer ring operations") {
  // A longer cycle gathers more ready tensors per negotiation round; the
  // tensors (64-88 bytes) take the ring, not the direct exchange.
  ClusterFixture cluster(cluster_options(2, 2, {"--cycle-time", "5ms", "--inline-bytes", "0"}));
  REQUIRE(run_job(cluster, "fusion", {"fusion", "200"}));
  const std::string metrics = cluster.metrics(0);
  const auto operations = metric_value(metrics, "ringsync_ring_operations_total");
  const auto tensors = metric_value(metrics, "ringsync_fused_tensors_total");
  const std::string summary = node_metric_summary(
      cluster, {"ringsync_ring_operations_total", "ringsync_fused_tensors_total"});
  REQUIRE_MESSAGE(operations.has_value(), summary);
  REQUIRE_MESSAGE(tensors.has_value(), summary);
  CHECK_MESSAGE(*tensors >= 200, summary);
  CHECK_MESSAGE(*operations > 0, summary);
  CHECK_MESSAGE(*operations < 200, summary);
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

TEST_CASE("cluster: a repeated step hits the response cache") {
  ClusterFixture cluster(cluster_options(2, 2));
  REQUIRE(run_job(cluster, "repeat", {"repeat", "3", "4"}));
  double hits = 0;
  for (int i = 0; i < cluster.nodes(); ++i)
    hits += metric_value(cluster.metrics(i), "ringsync_response_cache_hits_total").value_or(0);
  CHECK_MESSAGE(hits > 0, node_metric_summary(cluster, {"ringsync_response_cache_hits_total",
                                                        "ringsync_response_cache_misses_total"}));
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

TEST_CASE("cluster: a daemon killed mid-allreduce: peer lost naming it; then it rejoins") {
  ClusterFixture cluster(cluster_options(3, 2));
  const int victim = 2;
  {
    RankGroup ranks(cluster, "killed");
    const NodeLossRun out = hurt_node_mid_loop(cluster, ranks, victim, SIGKILL);
    REQUIRE_MESSAGE(out.looping, "not every rank got through a first allreduce:\n",
                    ranks.report(), cluster.logs());
    CHECK_MESSAGE(all_equal(out.survivors, rank_exit::kPeerLost),
                  "every rank on nodes 0 and 1 should get peer lost naming node 2 (exit ",
                  rank_exit::kPeerLost, "):\n", ranks.report(), cluster.logs());
    // The victim's own ranks lost their daemon; they only have to end.
    for (int code : out.victims) CHECK_MESSAGE(code >= 0, ranks.report());
  }
  CHECK_MESSAGE(all_running(cluster, victim), cluster.logs());

  // The node comes back: the same job forms again on every node and works.
  cluster.restart(victim);
  CHECK(run_job(cluster, "after-restart", {"collectives", "1", "1001"}));
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

namespace {

// Kills `victim` (of 3 nodes x 2) while the ranks loop over allreduces of
// `count` floats: every rank of the other nodes gets peer lost naming it, they
// took the path `path_metric` counts, and after the restart the job works.
void check_killed_mid_path(int victim, const std::string& tag, const std::string& count,
                           const std::string& path_metric, std::vector<std::string> after) {
  ClusterFixture cluster(cluster_options(3, 2));
  std::vector<int> survivors;
  for (int node = 0; node < 3; ++node)
    if (node != victim) survivors.push_back(node);
  const std::string nodes = std::to_string(survivors[0]) + " and " + std::to_string(survivors[1]);
  {
    RankGroup ranks(cluster, tag);
    const NodeLossRun out = hurt_node_mid_loop(cluster, ranks, victim, SIGKILL, {}, 30s, count);
    REQUIRE_MESSAGE(out.looping, "not every rank got through a first allreduce:\n", ranks.report(), cluster.logs());
    CHECK_MESSAGE(all_equal(out.survivors, rank_exit::kPeerLost), "every rank on nodes ", nodes,
                  " should get peer lost naming node ", victim, " (exit ", rank_exit::kPeerLost, "):\n",
                  ranks.report(), cluster.logs());
    for (int code : out.victims) CHECK_MESSAGE(code >= 0, ranks.report());
  }
  const std::string family = path_metric.substr(0, path_metric.find('{'));
  for (int node : survivors)
    CHECK_MESSAGE(metric_value(cluster.metrics(node), path_metric).value_or(0) > 0,
                  node_metric_summary(cluster, {family}));
  CHECK_MESSAGE(all_running(cluster, victim), cluster.logs());
  cluster.restart(victim);
  CHECK(run_job(cluster, "after-" + tag, std::move(after)));
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

}  // namespace

TEST_CASE("cluster: a daemon killed mid ring allreduce, its gather still running beside the ring: peer lost") {
  // 4 MiB on 3 nodes takes the ring, which starts while the work pool still
  // gathers (execution/gather_gate.h); a loss then must end every wait, after
  // the pool is done with the buffer, and the job must work again.
  // After the restart: 4 MiB allreduces around the ring again, each checked
  // (every kind at every size: "2 nodes x 2 ranks: every collective").
  check_killed_mid_path(2, "killed-ring", "1048576", "ringsync_data_plane_operations_total{algorithm=\"ring\"}",
                        {"verify-loop", "f32", "1048577", "4"});
}

TEST_CASE("cluster: a worker killed mid small allreduces (exchanged directly): peer lost naming it") {
  // 8 B allreduces on 3 nodes go node to node, node 0 forwarding the workers'
  // contributions; losing node 1 mid-exchange must end every wait, not hang one.
  check_killed_mid_path(1, "killed-small", "2", "ringsync_inline_operations_total{path=\"direct\"}",
                        {"collectives", "1", "3"});
}

TEST_CASE("cluster: a daemon stopped mid-allreduce: peer lost naming it; then it recovers") {
  ClusterFixture cluster(cluster_options(3, 2));
  const int victim = 1;
  {
    RankGroup ranks(cluster, "stopped");
    const NodeLossRun out = hurt_node_mid_loop(cluster, ranks, victim, SIGSTOP,
                                               [&] { cluster.signal(victim, SIGCONT); });
    REQUIRE_MESSAGE(out.looping, "not every rank got through a first allreduce:\n",
                    ranks.report(), cluster.logs());
    CHECK_MESSAGE(all_equal(out.survivors, rank_exit::kPeerLost),
                  "every rank on nodes 0 and 2 should get peer lost naming node 1 (exit ",
                  rank_exit::kPeerLost, "):\n", ranks.report(), cluster.logs());
    for (int code : out.victims) CHECK_MESSAGE(code >= 0, ranks.report());
  }
  CHECK_MESSAGE(all_running(cluster), cluster.logs());
  // Once resumed, the node finds its ring gone and the job forms again.
  CHECK(run_job(cluster, "after-resume", {"collectives", "1", "1001"}));
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

TEST_CASE("cluster: junk on the control port is rejected and the daemons serve on") {
  ClusterFixture cluster(cluster_options(2, 2));
  CHECK_MESSAGE(wait_for_ring(cluster, 30s), cluster.logs());
  const std::string port = cluster.control_address(0);

  SUBCASE("garbage after a plausible length prefix") {
    const std::size_t from = cluster.log(0).size();
    RawPeer peer(port);
    REQUIRE(peer.connected());
    std::vector<std::uint8_t> junk = {60, 0, 0, 0};
    for (int i = 0; i < 60; ++i) junk.push_back(static_cast<std::uint8_t>(i * 37 + 11));
    peer.send(junk);
    const bool closed = peer.closed_by_peer();
    CHECK(closed);
    // A daemon that closed has logged why already; one that did not had 10 s.
    const std::string line = new_warning(cluster, 0, from, closed ? 10s : 1s);
    CHECK_MESSAGE(!line.empty(), "node 0 logged no rejection:\n", cluster.logs());
    MESSAGE("rejection: ", line);
  }
  SUBCASE("a flood of junk from one source is logged once, not once per connection") {
    const std::size_t from = cluster.log(0).size();
    for (int i = 0; i < 30; ++i) {
      RawPeer peer(port);
      REQUIRE(peer.connected());
      peer.send({0xf0, 0xff, 0xff, 0xff, 1, 2, 3, 4});
      CHECK(peer.closed_by_peer());
    }
    const std::string line = new_warning(cluster, 0, from, 10s);
    CHECK_MESSAGE(!line.empty(), "node 0 logged no rejection:\n", cluster.logs());
    const std::string log = cluster.log(0).substr(from);
    std::size_t lines = 0;
    for (std::size_t at = log.find("from peer at 127.0.0.1"); at != std::string::npos;
         at = log.find("from peer at 127.0.0.1", at + 1))
      ++lines;
    CHECK_MESSAGE(lines == 1, lines, " lines about one source:\n", log);
  }
  SUBCASE("an oversized length prefix") {
    const std::size_t from = cluster.log(0).size();
    RawPeer peer(port);
    REQUIRE(peer.connected());
    peer.send({0xf0, 0xff, 0xff, 0xff, 1, 2, 3, 4});
    const bool closed = peer.closed_by_peer();
    CHECK(closed);
    // A daemon that closed has logged why already; one that did not had 10 s.
    const std::string line = new_warning(cluster, 0, from, closed ? 10s : 1s);
    CHECK_MESSAGE(!line.empty(), "node 0 logged no rejection:\n", cluster.logs());
    MESSAGE("rejection: ", line);
  }
  SUBCASE("auth: a stranger's hello for a node of the formed ring learns none of node 0's settings") {
    const std::size_t from = cluster.log(0).size();
    RawPeer peer(port);
    REQUIRE(peer.connected());
    // Settings unlike node 0's (--ring-chunk-bytes 0): a keyed ring tells them
    // only to a node that proved it holds the key.
    peer.send(peer_wire::encode(peer_wire::PeerHello{peer_wire::kProtocolVersion, cluster.job_id(), 1, 2, 2,
                                                     std::vector<std::uint8_t>(32, 7), {}, 0}));
    const auto reply = peer.receive();
    const auto* hello_reply = reply ? std::get_if<peer_wire::PeerHelloReply>(&*reply) : nullptr;
    REQUIRE(hello_reply != nullptr);
    CHECK_FALSE(hello_reply->accepted);
    CHECK_MESSAGE(hello_reply->message.find("already in the ring") != std::string::npos, hello_reply->message);
    CHECK_MESSAGE(hello_reply->message.find("524288") == std::string::npos, hello_reply->message);
    const std::string line = new_warning(cluster, 0, from, 10s);
    CHECK_MESSAGE(line.find("refused peer at 127.0.0.1") != std::string::npos, line, "\n", cluster.logs());
  }

  CHECK_MESSAGE(all_running(cluster), cluster.logs());
  CHECK(run_job(cluster, "after-junk", {"collectives", "1", "1001"}));
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

}  // namespace test_integration_cluster
