// The multi-node settings of DaemonConfig: host list, node rank, timeouts.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "service/daemon_config.h"

using namespace std::chrono_literals;
using ringsync::Result;
using ringsync::config::Config;
using ringsync::service::daemon_config_from;
using ringsync::service::daemon_tunables;
using ringsync::service::DaemonConfig;

namespace {

Result<DaemonConfig> load(std::vector<std::string> args) {
  std::vector<const char*> argv{"ringsyncd"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  auto cfg = Config::parse(daemon_tunables(), static_cast<int>(argv.size()), argv.data(),
                           {{"XDG_RUNTIME_DIR", "/run/user/1000"}});
  REQUIRE(cfg.ok());
  return daemon_config_from(*cfg);
}

std::string error_of(std::vector<std::string> args) {
  auto d = load(std::move(args));
  REQUIRE_FALSE(d.ok());
  return d.status().message();
}

}  // namespace

TEST_CASE("cluster config: alone by default, with Horovod-like defaults") {
  auto d = load({});
  REQUIRE(d.ok());
  CHECK_FALSE(d->cluster.enabled());
  CHECK(d->cluster.job_id == "default");
  CHECK(d->cluster.join_timeout == 60s);
  CHECK(d->cluster.peer_timeout == 5s);
  CHECK(d->cluster.heartbeat_interval == 500ms);
  CHECK(d->cluster.cycle_time == 1ms);
  CHECK(d->cluster.fusion_threshold_bytes == 128ull << 20);
  CHECK(d->cluster.inline_bytes == 32 * 1024);
  CHECK(d->cluster.response_cache_capacity == 1024);
  CHECK(d->cluster.ucx_transports.empty());  // UCX chooses: verbs where the fabric has them
}

TEST_CASE("cluster config: a host list makes a multi-node job") {
  auto d = load({"--hosts", "a:4,b:4,c:4", "--node-rank", "2", "--job-token", "s3cret"});
  REQUIRE(d.ok());
  CHECK(d->cluster.enabled());
  CHECK(d->cluster.nodes.size() == 3);
  CHECK(d->cluster.node_rank == 2);
  CHECK(d->cluster.slots() == 4);
  CHECK(d->cluster.token == "s3cret");
}

TEST_CASE("cluster config: clear errors") {
  CHECK(error_of({"--inline-bytes", "65KiB"}).starts_with("inline-bytes must be between"));
  CHECK(error_of({"--hosts", "a:2,b:2", "--node-rank", "2"}).find("node-rank 2 is not in the host list") !=
        std::string::npos);
  CHECK(error_of({"--node-rank", "1"}).find("not in the host list") != std::string::npos);
  CHECK(error_of({"--hosts", "a:2,b:3"}).find("same slots") != std::string::npos);
  CHECK(error_of({"--hosts", "a:2", "--hostfile", "/nonexistent"}).find("not both") != std::string::npos);
  CHECK(error_of({"--hostfile", "/nonexistent/hosts"}).find("/nonexistent/hosts") != std::string::npos);
  CHECK(error_of({"--heartbeat-interval", "1s", "--peer-timeout", "1500ms"}).find("twice") != std::string::npos);
  CHECK(error_of({"--ring-window", "0"}).find("ring-window") != std::string::npos);
  CHECK(error_of({"--job-id", ""}).find("job-id") != std::string::npos);
}
