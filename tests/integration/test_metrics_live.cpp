// /metrics of a live daemon after real traffic: promtool finds nothing to
// complain about, and a real Prometheus server scrapes it.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <thread>
#include <vector>

#include "daemon_fixture.h"

namespace test_integration_metrics_live {

using namespace ringsync::test;
using namespace std::chrono_literals;

namespace {

void run_traffic(DaemonFixture& daemon) {
  std::vector<Child> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.push_back(spawn({bin("ringsync-test-rank"), "collectives", "1", "1001"},
                                 daemon.rank_env(r, 2, "metrics"),
                                 daemon.dir().file("rank" + std::to_string(r) + ".log")));
  for (auto& r : ranks) REQUIRE(r.succeeded(120s));
}

std::string body_of(const std::string& response) {
  const auto pos = response.find("\r\n\r\n");
  return pos == std::string::npos ? "" : response.substr(pos + 4);
}

// A loopback port that was free a moment ago (the kernel's pick for port 0).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

}  // namespace

TEST_CASE("promtool check metrics is clean on a live daemon after traffic") {
  DaemonFixture daemon;
  run_traffic(daemon);
  const std::string response = http_get(daemon.metrics_host_port(), "/metrics");
  CHECK(response.find("Content-Type: text/plain; version=0.0.4; charset=utf-8") != std::string::npos);
  const std::string body = body_of(response);
  for (const char* name :
       {"ringsync_collectives_total{job_id=\"metrics\",op=\"allreduce\",status=\"ok\"}",
        "ringsync_collective_bytes_total{job_id=\"metrics\",op=\"allreduce\",dtype=\"bf16\"}",
        "ringsync_collective_duration_seconds_bucket{job_id=\"metrics\",op=\"broadcast\",le=\"+Inf\"}",
        "ringsync_rank_wait_seconds_count{job_id=\"metrics\",rank=\"1\"}", "ringsync_clients 0",
        "ringsync_registered_buffer_bytes{memory=\"host\"} 0", "ringsync_stalled_tensors 0"})
    CHECK_MESSAGE(body.find(name) != std::string::npos, name);
  const std::string path = daemon.dir().file("metrics.txt");
  std::ofstream(path) << body;
  auto [rc, out] = run_command("promtool check metrics < " + path);
  CHECK_MESSAGE(rc == 0, out);
  CHECK_MESSAGE(out.empty(), out);
  CHECK(daemon.stop());
}

TEST_CASE("a real Prometheus server scrapes the daemon") {
  DaemonFixture daemon;
  run_traffic(daemon);
  const int port = free_port();
  REQUIRE(port > 0);
  const std::string config = daemon.dir().file("prometheus.yml");
  std::ofstream(config) << "global:\n  scrape_interval: 1s\n"
                        << "scrape_configs:\n  - job_name: ringsyncd\n    static_configs:\n"
                        << "      - targets: ['" << daemon.metrics_host_port() << "']\n";
  const std::string listen = "127.0.0.1:" + std::to_string(port);
  Child prometheus = spawn({"/usr/bin/prometheus", "--config.file=" + config,
                                   "--storage.tsdb.path=" + daemon.dir().file("tsdb"),
                                   "--web.listen-address=" + listen},
                                  {}, daemon.dir().file("prometheus.log"));
  // Ask the server until it has scraped a sample (bounded: 60 s).
  std::string answer;
  for (int i = 0; i < 240; ++i) {
    // Prometheus's own `job` label (the scrape job) sits beside the daemon's job_id.
    answer = http_get(listen,
                      "/api/v1/query?query=ringsync_collectives_total%7Bjob%3D%22ringsyncd%22%2Cjob_id%3D%22metrics%22"
                      "%2Cop%3D%22allgather%22%2Cstatus%3D%22ok%22%7D");
    if (answer.find("\"result\":[{") != std::string::npos) break;
    std::this_thread::sleep_for(250ms);
  }
  CHECK_MESSAGE(answer.find("\"result\":[{") != std::string::npos,
                answer, read_file(daemon.dir().file("prometheus.log")));
  // Two ranks ran two allgathers (in and out of place) for each of 2 counts, twice
  // (zero copy and staged): 8 successful allgathers.
  CHECK(answer.find("\"8\"]") != std::string::npos);
  const std::string up = http_get(listen, "/api/v1/query?query=up%7Bjob%3D%22ringsyncd%22%7D");
  CHECK(up.find("\"1\"]") != std::string::npos);
  prometheus.signal(SIGTERM);
  CHECK(prometheus.wait(20s).has_value());
  CHECK(daemon.stop());
}

}  // namespace test_integration_metrics_live
