#include <doctest/doctest.h>

#include <string>

#include "client/src/env.h"

using ringsync::StatusCode;
using ringsync::client::default_socket_path;
using ringsync::client::Environment;
using ringsync::client::resolve_settings;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

rs_config_t defaults() {
  rs_config_t c;
  rs_config_init(&c);
  return c;
}

std::string error_of(const rs_config_t* config, const Environment& env) {
  auto s = resolve_settings(config, env, 1000);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().code() == StatusCode::kInvalidArgument);
  return s.status().message();
}

}  // namespace

TEST_CASE("the default socket path follows XDG_RUNTIME_DIR, then root, then the uid") {
  CHECK(default_socket_path({{"XDG_RUNTIME_DIR", "/run/user/1000"}}, 1000) ==
        "/run/user/1000/ringsync/ringsyncd.sock");
  CHECK(default_socket_path({{"XDG_RUNTIME_DIR", "/run/user/0"}}, 0) ==
        "/run/user/0/ringsync/ringsyncd.sock");
  CHECK(default_socket_path({}, 0) == "/run/ringsync/ringsyncd.sock");
  CHECK(default_socket_path({}, 1234) == "/tmp/ringsync-1234/ringsyncd.sock");
  CHECK(default_socket_path({{"XDG_RUNTIME_DIR", ""}}, 1234) ==
        "/tmp/ringsync-1234/ringsyncd.sock");
}

TEST_CASE("with nothing set, a process is rank 0 of 1 of job 'default' on the default socket") {
  const rs_config_t c = defaults();
  for (const rs_config_t* config : {static_cast<const rs_config_t*>(nullptr), &c}) {
    auto s = resolve_settings(config, {}, 1234);
    REQUIRE(s.ok());
    CHECK(s->socket_path == "/tmp/ringsync-1234/ringsyncd.sock");
    CHECK(s->job_id == "default");
    CHECK(s->local_rank == 0);
    CHECK(s->local_size == 1);
    CHECK(s->connect_timeout.count() == ringsync::client::kDefaultConnectTimeoutMs);
    CHECK(s->busy_poll.count() == ringsync::client::kDefaultBusyPollUs);
  }
}

TEST_CASE("RINGSYNC_BUSY_POLL_US: microseconds a waiting thread polls, 0 to 10000") {
  auto off = resolve_settings(nullptr, {{"RINGSYNC_BUSY_POLL_US", "0"}}, 1000);
  REQUIRE(off.ok());
  CHECK(off->busy_poll.count() == 0);
  auto longer = resolve_settings(nullptr, {{"RINGSYNC_BUSY_POLL_US", "200"}}, 1000);
  REQUIRE(longer.ok());
  CHECK(longer->busy_poll.count() == 200);
  CHECK(error_of(nullptr, {{"RINGSYNC_BUSY_POLL_US", "10001"}}) ==
        "RINGSYNC_BUSY_POLL_US='10001' is not a number of microseconds from 0 (never poll) to 10000");
  CHECK(contains(error_of(nullptr, {{"RINGSYNC_BUSY_POLL_US", "fast"}}), "RINGSYNC_BUSY_POLL_US='fast'"));
  CHECK(contains(error_of(nullptr, {{"RINGSYNC_BUSY_POLL_US", "-5"}}), "from 0 (never poll) to 10000"));
}

TEST_CASE("RINGSYNC_CHANNEL: shm (the default) or socket") {
  auto plain = resolve_settings(nullptr, {}, 1000);
  REQUIRE(plain.ok());
  CHECK(plain->shm_channel);
  auto socket = resolve_settings(nullptr, {{"RINGSYNC_CHANNEL", "socket"}}, 1000);
  REQUIRE(socket.ok());
  CHECK_FALSE(socket->shm_channel);
  CHECK(resolve_settings(nullptr, {{"RINGSYNC_CHANNEL", "shm"}}, 1000)->shm_channel);
  CHECK(error_of(nullptr, {{"RINGSYNC_CHANNEL", "rdma"}}) ==
        "RINGSYNC_CHANNEL='rdma' is neither shm (a shared-memory channel, the default) nor socket");
}

TEST_CASE("the environment fills what the config leaves unset") {
  const Environment env = {{"RINGSYNC_SOCKET", "/tmp/d.sock"},
                           {"RINGSYNC_JOB_ID", "resnet"},
                           {"RINGSYNC_LOCAL_RANK", "2"},
                           {"RINGSYNC_LOCAL_SIZE", "4"}};
  const rs_config_t c = defaults();
  auto s = resolve_settings(&c, env, 1000);
  REQUIRE(s.ok());
  CHECK(s->socket_path == "/tmp/d.sock");
  CHECK(s->job_id == "resnet");
  CHECK(s->local_rank == 2);
  CHECK(s->local_size == 4);
}

TEST_CASE("config fields win over the environment") {
  const Environment env = {{"RINGSYNC_SOCKET", "/tmp/d.sock"},
                           {"RINGSYNC_JOB_ID", "resnet"},
                           {"RINGSYNC_LOCAL_RANK", "2"},
                           {"RINGSYNC_LOCAL_SIZE", "4"}};
  rs_config_t c = defaults();
  c.socket_path = "/tmp/mine.sock";
  c.job_id = "bert";
  c.local_rank = 1;
  c.local_size = 3;
  c.connect_timeout_ms = 250;
  auto s = resolve_settings(&c, env, 1000);
  REQUIRE(s.ok());
  CHECK(s->socket_path == "/tmp/mine.sock");
  CHECK(s->job_id == "bert");
  CHECK(s->local_rank == 1);
  CHECK(s->local_size == 3);
  CHECK(s->connect_timeout.count() == 250);
}

TEST_CASE("a zero-initialised config means rank 0 and the environment's size") {
  rs_config_t c{};
  auto s = resolve_settings(&c, {{"RINGSYNC_LOCAL_RANK", "3"}, {"RINGSYNC_LOCAL_SIZE", "4"}}, 1000);
  REQUIRE(s.ok());
  CHECK(s->local_rank == 0);
  CHECK(s->local_size == 4);
}

TEST_CASE("bad ranks and sizes are refused with what to fix") {
  const rs_config_t c = defaults();
  CHECK(contains(error_of(&c, {{"RINGSYNC_LOCAL_RANK", "two"}, {"RINGSYNC_LOCAL_SIZE", "4"}}),
                 "RINGSYNC_LOCAL_RANK='two' is not an integer >= 0"));
  CHECK(contains(error_of(&c, {{"RINGSYNC_LOCAL_RANK", "1"}, {"RINGSYNC_LOCAL_SIZE", "0"}}),
                 "RINGSYNC_LOCAL_SIZE='0' is not an integer >= 1"));
  CHECK(contains(error_of(&c, {{"RINGSYNC_LOCAL_RANK", "4"}, {"RINGSYNC_LOCAL_SIZE", "4"}}),
                 "local rank 4 is out of range for local size 4"));
  CHECK(contains(error_of(&c, {{"RINGSYNC_LOCAL_SIZE", "4"}}),
                 "the local rank is not set; set config.local_rank or RINGSYNC_LOCAL_RANK"));
  CHECK(contains(error_of(&c, {{"RINGSYNC_LOCAL_RANK", "1"}}),
                 "the local size is not set; set config.local_size or RINGSYNC_LOCAL_SIZE"));

  rs_config_t bad = defaults();
  bad.local_rank = -5;
  CHECK(contains(error_of(&bad, {}), "config.local_rank is -5"));
  bad = defaults();
  bad.local_size = -2;
  CHECK(contains(error_of(&bad, {}), "config.local_size is -2"));
  bad = defaults();
  bad.connect_timeout_ms = -1;
  CHECK(contains(error_of(&bad, {}), "config.connect_timeout_ms is -1"));
}

TEST_CASE("a socket path too long for a Unix socket is refused") {
  rs_config_t c = defaults();
  const std::string path = "/tmp/" + std::string(200, 'x') + ".sock";
  c.socket_path = path.c_str();
  CHECK(contains(error_of(&c, {}), "Unix socket paths must be shorter than"));
}
