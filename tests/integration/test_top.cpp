// `ringsync top --once` against real daemons of a 2-node job moving data over
// the ring, beside an address where nothing listens; and against a stand-in
// exporter whose two answers fix what the rates must come to. Deadlines only
// bound the test; nothing asserts how fast anything ran.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <sstream>
#include <thread>
#include <tuple>
#include <vector>

#include "cluster_fixture.h"
#include "common/metrics_text.h"
#include "daemon_fixture.h"

namespace test_integration_top {

using namespace ringsync;
using namespace ringsync::test;
using namespace std::chrono_literals;

namespace {

// A loopback port bound but not listening, held for the test: connecting to it
// is refused, and no other process can start listening there meanwhile.
class DeadPort {
 public:
  DeadPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    address_ = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  }
  ~DeadPort() { ::close(fd_); }
  const std::string& address() const { return address_; }

 private:
  int fd_ = -1;
  std::string address_;
};

// A stand-in exporter: the n-th request gets answers[n] (the last one again
// after that), as HTTP/1.1 200 text.
class FakeExporter {
 public:
  explicit FakeExporter(std::vector<std::string> answers) : answers_(std::move(answers)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    REQUIRE(::listen(listener_, 16) == 0);
    REQUIRE(::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    address_ = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeExporter() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
  }
  const std::string& address() const { return address_; }
  int requests() const { return served_; }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::string request;
      char buf[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        pollfd q{fd, POLLIN, 0};
        if (::poll(&q, 1, 5000) <= 0) break;
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        request.append(buf, static_cast<std::size_t>(n));
      }
      const std::string& body = answers_[std::min<std::size_t>(served_, answers_.size() - 1)];
      ++served_;
      const std::string response = "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " +
                                   std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
      [[maybe_unused]] auto sent = ::send(fd, response.data(), response.size(), MSG_NOSIGNAL);
      ::close(fd);
    }
  }

  std::vector<std::string> answers_;
  int listener_ = -1;
  std::string address_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> served_{0};
};

struct TopRun {
  int status = -1;
  std::string out, err;
};

// ringsync top ARGS (bounded by `timeout`, which only catches a hang).
TopRun top(const std::string& args) {
  TempDir dir;
  TopRun run;
  std::tie(run.status, std::ignore) = run_command("{ timeout 120 " + bin("ringsync") + " top " + args + " >" +
                                                  dir.file("out") + " 2>" + dir.file("err") + "; }");
  run.out = read_file(dir.file("out"));
  run.err = read_file(dir.file("err"));
  return run;
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The lines of section `title` (from its title line to the next blank line).
std::vector<std::string> section(const std::string& text, const std::string& title) {
  std::istringstream in(text);
  std::vector<std::string> lines;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (!inside) {
      inside = line.rfind(title, 0) == 0;
      continue;
    }
    if (line.empty()) break;
    lines.push_back(line);
  }
  return lines;
}

// The first line of `lines` whose words begin with `first...`, as words.
std::vector<std::string> row(const std::vector<std::string>& lines, const std::vector<std::string>& first) {
  for (const auto& line : lines) {
    auto w = words(line);
    if (w.size() >= first.size() && std::equal(first.begin(), first.end(), w.begin())) return w;
  }
  return {};
}

// The value of name{job_id=job} in a daemon's /metrics response (headers and body).
double gauge(const std::string& response, const std::string& name, const std::string& job) {
  const auto body = response.find("\r\n\r\n");
  REQUIRE_MESSAGE(body != std::string::npos, response);
  const std::string metrics_text = response.substr(body + 4);
  auto samples = metrics::parse_text(metrics_text);
  REQUIRE_MESSAGE(samples.ok(), samples.status().message());
  for (const auto& s : *samples)
    if (s.name == name && s.label("job_id") == job) return s.value;
  FAIL("no ", name, "{job_id=\"", job, "\"} in:\n", metrics_text);
  return -1;
}

}  // namespace

TEST_CASE("ringsync top --once shows a 2-node job's ring, links and ranks, and an address with nothing as DOWN") {
  ClusterOptions o;
  o.nodes = 2;
  o.local_size = 2;
  ClusterFixture cluster(o);
  DeadPort dead;
  RankGroup ranks(cluster, "top");
  // 1 Mi f32 = 4 MiB per allreduce: over the ring, not the direct exchange.
  ranks.start_all({"loop", "300", "peer lost", "1048576"});
  REQUIRE_MESSAGE(ranks.wait_marks("looping", 120s), ranks.report(), cluster.logs());

  const std::string a = cluster.metrics_host_port(0), b = cluster.metrics_host_port(1);
  const TopRun run = top("--once --interval 2 --metrics " + a + "," + dead.address() + ",http://" + b + "/metrics");
  const std::string all = run.out + run.err;
  CHECK_MESSAGE(run.status == 0, all);
  CHECK_MESSAGE(run.err.empty(), run.err);
  CHECK_MESSAGE(run.out.find("\x1b") == std::string::npos, "a snapshot has no escape codes");
  CHECK_MESSAGE(run.out.rfind("ringsync top: 2 of 3 daemon(s) up, rates over ", 0) == 0, all);

  // Both nodes, with the ring's size and each node's epoch as its gauge says.
  const auto nodes = section(run.out, "NODES");
  for (int node = 0; node < 2; ++node) {
    const std::string instance = cluster.metrics_host_port(node);
    const auto w = row(nodes, {instance, "up"});
    REQUIRE_MESSAGE(w.size() >= 7, "no row for ", instance, " in:\n", run.out);
    CHECK(w[4] == cluster.job_id());
    CHECK(w[5] == "2");  // ring nodes
    const double epoch = gauge(cluster.metrics(node), "ringsync_ring_epoch", cluster.job_id());
    CHECK_MESSAGE(w[6] == std::to_string(static_cast<long>(epoch)), run.out);
  }
  // The dead address: DOWN with why, and the others shown all the same.
  const auto down = row(nodes, {dead.address(), "DOWN"});
  CHECK_MESSAGE(!down.empty(), run.out);
  CHECK_MESSAGE(run.out.find("cannot connect") != std::string::npos, run.out);

  // Each node's tx link to the other moved data in the interval.
  const auto links = section(run.out, "LINKS");
  for (int node = 0; node < 2; ++node) {
    const std::string instance = cluster.metrics_host_port(node);
    const std::string peer = std::to_string(1 - node);
    const auto w = row(links, {instance, cluster.job_id(), peer});
    REQUIRE_MESSAGE(w.size() >= 7, "no link row for ", instance, " in:\n", run.out);
    const auto tx = [&] {
      for (const auto& line : links) {
        auto x = words(line);
        if (x.size() >= 7 && x[0] == instance && x[2] == peer && x[4] == "tx") return x;
      }
      return std::vector<std::string>{};
    }();
    REQUIRE_MESSAGE(tx.size() >= 7, run.out);
    CHECK_MESSAGE(tx[5] != "-", run.out);
    CHECK_MESSAGE(std::stod(tx[5]) > 0, run.out);
    CHECK(tx[6].find("B/s") != std::string::npos);
  }
  // Exactly one link of the job is the slowest.
  int slowest = 0;
  for (const auto& line : links) slowest += line.find("<- slowest") != std::string::npos;
  CHECK_MESSAGE(slowest == 1, run.out);

  // Both local ranks of both nodes submitted in the interval.
  const auto rank_rows = section(run.out, "RANKS");
  for (int node = 0; node < 2; ++node)
    for (const char* rank : {"0", "1"}) {
      const auto w = row(rank_rows, {cluster.metrics_host_port(node), cluster.job_id(), rank});
      REQUIRE_MESSAGE(w.size() >= 4, run.out);
      CHECK_MESSAGE(w[3] != "-", run.out);
    }

  // --job-id keeps another job's view empty; the daemons still answer.
  const TopRun other = top("--once --interval 0.2 --job-id no-such-job --metrics " + a + "," + b);
  CHECK_MESSAGE(other.status == 0, other.out, other.err);
  CHECK_MESSAGE(other.out.find("  none (no ring has moved data yet)") != std::string::npos, other.out);
  CHECK_MESSAGE(other.out.find(" DOWN ") == std::string::npos, other.out);

  for (std::size_t i = 0; i < ranks.size(); ++i) ranks.signal(static_cast<int>(i), SIGKILL);
}

TEST_CASE("ringsync top --once exits 1 naming every address when no daemon answers") {
  DeadPort first, second;
  const TopRun run = top("--once --interval 0.1 --metrics " + first.address() + "," + second.address());
  CHECK(run.status == 1);
  CHECK_MESSAGE(run.out.empty(), run.out);
  CHECK_MESSAGE(run.err.find("no daemon answered") != std::string::npos, run.err);
  CHECK_MESSAGE(run.err.find(first.address() + ": cannot connect") != std::string::npos, run.err);
  CHECK_MESSAGE(run.err.find(second.address() + ": cannot connect") != std::string::npos, run.err);
}

TEST_CASE("ringsync top computes send-busy bandwidth, the slowest link, rank lateness and new errors") {
  // Two answers: the second adds 1e9 data bytes to each link, sent in 1 s to
  // peer 1 and in 4 s to peer 2 (so 1.00 GB/s and 250.0 MB/s whatever the
  // interval), 100 wait observations (10 up to 1 ms, 90 up to 10 ms: p90 9.0 ms,
  // mean 5.0 ms), rank 1 last 70 times, 3 new timeouts. No other series: the
  // cells they would fill stay empty.
  const std::string link1 = "job_id=\"j\",peer=\"1\",peer_address=\"10.0.0.2:29517\"";
  const std::string link2 = "job_id=\"j\",peer=\"2\",peer_address=\"10.0.0.3:29517\"";
  auto text = [&](double bytes, double busy1, double busy2, double le1, double le2, double sum, double last,
                  double timeouts) {
    std::string t = "# HELP ringsync_link_bytes_total Bytes.\n# TYPE ringsync_link_bytes_total counter\n";
    for (const auto& l : {link1, link2}) {
      t += "ringsync_link_bytes_total{" + l + ",direction=\"tx\",plane=\"data\"} " + std::to_string(bytes) + "\n";
      t += "ringsync_link_bytes_total{" + l + ",direction=\"tx\",plane=\"control\"} 100\n";
      t += "ringsync_link_bytes_total{" + l + ",direction=\"rx\",plane=\"data\"} " + std::to_string(bytes) + "\n";
    }
    t += "ringsync_link_send_busy_seconds_total{" + link1 + "} " + std::to_string(busy1) + "\n";
    t += "ringsync_link_send_busy_seconds_total{" + link2 + "} " + std::to_string(busy2) + "\n";
    for (const char* rank : {"0", "1"}) {
      const std::string r = std::string("job_id=\"j\",rank=\"") + rank + "\"";
      t += "ringsync_rank_wait_seconds_bucket{" + r + ",le=\"0.001\"} " + std::to_string(le1) + "\n";
      t += "ringsync_rank_wait_seconds_bucket{" + r + ",le=\"0.01\"} " + std::to_string(le2) + "\n";
      t += "ringsync_rank_wait_seconds_bucket{" + r + ",le=\"+Inf\"} " + std::to_string(le2) + "\n";
      t += "ringsync_rank_wait_seconds_sum{" + r + "} " + std::to_string(sum) + "\n";
      t += "ringsync_rank_wait_seconds_count{" + r + "} " + std::to_string(le2) + "\n";
      t += "ringsync_rank_last_total{" + r + "} " + std::to_string(rank[0] == '1' ? last : 0.0) + "\n";
    }
    t += "ringsync_errors_total{kind=\"timeout\"} " + std::to_string(timeouts) + "\n";
    t += "ringsync_errors_total{kind=\"peer_lost\"} 2\n";
    t += "ringsync_ring_nodes{job_id=\"j\"} 3\nringsync_ring_epoch{job_id=\"j\"} 4\n";
    return t;
  };
  FakeExporter exporter({text(5e9, 10, 10, 5, 50, 1.0, 30, 1), text(6e9, 11, 14, 15, 150, 1.5, 100, 4)});
  FakeExporter junk({"ringsync_clients 1\nnot a sample line\n"});

  const TopRun run = top("--once --interval 0.2 --metrics " + exporter.address() + "," + junk.address());
  CHECK_MESSAGE(run.status == 0, run.out, run.err);
  const auto node = row(section(run.out, "NODES"), {exporter.address(), "up"});
  REQUIRE_MESSAGE(node.size() >= 7, run.out);
  CHECK(node[2] == "-");  // no ringsync_clients served
  CHECK(node[4] == "j");
  CHECK(node[5] == "3");
  CHECK(node[6] == "4");
  const auto junk_row = row(section(run.out, "NODES"), {junk.address(), "DOWN"});
  CHECK_MESSAGE(!junk_row.empty(), run.out);
  CHECK_MESSAGE(run.out.find("line 2: ") != std::string::npos, run.out);

  const auto links = section(run.out, "LINKS");
  const auto busy = [&](const std::string& peer) {
    for (const auto& line : links) {
      auto w = words(line);
      if (w.size() >= 9 && w[2] == peer && w[4] == "tx") return w[7] + " " + w[8] + (line.find("<- slowest") != std::string::npos ? " slowest" : "");
    }
    return std::string("(no tx row for peer " + peer + ")");
  };
  CHECK_MESSAGE(busy("1") == "1.00 GB/s", run.out);
  CHECK_MESSAGE(busy("2") == "250.0 MB/s slowest", run.out);
  CHECK_MESSAGE(run.out.find("10.0.0.3:29517") != std::string::npos, run.out);

  const auto ranks = section(run.out, "RANKS");
  const auto r1 = row(ranks, {exporter.address(), "j", "1"});
  REQUIRE_MESSAGE(r1.size() >= 10, run.out);
  CHECK(r1[3] == "100");                    // collectives in the interval
  CHECK(r1[4] + " " + r1[5] == "5.0 ms");   // mean wait
  CHECK(r1[6] + " " + r1[7] == "9.0 ms");   // p90 wait
  CHECK(r1[8] == "70");                     // last
  CHECK(r1.back() == "latest");

  const auto errors = section(run.out, "ERRORS");
  CHECK_MESSAGE(row(errors, {exporter.address(), "timeout", "+3"}).size() == 3, run.out);
  CHECK_MESSAGE(run.out.find("peer_lost") == std::string::npos, run.out);  // no new ones
}

TEST_CASE("ringsync top --launch-dir watches the daemons a ringsync launch recorded") {
  TempDir dir;
  const std::string logs = dir.file("logs");
  Child launch = spawn({bin("ringsync"), "launch", "--nodes", "2", "--slots", "1", "--log-dir", logs, "--", "sleep",
                        "300"},
                       {}, dir.file("launch.log"));
  const std::string record = logs + "/metrics-addresses";
  // The daemons record their addresses as they start; launch prints its summary after that.
  const std::string hint = "ringsync top --launch-dir " + logs;
  const auto recorded_and_said = [&] {
    return !read_file(record).empty() && read_file(dir.file("launch.log")).find(hint) != std::string::npos;
  };
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (!recorded_and_said() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(50ms);
  REQUIRE_MESSAGE(!read_file(record).empty(), read_file(dir.file("launch.log")));
  CHECK_MESSAGE(read_file(dir.file("launch.log")).find(hint) != std::string::npos, read_file(dir.file("launch.log")));

  const TopRun run = top("--once --interval 0.2 --launch-dir " + logs);
  CHECK_MESSAGE(run.status == 0, run.out, run.err);
  CHECK_MESSAGE(run.out.rfind("ringsync top: 2 of 2 daemon(s) up", 0) == 0, run.out);

  launch.signal(SIGTERM);
  CHECK(launch.wait(60s).has_value());
  CHECK_MESSAGE(!std::filesystem::exists(record), "the record outlived the daemons");
  const TopRun gone = top("--once --launch-dir " + logs);
  CHECK(gone.status == 2);
  CHECK_MESSAGE(gone.err.find("metrics-addresses") != std::string::npos, gone.err);
}

TEST_CASE("ringsync help lists top; top --help and bad arguments") {
  auto [rc, help] = run_command(bin("ringsync") + " help");
  CHECK(rc == 0);
  CHECK(help.find("  top ") != std::string::npos);
  std::tie(rc, help) = run_command(bin("ringsync") + " top --help");
  CHECK(rc == 0);
  CHECK(help.find("--once") != std::string::npos);
  CHECK(help.find("--launch-dir") != std::string::npos);
  const TopRun bad = top("--interval soon --metrics 127.0.0.1:1");
  CHECK(bad.status == 2);
  CHECK(bad.err.find("--interval 'soon'") != std::string::npos);
  const TopRun not_an_address = top("--once --metrics nowhere");
  CHECK(not_an_address.status == 2);
  CHECK(not_an_address.err.find("'nowhere' is not HOST:PORT") != std::string::npos);
}

}  // namespace test_integration_top
