// A job as its trainers' hellos describe it, and the errors that say which
// setting to fix.
#include <doctest/doctest.h>

#include "service/local/job_description.h"

namespace test_service_local_job_description {

using namespace ringsync;
using namespace ringsync::service;

namespace {

wire::Hello hello(std::string nodes = "", std::int32_t node_rank = -1, std::uint32_t num_nodes = 0,
                  std::string rendezvous = "") {
  wire::Hello h;
  h.job_id = "j";
  h.local_size = 4;
  h.nodes = std::move(nodes);
  h.node_rank = node_rank;
  h.num_nodes = num_nodes;
  h.rendezvous = std::move(rendezvous);
  h.job_token = "t";
  return h;
}

std::string error_of(const wire::Hello& h, local::JobDefaults d = {}) {
  auto job = local::describe_job(h, d);
  REQUIRE_FALSE(job.ok());
  return job.status().message();
}

}  // namespace

TEST_CASE("job description: nothing said is a job of this node alone") {
  auto job = local::describe_job(hello(), {});
  REQUIRE(job.ok());
  CHECK(job->spec.num_nodes == 1);
  CHECK(job->spec.slots == 4);
  CHECK(job->spec.nodes.empty());
}

TEST_CASE("job description: a node list and a rank") {
  auto job = local::describe_job(hello("10.0.0.1:29600,[fe80::1]:29601,c", 1), {"", 29601});
  REQUIRE_MESSAGE(job.ok(), job.status().message());
  CHECK(job->spec.num_nodes == 3);
  CHECK(job->spec.node_rank == 1);
  CHECK(job->spec.nodes[1].host == "fe80::1");
  CHECK(job->spec.nodes[2].port == 0);  // the default port
  CHECK(job->spec.nodes[0].slots == 4);
  CHECK(job->spec.token == "t");
}

TEST_CASE("job description: what is wrong is named, with what to set") {
  CHECK(error_of(hello("a:1,b:1")).find("set RINGSYNC_NODE_RANK") != std::string::npos);
  CHECK(error_of(hello("a:1,b:1", 2)).find("out of range") != std::string::npos);
  CHECK(error_of(hello("a:1,b:1", 0, 3)).find("make them agree") != std::string::npos);
  CHECK(error_of(hello("", -1, 3)).find("RINGSYNC_NODES=host:port") != std::string::npos);
  CHECK(error_of(hello("a:1,,b:1", 0)).find("empty item") != std::string::npos);
  // This node's entry must be where this daemon listens.
  CHECK(error_of(hello("a:29600,b:29601", 0), {"", 29601}).find("listens for the other nodes on port 29601") !=
        std::string::npos);
}

TEST_CASE("job description: a rendezvous (the trainers' or the daemon's) assigns the rank") {
  auto job = local::describe_job(hello("", -1, 3), {"etcd://10.0.0.5:2379"});
  REQUIRE(job.ok());
  CHECK(job->spec.rendezvous == "etcd://10.0.0.5:2379");
  CHECK_FALSE(job->rank_known);
  auto stated = local::describe_job(hello("", 2, 3, "etcd://e:1"), {"etcd://other:2"});
  REQUIRE(stated.ok());
  CHECK(stated->spec.rendezvous == "etcd://e:1");
  CHECK(stated->rank_known);
  CHECK(stated->spec.node_rank == 2);
}

TEST_CASE("job description: later ranks must describe the job as its first did") {
  auto first = *local::describe_job(hello("a:1,b:1", 0), {});
  CHECK(local::description_mismatch(first, *local::describe_job(hello("a:1,b:1", 0), {})).empty());
  CHECK(local::description_mismatch(first, *local::describe_job(hello("a:1,c:1", 0), {})).find("RINGSYNC_NODES") !=
        std::string::npos);
  CHECK(local::description_mismatch(first, *local::describe_job(hello("a:1,b:1", 1), {})).find("node rank") != std::string::npos);
  auto other_token = hello("a:1,b:1", 0);
  other_token.job_token = "u";
  CHECK(local::description_mismatch(first, *local::describe_job(other_token, {})).find("token") != std::string::npos);
}

}  // namespace test_service_local_job_description
