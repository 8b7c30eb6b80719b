#include <doctest/doctest.h>

#include <cstring>

#include "service/negotiation/direct_exchange.h"

namespace test_service_negotiation_direct_exchange {

using namespace ringsync;
using namespace ringsync::service::negotiation;
using peer_wire::DirectTensor;
using peer_wire::ReadyTensor;
using Outcome = DirectExchange::Round::Outcome;

namespace {

ReadyTensor allreduce(std::string name, std::uint64_t count, DType dtype = DType::kF32, ReduceOp op = ReduceOp::kSum) {
  return {std::move(name), wire::CollectiveKind::kAllreduce, dtype, op, count, 0};
}

template <typename T>
DirectTensor contribution(ReadyTensor tensor, std::vector<T> values) {
  DirectTensor out;
  out.tensor = std::move(tensor);
  out.data.resize(values.size() * sizeof(T));
  std::memcpy(out.data.data(), values.data(), out.data.size());
  return out;
}

template <typename T>
std::vector<T> values_of(const std::vector<std::uint8_t>& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

const Clock::time_point t0 = Clock::now();

}  // namespace

TEST_CASE("a round finishes with the last node's contribution, reduced in node order") {
  DirectExchange x(3, 6);
  CHECK_FALSE(x.add(2, contribution<float>(allreduce("w", 2), {1, 2}), t0));
  CHECK_FALSE(x.add(0, contribution<float>(allreduce("w", 2), {10, 20}), t0));
  CHECK(x.pending() == 1);
  auto round = x.add(1, contribution<float>(allreduce("w", 2), {100, 200}), t0);
  REQUIRE(round);
  CHECK(round->outcome == Outcome::kResult);
  CHECK(round->name == "w");
  CHECK(values_of<float>(round->result) == std::vector<float>{111, 222});
  CHECK(x.pending() == 0);
}

TEST_CASE("avg is divided once by the job's ranks; min, max and prod combine the nodes") {
  DirectExchange x(2, 4);  // 2 nodes x 2 ranks: each node sent its ranks' sum
  x.add(0, contribution<double>(allreduce("a", 1, DType::kF64, ReduceOp::kAvg), {6}), t0);
  auto avg = x.add(1, contribution<double>(allreduce("a", 1, DType::kF64, ReduceOp::kAvg), {2}), t0);
  REQUIRE(avg);
  CHECK(values_of<double>(avg->result) == std::vector<double>{2});
  x.add(1, contribution<std::int32_t>(allreduce("m", 2, DType::kI32, ReduceOp::kMax), {5, -1}), t0);
  auto max = x.add(0, contribution<std::int32_t>(allreduce("m", 2, DType::kI32, ReduceOp::kMax), {3, 7}), t0);
  REQUIRE(max);
  CHECK(values_of<std::int32_t>(max->result) == std::vector<std::int32_t>{5, 7});
}

TEST_CASE("rounds of one name pair up in order, even when a node is a round ahead") {
  DirectExchange x(2, 2);
  CHECK_FALSE(x.add(1, contribution<float>(allreduce("g", 1), {1}), t0));
  CHECK_FALSE(x.add(1, contribution<float>(allreduce("g", 1), {2}), t0));  // node 1's next round
  auto first = x.add(0, contribution<float>(allreduce("g", 1), {10}), t0);
  REQUIRE(first);
  CHECK(values_of<float>(first->result) == std::vector<float>{11});
  CHECK(x.pending() == 1);
  auto second = x.add(0, contribution<float>(allreduce("g", 1), {20}), t0);
  REQUIRE(second);
  CHECK(values_of<float>(second->result) == std::vector<float>{22});
  CHECK(x.pending() == 0);
}

TEST_CASE("nodes that disagree on a tensor get the same error everywhere") {
  DirectExchange x(2, 2);
  x.add(0, contribution<float>(allreduce("w", 2), {1, 2}), t0);
  auto round = x.add(1, contribution<float>(allreduce("w", 3), {1, 2, 3}), t0);
  REQUIRE(round);
  CHECK(round->outcome == Outcome::kMismatch);
  CHECK_MESSAGE(round->error.find("count: node 0 says 2, node 1 says 3") != std::string::npos, round->error);
  CHECK(round->result.empty());
  x.add(0, contribution<float>(allreduce("o", 1, DType::kF32, ReduceOp::kMin), {1}), t0);
  auto op = x.add(1, contribution<float>(allreduce("o", 1, DType::kF32, ReduceOp::kMax), {1}), t0);
  REQUIRE(op);
  CHECK(op->outcome == Outcome::kMismatch);
  CHECK_MESSAGE(op->error.find("op: ") != std::string::npos, op->error);
}

TEST_CASE("a node without data, or with data of another size, sends the tensor to negotiation") {
  DirectExchange x(2, 2);
  x.add(0, contribution<float>(allreduce("gpu", 2), {1, 2}), t0);
  DirectTensor none;
  none.tensor = allreduce("gpu", 2);
  auto round = x.add(1, none, t0);
  REQUIRE(round);
  CHECK(round->outcome == Outcome::kNegotiate);
  CHECK(round->result.empty());
  x.add(0, contribution<float>(allreduce("odd", 2), {1, 2}), t0);
  auto odd = x.add(1, contribution<float>(allreduce("odd", 2), {1, 2, 3}), t0);
  REQUIRE(odd);
  CHECK(odd->outcome == Outcome::kNegotiate);
}

TEST_CASE("stalls name the nodes that contributed and the ones still missing") {
  DirectExchange x(3, 3);
  x.add(0, contribution<float>(allreduce("late", 1), {1}), t0);
  x.add(2, contribution<float>(allreduce("late", 1), {1}), t0 + std::chrono::seconds(1));
  CHECK(x.stalled(t0 + std::chrono::seconds(5), std::chrono::seconds(10)).empty());
  auto stalls = x.stalled(t0 + std::chrono::seconds(30), std::chrono::seconds(10));
  REQUIRE(stalls.size() == 1);
  CHECK(stalls[0].name == "late");
  CHECK(stalls[0].ready_nodes == std::vector<std::uint32_t>{0, 2});
  CHECK(stalls[0].missing_nodes == std::vector<std::uint32_t>{1});
  CHECK(stalls[0].waited == std::chrono::seconds(30));
  CHECK_FALSE(x.add(7, contribution<float>(allreduce("late", 1), {1}), t0));  // no such node
  CHECK(x.stalled(t0 + std::chrono::seconds(30), std::chrono::seconds(10))[0].missing_nodes ==
        std::vector<std::uint32_t>{1});
}

TEST_CASE("waiting_nodes: the nodes whose contribution waits, until the round is done") {
  DirectExchange x(3, 3);
  CHECK(x.waiting_nodes("w").empty());
  x.add(1, contribution<float>(allreduce("w", 1), {1}), t0);
  CHECK(x.waiting_nodes("w") == std::vector<std::uint32_t>{1});
  x.add(0, contribution<float>(allreduce("w", 1), {1}), t0);
  CHECK(x.waiting_nodes("w") == std::vector<std::uint32_t>{0, 1});
  CHECK(x.add(2, contribution<float>(allreduce("w", 1), {1}), t0));
  CHECK(x.waiting_nodes("w").empty());
}

}  // namespace test_service_negotiation_direct_exchange
