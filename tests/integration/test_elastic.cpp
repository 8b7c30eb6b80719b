// Elastic training (docs/elastic.md) with real daemons on network-namespace
// hosts, a real etcd and PyTorch trainers (examples/elastic_train.py): a node
// killed mid-training is replaced by a spare, or the job goes on with fewer
// nodes, or, below its minimum, every rank fails with a clear error. The final
// weights must equal those of the same training in one process.
// Needs root (netns hosts), etcd-server and a python3 with torch; CI has them.
// Not in the sanitizer build (the trainers are Python processes).
#include <doctest/doctest.h>

#include <csignal>
#include <fstream>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "cluster_fixture.h"
#include "etcd_server.h"
#include "netns.h"

namespace test_integration_elastic {

using namespace ringsync::test;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

constexpr std::uint16_t kControlPort = 29517;
constexpr int kSteps = 30;

std::string repo_file(const std::string& path) { return std::string(RINGSYNC_SOURCE_DIR) + "/" + path; }

#define REQUIRE_ELASTIC_HOSTS()                                                   \
  do {                                                                            \
    const std::string why = NetnsHosts::unavailable_reason();                     \
    REQUIRE_MESSAGE(why.empty(), why);                                            \
    const std::string no_etcd = EtcdServer::unavailable_reason();                 \
    REQUIRE_MESSAGE(no_etcd.empty(), no_etcd);                                    \
    REQUIRE_MESSAGE(std::string(RINGSYNC_TORCH_PYTHON) != "",                     \
                    "no python3 with torch was found at configure time (python3-torch)"); \
  } while (0)

// Where the job rendezvouses: a real etcd on host 0, or the store host 0's
// own ringsyncd serves (--serve-rendezvous), for clusters without etcd.
enum class Store { kEtcd, kServedByDaemon };

// The store on host 0; a service ringsyncd on every host; elastic trainers.
struct ElasticCluster {
  NetnsHosts hosts;
  std::optional<EtcdServer> etcd;
  ClusterFixture cluster;

  ElasticCluster(int host_count, std::vector<std::string> flags = {}, Store store = Store::kEtcd)
      : hosts(host_count), etcd(start_etcd(store)), cluster(options(std::move(flags), store)) {}

  std::optional<EtcdServer> start_etcd(Store store) const {
    if (store != Store::kEtcd) return std::nullopt;
    return std::optional<EtcdServer>(std::in_place, hosts.address(0), 2379, 2380, hosts.launcher(0));
  }
  std::string store_url() const { return etcd ? etcd->url() : "etcd://" + hosts.address(0) + ":2379"; }

  ClusterOptions options(std::vector<std::string> flags, Store store) const {
    ClusterOptions o;
    o.nodes = hosts.size();
    o.local_size = 1;
    o.service = true;
    o.job_id = "unused";
    for (int i = 0; i < hosts.size(); ++i) o.places.push_back({hosts.address(i), kControlPort, hosts.launcher(i)});
    if (store == Store::kServedByDaemon) o.places[0].flags = {"--serve-rendezvous", hosts.address(0) + ":2379"};
    o.extra_flags = {"--rendezvous", store_url(), "--rendezvous-lease", "2s", "--elastic-timeout", "8s"};
    o.extra_flags.insert(o.extra_flags.end(), flags.begin(), flags.end());
    return o;
  }

  // The trainer of `node`: examples/elastic_train.py in an elastic job of min..max nodes.
  // join_when: the trainer starts now (Python and torch load in seconds) but
  // joins only once that file exists.
  void start_trainer(RankGroup& ranks, int node, int min_nodes, int max_nodes, int first_nodes,
                     const std::string& join_when = "") const {
    std::map<std::string, std::string> env = {
        {"RINGSYNC_JOB_ID", "elastic"},
        {"RINGSYNC_JOB_TOKEN", "token-of-elastic"},
        {"RINGSYNC_LOCAL_RANK", "0"},
        {"RINGSYNC_LOCAL_SIZE", "1"},
        {"RINGSYNC_MIN_NODES", std::to_string(min_nodes)},
        {"RINGSYNC_MAX_NODES", std::to_string(max_nodes)},
        {"RINGSYNC_NUM_NODES", std::to_string(first_nodes)},
        {"PYTHONPATH", repo_file("client/python")},
        {"RINGSYNC_LIBRARY", std::string(RINGSYNC_BIN_DIR) + "/../lib/libringsync.so"},
        {"PYTHONUNBUFFERED", "1"}};
    std::vector<std::string> argv = {RINGSYNC_TORCH_PYTHON, repo_file("examples/elastic_train.py"), "--steps",
                                     std::to_string(kSteps), "--step-delay", "0.15"};
    if (!join_when.empty()) argv.insert(argv.end(), {"--join-when", join_when});
    ranks.start_program(node, 0, argv, env);
  }
};

// What one trainer printed: its step lines and its result.
struct TrainerRun {
  std::vector<json> steps;
  json result;
};

TrainerRun parse(const std::string& output) {
  TrainerRun run;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("{\"step\"", 0) == 0) run.steps.push_back(json::parse(line, nullptr, false));
    if (line.rfind("RESULT ", 0) == 0) run.result = json::parse(line.substr(7), nullptr, false);
  }
  return run;
}

// The same training in one process.
json reference() {
  TempDir dir;
  const std::string out = dir.file("reference.json");
  Child child = spawn({RINGSYNC_TORCH_PYTHON, repo_file("examples/elastic_train.py"), "--reference", "--steps",
                       std::to_string(kSteps), "--out", out},
                      {}, dir.file("reference.log"));
  const auto code = child.wait(120s);
  REQUIRE_MESSAGE((code && *code == 0), read_file(dir.file("reference.log")));
  return json::parse(read_file(out));
}

double max_difference(const json& a, const json& b) {
  double worst = 0;
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i].get<double>() - b[i].get<double>()));
  return worst;
}

// Waits until rank index `which` printed step `step`.
bool reached(RankGroup& ranks, int which, int step, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    for (const auto& s : parse(ranks.output(which)).steps)
      if (s.value("step", -1) >= step) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Seconds from `killed_at` to the first step the survivor printed after it.
double recovery(const TrainerRun& survivor, double killed_at) {
  for (const auto& s : survivor.steps)
    if (s.value("t", 0.0) > killed_at) return s["t"].get<double>() - killed_at;
  return -1;
}

// Steps printed twice (work redone after a reset).
int redone(const TrainerRun& run) {
  std::set<int> seen;
  int twice = 0;
  for (const auto& s : run.steps)
    if (!seen.insert(s.value("step", -1)).second) ++twice;
  return twice;
}

}  // namespace

// 3 nodes + 1 spare; node 2 killed at a random step; the spare takes its
// place and training ends as without the kill.
void spare_replaces_killed_node(ElasticCluster& e) {
  const json expected = reference();
  RankGroup ranks(e.cluster, "spare");
  TempDir dir;
  const std::string spare_joins = dir.file("spare-joins");
  for (int node = 0; node < 3; ++node) e.start_trainer(ranks, node, 2, 3, 3);
  // The spare starts with the others (loading torch takes seconds on a busy
  // machine: longer than the whole training) and joins once the run is on.
  e.start_trainer(ranks, 3, 2, 3, 3, spare_joins);
  REQUIRE_MESSAGE(reached(ranks, 0, 1, 90s), ranks.report(), e.cluster.logs());
  std::ofstream(spare_joins) << "now\n";
  // Its daemon has registered it (a spare that comes later joins at the next reset).
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (e.cluster.log(3).find("waiting for the next run's nodes") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  REQUIRE_MESSAGE(e.cluster.log(3).find("waiting for the next run's nodes") != std::string::npos, e.cluster.logs());
  const int victim = 2;
  // At a random step from the next on (printed, to rerun a failure with it in mind).
  int now_at = 0;
  for (const auto& s : parse(ranks.output(0)).steps) now_at = std::max(now_at, s.value("step", 0));
  REQUIRE_MESSAGE(now_at + 1 < kSteps - 5, "training ran ahead of the spare's registration: at step ", now_at);
  const int kill_step = now_at + 1 + static_cast<int>(std::random_device{}() % (kSteps - 6 - now_at));
  MESSAGE("killing node ", victim, " at step ", kill_step, " of ", kSteps);
  REQUIRE_MESSAGE(reached(ranks, 0, kill_step, 60s), ranks.report(), e.cluster.logs());
  e.cluster.signal(victim, SIGKILL);
  ranks.signal(victim, SIGKILL);
  const double killed_at = now_seconds();
  const auto codes = ranks.wait(150s, {0, 1, 3});
  CHECK_MESSAGE(all_equal(codes, 0), ranks.report(), e.cluster.logs());
  const TrainerRun survivor = parse(ranks.output(0)), spare = parse(ranks.output(3));
  REQUIRE_MESSAGE(!survivor.result.is_null(), ranks.report());
  REQUIRE_MESSAGE(!spare.result.is_null(), ranks.report());
  // Every rank ends with the weights of the same training in one process.
  for (int index : {0, 1, 3}) {
    const TrainerRun run = parse(ranks.output(index));
    REQUIRE(!run.result.is_null());
    CHECK(max_difference(run.result["weights"], expected["weights"]) < 1e-4);
    CHECK(run.result["size"] == 3);  // the spare made up the loss
  }
  CHECK(survivor.result["resets"] == 1);
  CHECK(redone(survivor) <= 1);  // at most the uncommitted step
  CHECK(spare.steps.front().value("step", 0) > 0);  // the spare started from the synced state
  const double seconds = recovery(survivor, killed_at);
  MESSAGE("from the kill to the first step on the new ring: ", seconds, " s (--peer-timeout 1s, --rendezvous-lease 2s)");
  CHECK(seconds > 0);
  // Every survivor's daemon says who left and who joined, and how long recovery took.
  for (int node : {0, 1}) {
    const std::string log = e.cluster.log(node);
    CHECK_MESSAGE(log.find("left: " + e.hosts.address(victim) + ":29517") != std::string::npos, log);
    CHECK_MESSAGE(log.find("joined: " + e.hosts.address(3) + ":29517 as node ") != std::string::npos, log);
    CHECK_MESSAGE(log.find("has its next run ") != std::string::npos, log);
    // /metrics is on the host's own loopback.
    const auto [code, metrics] = e.hosts.run(
        node, "python3 -c \"import urllib.request as u; print(u.urlopen(\\\"http://" +
                  e.cluster.metrics_host_port(node) + "/metrics\\\").read().decode())\"");
    CHECK_MESSAGE(metrics.find("ringsync_ring_recovery_seconds{job_id=\"elastic\"}") != std::string::npos, code, metrics);
  }
  CHECK(e.cluster.stop_all().empty());
}

TEST_CASE("elastic: 3 nodes + 1 spare: a node killed mid-training is replaced and training ends as without the kill") {
  REQUIRE_ELASTIC_HOSTS();
  ElasticCluster e(4);
  spare_replaces_killed_node(e);
}

TEST_CASE("elastic without etcd: host 0's ringsyncd serves the rendezvous, and the spare still replaces a killed node") {
  REQUIRE_ELASTIC_HOSTS();
  ElasticCluster e(4, {}, Store::kServedByDaemon);
  REQUIRE_MESSAGE(e.cluster.log(0).find("serving a rendezvous store at " + e.hosts.address(0) + ":2379") !=
                      std::string::npos,
                  e.cluster.log(0));
  spare_replaces_killed_node(e);
}

TEST_CASE("elastic: no spare, 2 of 3 nodes left and a minimum of 2: the job goes on with 2 nodes") {
  REQUIRE_ELASTIC_HOSTS();
  const json expected = reference();
  ElasticCluster e(3);
  RankGroup ranks(e.cluster, "fewer");
  for (int node = 0; node < 3; ++node) e.start_trainer(ranks, node, 2, 3, 3);
  REQUIRE_MESSAGE(reached(ranks, 0, 6, 90s), ranks.report(), e.cluster.logs());
  e.cluster.signal(1, SIGKILL);
  ranks.signal(1, SIGKILL);
  const auto codes = ranks.wait(150s, {0, 2});
  CHECK_MESSAGE(all_equal(codes, 0), ranks.report(), e.cluster.logs());
  for (int index : {0, 2}) {
    const TrainerRun run = parse(ranks.output(index));
    REQUIRE_MESSAGE(!run.result.is_null(), ranks.report());
    CHECK(run.result["size"] == 2);
    // The averaged gradient over the 2 remaining ranks: the same global batch,
    // so the same weights as one process.
    CHECK(max_difference(run.result["weights"], expected["weights"]) < 1e-4);
    std::set<int> sizes;
    for (const auto& s : run.steps) sizes.insert(s.value("size", 0));
    CHECK(sizes == std::set<int>{2, 3});
  }
  CHECK(e.cluster.stop_all().empty());
}

TEST_CASE("elastic: below the minimum every rank fails with a clear error in bounded time") {
  REQUIRE_ELASTIC_HOSTS();
  ElasticCluster e(3);
  RankGroup ranks(e.cluster, "below");
  for (int node = 0; node < 3; ++node) e.start_trainer(ranks, node, 3, 3, 3);
  REQUIRE_MESSAGE(reached(ranks, 0, 3, 90s), ranks.report(), e.cluster.logs());
  e.cluster.signal(2, SIGKILL);
  ranks.signal(2, SIGKILL);
  const auto started = std::chrono::steady_clock::now();
  const auto codes = ranks.wait(120s, {0, 1});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  for (int code : codes) CHECK_MESSAGE((code != 0 && code != -1), ranks.report(), e.cluster.logs());
  for (int index : {0, 1}) {
    const std::string out = ranks.output(index);
    CHECK_MESSAGE(out.find("fewer than the job's minimum of 3") != std::string::npos, out);
    CHECK_MESSAGE(out.find("--elastic-timeout") != std::string::npos, out);
  }
  MESSAGE("the survivors gave up ", seconds, " s after the kill (--elastic-timeout 8s)");
  CHECK(e.cluster.stop_all().empty());
}

TEST_CASE("elastic: a node that comes while a run of 2 goes on joins it at the next step boundary, losing no step") {
  REQUIRE_ELASTIC_HOSTS();
  const json expected = reference();
  ElasticCluster e(3);
  RankGroup ranks(e.cluster, "grow");
  TempDir dir;
  const std::string third_joins = dir.file("third-joins");
  for (int node = 0; node < 2; ++node) e.start_trainer(ranks, node, 2, 3, 2);
  e.start_trainer(ranks, 2, 2, 3, 2, third_joins);  // loads torch now, joins at step 3
  REQUIRE_MESSAGE(reached(ranks, 0, 3, 90s), ranks.report(), e.cluster.logs());
  std::ofstream(third_joins) << "now\n";  // a third node arrives
  const auto codes = ranks.wait(150s);
  CHECK_MESSAGE(all_equal(codes, 0), ranks.report(), e.cluster.logs());
  for (int index : {0, 1, 2}) {
    const TrainerRun run = parse(ranks.output(index));
    REQUIRE_MESSAGE(!run.result.is_null(), ranks.report());
    CHECK(run.result["size"] == 3);
    CHECK(max_difference(run.result["weights"], expected["weights"]) < 1e-4);
    CHECK(redone(run) == 0);  // the run ended at a commit: nothing to redo
  }
  const TrainerRun first = parse(ranks.output(0)), newcomer = parse(ranks.output(2));
  CHECK(first.result["resets"] == 1);
  CHECK(first.result["steps_lost"] == 0);
  std::set<int> sizes;
  for (const auto& s : first.steps) sizes.insert(s.value("size", 0));
  CHECK(sizes == std::set<int>{2, 3});
  CHECK(newcomer.steps.front().value("step", 0) > 3);  // it started from the synced state
  const std::string said = e.cluster.log(0) + e.cluster.log(1);
  CHECK_MESSAGE(said.find("node(s) wait to join its next run") != std::string::npos, e.cluster.logs());
  CHECK(e.cluster.stop_all().empty());
}

}  // namespace test_integration_elastic
