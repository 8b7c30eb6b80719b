// The multi-node settings of DaemonConfig: host list, node rank, timeouts.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "service/daemon_config.h"
#include "service/route/route.h"

namespace test_service_cluster_config {

using namespace std::chrono_literals;
using ringsync::Result;
using ringsync::config::Config;
using ringsync::service::daemon_config_from;
using ringsync::service::daemon_tunables;
using ringsync::service::DaemonConfig;

namespace {

Result<DaemonConfig> load(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  std::vector<const char*> argv{"ringsyncd"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  env["XDG_RUNTIME_DIR"] = "/run/user/1000";
  auto cfg = Config::parse(daemon_tunables(), static_cast<int>(argv.size()), argv.data(), env);
  if (!cfg.ok()) return cfg.status();  // a value of the wrong form or out of its bounds
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
  CHECK(d->cluster.ring.inline_bytes == 256 * 1024);
  // Every allreduce the control plane carries by default keeps the loop polling.
  CHECK(ringsync::service::route::kBusyPollBytes >= d->cluster.ring.inline_bytes);
  CHECK(d->cluster.ring.response_cache == 1024);
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
  CHECK(error_of({"--inline-bytes", "513KiB"}).starts_with("inline-bytes must be between"));
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

TEST_CASE("auth: the job key from a file only its owner may read, or from the environment") {
  char dir_template[] = "/tmp/ringsync-key-XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string path = std::string(dir_template) + "/key";
  {
    std::ofstream out(path);
    out << "k3y-from-file\n";
  }
  ::chmod(path.c_str(), 0600);
  auto d = load({"--hosts", "a:1,b:1", "--job-token-file", path});
  REQUIRE_MESSAGE(d.ok(), d.status().message());
  CHECK(d->cluster.token == "k3y-from-file");

  ::chmod(path.c_str(), 0640);
  auto open = load({"--hosts", "a:1,b:1", "--job-token-file", path});
  REQUIRE_FALSE(open.ok());
  CHECK_MESSAGE(open.status().message().find("has mode 0640: others than its owner may access it; chmod 600 it") !=
                    std::string::npos,
                open.status().message());
  ::chmod(path.c_str(), 0600);

  auto both = load({"--hosts", "a:1,b:1", "--job-token", "x", "--job-token-file", path});
  REQUIRE_FALSE(both.ok());
  CHECK(both.status().message().find("not both") != std::string::npos);

  auto missing = load({"--hosts", "a:1,b:1", "--job-token-file", path + ".none"});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find("--job-token-file") != std::string::npos);

  auto from_env = load({"--hosts", "a:1,b:1"}, {{"RINGSYNC_JOB_TOKEN_FILE", path}});
  REQUIRE_MESSAGE(from_env.ok(), from_env.status().message());
  CHECK(from_env->cluster.token == "k3y-from-file");
  ::unlink(path.c_str());
  ::rmdir(dir_template);
}

}  // namespace test_service_cluster_config
