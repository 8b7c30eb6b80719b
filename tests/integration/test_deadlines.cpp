// No collective hangs: a data-plane message dropped on purpose
// (RINGSYNC_TEST_DROP_SEND, transport/test_drop.h) stalls an allreduce on
// real daemons, and each deadline (--progress-timeout, --collective-timeout)
// ends it on every rank with a timeout naming the node that waits, the peer
// and the link. As after any loss of the ring, the run is over (the ranks'
// views of what finished may differ): the ring forms again at once, and the
// ranks started next run their allreduces. While it
// is stuck, the daemons' GET /debug/inflight, `ringsync top`'s WAITING
// section and the stall warning say what it waits for. Bounds here only
// catch a hang: nothing asserts how fast anything ran.
#include <doctest/doctest.h>

#include <chrono>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "cluster_fixture.h"
#include "daemon_fixture.h"

namespace test_integration_deadlines {

using namespace ringsync::test;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

// 1 MiB of f32: halving-doubling between the two nodes.
constexpr const char* kCount = "262144";

ClusterOptions stalled_cluster(std::vector<std::string> flags) {
  ClusterOptions o = cluster_options(2, 2, std::move(flags));
  o.daemon_env["RINGSYNC_TEST_DROP_SEND"] = "1:1";  // node 1 drops its first data-plane send
  return o;
}

// The first data-plane entry of node's /debug/inflight once it has moved
// nothing for a second (bounded: null after 30 s).
json stuck_operation(ClusterFixture& cluster, int node) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string answer = http_get(cluster.metrics_host_port(node), "/debug/inflight");
    const auto body = answer.find("\r\n\r\n");
    if (answer.rfind("HTTP/1.1 200", 0) == 0 && body != std::string::npos) {
      const json view = json::parse(answer.substr(body + 4));
      for (const json& job : view.at("jobs"))
        for (const json& e : job.at("waiting"))
          if (e.value("phase", "") == "data plane" && e.value("idle_seconds", 0.0) >= 1.0) return e;
    }
    std::this_thread::sleep_for(100ms);
  }
  return nullptr;
}

// Every rank got the timeout (expect-error checked its status and text); then
// the next run's ranks, on the ring formed again, allreduce the same size.
void check_every_rank(RankGroup& ranks, ClusterFixture& cluster, const std::vector<std::string>& words) {
  const auto codes = ranks.wait(90s);
  CHECK_MESSAGE(all_equal(codes, 0), ranks.report(), cluster.logs());
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const std::string out = ranks.output(static_cast<int>(i));
    for (const auto& word : words) CHECK_MESSAGE(out.find(word) != std::string::npos, "rank ", i, " lacks '", word, "':\n", out);
  }
  CHECK(run_job(cluster, "next-run", {"collectives", kCount}));
}

}  // namespace

TEST_CASE("deadlines: a lost message: --progress-timeout fails every rank naming node, peer and link; the view shows it first") {
  ClusterFixture cluster(stalled_cluster({"--progress-timeout", "6s", "--stall-warning", "2s", "--collective-timeout", "300s"}));
  RankGroup ranks(cluster, "progress");
  ranks.start_all({"expect-error", "timeout", "(--progress-timeout): node ", kCount});
  REQUIRE_MESSAGE(ranks.wait_marks("submitted", 60s), ranks.report(), cluster.logs());

  // While it is stuck: each daemon names the other node and the link.
  for (int node = 0; node < 2; ++node) {
    const json op = stuck_operation(cluster, node);
    REQUIRE_MESSAGE(!op.is_null(), "node ", node, " showed no stuck operation:\n", cluster.logs());
    CHECK(op.at("kind") == "allreduce");
    CHECK(op.at("algorithm") == "halving-doubling");
    const json& w = op.at("waiting_for");
    CHECK(w.at("nodes") == json::array({1 - node}));
    CHECK(w.at("names").at(0) == "node " + std::to_string(1 - node) + " (" + cluster.control_address(1 - node) + ")");
    CHECK(w.at("link") == "tcp/lo");
    CHECK(w.at("direction") == "receive");
    CHECK(op.at("summary").get<std::string>().find(" waits in its halving-doubling, step ") != std::string::npos);
  }
  // ringsync top: a WAITING section with both, and node 1 (whose send was lost) named.
  const auto [status, top] = run_command("timeout 60 " + std::string(RINGSYNC_BIN_DIR) + "/ringsync top --once --interval 0.2s --metrics " +
                                         cluster.metrics_host_port(0) + "," + cluster.metrics_host_port(1) + " 2>&1");
  CHECK_MESSAGE(status == 0, top);
  const auto waiting = top.find("\nWAITING  ");
  REQUIRE_MESSAGE(waiting != std::string::npos, top);
  const std::string section = top.substr(waiting, top.find("\nERRORS", waiting) - waiting);
  CHECK_MESSAGE(section.find("data plane  allreduce 'doomed' (#") != std::string::npos, section);
  CHECK_MESSAGE(section.find("over tcp/lo: receive 524288 B") != std::string::npos, section);
  CHECK_MESSAGE(section.find("=> job cluster waits on node 1 (" + cluster.control_address(1) + ")") != std::string::npos,
                section);

  check_every_rank(ranks, cluster, {" waits in its halving-doubling, step ", " over tcp/lo ", "check the daemon of node "});
  for (int node = 0; node < 2; ++node) {
    // The stall warning said it before the deadline.
    const std::string line = find_line(cluster.log(node), "has run for", std::regex("waits in its halving-doubling"));
    CHECK_MESSAGE(!line.empty(), cluster.logs());
    const auto timeouts = metric_value(cluster.metrics(node), "ringsync_errors_total{kind=\"timeout\"}");
    CHECK_MESSAGE(timeouts.value_or(0) >= 1, cluster.metrics(node));
    CHECK(metric_value(cluster.metrics(node), "ringsync_peers_lost_total").value_or(-1) == 0);
  }
  CHECK(all_running(cluster));
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

TEST_CASE("deadlines: a lost message with no progress deadline: --collective-timeout fails every rank alike") {
  ClusterFixture cluster(stalled_cluster({"--progress-timeout", "0", "--collective-timeout", "5s"}));
  RankGroup ranks(cluster, "collective");
  ranks.start_all({"expect-error", "timeout", "(--collective-timeout): node ", kCount});
  check_every_rank(ranks, cluster, {"did not finish in ", " waits in its halving-doubling, step ", " over tcp/lo "});
  // Each rank read a verdict of its job's nodes: one node's view, or each
  // node's own when both reached the deadline in the same sweep.
  std::set<std::string> verdicts;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const std::string out = ranks.output(static_cast<int>(i));
    const auto at = out.find(": timeout: ");
    REQUIRE_MESSAGE(at != std::string::npos, out);
    verdicts.insert(out.substr(at, out.find('\n', at) - at));
  }
  CHECK_MESSAGE(verdicts.size() <= 2, ranks.report());
  CHECK(all_running(cluster));
  const std::string stopped = cluster.stop_all();
  CHECK_MESSAGE(stopped.empty(), stopped, cluster.logs());
}

}  // namespace test_integration_deadlines
