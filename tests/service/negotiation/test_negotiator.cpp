// The Negotiator of every node of a job, over its control-plane seam: the
// nodes' ControlPlanes are in-process links that deliver each frame, encoded
// and decoded as the wire would, on the one io_context. What every node plans,
// in which order; what is answered without a ring (the direct exchange and the
// plan's inline results); what fails (disagreements, a broken run, a lost ring).
#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "common/peer_wire.h"
#include "service/negotiation/negotiator.h"
#include "service/one_rank_collective.h"

namespace test_service_negotiation_negotiator {

using namespace ringsync;
using namespace ringsync::service;
using namespace ringsync::service::negotiation;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

struct Job;

// One node's control links: a star around node 0, each frame encoded and
// decoded (as the peers' wire does) and delivered on the io_context.
class Links final : public cluster::ControlPlane {
 public:
  Links(Job& job, std::uint32_t self) : job_(job), self_(self) {}
  void send(std::uint32_t node, const peer_wire::Message& message) override;
  std::size_t sent = 0;

 private:
  Job& job_;
  std::uint32_t self_;
};

// Records every answer (the daemon's side of cluster::Answers).
struct Answered final : cluster::Answers {
  void fail(local::PendingCollective& p, const Status& why, observe::ErrorKind kind) override {
    failures.push_back({p.name, why, kind});
    for (auto& s : p.submissions) s.complete(why);
  }
  void succeed(local::PendingCollective& p, Clock::time_point, std::size_t) override {
    succeeded.push_back(p.name);
    for (auto& s : p.submissions) s.complete(Status::Ok());
  }
  struct Failure {
    std::string name;
    Status why;
    observe::ErrorKind kind;
  };
  std::vector<Failure> failures;
  std::vector<std::string> succeeded;
};

struct Node {
  std::unique_ptr<Links> links;
  Answered answers;
  std::unique_ptr<negotiation::Negotiator> negotiator;
  std::vector<std::shared_ptr<cluster::PlannedOperation>> planned;  // handed to the executor, in order
  std::vector<Status> lost;
};

cluster::ClusterConfig settings(std::uint64_t inline_bytes) {
  cluster::ClusterConfig c;
  c.cycle_time = 0ms;
  c.fusion_threshold_bytes = 1 << 20;
  c.ring.inline_bytes = inline_bytes;
  c.ring.response_cache = 16;
  return c;
}

struct Job {
  asio::io_context io;
  // Keeps poll() running handlers after the queue once ran dry.
  asio::executor_work_guard<asio::io_context::executor_type> keep{io.get_executor()};
  metrics::Registry registry;
  observe::DaemonMetrics metrics{registry};
  cluster::ClusterConfig config;
  cluster::JobSpec spec;
  std::vector<Node> nodes;

  Job(std::uint32_t n, std::uint64_t inline_bytes) : config(settings(inline_bytes)), nodes(n) {
    spec.id = "j";
    spec.slots = 1;
    spec.num_nodes = n;
    for (std::uint32_t i = 0; i < n; ++i) spec.nodes.push_back({"127.0.0.1", static_cast<std::uint16_t>(1000 + i), 1});
    for (std::uint32_t i = 0; i < n; ++i) {
      nodes[i].links = std::make_unique<Links>(*this, i);
      specs.push_back(spec);
      specs.back().node_rank = i;
    }
    // The specs must not move once the negotiators hold them.
    for (std::uint32_t i = 0; i < n; ++i) {
      Node& node = nodes[i];
      negotiation::Negotiator::Hooks hooks;
      hooks.run = [&node](std::shared_ptr<cluster::PlannedOperation> op) { node.planned.push_back(std::move(op)); };
      hooks.lose = [&node](const Status& why) { node.lost.push_back(why); };
      hooks.executor_idle = [] { return true; };
      node.negotiator = std::make_unique<negotiation::Negotiator>(io, specs[i], config, metrics, nullptr, node.answers,
                                                                 std::move(hooks));
      node.negotiator->formed(1, node.links.get());
    }
  }

  void deliver(std::uint32_t from, std::uint32_t to, const peer_wire::Message& message) {
    auto bytes = std::make_shared<std::vector<std::uint8_t>>(peer_wire::encode(message));
    asio::post(io, [this, from, to, bytes] {
      auto decoded = peer_wire::decode(std::span<const std::uint8_t>(*bytes).subspan(wire::kFrameHeaderBytes));
      REQUIRE(decoded.ok());
      CHECK(nodes[to].negotiator->on_message(from, *decoded));
    });
  }

  // Every node's one rank submitted an f32 allreduce `name` of `values` (in place).
  void allreduce(const std::string& name, std::vector<std::vector<float>>& values,
                 std::vector<std::optional<Status>>& answers) {
    for (std::uint32_t n = 0; n < nodes.size(); ++n)
      nodes[n].negotiator->local_ready(test::one_rank_collective(
          wire::CollectiveKind::kAllreduce, name, values[n].data(), values[n].size(),
          [&answers, n](const Status& status) { answers[n] = status; }));
  }
  void settle() {
    for (int i = 0; i < 200 && io.poll() > 0; ++i) {
    }
  }

  std::vector<cluster::JobSpec> specs;
};

void Links::send(std::uint32_t node, const peer_wire::Message& message) {
  // A star: workers reach node 0 only.
  REQUIRE((self_ == 0 || node == 0));
  ++sent;
  job_.deliver(self_, node, message);
}

std::vector<std::vector<float>> ones(std::size_t nodes, std::size_t count) {
  std::vector<std::vector<float>> v;
  for (std::size_t n = 0; n < nodes; ++n) v.emplace_back(count, static_cast<float>(n + 1));
  return v;
}

std::vector<std::string> names_of(const Node& node) {
  std::vector<std::string> names;
  for (const auto& op : node.planned)
    for (const auto& t : op->tensors) names.push_back(t.name);
  return names;
}

}  // namespace

TEST_CASE("negotiator: every node plans the same operations in the same order, node 0 deciding") {
  Job job(3, /*inline_bytes=*/0);  // every allreduce is planned for the ring
  std::vector<std::vector<std::optional<Status>>> answers(3, std::vector<std::optional<Status>>(3));
  std::vector<std::vector<std::vector<float>>> data;
  for (int t = 0; t < 3; ++t) data.push_back(ones(3, 1000));
  // Node 2 readies them in another order than nodes 0 and 1.
  for (int t : {0, 1, 2}) {
    for (std::uint32_t n = 0; n < 2; ++n)
      job.nodes[n].negotiator->local_ready(
          test::one_rank_collective(wire::CollectiveKind::kAllreduce, "t" + std::to_string(t), data[t][n].data(), 1000,
                                    [&answers, t, n](const Status& st) { answers[t][n] = st; }));
  }
  job.settle();
  for (const Node& node : job.nodes) CHECK(node.planned.empty());  // node 2 has none of them yet
  for (int t : {2, 0, 1})
    job.nodes[2].negotiator->local_ready(
        test::one_rank_collective(wire::CollectiveKind::kAllreduce, "t" + std::to_string(t), data[t][2].data(), 1000,
                                  [&answers, t](const Status& st) { answers[t][2] = st; }));
  job.settle();
  const std::vector<std::string> order = names_of(job.nodes[0]);
  CHECK(order.size() == 3);
  for (const Node& node : job.nodes) CHECK(names_of(node) == order);
  // Same sequence numbers everywhere: the ring's tags depend on them.
  for (std::size_t i = 0; i < job.nodes[0].planned.size(); ++i)
    for (const Node& node : job.nodes) CHECK(node.planned[i]->op.sequence == job.nodes[0].planned[i]->op.sequence);
  CHECK_FALSE(job.nodes[0].negotiator->has_waiting());
}

TEST_CASE("negotiator: a small allreduce is exchanged directly and answered on every node, no plan, no ring") {
  Job job(3, /*inline_bytes=*/32 * 1024);
  std::vector<std::optional<Status>> answers(3);
  auto values = ones(3, 4);  // 16 bytes: within 32 KiB x 2/(3 x 2)
  job.allreduce("small", values, answers);
  job.settle();
  for (std::uint32_t n = 0; n < 3; ++n) {
    REQUIRE(answers[n]);
    CHECK(answers[n]->ok());
    CHECK(values[n] == std::vector<float>(4, 6.0f));  // 1 + 2 + 3
    CHECK(job.nodes[n].planned.empty());
    CHECK(job.nodes[n].answers.succeeded == std::vector<std::string>{"small"});
  }
  CHECK(job.metrics.inline_operations.with({"direct"}).value() == 3);
}

TEST_CASE("negotiator: a larger small allreduce is answered with node 0's plan") {
  Job job(3, /*inline_bytes=*/32 * 1024);
  std::vector<std::optional<Status>> answers(3);
  auto values = ones(3, 4000);  // 16 KB: past the direct limit (10.9 KB), within the plan's (21.8 KB)
  job.allreduce("medium", values, answers);
  job.settle();
  for (std::uint32_t n = 0; n < 3; ++n) {
    REQUIRE(answers[n]);
    CHECK(answers[n]->ok());
    CHECK(values[n].front() == 6.0f);
    CHECK(values[n].back() == 6.0f);
    CHECK(job.nodes[n].planned.empty());
  }
  CHECK(job.metrics.inline_operations.with({"plan"}).value() == 3);
}

TEST_CASE("negotiator: nodes that disagree on a tensor all fail it, naming the field and the nodes") {
  Job job(2, /*inline_bytes=*/0);
  std::vector<std::optional<Status>> answers(2);
  std::vector<std::vector<float>> values{std::vector<float>(8, 1.0f), std::vector<float>(9, 1.0f)};
  job.allreduce("shape", values, answers);
  job.settle();
  for (std::uint32_t n = 0; n < 2; ++n) {
    REQUIRE(answers[n]);
    CHECK(answers[n]->code() == StatusCode::kMismatch);
    CHECK_MESSAGE(answers[n]->message().find("count: node 0 says 8, node 1 says 9") != std::string::npos,
                  answers[n]->message());
    REQUIRE(job.nodes[n].answers.failures.size() == 1);
    CHECK(job.nodes[n].answers.failures[0].kind == observe::ErrorKind::kMismatch);
  }
}

TEST_CASE("negotiator: a repeated step travels as response-cache bits and plans the same") {
  Job job(2, /*inline_bytes=*/0);
  for (int step = 0; step < 3; ++step) {
    std::vector<std::optional<Status>> answers(2);
    auto values = ones(2, 1000);
    const std::size_t before = job.nodes[1].links->sent;
    job.allreduce("grad", values, answers);
    job.settle();
    CHECK(job.nodes[1].links->sent > before);
    REQUIRE(job.nodes[0].planned.size() == static_cast<std::size_t>(step + 1));
    CHECK(names_of(job.nodes[0]) == names_of(job.nodes[1]));
    // Finished by the executor: the tensor is free to come again.
    for (Node& node : job.nodes) node.answers.succeed(node.planned.back()->tensors[0], Clock::now(), 2);
  }
  // The first step was described in full; the next ones came as cache bits.
  CHECK(job.metrics.cache_hits.with().value() > 0);
}

TEST_CASE("negotiator: a broken run fails what waits and what comes; a lost ring fails the rest") {
  Job job(2, /*inline_bytes=*/0);
  std::vector<std::optional<Status>> answers(2);
  auto values = ones(2, 1000);
  // Only node 0 readies it: it waits for node 1.
  std::vector<std::optional<Status>> one(1);
  {
    local::PendingCollective p;
    p.name = "waits";
    p.job_id = "j";
    p.present = {true};
    local::Submission s;
    s.request.kind = wire::CollectiveKind::kAllreduce;
    s.request.name = "waits";
    s.request.count = 1000;
    auto* d = reinterpret_cast<std::byte*>(values[0].data());
    s.where = collective::Contribution{d, d};
    s.complete = [&one](const Status& st) { one[0] = st; };
    p.submissions.push_back(std::move(s));
    job.nodes[0].negotiator->local_ready(std::move(p));
  }
  job.settle();
  CHECK(job.nodes[0].negotiator->has_waiting());
  job.nodes[0].negotiator->break_run(Status::PeerLost("rank 1 of job 'j' left"));
  REQUIRE(one[0]);
  CHECK(one[0]->code() == StatusCode::kPeerLost);
  CHECK(job.nodes[0].answers.failures.back().kind == observe::ErrorKind::kPeerLost);
  // What becomes ready after the break fails at once.
  job.allreduce("after", values, answers);
  REQUIRE(answers[0]);
  CHECK(answers[0]->code() == StatusCode::kPeerLost);
  // Node 1's tensor waits; the ring's loss fails it with the loss's kind.
  job.settle();
  job.nodes[1].negotiator->lost(Status::Timeout("a deadline ran out"), observe::ErrorKind::kTimeout);
  REQUIRE(answers[1]);
  CHECK(answers[1]->code() == StatusCode::kTimeout);
  CHECK(job.nodes[1].answers.failures.back().kind == observe::ErrorKind::kTimeout);
}

}  // namespace test_service_negotiation_negotiator
