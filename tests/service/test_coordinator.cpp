#include <doctest/doctest.h>

#include "service/negotiation/coordinator.h"

using namespace ringsync;
using namespace ringsync::service::negotiation;
using peer_wire::ReadyTensor;

namespace {

ReadyTensor allreduce(std::string name, std::uint64_t count, DType dtype = DType::kF32,
                      ReduceOp op = ReduceOp::kSum) {
  return {std::move(name), wire::CollectiveKind::kAllreduce, dtype, op, count, 0};
}

const Clock::time_point t0 = Clock::now();

}  // namespace

TEST_CASE("a tensor runs once every node has it ready, in first-heard order") {
  Coordinator c(3, 0);
  c.add_ready(0, {allreduce("b", 4), allreduce("a", 4)}, t0);
  c.add_ready(1, {allreduce("a", 4)}, t0);
  CHECK(c.plan(1, 1).operations.empty());
  c.add_ready(2, {allreduce("a", 4), allreduce("b", 4)}, t0);
  c.add_ready(1, {allreduce("b", 4)}, t0);
  auto plan = c.plan(1, 2);
  REQUIRE(plan.operations.size() == 2);
  CHECK(plan.operations[0].names == std::vector<std::string>{"b"});  // heard of first
  CHECK(plan.operations[1].names == std::vector<std::string>{"a"});
  CHECK(plan.operations[1].sequence == plan.operations[0].sequence + 1);
  CHECK(c.pending() == 0);
}

TEST_CASE("fusion packs same-dtype, same-op allreduces up to the threshold") {
  Coordinator c(2, 64);  // 64 bytes = 16 f32
  std::vector<ReadyTensor> ready = {allreduce("a", 8), allreduce("b", 8), allreduce("c", 8),
                                    allreduce("d", 4, DType::kF64), allreduce("e", 2, DType::kF64),
                                    allreduce("f", 1, DType::kF64, ReduceOp::kMax),
                                    {"g", wire::CollectiveKind::kBroadcast, DType::kF32, ReduceOp::kSum, 3, 1}};
  c.add_ready(0, ready, t0);
  c.add_ready(1, ready, t0);
  auto plan = c.plan(1, 1);
  REQUIRE(plan.operations.size() == 5);
  CHECK(plan.operations[0].names == std::vector<std::string>{"a", "b"});  // 64 bytes: full
  CHECK(plan.operations[0].counts == std::vector<std::uint64_t>{8, 8});
  CHECK(plan.operations[1].names == std::vector<std::string>{"c"});
  CHECK(plan.operations[2].names == std::vector<std::string>{"d", "e"});  // 48 bytes of f64
  CHECK(plan.operations[3].names == std::vector<std::string>{"f"});       // another op
  CHECK(plan.operations[4].kind == wire::CollectiveKind::kBroadcast);     // never fused
  CHECK(plan.operations[4].root == 1);
}

TEST_CASE("nodes that disagree get one error naming the tensor, fields and nodes") {
  Coordinator c(3, 1 << 20);
  c.add_ready(0, {allreduce("w", 10), allreduce("ok", 1)}, t0);
  c.add_ready(1, {allreduce("w", 12), allreduce("ok", 1)}, t0);
  c.add_ready(2, {allreduce("w", 12, DType::kF32, ReduceOp::kMax), allreduce("ok", 1)}, t0);
  auto plan = c.plan(1, 1);
  REQUIRE(plan.errors.size() == 1);
  CHECK(plan.errors[0].name == "w");
  CHECK(plan.errors[0].message ==
        "nodes disagree on tensor 'w': count: node 0 says 10, nodes 1,2 say 12; op: node 2 says "
        "max, nodes 0,1 say sum");
  REQUIRE(plan.operations.size() == 1);
  CHECK(plan.operations[0].names == std::vector<std::string>{"ok"});
}

TEST_CASE("a tensor reported twice by a node fails instead of running twice") {
  Coordinator c(2, 0);
  c.add_ready(0, {allreduce("x", 1)}, t0);
  c.add_ready(0, {allreduce("x", 1)}, t0);
  c.add_ready(1, {allreduce("x", 1)}, t0);
  auto plan = c.plan(1, 1);
  REQUIRE(plan.errors.size() == 1);
  CHECK(plan.errors[0].message == "node 0 submitted tensor 'x' again before it ran");
  CHECK(plan.operations.empty());
}

TEST_CASE("stalled tensors name the nodes still missing") {
  Coordinator c(4, 0);
  c.add_ready(0, {allreduce("slow", 1)}, t0);
  c.add_ready(2, {allreduce("slow", 1)}, t0);
  c.add_ready(1, {allreduce("fresh", 1)}, t0 + std::chrono::seconds(50));
  auto stalls = c.stalled(t0 + std::chrono::seconds(60), std::chrono::seconds(30));
  REQUIRE(stalls.size() == 1);
  CHECK(stalls[0].name == "slow");
  CHECK(stalls[0].ready_nodes == std::vector<std::uint32_t>{0, 2});
  CHECK(stalls[0].missing_nodes == std::vector<std::uint32_t>{1, 3});
  CHECK(stalls[0].waited == std::chrono::seconds(60));
}

TEST_CASE("a plan stays within its byte budget; the rest comes in the next plans, in order") {
  Coordinator c(2, 1 << 30);
  const auto t0 = Clock::now();
  std::vector<ReadyTensor> tensors;
  for (int i = 0; i < 100; ++i) tensors.push_back(allreduce(std::string(1000, 'a') + std::to_string(1000 + i), 4));
  c.add_ready(0, tensors, t0);
  c.add_ready(1, tensors, t0);
  std::vector<std::string> order;
  int plans = 0;
  while (c.has_ready()) {
    const auto plan = c.plan(1, static_cast<std::uint64_t>(plans + 1), 16 * 1024);
    std::size_t bytes = 0;
    for (const auto& op : plan.operations)
      for (const auto& name : op.names) {
        bytes += name.size();
        order.push_back(name);
      }
    CHECK(bytes <= 16 * 1024);
    CHECK_FALSE(plan.operations.empty());
    REQUIRE(++plans < 100);
  }
  CHECK(plans == 7);  // 100 names of ~1 KiB, at most 15 per 16 KiB plan
  REQUIRE(order.size() == 100);
  for (int i = 0; i < 100; ++i) CHECK(order[i] == std::string(1000, 'a') + std::to_string(1000 + i));
  CHECK(c.pending() == 0);
}
