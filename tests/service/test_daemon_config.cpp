#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "service/daemon_config.h"

namespace test_service_daemon_config {

using namespace std::chrono_literals;
using ringsync::Result;
using ringsync::StatusCode;
using ringsync::config::Config;
using ringsync::service::daemon_config_from;
using ringsync::service::daemon_tunables;
using ringsync::service::DaemonConfig;
namespace route = ringsync::service::route;
using ringsync::service::default_socket_path;
using Env = std::map<std::string, std::string>;

namespace {

Result<DaemonConfig> load(std::vector<std::string> args, const Env& env = {{"XDG_RUNTIME_DIR", "/run/user/1000"}}) {
  std::vector<const char*> argv{"ringsyncd"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  auto cfg = Config::parse(daemon_tunables(), static_cast<int>(argv.size()), argv.data(), env);
  if (!cfg.ok()) return cfg.status();  // a value of the wrong form or out of its bounds
  return daemon_config_from(*cfg);
}

std::string error_of(std::vector<std::string> args, const Env& env = {{"XDG_RUNTIME_DIR", "/run/user/1000"}}) {
  auto d = load(std::move(args), env);
  REQUIRE_FALSE(d.ok());
  CHECK(d.status().code() == StatusCode::kInvalidArgument);
  return d.status().message();
}

}  // namespace

TEST_CASE("daemon defaults") {
  auto d = load({});
  REQUIRE(d.ok());
  CHECK(d->socket_path == "/run/user/1000/ringsync/ringsyncd.sock");
  CHECK(d->metrics_address == "127.0.0.1:9400");
  CHECK(d->collective_timeout == 300s);
  CHECK(d->stall_warning == 60s);
  CHECK(d->max_frame_bytes == 64 * 1024);
  CHECK(d->max_client_buffer_bytes == 64ull << 30);
  CHECK(d->reduce_threads == std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
  CHECK(d->reduce_chunk_bytes == 1 << 20);
  CHECK(d->ready_file.empty());
  CHECK(d->log_level == "info");
  CHECK(d->log_subsys == "all");
  CHECK(d->client_handshake_timeout == 10s);
  CHECK(d->busy_poll == 100us);
  CHECK(d->cluster.busy_poll == 100us);  // the ring's thread polls as long
}

TEST_CASE("the table: every tunable has a flag-style name, help, and a unit where it has one") {
  std::set<std::string> names;
  for (const auto& t : daemon_tunables()) {
    CHECK_FALSE(t.help.empty());
    names.insert(t.name);
    if (t.kind == ringsync::config::Kind::kBytes) CHECK(t.unit == "bytes");
    if (t.kind == ringsync::config::Kind::kDuration) CHECK(t.unit == "seconds");
  }
  CHECK(names == std::set<std::string>{"socket", "allow-uid", "allow-gid", "metrics-address", "collective-timeout", "stall-warning",
                                       "max-frame-bytes", "max-client-buffer-bytes", "reduce-threads",
                                       "reduce-chunk-bytes", "ready-file", "log-level", "log-subsys",
                                       "handshake-timeout", "busy-poll", "control-cpus", "client-channel", "hostfile", "hosts", "node-rank",
                                       "control-address", "job-id", "job-token", "job-token-file", "tls-cert", "tls-key", "tls-ca",
                                       "join-timeout",
                                       "heartbeat-interval", "peer-timeout", "progress-timeout", "cycle-time", "fusion-threshold", "inline-bytes",
                                       "response-cache", "ring-chunk-bytes", "ring-window", "gpu-staging-chunk", "ucx-transports",
                                       "ucx-net-devices", "timeline", "rendezvous", "advertise-address",
                                       "rank-liveness-timeout", "max-jobs", "max-job-ranks",
                                       "max-job-buffer-bytes", "job-metrics-linger",
                                       "rendezvous-timeout", "rendezvous-lease", "elastic-timeout",
                                       "max-kept-state-bytes", "kept-state-linger", "link-rate", "serve-rendezvous",
                                       "algorithm", "direct-max-bytes", "rhd-max-bytes", "verify-results"});
}

TEST_CASE("default socket path: XDG_RUNTIME_DIR, else /run as root, else /tmp per user") {
  CHECK(default_socket_path({{"XDG_RUNTIME_DIR", "/run/user/1000"}}, 1000) == "/run/user/1000/ringsync/ringsyncd.sock");
  CHECK(default_socket_path({{"XDG_RUNTIME_DIR", "/run/user/0/"}}, 0) == "/run/user/0/ringsync/ringsyncd.sock");
  CHECK(default_socket_path({}, 0) == "/run/ringsync/ringsyncd.sock");
  CHECK(default_socket_path({}, 1234) == "/tmp/ringsync-1234/ringsyncd.sock");
  CHECK(default_socket_path({{"XDG_RUNTIME_DIR", ""}}, 1234) == "/tmp/ringsync-1234/ringsyncd.sock");
  CHECK(default_socket_path({{"XDG_RUNTIME_DIR", "relative/dir"}}, 0) == "/run/ringsync/ringsyncd.sock");

  auto from_env = load({}, {});
  REQUIRE(from_env.ok());
  CHECK(from_env->socket_path == default_socket_path({}, ::getuid()));
}

TEST_CASE("started by srun: a socket of the Slurm job's own, and the control port on every address") {
  const Env step = {{"XDG_RUNTIME_DIR", "/run/user/1000"}, {"SLURM_JOB_ID", "4242"}, {"SLURM_STEP_ID", "0"},
                    {"SLURM_NODEID", "1"}};
  CHECK(ringsync::slurm_socket_path(step, 1000) == "/run/user/1000/ringsync/ringsyncd-slurm-4242.sock");
  CHECK(ringsync::slurm_socket_path({{"SLURM_JOB_ID", "4242"}}, 0) == "/run/ringsync/ringsyncd-slurm-4242.sock");
  CHECK(ringsync::slurm_socket_path({}, 0).empty());
  CHECK(ringsync::slurm_socket_path({{"SLURM_JOB_ID", "../x"}}, 0).empty());  // not a job id: no path from it

  auto d = load({}, step);
  REQUIRE(d.ok());
  CHECK(d->socket_path == "/run/user/1000/ringsync/ringsyncd-slurm-4242.sock");
  CHECK(d->cluster.control_address == "0.0.0.0:29517");
  CHECK(d->cluster.slurm_job == "4242");
  CHECK(d->cluster.slurm_node == "1");
  // What the user says wins; a pre-configured job is not a Slurm-described one.
  auto given = load({"--socket=/tmp/mine.sock", "--control-address=10.0.0.1:30000"}, step);
  REQUIRE(given.ok());
  CHECK(given->socket_path == "/tmp/mine.sock");
  CHECK(given->cluster.control_address == "10.0.0.1:30000");
  auto hostfile = load({"--hosts=a:1,b:1", "--node-rank=1"}, step);
  REQUIRE(hostfile.ok());
  CHECK(hostfile->cluster.slurm_job.empty());
  CHECK(hostfile->socket_path == "/run/user/1000/ringsync/ringsyncd.sock");
  // Inside an allocation but not a step (the batch script itself): the usual defaults.
  auto batch = load({}, {{"XDG_RUNTIME_DIR", "/run/user/1000"}, {"SLURM_JOB_ID", "4242"}});
  REQUIRE(batch.ok());
  CHECK(batch->socket_path == "/run/user/1000/ringsync/ringsyncd.sock");
  CHECK(batch->cluster.control_address.empty());
}

TEST_CASE("flags and variables reach the typed struct") {
  auto d = load({"--socket=/tmp/x.sock", "--metrics-address", "[::1]:9500", "--reduce-threads=3",
                 "--collective-timeout=2m", "--ready-file", "/tmp/ready", "--log-level=DEBUG", "--log-subsys=^ucx"},
                {{"RINGSYNC_MAX_FRAME_BYTES", "128K"}, {"RINGSYNC_HANDSHAKE_TIMEOUT", "1.5"}});
  REQUIRE(d.ok());
  CHECK(d->socket_path == "/tmp/x.sock");
  CHECK(d->metrics_address == "[::1]:9500");
  CHECK(d->reduce_threads == 3);
  CHECK(d->collective_timeout == 120s);
  CHECK(d->ready_file == "/tmp/ready");
  CHECK(d->log_level == "debug");
  CHECK(d->log_subsys == "all,^ucx");
  CHECK(d->max_frame_bytes == 128 * 1024);
  CHECK(d->client_handshake_timeout == 1500ms);
}

TEST_CASE("--control-cpus: none by default, a CPU list when given, a clear error when malformed") {
  auto d = load({});
  REQUIRE(d.ok());
  CHECK(d->control_cpus.empty());
  auto pinned = load({"--control-cpus=2-3,0"});
  REQUIRE(pinned.ok());
  CHECK(pinned->control_cpus == std::vector<int>{0, 2, 3});
  CHECK(error_of({"--control-cpus=two"}) ==
        "control-cpus must be a CPU list such as 3 or 2-3,6: 'two' is not a CPU number (0 to 8191) or a range of "
        "them such as 2-5 (--control-cpus from flag)");
}

TEST_CASE("--link-rate: unset by default, bits per second or a size per second, a clear error otherwise") {
  auto d = load({});
  REQUIRE(d.ok());
  CHECK(d->link_rate_bytes_per_second == 0);
  auto fast = load({"--link-rate=100Gbit"});
  REQUIRE(fast.ok());
  CHECK(fast->link_rate_bytes_per_second == doctest::Approx(12.5e9));
  auto from_env = load({}, {{"RINGSYNC_LINK_RATE", "25Gbit"}});
  REQUIRE(from_env.ok());
  CHECK(from_env->link_rate_bytes_per_second == doctest::Approx(3.125e9));
  CHECK(error_of({"--link-rate=fast"}).starts_with("link-rate: unknown rate 'fast' (use a link rate in bits"));
  CHECK(error_of({"--link-rate=0Gbit"}) == "link-rate: must be above 0 (--link-rate from flag)");
  auto ring = load({"--algorithm=ring"});
  REQUIRE(ring.ok());
  CHECK(ring->cluster.ring.routes == route::DataRoutes{});
  auto automatic = load({"--rhd-max-bytes=2MiB", "--direct-max-bytes=256KiB"});
  REQUIRE(automatic.ok());
  CHECK(automatic->cluster.ring.routes == route::DataRoutes{256 * 1024, 2 * 1024 * 1024, /*fold=*/false});
  auto direct = load({"--algorithm=direct"});
  REQUIRE(direct.ok());
  CHECK(direct->cluster.ring.routes == route::DataRoutes{route::kAlways, 0});
  CHECK(error_of({"--algorithm=tree"}) ==
        "algorithm must be auto, ring, rhd or direct, got 'tree' (--algorithm from flag)");
  auto served = load({"--serve-rendezvous=10.0.0.1:2379"});
  REQUIRE(served.ok());
  CHECK(served->serve_rendezvous == "10.0.0.1:2379");
}

TEST_CASE("integrity: --verify-results is off unless set to sample or all") {
  using ringsync::service::integrity::VerifyResults;
  auto plain = load({});
  REQUIRE(plain.ok());
  CHECK(plain->cluster.ring.verify_results == VerifyResults::kOff);
  auto sample = load({"--verify-results=sample"});
  REQUIRE(sample.ok());
  CHECK(sample->cluster.ring.verify_results == VerifyResults::kSample);
  auto all = load({}, {{"RINGSYNC_VERIFY_RESULTS", "all"}});
  REQUIRE(all.ok());
  CHECK(all->cluster.ring.verify_results == VerifyResults::kAll);
  CHECK(error_of({"--verify-results=some"}) ==
        "verify-results must be off, sample or all, got 'some' (--verify-results from flag)");
}

TEST_CASE("the metrics server can be turned off") {
  for (const char* off : {"--metrics-address=off", "--metrics-address="}) {
    auto d = load({off});
    REQUIRE(d.ok());
    CHECK(d->metrics_address.empty());
  }
}

TEST_CASE("validation errors name the setting, its bound and where the value came from") {
  CHECK(error_of({"--reduce-threads=-1"}) ==
        "reduce-threads must be between 0 and 1024, got '-1' (--reduce-threads from flag)");
  CHECK(error_of({"--reduce-chunk-bytes=4100"}).starts_with("reduce-chunk-bytes must be a multiple of 64 bytes"));
  CHECK(error_of({"--collective-timeout=0s"}) ==
        "collective-timeout must be longer than 0, got '0s' (--collective-timeout from flag)");
  CHECK(error_of({"--stall-warning=0"}).starts_with("stall-warning must be longer than 0"));
  CHECK(error_of({"--handshake-timeout=0ms"}).starts_with("handshake-timeout must be longer than 0"));
  CHECK(error_of({"--busy-poll=11ms"}) == "busy-poll must be between 0 and 10ms, got '11ms' (--busy-poll from flag)");
  CHECK(error_of({"--ring-window=65"}) == "ring-window must be between 1 and 64, got '65' (--ring-window from flag)");
  CHECK(error_of({"--rendezvous-lease=500ms"}).starts_with("rendezvous-lease must be at least 1s"));
  auto off = load({"--busy-poll=0"});
  REQUIRE(off.ok());
  CHECK(off->busy_poll == 0ns);
  CHECK(error_of({"--max-frame-bytes=2MiB"}) ==
        "max-frame-bytes must be between 4KiB and 1MiB, got '2MiB' (--max-frame-bytes from flag)");
  CHECK(error_of({"--max-frame-bytes=1K"}).starts_with("max-frame-bytes must be between 4KiB and 1MiB"));
  CHECK(error_of({"--max-client-buffer-bytes=0"}).starts_with("max-client-buffer-bytes must be at least 4KiB"));
  CHECK(error_of({"--log-level=loud"}) ==
        "unknown log level 'loud'; expected one of error, warn, info, debug, trace (--log-level from flag)");
  CHECK(error_of({"--log-subsys=ring,,ucx"}) ==
        "empty entry in subsystem list 'ring,,ucx' (--log-subsys from flag)");
  const std::string long_path = "/tmp/" + std::string(120, 's') + ".sock";
  CHECK(error_of({"--socket", long_path}).find("a Unix socket path must be at most 107: choose a shorter --socket") !=
        std::string::npos);
}

TEST_CASE("the chunk-size lower bound is reported from the environment too") {
  const std::string message = error_of({}, {{"RINGSYNC_REDUCE_CHUNK_BYTES", "1K"}});
  CHECK(message.starts_with("reduce-chunk-bytes must be at least 4KiB"));
  CHECK(message.ends_with(", got '1K' (--reduce-chunk-bytes from env RINGSYNC_REDUCE_CHUNK_BYTES)"));
}

TEST_CASE("bad value forms are caught by the table before validation") {
  std::vector<const char*> argv{"ringsyncd", "--collective-timeout", "forever"};
  auto cfg = Config::parse(daemon_tunables(), static_cast<int>(argv.size()), argv.data(), {});
  REQUIRE_FALSE(cfg.ok());
  CHECK(cfg.status().message().starts_with(
      "invalid value 'forever' for collective-timeout (from flag --collective-timeout): expected a number"));
}

TEST_CASE("help and dump cover the daemon's tunables") {
  std::vector<const char*> argv{"ringsyncd"};
  auto cfg = Config::parse(daemon_tunables(), 1, argv.data(), {{"RINGSYNC_STALL_WARNING", "90s"}});
  REQUIRE(cfg.ok());
  const std::string help = cfg->help_text("ringsyncd", "Parameter synchronization daemon.");
  CHECK(help.find("  --collective-timeout DURATION\n") != std::string::npos);
  CHECK(help.find("env RINGSYNC_MAX_CLIENT_BUFFER_BYTES; default: 64GiB; unit: bytes") != std::string::npos);
  const std::string dump = cfg->dump();
  CHECK(dump.find("stall-warning = 90s (env RINGSYNC_STALL_WARNING)\n") != std::string::npos);
  CHECK(dump.find("socket = \"\" (default)\n") != std::string::npos);
}

}  // namespace test_service_daemon_config
