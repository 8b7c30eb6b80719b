#include <doctest/doctest.h>

#include <cstring>

#include "service/negotiation/coordinator.h"

namespace test_service_negotiation_coordinator {

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

namespace {

template <typename T>
std::vector<std::uint8_t> bytes_of(std::vector<T> values) {
  std::vector<std::uint8_t> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

template <typename T>
std::vector<T> values_of(const std::vector<std::uint8_t>& bytes, std::size_t at, std::size_t count) {
  std::vector<T> out(count);
  std::memcpy(out.data(), bytes.data() + at, count * sizeof(T));
  return out;
}

}  // namespace

TEST_CASE("small allreduces: node 0 reduces every node's data and the plan carries the result") {
  Coordinator c(3, 1 << 20, InlineOptions{64, 6});  // 3 nodes of 2 ranks
  const auto avg = allreduce("avg", 3, DType::kF32, ReduceOp::kAvg);
  const auto max = allreduce("max", 2, DType::kI64, ReduceOp::kMax);
  // Each node's data is its two ranks' sum (avg) or max.
  c.add_ready(0, {avg, max}, t0, {bytes_of<float>({2, 4, 6}), bytes_of<std::int64_t>({-5, 9})});
  c.add_ready(1, {avg, max}, t0, {bytes_of<float>({4, 8, 12}), bytes_of<std::int64_t>({7, -1})});
  c.add_ready(2, {max, avg}, t0, {bytes_of<std::int64_t>({3, 100}), bytes_of<float>({6, 0, 0})});
  auto plan = c.plan(1, 1);
  REQUIRE(plan.operations.size() == 2);  // another dtype and op: not fused
  CHECK(plan.operations[0].names == std::vector<std::string>{"avg"});
  CHECK(values_of<float>(plan.operations[0].result, 0, 3) == std::vector<float>{2, 2, 3});  // sum / 6 ranks
  CHECK(values_of<std::int64_t>(plan.operations[1].result, 0, 2) == std::vector<std::int64_t>{7, 100});
}

TEST_CASE("small allreduces fuse with each other up to the inline limit, never with ring tensors") {
  Coordinator c(2, 1 << 20, InlineOptions{16, 2});
  const auto a = allreduce("a", 2), b = allreduce("b", 2), big = allreduce("big", 8), d = allreduce("d", 2),
             e = allreduce("e", 2);
  const auto two = bytes_of<float>({1, 2});
  c.add_ready(0, {a, b, big, d, e}, t0, {two, two, {}, two, two});
  c.add_ready(1, {a, b, big, d, e}, t0, {two, two, {}, two, two});
  auto plan = c.plan(1, 1);
  REQUIRE(plan.operations.size() == 3);
  CHECK(plan.operations[0].names == std::vector<std::string>{"a", "b"});  // 16 bytes: the limit
  CHECK(values_of<float>(plan.operations[0].result, 0, 4) == std::vector<float>{2, 4, 2, 4});
  CHECK(plan.operations[1].names == std::vector<std::string>{"big"});  // no data: the ring
  CHECK(plan.operations[1].result.empty());
  CHECK(plan.operations[2].names == std::vector<std::string>{"d", "e"});
  CHECK(plan.operations[2].result.size() == 16);
}

TEST_CASE("a small allreduce runs the ring unless every node sent data of the right size") {
  const auto t = allreduce("t", 2);
  SUBCASE("a node without data") {
    Coordinator c(2, 1 << 20, InlineOptions{64, 2});
    c.add_ready(0, {t}, t0, {bytes_of<float>({1, 2})});
    c.add_ready(1, {t}, t0);
    auto plan = c.plan(1, 1);
    REQUIRE(plan.operations.size() == 1);
    CHECK(plan.operations[0].result.empty());
  }
  SUBCASE("data of another size") {
    Coordinator c(2, 1 << 20, InlineOptions{64, 2});
    c.add_ready(0, {t}, t0, {bytes_of<float>({1, 2})});
    c.add_ready(1, {t}, t0, {bytes_of<float>({1, 2, 3})});
    auto plan = c.plan(1, 1);
    REQUIRE(plan.operations.size() == 1);
    CHECK(plan.operations[0].result.empty());
  }
  SUBCASE("inline results turned off on node 0") {
    Coordinator c(2, 1 << 20, InlineOptions{0, 2});
    c.add_ready(0, {t}, t0, {bytes_of<float>({1, 2})});
    c.add_ready(1, {t}, t0, {bytes_of<float>({1, 2})});
    auto plan = c.plan(1, 1);
    REQUIRE(plan.operations.size() == 1);
    CHECK(plan.operations[0].result.empty());
  }
  SUBCASE("nodes that disagree get the error, not a result") {
    Coordinator c(2, 1 << 20, InlineOptions{64, 2});
    c.add_ready(0, {t}, t0, {bytes_of<float>({1, 2})});
    c.add_ready(1, {allreduce("t", 2, DType::kF32, ReduceOp::kMin)}, t0, {bytes_of<float>({1, 2})});
    auto plan = c.plan(1, 1);
    CHECK(plan.operations.empty());
    REQUIRE(plan.errors.size() == 1);
  }
}

TEST_CASE("the inline limit shrinks as 2/N past 2 nodes: node 0 moves N/2 times the ring's bytes") {
  // route::inline_limit (tests/service/route/). 4 nodes with --inline-bytes 32: 16 bytes inline, 20 bytes over the ring.
  Coordinator c(4, 1 << 20, InlineOptions{32, 4});
  const auto small = allreduce("small", 4), big = allreduce("big", 5);
  const auto four = bytes_of<float>({1, 1, 1, 1});
  const auto five = bytes_of<float>({1, 1, 1, 1, 1});
  for (std::uint32_t n = 0; n < 4; ++n) c.add_ready(n, {small, big}, t0, {four, five});
  auto plan = c.plan(1, 1);
  REQUIRE(plan.operations.size() == 2);
  CHECK(values_of<float>(plan.operations[0].result, 0, 4) == std::vector<float>{4, 4, 4, 4});
  CHECK(plan.operations[1].result.empty());
}

TEST_CASE("waiting_nodes: who reported a tensor still waiting for the others, at once") {
  Coordinator c(3, 0);
  CHECK(c.waiting_nodes("w").empty());
  c.add_ready(2, {allreduce("w", 1)}, t0);
  CHECK(c.waiting_nodes("w") == std::vector<std::uint32_t>{2});
  c.add_ready(0, {allreduce("w", 1)}, t0);
  CHECK(c.waiting_nodes("w") == std::vector<std::uint32_t>{0, 2});
  c.add_ready(1, {allreduce("w", 1)}, t0);
  CHECK(c.waiting_nodes("w").empty());  // ready everywhere: it waits for nobody
}

}  // namespace test_service_negotiation_coordinator
