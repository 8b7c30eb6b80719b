#include "common/metrics.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <vector>

namespace test_common_metrics {

namespace m = ringsync::metrics;

namespace {

std::string escaped_label(std::string_view v) {
  std::string out;
  m::append_escaped_label_value(out, v);
  return out;
}

std::string escaped_help(std::string_view v) {
  std::string out;
  m::append_escaped_help(out, v);
  return out;
}

// Runs `promtool check metrics` on `text`; returns {exit status, output}.
std::pair<int, std::string> promtool_check(const std::string& text) {
  char path[] = "/tmp/ringsync_metrics_XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  close(fd);
  const std::string cmd = std::string("promtool check metrics < ") + path + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string output;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) output.append(buf, n);
  const int status = pclose(pipe);
  unlink(path);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

}  // namespace

TEST_CASE("values are formatted so that Go's ParseFloat reads them back exactly") {
  CHECK(m::format_value(0) == "0");
  CHECK(m::format_value(-0.0) == "0");
  CHECK(m::format_value(42) == "42");
  CHECK(m::format_value(-7) == "-7");
  CHECK(m::format_value(9007199254740991.0) == "9007199254740991");  // 2^53 - 1: no exponent
  CHECK(m::format_value(1e15) == "1000000000000000");
  CHECK(m::format_value(0.1) == "0.1");
  CHECK(m::format_value(1.5) == "1.5");
  CHECK(m::format_value(1e-9) == "1e-09");
  CHECK(m::format_value(1e300) == "1e+300");
  CHECK(m::format_value(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(m::format_value(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(m::format_value(std::numeric_limits<double>::quiet_NaN()) == "NaN");

  for (double v : {0.1, 1.0 / 3.0, 1e-9, 123456.789, 1e300, 2.5e-308, 9007199254740993.0,
                   std::numeric_limits<double>::max(), std::numeric_limits<double>::denorm_min()}) {
    CAPTURE(v);
    CHECK(std::strtod(m::format_value(v).c_str(), nullptr) == v);
  }
}

TEST_CASE("HELP text and label values are escaped as the text format requires") {
  CHECK(escaped_help("line one\nline \"two\" \\ end") == "line one\\nline \"two\" \\\\ end");
  CHECK(escaped_label("say \"hi\"\\n\nnext") == "say \\\"hi\\\"\\\\n\\nnext");
  CHECK(escaped_label("héllo ✓ 🚀") == "héllo ✓ 🚀");  // valid UTF-8 passes through
  // Invalid UTF-8 (stray continuation, truncated sequence, overlong) is replaced.
  CHECK(escaped_label("a\x80z") == "a\xEF\xBF\xBDz");
  CHECK(escaped_label("a\xE2\x9C") == "a\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(escaped_label("\xC0\xAF") == "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST_CASE("counters and gauges render HELP, TYPE and sorted series") {
  m::Registry reg;
  auto& ops = reg.counter("ringsync_collectives_total", "Collectives finished.", {"op", "status"});
  ops.with({"broadcast", "ok"}).inc();
  ops.with({"allreduce", "ok"}).inc(2);
  ops.with({"allreduce", "error"}).inc(0.5);
  auto& clients = reg.gauge("ringsync_clients", "Connected trainers.");
  clients.with().set(3);
  clients.with().dec();

  CHECK(reg.render() ==
        "# HELP ringsync_clients Connected trainers.\n"
        "# TYPE ringsync_clients gauge\n"
        "ringsync_clients 2\n"
        "# HELP ringsync_collectives_total Collectives finished.\n"
        "# TYPE ringsync_collectives_total counter\n"
        "ringsync_collectives_total{op=\"allreduce\",status=\"error\"} 0.5\n"
        "ringsync_collectives_total{op=\"allreduce\",status=\"ok\"} 2\n"
        "ringsync_collectives_total{op=\"broadcast\",status=\"ok\"} 1\n");
}

TEST_CASE("a family without labels renders 0 before the first update; one with labels renders no series") {
  m::Registry reg;
  reg.gauge("ringsync_stalled_tensors", "Tensors waiting for a rank.");
  reg.counter("ringsync_errors_total", "Errors by kind.", {"kind"});
  CHECK(reg.render() ==
        "# HELP ringsync_errors_total Errors by kind.\n"
        "# TYPE ringsync_errors_total counter\n"
        "# HELP ringsync_stalled_tensors Tensors waiting for a rank.\n"
        "# TYPE ringsync_stalled_tensors gauge\n"
        "ringsync_stalled_tensors 0\n");
}

TEST_CASE("histogram buckets are cumulative, +Inf equals _count, _sum adds up") {
  m::Registry reg;
  auto& h = reg.histogram("ringsync_collective_duration_seconds", "Time per collective.", {0.1, 1, 10}, {"op"});
  auto& ar = h.with({"allreduce"});
  for (double v : {0.05, 0.1, 0.5, 5.0, 50.0}) ar.observe(v);  // 0.1 lands in le="0.1": bounds are inclusive

  const auto snap = ar.snapshot();
  CHECK(snap.cumulative == std::vector<std::uint64_t>{2, 3, 4, 5});
  CHECK(snap.count == snap.cumulative.back());
  CHECK(snap.sum == doctest::Approx(55.65));

  CHECK(reg.render() ==
        "# HELP ringsync_collective_duration_seconds Time per collective.\n"
        "# TYPE ringsync_collective_duration_seconds histogram\n"
        "ringsync_collective_duration_seconds_bucket{op=\"allreduce\",le=\"0.1\"} 2\n"
        "ringsync_collective_duration_seconds_bucket{op=\"allreduce\",le=\"1\"} 3\n"
        "ringsync_collective_duration_seconds_bucket{op=\"allreduce\",le=\"10\"} 4\n"
        "ringsync_collective_duration_seconds_bucket{op=\"allreduce\",le=\"+Inf\"} 5\n"
        "ringsync_collective_duration_seconds_sum{op=\"allreduce\"} 55.65\n"
        "ringsync_collective_duration_seconds_count{op=\"allreduce\"} 5\n");

  SUBCASE("NaN goes to +Inf only and poisons the sum") {
    ar.observe(std::numeric_limits<double>::quiet_NaN());
    const auto after = ar.snapshot();
    CHECK(after.cumulative == std::vector<std::uint64_t>{2, 3, 4, 6});
    CHECK(after.count == 6);
    CHECK(std::isnan(after.sum));
  }
}

TEST_CASE("exponential_buckets gives clean bounds") {
  CHECK(m::exponential_buckets(0.001, 10, 4) == std::vector<double>{0.001, 0.01, 0.1, 1});
  CHECK(m::exponential_buckets(1e-6, 10, 3) == std::vector<double>{1e-6, 1e-5, 1e-4});
  CHECK(m::exponential_buckets(1024, 2, 3) == std::vector<double>{1024, 2048, 4096});
  CHECK(m::exponential_buckets(1, 2, 1) == std::vector<double>{1});
  CHECK_THROWS_AS(m::exponential_buckets(0, 2, 3), std::invalid_argument);
  CHECK_THROWS_AS(m::exponential_buckets(1, 1, 3), std::invalid_argument);
  CHECK_THROWS_AS(m::exponential_buckets(1, 2, 0), std::invalid_argument);
  CHECK_THROWS_AS(m::exponential_buckets(1e300, 1e10, 3), std::invalid_argument);  // overflows to +Inf
}

TEST_CASE("the wrong number of label values is ignored, counted and described, never thrown") {
  m::Registry reg;
  auto& c = reg.counter("ringsync_collective_bytes_total", "Bytes.", {"op", "dtype"});
  const std::uint64_t before = m::misuse_count();
  CHECK_NOTHROW(c.with({"allreduce"}).inc(5));
  CHECK(m::misuse_count() == before + 1);
  if (before == 0)
    CHECK(m::first_misuse() == "metric 'ringsync_collective_bytes_total' takes 2 label value(s) (op, dtype), got 1");
  CHECK_NOTHROW(c.with().inc());
  CHECK_FALSE(c.remove({"a", "b", "c"}));
  auto& g = reg.gauge("ringsync_ring_nodes", "Nodes.");
  CHECK_NOTHROW(g.with({"x"}).set(3));
  CHECK(m::misuse_count() == before + 4);
  // Nothing of it shows: the family without labels keeps its one series at 0.
  CHECK(c.size() == 0);
  CHECK(reg.render().find("ringsync_ring_nodes 0\n") != std::string::npos);
  CHECK(reg.render().find("allreduce") == std::string::npos);
}

TEST_CASE("invalid registrations are rejected with the rule that was broken") {
  m::Registry reg;
  CHECK_THROWS_WITH_AS(reg.gauge("Ringsync", "h"),
                       "metric name 'Ringsync' is invalid: use snake_case [a-z_][a-z0-9_]* (no upper case, no ':')",
                       std::invalid_argument);
  CHECK_THROWS_AS(reg.gauge("", "h"), std::invalid_argument);
  CHECK_THROWS_AS(reg.gauge("1abc", "h"), std::invalid_argument);
  CHECK_THROWS_AS(reg.gauge("job:rate5m", "h"), std::invalid_argument);
  CHECK_THROWS_AS(reg.gauge("with space", "h"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(reg.counter("ringsync_collectives", "h"),
                       "counter 'ringsync_collectives' must end in '_total' (Prometheus naming convention)",
                       std::invalid_argument);
  CHECK_THROWS_AS(reg.gauge("ringsync_clients_total", "h"), std::invalid_argument);
  CHECK_THROWS_AS(reg.gauge("ringsync_things_count", "h"), std::invalid_argument);
  CHECK_THROWS_AS(reg.histogram("ringsync_wait_sum", "h", {1}), std::invalid_argument);
  CHECK_THROWS_AS(reg.gauge("ringsync_x", ""), std::invalid_argument);

  CHECK_THROWS_AS(reg.gauge("ringsync_x", "h", {"le"}), std::invalid_argument);
  CHECK_THROWS_AS(reg.gauge("ringsync_x", "h", {"quantile"}), std::invalid_argument);
  CHECK_THROWS_AS(reg.gauge("ringsync_x", "h", {"__name__"}), std::invalid_argument);
  CHECK_THROWS_AS(reg.gauge("ringsync_x", "h", {"Peer"}), std::invalid_argument);
  CHECK_THROWS_AS(reg.gauge("ringsync_x", "h", {"peer-id"}), std::invalid_argument);
  CHECK_THROWS_AS(reg.gauge("ringsync_x", "h", {"peer", "peer"}), std::invalid_argument);

  const double inf = std::numeric_limits<double>::infinity();
  CHECK_THROWS_AS(reg.histogram("ringsync_h_seconds", "h", {}), std::invalid_argument);
  CHECK_THROWS_AS(reg.histogram("ringsync_h_seconds", "h", {1, 1}), std::invalid_argument);
  CHECK_THROWS_AS(reg.histogram("ringsync_h_seconds", "h", {2, 1}), std::invalid_argument);
  CHECK_THROWS_AS(reg.histogram("ringsync_h_seconds", "h", {1, inf}), std::invalid_argument);
  CHECK_THROWS_AS(reg.histogram("ringsync_h_seconds", "h", {std::nan("")}), std::invalid_argument);

  // Nothing half-registered was left behind.
  CHECK(reg.render().empty());
}

TEST_CASE("registering a name twice returns the same family only for the same definition") {
  m::Registry reg;
  auto& a = reg.counter("ringsync_link_bytes_total", "Bytes per link.", {"peer", "direction"});
  auto& b = reg.counter("ringsync_link_bytes_total", "Bytes per link.", {"peer", "direction"});
  CHECK(&a == &b);
  CHECK_THROWS_WITH_AS(reg.gauge("ringsync_link_bytes_total", "Bytes per link.", {"peer", "direction"}),
                       "gauge 'ringsync_link_bytes_total' must not end in '_total': only counters do",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(reg.counter("ringsync_link_bytes_total", "Bytes per link.", {"peer"}),
                       "metric 'ringsync_link_bytes_total' is already registered with labels (peer, direction); "
                       "one name, one definition",
                       std::invalid_argument);
  CHECK_THROWS_AS(reg.counter("ringsync_link_bytes_total", "Other help.", {"peer", "direction"}),
                  std::invalid_argument);
  reg.histogram("ringsync_wait_seconds", "h", {1, 2});
  CHECK_THROWS_AS(reg.gauge("ringsync_wait_seconds", "h"), std::invalid_argument);
  CHECK_THROWS_AS(reg.histogram("ringsync_wait_seconds", "h", {1, 3}), std::invalid_argument);
}

TEST_CASE("a counter only goes up") {
  m::Registry reg;
  auto& c = reg.counter("ringsync_errors_total", "Errors.").with();
  const std::uint64_t before = m::misuse_count();
  CHECK_NOTHROW(c.inc(-1));  // ignored and counted: a bug must not end a daemon
  CHECK_NOTHROW(c.inc(std::nan("")));
  CHECK(m::misuse_count() == before + 2);
  CHECK(c.value() == 0);
  c.inc(0);
  c.inc(3);
  CHECK(c.value() == 3);
}

TEST_CASE("removed series disappear, stale references stay valid, with() revives at zero") {
  m::Registry reg;
  auto& bw = reg.gauge("ringsync_link_bandwidth_bytes_per_second", "Bandwidth.", {"peer"});
  auto& one = bw.with({"node1"});
  bw.with({"node2"}).set(2);
  one.set(1);
  CHECK(bw.size() == 2);

  CHECK(bw.remove({"node1"}));
  CHECK_FALSE(bw.remove({"node1"}));
  CHECK_FALSE(bw.remove({"never"}));
  CHECK(bw.size() == 1);
  one.set(99);  // a stale writer: harmless and invisible
  std::string text = reg.render();
  CHECK(text.find("node1") == std::string::npos);
  CHECK(text.find("ringsync_link_bandwidth_bytes_per_second{peer=\"node2\"} 2\n") != std::string::npos);

  auto& again = bw.with({"node1"});
  CHECK(&again == &one);
  CHECK(again.value() == 0);

  bw.clear();
  CHECK(bw.size() == 0);
  CHECK(reg.render() ==
        "# HELP ringsync_link_bandwidth_bytes_per_second Bandwidth.\n"
        "# TYPE ringsync_link_bandwidth_bytes_per_second gauge\n");

  const std::vector<std::string> values{"node3"};
  bw.with(values).set(5);  // runtime label values from a vector
  CHECK(bw.with({"node3"}).value() == 5);
  CHECK(bw.remove(values));
}

TEST_CASE("concurrent updates from many threads are all counted") {
  m::Registry reg;
  auto& fam = reg.counter("ringsync_collectives_total", "h", {"op", "status"});
  auto& hist = reg.histogram("ringsync_rank_wait_seconds", "h", {0.5}, {"rank"});
  auto& gauge = reg.gauge("ringsync_clients", "h");
  constexpr int kThreads = 4;
  constexpr int kIters = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIters; ++i) {
        fam.with({"allreduce", "ok"}).inc();                 // created on demand by whichever thread is first
        fam.with({"op" + std::to_string(i % 8), "ok"}).inc();  // many distinct children
        hist.with({"0"}).observe(i % 2 == 0 ? 0.25 : 1.0);
        gauge.with().inc();
        if (i % 1000 == 0) (void)reg.render();  // scrapes during updates
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(fam.with({"allreduce", "ok"}).value() == kThreads * kIters);
  CHECK(fam.with({"op3", "ok"}).value() == kThreads * kIters / 8);
  const auto snap = hist.with({"0"}).snapshot();
  CHECK(snap.count == kThreads * kIters);
  CHECK(snap.cumulative[0] == kThreads * kIters / 2);
  CHECK(gauge.with().value() == kThreads * kIters);
}

TEST_CASE("promtool check metrics accepts the exposition with every metric type and awkward values") {
  m::Registry reg;
  auto& c = reg.counter("ringsync_collectives_total", "Collectives by op and status.\nSecond line \\ here.",
                        {"op", "status"});
  c.with({"allreduce", "ok"}).inc(12);
  c.with({"quote\"back\\slash\nnewline", "ok"}).inc(1e-9);
  c.with({"", "empty value"}).inc(1e20);
  c.with({"bad utf8 \xff\xfe", "ünïcødé"}).inc();
  auto& g = reg.gauge("ringsync_link_bandwidth_bytes_per_second", "Bandwidth per link.", {"peer", "direction"});
  g.with({"[::1]:9400", "tx"}).set(-std::numeric_limits<double>::infinity());
  g.with({"10.0.0.2:9400", "rx"}).set(std::numeric_limits<double>::quiet_NaN());
  g.with({"10.0.0.3:9400", "rx"}).set(0.1);
  reg.gauge("ringsync_ring_epoch", "Ring epoch.").with().set(7);
  reg.gauge("ringsync_gpu_memory_used_bytes", "Unused family: HELP and TYPE only.", {"gpu", "uuid"});
  auto& h = reg.histogram("ringsync_rank_wait_seconds", "How late each rank submits.",
                          m::exponential_buckets(1e-6, 10, 7), {"rank"});
  for (double v : {1e-7, 3e-5, 0.02, 0.5, 2.0, 100.0}) h.with({"3"}).observe(v);
  h.with({"0"});
  reg.histogram("ringsync_collective_duration_seconds", "No labels.", {0.001, 0.01}).with().observe(0.005);

  const std::string text = reg.render();
  CHECK(text.find(R"(op="quote\"back\\slash\nnewline")") != std::string::npos);
  CHECK(text.find(R"(le="1e-05")") != std::string::npos);
  const auto [status, output] = promtool_check(text);
  INFO("exposition:\n" << text);
  REQUIRE_MESSAGE(status != 127, "promtool not found on PATH (Debian package 'prometheus')");
  CHECK(output == "");
  CHECK(status == 0);
}

TEST_CASE("erase_where deletes every series with a label value, and only those") {
  m::Registry reg;
  auto& c = reg.counter("ringsync_things_total", "Things.", {"job_id", "op"});
  c.with({"a", "x"}).inc();
  c.with({"a", "y"}).inc(2);
  c.with({"b", "x"}).inc(3);
  CHECK(c.erase_where("job_id", "a") == 2);
  CHECK(c.size() == 1);
  const std::string text = reg.render();
  CHECK(text.find("job_id=\"a\"") == std::string::npos);
  CHECK(text.find("ringsync_things_total{job_id=\"b\",op=\"x\"} 3") != std::string::npos);
  CHECK(c.erase_where("no_such_label", "b") == 0);
  // A series made again after erasure starts from zero.
  c.with({"a", "x"}).inc();
  CHECK(reg.render().find("ringsync_things_total{job_id=\"a\",op=\"x\"} 1") != std::string::npos);
}

}  // namespace test_common_metrics
