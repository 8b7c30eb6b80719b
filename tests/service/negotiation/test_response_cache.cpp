#include <doctest/doctest.h>

#include "service/negotiation/response_cache.h"

namespace test_service_negotiation_response_cache {

using namespace ringsync;
using namespace ringsync::service::negotiation;
using peer_wire::ReadyTensor;

namespace {
ReadyTensor tensor(std::string name, std::uint64_t count = 8) {
  return {std::move(name), wire::CollectiveKind::kAllreduce, DType::kF32, ReduceOp::kSum, count, 0};
}
}  // namespace

TEST_CASE("a tensor that ran is found again under its bit, until its description changes") {
  ResponseCache cache(4);
  CHECK_FALSE(cache.lookup(tensor("a")).has_value());
  cache.record(tensor("a"));
  auto bit = cache.lookup(tensor("a"));
  REQUIRE(bit.has_value());
  REQUIRE(cache.find(*bit) != nullptr);
  CHECK(cache.find(*bit)->name == "a");
  CHECK(cache.find(*bit + 1000) == nullptr);  // out of range: no tensor, no exception
  CHECK_FALSE(cache.lookup(tensor("a", 9)).has_value());  // another count: negotiate again
  cache.record(tensor("a", 9));
  CHECK(cache.lookup(tensor("a", 9)) == bit);             // same bit, new description
  CHECK(cache.size() == 1);
}

TEST_CASE("two nodes recording the same plans assign the same bits, eviction included") {
  ResponseCache node0(3), node1(3);
  const std::vector<std::string> runs = {"a", "b", "c", "a", "d", "e", "a", "b"};
  for (const auto& name : runs) {
    node0.record(tensor(name));
    node1.record(tensor(name));
  }
  CHECK(node0.size() == 3);
  for (const auto& name : {"a", "b", "e"}) {  // d and c were least recently run
    CAPTURE(name);
    REQUIRE(node0.lookup(tensor(name)).has_value());
    CHECK(node0.lookup(tensor(name)) == node1.lookup(tensor(name)));
  }
  CHECK_FALSE(node0.lookup(tensor("c")).has_value());
  CHECK_FALSE(node0.lookup(tensor("d")).has_value());
}

TEST_CASE("bit vectors: ready on every node is the intersection") {
  const Bits a = to_bits({0, 5, 64, 129}, 130);
  const Bits b = to_bits({5, 64, 100}, 130);
  const Bits c = to_bits({5, 64, 129}, 130);
  CHECK(a.size() == 3);
  CHECK(from_bits(a) == std::vector<std::uint32_t>{0, 5, 64, 129});
  CHECK(from_bits(intersect({a, b, c})) == std::vector<std::uint32_t>{5, 64});
  CHECK(from_bits(to_bits({200}, 130)).empty());  // out of range positions are ignored
  CHECK(intersect({}).empty());
}

TEST_CASE("a cache of capacity zero caches nothing") {
  ResponseCache cache(0);
  cache.record(tensor("a"));
  CHECK_FALSE(cache.lookup(tensor("a")).has_value());
  CHECK_FALSE(cache.occupied(0));
}

}  // namespace test_service_negotiation_response_cache
