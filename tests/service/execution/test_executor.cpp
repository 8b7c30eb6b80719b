// The Executor of every node of a job over the in-process fabric: planned
// operations handed to it as the negotiator would (same sequence, same plan
// order on every node), each node's RingEngine over its fabric endpoint, the
// completions delivered on one io_context. What it runs (the route's path and
// the kind's task), what it answers, and what a lost ring does to what waits.
#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "service/borrowed_transport.h"
#include "service/execution/executor.h"
#include "service/one_rank_collective.h"
#include "service/transport/in_process.h"

namespace test_service_execution_executor {

using namespace ringsync;
using namespace ringsync::service;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

struct Answered final : cluster::Answers {
  void fail(local::PendingCollective& p, const Status& why, observe::ErrorKind kind) override {
    kinds.push_back(kind);
    for (auto& s : p.submissions) s.complete(why);
  }
  void succeed(local::PendingCollective& p, Clock::time_point, std::size_t) override {
    for (auto& s : p.submissions) s.complete(Status::Ok());
  }
  std::vector<observe::ErrorKind> kinds;
};

struct Node {
  cluster::JobSpec spec;
  Answered answers;
  std::unique_ptr<threads::WorkPool> pool;  // each node its own, as each daemon has
  std::unique_ptr<execution::Executor> executor;
  std::unique_ptr<execution::RingEngine> engine;
  std::vector<Status> suspected;
};

struct Job {
  asio::io_context io;
  // Keeps run_for() waiting for completions posted from the pool and the engines.
  asio::executor_work_guard<asio::io_context::executor_type> keep{io.get_executor()};
  metrics::Registry registry;
  observe::DaemonMetrics metrics{registry};
  cluster::ClusterConfig config;
  transport::InProcessFabric fabric;
  std::vector<Node> nodes;

  Job(std::uint32_t n, route::DataRoutes routes) : fabric(static_cast<int>(n)), nodes(n) {
    config.ring.chunk_bytes = 16 * 1024;
    config.ring_window = 4;
    config.ring.routes = routes;
    config.fusion_threshold_bytes = 1 << 20;
    for (std::uint32_t i = 0; i < n; ++i) {
      Node& node = nodes[i];
      node.spec.id = "j";
      node.spec.slots = 1;
      node.spec.num_nodes = n;
      node.spec.node_rank = i;
      execution::Executor::Hooks hooks;
      hooks.suspect = [&node](const Status& why) { node.suspected.push_back(why); };
      node.pool = std::make_unique<threads::WorkPool>(1);
      node.executor = std::make_unique<execution::Executor>(io, node.spec, config, *node.pool, metrics, nullptr,
                                                            node.answers, std::move(hooks));
      node.engine = std::make_unique<execution::RingEngine>(
          std::make_unique<transport::Borrowed>(fabric.endpoint(static_cast<int>(i))),
          [this](std::function<void()> f) { asio::post(io, std::move(f)); });
      node.executor->formed(1, node.engine.get(), std::vector<std::string>(n, "in-process"));
    }
  }
  ~Job() {
    for (auto& n : nodes) n.executor->lost(Status::Closed("test over"));
    for (int i = 0; i < 200 && !idle(); ++i) io.run_for(10ms);
    for (auto& n : nodes) n.engine.reset();
    io.run_for(10ms);
  }
  bool idle() const {
    for (const auto& n : nodes)
      if (!n.executor->idle()) return false;
    return true;
  }

  // Operation `sequence`: every node's one rank's f32 tensors (in place), of
  // `kind`, planned alike on every node; answers[node][tensor].
  void submit(std::uint32_t sequence, wire::CollectiveKind kind, const std::vector<std::string>& names,
              std::vector<std::vector<std::vector<float>>>& data,  // [node][tensor]
              std::vector<std::vector<std::optional<Status>>>& answers) {
    for (std::uint32_t n = 0; n < nodes.size(); ++n) {
      auto planned = std::make_shared<cluster::PlannedOperation>();
      planned->op.sequence = sequence;
      planned->op.kind = kind;
      planned->op.dtype = DType::kF32;
      planned->op.op = ReduceOp::kSum;
      for (std::size_t t = 0; t < names.size(); ++t) {
        planned->op.names.push_back(names[t]);
        planned->op.counts.push_back(data[n][t].size());
        planned->tensors.push_back(
            test::one_rank_collective(kind, names[t], data[n][t].data(), data[n][t].size(),
                                      [&answers, n, t](const Status& status) { answers[n][t] = status; }));
        planned->ready_at.push_back(Clock::now());
      }
      nodes[n].executor->submit(std::move(planned));
    }
  }
  bool run_until(const std::function<bool()>& done) {
    const auto deadline = Clock::now() + 30s;
    while (!done()) {
      if (Clock::now() > deadline) {
        for (std::size_t n = 0; n < nodes.size(); ++n)
          for (const auto& f : nodes[n].executor->in_flight(Clock::now()))
            MESSAGE("node " << n << " still runs: " << f.summary);
        return false;
      }
      io.run_for(5ms);
    }
    return true;
  }
};

bool all_answered(const std::vector<std::vector<std::optional<Status>>>& answers) {
  for (const auto& node : answers)
    for (const auto& a : node)
      if (!a) return false;
  return true;
}

}  // namespace

TEST_CASE("executor: a fused allreduce takes the route's algorithm, every node sums every tensor") {
  // 3 nodes: up to 64 KiB the direct algorithm, to 1 MiB halving-doubling
  // (folding), the ring above.
  struct Size {
    std::size_t count;
    const char* algorithm;
  };
  for (const Size& size : {Size{1000, "direct"}, Size{50000, "halving-doubling"}, Size{300001, "ring"}}) {
    CAPTURE(size.count);
    Job job(3, route::DataRoutes{64 * 1024, 1 << 20, true});
    // Two tensors fused into one operation: their counts together pick the algorithm.
    std::vector<std::vector<std::vector<float>>> data(3);
    for (std::uint32_t n = 0; n < 3; ++n)
      data[n] = {std::vector<float>(size.count / 2, static_cast<float>(n + 1)),
                 std::vector<float>(size.count - size.count / 2, static_cast<float>(10 * (n + 1)))};
    std::vector<std::vector<std::optional<Status>>> answers(3, std::vector<std::optional<Status>>(2));
    job.submit(1, wire::CollectiveKind::kAllreduce, {"a", "b"}, data, answers);
    REQUIRE(job.run_until([&] { return all_answered(answers); }));
    for (std::uint32_t n = 0; n < 3; ++n) {
      CHECK(answers[n][0]->ok());
      CHECK(answers[n][1]->ok());
      CHECK(data[n][0] == std::vector<float>(size.count / 2, 6.0f));
      CHECK(data[n][1] == std::vector<float>(size.count - size.count / 2, 60.0f));
    }
    CHECK(job.metrics.data_operations.with({size.algorithm}).value() == 3);
    CHECK(job.run_until([&] { return job.idle(); }));
  }
}

TEST_CASE("executor: operations run in plan order, two at a time, each answered") {
  Job job(2, route::DataRoutes{});
  constexpr int kOps = 6;
  std::vector<std::vector<std::vector<std::vector<float>>>> data(kOps);
  std::vector<std::vector<std::vector<std::optional<Status>>>> answers(
      kOps, std::vector<std::vector<std::optional<Status>>>(2, std::vector<std::optional<Status>>(1)));
  for (int k = 0; k < kOps; ++k) {
    data[k].resize(2);
    for (std::uint32_t n = 0; n < 2; ++n) data[k][n] = {std::vector<float>(20000 + k, static_cast<float>(k + n))};
    job.submit(static_cast<std::uint32_t>(k + 1), wire::CollectiveKind::kAllreduce, {"t" + std::to_string(k)},
               data[k], answers[k]);
  }
  CHECK_FALSE(job.idle());
  REQUIRE(job.run_until([&] {
    for (const auto& a : answers)
      if (!all_answered(a)) return false;
    return true;
  }));
  for (int k = 0; k < kOps; ++k)
    for (std::uint32_t n = 0; n < 2; ++n) {
      CHECK(answers[k][n][0]->ok());
      CHECK(data[k][n][0].front() == static_cast<float>(2 * k + 1));
    }
  CHECK(job.metrics.data_operations.with({"ring"}).value() == 2 * kOps);
  CHECK(job.run_until([&] { return job.idle(); }));
}

TEST_CASE("executor: a barrier is its plan; other kinds take their ring task") {
  Job job(2, route::DataRoutes{});
  std::vector<std::vector<std::vector<float>>> none(2, std::vector<std::vector<float>>(1));
  std::vector<std::vector<std::optional<Status>>> answers(2, std::vector<std::optional<Status>>(1));
  job.submit(1, wire::CollectiveKind::kBarrier, {"b"}, none, answers);
  job.io.poll();
  CHECK(all_answered(answers));  // no data task: answered as it starts
  CHECK(job.metrics.data_operations.with({"ring"}).value() == 0);
  // A broadcast from global rank 1 (node 1's one rank).
  std::vector<std::vector<std::vector<float>>> data{{std::vector<float>(5000, 0.0f)}, {std::vector<float>(5000, 7.0f)}};
  std::vector<std::vector<std::optional<Status>>> cast(2, std::vector<std::optional<Status>>(1));
  for (std::uint32_t n = 0; n < 2; ++n) {
    auto planned = std::make_shared<cluster::PlannedOperation>();
    planned->op = peer_wire::Operation{2, wire::CollectiveKind::kBroadcast, DType::kF32, ReduceOp::kSum, 1, {"c"}, {5000}, {}};
    local::PendingCollective p = test::one_rank_collective(
        wire::CollectiveKind::kBroadcast, "c", data[n][0].data(), 5000,
        [&cast, n](const Status& status) { cast[n][0] = status; });
    p.submissions[0].request.root = 1;
    planned->tensors.push_back(std::move(p));
    planned->ready_at.push_back(Clock::now());
    job.nodes[n].executor->submit(std::move(planned));
  }
  REQUIRE(job.run_until([&] { return all_answered(cast); }));
  CHECK(data[0][0] == std::vector<float>(5000, 7.0f));
  CHECK(job.metrics.data_operations.with({"ring"}).value() == 2);
}

TEST_CASE("executor: a ring lost with operations queued fails them at once with the loss's kind") {
  Job job(2, route::DataRoutes{});
  // Only node 0 gets them: node 1 never runs its side, so they stay queued or waiting.
  std::vector<std::vector<std::vector<float>>> data(2);
  data[0] = {std::vector<float>(100000, 1.0f)};
  data[1] = {std::vector<float>(100000, 1.0f)};
  std::vector<std::vector<std::optional<Status>>> answers(2, std::vector<std::optional<Status>>(1));
  for (std::uint32_t k = 1; k <= 3; ++k) {
    auto planned = std::make_shared<cluster::PlannedOperation>();
    planned->op = peer_wire::Operation{k, wire::CollectiveKind::kAllreduce, DType::kF32, ReduceOp::kSum, 0,
                                       {"t" + std::to_string(k)}, {100000}, {}};
    planned->tensors.push_back(test::one_rank_collective(
        wire::CollectiveKind::kAllreduce, "t" + std::to_string(k), data[0][0].data(), 100000,
        [&answers](const Status& status) { answers[0][0] = status; }));
    planned->ready_at.push_back(Clock::now());
    job.nodes[0].executor->submit(std::move(planned));
  }
  job.io.run_for(50ms);
  CHECK_FALSE(job.nodes[0].executor->idle());
  // The membership's verdict: a deadline ran out. The engine's tasks end with it.
  job.nodes[0].engine->abort(Status::Timeout("node 1 moved no data"));
  job.nodes[0].executor->lost(Status::Timeout("node 1 moved no data"));
  REQUIRE(job.run_until([&] { return job.nodes[0].executor->idle(); }));
  REQUIRE(answers[0][0]);
  CHECK(answers[0][0]->code() == StatusCode::kTimeout);
  REQUIRE(job.nodes[0].answers.kinds.size() == 3);
  for (observe::ErrorKind kind : job.nodes[0].answers.kinds) CHECK(kind == observe::ErrorKind::kTimeout);
}

}  // namespace test_service_execution_executor
