// The observability files against the real thing: 3 namespace hosts with one
// ringsyncd and 1 trainer rank each, ONE host's link shaped with `tc tbf` to a
// fraction of the others', allreduces running, and a real Prometheus (inside
// host 0, scraping the 3 daemons every second) with dashboards/rules loaded.
// Every query of every Grafana dashboard (dashboards/grafana/*.json, variables
// substituted) must return data, and SlowLink must fire naming exactly the
// shaped host's link while nothing else fires. The rules' `for:` durations are
// shortened to 5s in the copy Prometheus loads, so the alerts fire within the
// test's bounded time; their expressions are the file's own.
//
// Needs root (network namespaces, tc) and Prometheus (scripts/install-deps.sh).
#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>
#include <vector>

#include "cluster_fixture.h"
#include "common/http_get.h"
#include "daemon_fixture.h"
#include "netns.h"
#include "process.h"

namespace test_integration_prometheus_dashboards {

using namespace ringsync::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

constexpr int kHosts = 3;
constexpr int kShaped = 2;                  // the host whose link is slow
constexpr std::uint16_t kMetricsPort = 9400;  // every host has its own port space
const std::string kPrometheus = "/usr/bin/prometheus";
const std::string kJobId = "observe";
const std::string kScrapeJob = "ringsync";

std::string percent_encode(const std::string& text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// The Prometheus HTTP API inside host 0.
class PrometheusApi {
 public:
  PrometheusApi(const NetnsHosts& hosts, std::string listen) : hosts_(hosts), listen_(std::move(listen)) {}

  // GET path; the parsed JSON answer (null when there was none).
  json get(const std::string& path) const {
    json answer;
    hosts_.inside(0, [&] {
      auto response = ringsync::http_get(listen_, path);
      if (response.ok()) answer = json::parse(response->body, nullptr, false);
    });
    return answer.is_discarded() ? json() : answer;
  }
  json query(const std::string& expr) const { return get("/api/v1/query?query=" + percent_encode(expr)); }

 private:
  const NetnsHosts& hosts_;
  std::string listen_;
};

// Grafana's variables as this test's job has them.
std::string substitute(std::string expr) {
  static const std::vector<std::pair<std::string, std::string>> values = {
      {"job_id", kJobId},           {"job", kScrapeJob},     {"instance", ".*"},
      {"__rate_interval", "1m"},    {"__interval", "15s"},   {"__range_s", "300"},
      {"__range", "5m"},            {"__interval_ms", "15000"}};
  // Longest names first so that $job_id is not read as $job followed by "_id".
  for (const auto& [name, value] : values) {
    for (const std::string& form : std::vector<std::string>{"${" + name + "}", "[[" + name + "]]"}) {
      for (auto at = expr.find(form); at != std::string::npos; at = expr.find(form, at + value.size()))
        expr.replace(at, form.size(), value);
    }
    const std::regex bare("\\$" + name + "(?![A-Za-z0-9_])");
    expr = std::regex_replace(expr, bare, value);
  }
  return expr;
}

struct Query {
  std::string where;  // "ringsync-overview.json: panel 'Collectives/s'"
  std::string expr;
  bool may_be_empty = false;  // annotations: data only when the event happened
};

void collect_panels(const json& panels, const std::string& file, std::vector<Query>& out) {
  if (!panels.is_array()) return;
  for (const auto& panel : panels) {
    collect_panels(panel.value("panels", json::array()), file, out);
    for (const auto& target : panel.value("targets", json::array()))
      if (target.contains("expr") && target["expr"].is_string())
        out.push_back({file + ": panel '" + panel.value("title", "?") + "'", target["expr"].get<std::string>()});
  }
}

std::vector<Query> dashboard_queries(std::vector<std::string>& variable_queries) {
  std::vector<Query> queries;
  const std::filesystem::path folder = std::filesystem::path(RINGSYNC_SOURCE_DIR) / "dashboards" / "grafana";
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.path().extension() != ".json") continue;
    const json dashboard = json::parse(read_file(entry.path().string()));
    const std::string file = entry.path().filename().string();
    collect_panels(dashboard.value("panels", json::array()), file, queries);
    for (const auto& a : dashboard.value("annotations", json::object()).value("list", json::array())) {
      const json expr = a.contains("expr") ? a["expr"] : a.value("target", json::object()).value("expr", json());
      if (expr.is_string())
        queries.push_back({file + ": annotation '" + a.value("name", "?") + "'", expr.get<std::string>(), true});
    }
    for (const auto& v : dashboard.value("templating", json::object()).value("list", json::array())) {
      if (v.value("type", "") != "query") continue;
      const json q = v.value("query", json());
      const std::string text = q.is_string() ? q.get<std::string>() : q.is_object() ? q.value("query", "") : "";
      if (!text.empty()) variable_queries.push_back(file + ": variable '" + v.value("name", "?") + "': " + text);
    }
  }
  return queries;
}

// The rules file with every `for:` shortened to 5s.
std::string rules_for_test() {
  const std::string rules = read_file(std::string(RINGSYNC_SOURCE_DIR) + "/dashboards/rules/ringsync.rules.yml");
  return std::regex_replace(rules, std::regex("\\n([ \\t]*)for:[ \\t]*[0-9smhd]+"), "\n$1for: 5s");
}

struct Alert {
  std::string name, state;
  json labels;
};

std::vector<Alert> alerts(const PrometheusApi& api) {
  std::vector<Alert> out;
  const json answer = api.get("/api/v1/alerts");
  if (!answer.is_object()) return out;
  for (const auto& a : answer["data"].value("alerts", json::array()))
    out.push_back({a["labels"].value("alertname", ""), a.value("state", ""), a["labels"]});
  return out;
}

std::string describe(const std::vector<Alert>& list) {
  std::string text;
  for (const auto& a : list) text += "  " + a.name + " (" + a.state + ") " + a.labels.dump() + "\n";
  return text.empty() ? "  (none)\n" : text;
}

#define REQUIRE_NETNS()                                       \
  do {                                                        \
    const std::string why = NetnsHosts::unavailable_reason(); \
    REQUIRE_MESSAGE(why.empty(), why);                        \
  } while (0)

}  // namespace

TEST_CASE("prometheus: dashboards' queries return data and SlowLink names the shaped host's link") {
  REQUIRE_NETNS();
  REQUIRE_MESSAGE(std::filesystem::exists(kPrometheus), "needs Prometheus (scripts/install-deps.sh installs it)");
  NetnsHosts hosts(kHosts);
  // The shaped host sends at 50 Mbit/s through a short queue; the others' veths
  // move GB/s.
  const auto [tc_code, tc_output] = hosts.run(kShaped, "tc qdisc add dev eth0 root tbf rate 50mbit burst 64kb latency 10ms");
  REQUIRE_MESSAGE(tc_code == 0, "tc tbf: ", tc_output);

  ClusterOptions o;
  o.nodes = kHosts;
  // One rank per host: with two, a loaded machine's scheduler makes one of
  // them late often enough for Straggler to fire, rightly; this test is about
  // the links.
  o.local_size = 1;
  o.job_id = kJobId;
  for (int i = 0; i < kHosts; ++i) o.places.push_back({hosts.address(i), 29517, hosts.launcher(i)});
  // Metrics on each host's own address, for the Prometheus in host 0; the link
  // rate the alerts compare with is the shaped one's (no BusBandwidthLow).
  o.extra_flags = {"--metrics-address", "0.0.0.0:" + std::to_string(kMetricsPort), "--link-rate", "50Mbit"};
  ClusterFixture cluster(o);

  TempDir dir;
  std::ofstream(dir.file("ringsync.rules.yml")) << rules_for_test();
  {
    std::ofstream config(dir.file("prometheus.yml"));
    config << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
           << "rule_files:\n  - " << dir.file("ringsync.rules.yml") << "\n"
           << "scrape_configs:\n  - job_name: " << kScrapeJob << "\n    static_configs:\n      - targets: [";
    for (int i = 0; i < kHosts; ++i)
      config << (i ? ", " : "") << "'" << hosts.address(i) << ":" << kMetricsPort << "'";
    config << "]\n";
  }
  const auto [check_code, check_output] = run_command("promtool check config " + dir.file("prometheus.yml"));
  REQUIRE_MESSAGE(check_code == 0, check_output);
  std::vector<std::string> argv = hosts.launcher(0);
  const std::string listen = "127.0.0.1:9090";  // host 0's own loopback
  for (const std::string& a : {kPrometheus, "--config.file=" + dir.file("prometheus.yml"),
                               "--storage.tsdb.path=" + dir.file("tsdb"), "--web.listen-address=" + listen})
    argv.push_back(a);
  Child prometheus = spawn(argv, {}, dir.file("prometheus.log"));
  const PrometheusApi api(hosts, listen);

  // Checked 4 MiB f32 allreduces until the test is done (the stop file), 300 s
  // at most: they stop by themselves.
  RankGroup ranks(cluster, "observe");
  const std::string stop_file = dir.file("stop");
  ranks.start_all({"until-file", stop_file, "1048576", "300"});

  const auto prometheus_log = [&] { return read_file(dir.file("prometheus.log")); };
  // Every target up (bounded: 60 s).
  json up;
  const auto all_up = [&] {
    return up.is_object() && !up["data"]["result"].empty() && up["data"]["result"][0]["value"][1] == "3";
  };
  for (int i = 0; i < 240; ++i) {
    up = api.query("sum(up{job=\"" + kScrapeJob + "\"})");
    if (all_up()) break;
    std::this_thread::sleep_for(250ms);
  }
  REQUIRE_MESSAGE(all_up(), up.dump(), prometheus_log(), cluster.logs());

  // SlowLink fires for the shaped host (bounded: 120 s).
  const std::string shaped_instance = hosts.address(kShaped) + ":" + std::to_string(kMetricsPort);
  std::vector<Alert> now;
  const auto firing_slow_link = [&] {
    return std::any_of(now.begin(), now.end(),
                       [](const Alert& a) { return a.name == "SlowLink" && a.state == "firing"; });
  };
  for (int i = 0; i < 240 && !firing_slow_link(); ++i) {
    std::this_thread::sleep_for(500ms);
    now = alerts(api);
  }
  const json busy = api.query("ringsync:link_send_busy_bandwidth_bytes_per_second:rate1m");
  INFO("alerts:\n", describe(now), "send-busy bandwidth per link: ", busy.dump());
  REQUIRE(firing_slow_link());
  // Exactly the shaped host's link, and nothing else, pending or firing.
  for (const auto& a : now) {
    CHECK_MESSAGE(a.name == "SlowLink", "only SlowLink should fire or be pending");
    if (a.name != "SlowLink") continue;
    CHECK(a.labels.value("instance", "") == shaped_instance);
    CHECK(a.labels.value("direction", "") == "tx");
    CHECK(a.labels.value("job_id", "") == kJobId);
    const std::string peer = a.labels.value("peer_address", "");
    CHECK_MESSAGE((peer.rfind(hosts.address(0) + ":", 0) == 0 || peer.rfind(hosts.address(1) + ":", 0) == 0), peer);
  }

  // Every dashboard query returns data. Without a GPU (no NVML here) the
  // per-GPU series cannot exist: those queries are listed, not failed.
  std::vector<std::string> variable_queries;
  const std::vector<Query> queries = dashboard_queries(variable_queries);
  CHECK(queries.size() >= 40);
  CHECK(std::count_if(queries.begin(), queries.end(), [](const Query& q) { return q.may_be_empty; }) >= 3);
  const json gpus = api.query("max(ringsync_gpu_devices)");
  const bool have_gpu =
      gpus.is_object() && !gpus["data"]["result"].empty() && gpus["data"]["result"][0]["value"][1] != "0";
  int checked = 0;
  std::vector<std::string> skipped;
  for (const auto& q : queries) {
    const std::string expr = substitute(q.expr);
    if (!have_gpu && (expr.find("ringsync_gpu_") != std::string::npos ||
                      expr.find("ringsync_device_collectives_total") != std::string::npos)) {
      skipped.push_back(q.where);
      continue;
    }
    json answer;
    // A rate over a window needs a few scrapes; a recording rule one evaluation.
    for (int i = 0; i < (q.may_be_empty ? 1 : 20); ++i) {
      answer = api.query(expr);
      if (answer.is_object() && answer.value("status", "") == "success" && !answer["data"]["result"].empty()) break;
      std::this_thread::sleep_for(500ms);
    }
    ++checked;
    CHECK_MESSAGE(answer.is_object(), q.where, ": no answer for ", expr);
    if (!answer.is_object()) continue;
    CHECK_MESSAGE(answer.value("status", "") == "success", q.where, ": ", expr, " -> ", answer.dump());
    if (!q.may_be_empty) CHECK_MESSAGE(!answer["data"]["result"].empty(), q.where, ": no data for ", expr);
  }
  MESSAGE(checked, " dashboard queries returned data; ", skipped.size(), " GPU queries skipped (no GPU here)");
  // Template variables of the form label_values(METRIC, LABEL) have values.
  const std::regex label_values("label_values\\(\\s*([^,]+?)\\s*,\\s*([A-Za-z_]+)\\s*\\)");
  for (const auto& v : variable_queries) {
    std::smatch m;
    const std::string text = substitute(v.substr(v.rfind(": ") + 2));
    if (!std::regex_search(text, m, label_values)) continue;
    const json answer = api.get("/api/v1/label/" + m[2].str() + "/values?match[]=" + percent_encode(m[1].str()));
    CHECK_MESSAGE((answer.is_object() && !answer["data"].empty()), v, " -> ", answer.dump());
  }

  // Still only the shaped host's SlowLink.
  now = alerts(api);
  for (const auto& a : now) {
    CHECK_MESSAGE(a.name == "SlowLink", "only SlowLink should fire or be pending:\n", describe(now));
    if (a.name == "SlowLink") CHECK(a.labels.value("instance", "") == shaped_instance);
  }

  std::ofstream(stop_file) << "done\n";
  prometheus.signal(SIGTERM);
  CHECK(prometheus.wait(30s).has_value());
  for (int code : ranks.wait(360s)) CHECK_MESSAGE(code == 0, ranks.report());
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

}  // namespace test_integration_prometheus_dashboards
