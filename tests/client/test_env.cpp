#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "client/src/env.h"

namespace test_client_env {

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

TEST_CASE("the job's description: RINGSYNC_NODES, RINGSYNC_NODE_RANK, RINGSYNC_NUM_NODES, token, rendezvous") {
  auto s = resolve_settings(nullptr,
                            {{"RINGSYNC_LOCAL_RANK", "1"},
                             {"RINGSYNC_LOCAL_SIZE", "2"},
                             {"RINGSYNC_NODES", "a:1,b:2"},
                             {"RINGSYNC_NODE_RANK", "1"},
                             {"RINGSYNC_NUM_NODES", "2"},
                             {"RINGSYNC_JOB_TOKEN", "s3cret"}},
                            1000);
  REQUIRE(s.ok());
  CHECK(s->nodes == "a:1,b:2");
  CHECK(s->node_rank == 1);
  CHECK(s->num_nodes == 2);
  CHECK(s->job_token == "s3cret");
  CHECK(s->place_from == "ringsync");
  CHECK(contains(error_of(nullptr, {{"RINGSYNC_NODE_RANK", "2"}, {"RINGSYNC_NUM_NODES", "2"}}), "out of range"));
  CHECK(contains(error_of(nullptr, {{"RINGSYNC_RENDEZVOUS", "redis://x"}}), "etcd://"));
}

TEST_CASE("auth: the job token from RINGSYNC_JOB_TOKEN_FILE, a file only its owner may read") {
  char dir[] = "/tmp/ringsync-token-XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string path = std::string(dir) + "/token";
  std::ofstream(path) << "k3y-from-file\n";
  ::chmod(path.c_str(), 0600);
  auto s = resolve_settings(nullptr, {{"RINGSYNC_NODES", "a:1,b:2"}, {"RINGSYNC_JOB_TOKEN_FILE", path}}, 1000);
  REQUIRE_MESSAGE(s.ok(), s.status().message());
  CHECK(s->job_token == "k3y-from-file");

  CHECK(contains(error_of(nullptr, {{"RINGSYNC_JOB_TOKEN", "x"}, {"RINGSYNC_JOB_TOKEN_FILE", path}}), "not both"));
  ::chmod(path.c_str(), 0644);
  const std::string open = error_of(nullptr, {{"RINGSYNC_JOB_TOKEN_FILE", path}});
  CHECK(contains(open, "chmod 600"));
  CHECK(contains(open, "RINGSYNC_JOB_TOKEN_FILE"));
  CHECK(contains(error_of(nullptr, {{"RINGSYNC_JOB_TOKEN_FILE", path + ".none"}}), "No such file"));
  ::unlink(path.c_str());
  ::rmdir(dir);
}

TEST_CASE("without ringsync's variables, torchrun's, Open MPI's or Slurm's give the place") {
  // torchrun: 2 nodes of 4, this is rank 6 = node 1, local 2.
  auto t = resolve_settings(nullptr,
                            {{"RANK", "6"}, {"LOCAL_RANK", "2"}, {"WORLD_SIZE", "8"}, {"LOCAL_WORLD_SIZE", "4"},
                             {"GROUP_RANK", "1"}, {"TORCHELASTIC_RUN_ID", "abc"}},
                            1000);
  REQUIRE_MESSAGE(t.ok(), t.status().message());
  CHECK(t->local_rank == 2);
  CHECK(t->local_size == 4);
  CHECK(t->node_rank == 1);
  CHECK(t->num_nodes == 2);
  CHECK(t->job_id == "torchrun-abc");
  CHECK(t->place_from == "torchrun");
  // Open MPI has no node index: rank / local size, ranks filled node by node.
  auto m = resolve_settings(nullptr,
                            {{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "6"},
                             {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}},
                            1000);
  REQUIRE_MESSAGE(m.ok(), m.status().message());
  CHECK(m->node_rank == 1);
  CHECK(m->num_nodes == 2);
  CHECK(m->local_rank == 2);
  // Slurm: block distribution.
  auto sl = resolve_settings(nullptr,
                             {{"SLURM_PROCID", "3"}, {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "1"},
                              {"SLURM_NTASKS", "4"}, {"SLURM_NNODES", "2"}, {"SLURM_JOB_ID", "77"}},
                             1000);
  REQUIRE_MESSAGE(sl.ok(), sl.status().message());
  CHECK(sl->local_size == 2);
  CHECK(sl->node_rank == 1);
  CHECK(sl->job_id == "slurm-77");
  // ringsync's own variables win, as a whole; RINGSYNC_JOB_ID beats the launcher's id.
  auto own = resolve_settings(nullptr,
                              {{"RINGSYNC_LOCAL_RANK", "0"}, {"RINGSYNC_LOCAL_SIZE", "1"}, {"RINGSYNC_JOB_ID", "mine"},
                               {"RANK", "6"}, {"LOCAL_RANK", "2"}, {"WORLD_SIZE", "8"}, {"LOCAL_WORLD_SIZE", "4"}},
                              1000);
  REQUIRE(own.ok());
  CHECK(own->local_size == 1);
  CHECK(own->num_nodes == 0);
  CHECK(own->job_id == "mine");
  // torchrun beats Slurm (torchrun inside an allocation describes the ranks).
  auto both = resolve_settings(nullptr,
                               {{"RANK", "1"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "2"},
                                {"SLURM_PROCID", "0"}, {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "0"},
                                {"SLURM_NTASKS", "1"}, {"SLURM_NNODES", "1"}},
                               1000);
  REQUIRE(both.ok());
  CHECK(both->place_from == "torchrun");
  CHECK(both->local_rank == 1);
}

TEST_CASE("under srun the step's node list names every node's daemon, unless the job says otherwise") {
  const std::map<std::string, std::string> step = {
      {"SLURM_PROCID", "2"},           {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "1"},    {"SLURM_NTASKS", "4"},
      {"SLURM_STEP_NUM_NODES", "2"},   {"SLURM_JOB_ID", "9"},  {"SLURM_STEP_ID", "3"},
      {"SLURM_STEP_NODELIST", "rs-n[1-2]"}, {"SLURM_JOB_NODELIST", "rs-n[1-4]"}};
  auto s = resolve_settings(nullptr, step, 1000);
  REQUIRE_MESSAGE(s.ok(), s.status().message());
  CHECK(s->nodes == "rs-n1:29517,rs-n2:29517");
  CHECK(s->nodes_from == "SLURM_STEP_NODELIST");
  CHECK(s->node_rank == 1);
  CHECK(s->num_nodes == 2);
  CHECK(s->job_id == "slurm-9.3");

  auto with = [&](std::map<std::string, std::string> more) {
    auto env = step;
    for (auto& [k, v] : more) env[k] = v;
    return env;
  };
  auto port = resolve_settings(nullptr, with({{"RINGSYNC_CONTROL_PORT", "30000"}}), 1000);
  REQUIRE(port.ok());
  CHECK(port->nodes == "rs-n1:30000,rs-n2:30000");
  auto own = resolve_settings(nullptr, with({{"RINGSYNC_NODES", "a:1,b:1"}}), 1000);
  REQUIRE(own.ok());
  CHECK(own->nodes == "a:1,b:1");
  auto rendezvous = resolve_settings(nullptr, with({{"RINGSYNC_RENDEZVOUS", "etcd://e:2379"}}), 1000);
  REQUIRE(rendezvous.ok());
  CHECK(rendezvous->nodes.empty());
  // A batch script's tasks: no step list, the job's when it has the step's node count.
  auto env = step;
  env.erase("SLURM_STEP_NODELIST");
  auto job_list = resolve_settings(nullptr, env, 1000);
  REQUIRE(job_list.ok());
  CHECK(job_list->nodes.empty());  // 4 nodes listed, 2 in the step: not this step's list
  env["SLURM_JOB_NODELIST"] = "rs-n[3,5]";
  job_list = resolve_settings(nullptr, env, 1000);
  REQUIRE(job_list.ok());
  CHECK(job_list->nodes == "rs-n3:29517,rs-n5:29517");
  CHECK(contains(error_of(nullptr, with({{"SLURM_STEP_NODELIST", "rs-n[1-2"}})), "SLURM_STEP_NODELIST"));
  CHECK(contains(error_of(nullptr, with({{"RINGSYNC_CONTROL_PORT", "70000"}})), "RINGSYNC_CONTROL_PORT='70000'"));
}

TEST_CASE("a launcher that numbers ranks otherwise than node by node is refused with the fix") {
  // Slurm cyclic distribution: rank 1 on node 1.
  CHECK(contains(error_of(nullptr, {{"SLURM_PROCID", "1"}, {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "1"},
                                    {"SLURM_NTASKS", "4"}, {"SLURM_NNODES", "2"}}),
                 "--distribution=block"));
  CHECK(contains(error_of(nullptr, {{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                    {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}),
                 "--map-by slot"));
  CHECK(contains(error_of(nullptr, {{"RANK", "0"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "5"}, {"LOCAL_WORLD_SIZE", "2"}}),
                 "as many ranks on every node"));
  CHECK(contains(error_of(nullptr, {{"RANK", "x"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "2"}}),
                 "RANK='x'"));
}

}  // namespace test_client_env
