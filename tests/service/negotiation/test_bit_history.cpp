// BitHistory: reading response-cache bits sent by a node that is plans behind.
#include <doctest/doctest.h>

#include "service/negotiation/bit_history.h"
#include "service/negotiation/response_cache.h"

namespace test_service_negotiation_bit_history {

using namespace ringsync;
using ringsync::peer_wire::ReadyTensor;
using ringsync::service::negotiation::BitHistory;
using ringsync::service::negotiation::ResponseCache;

namespace {
ReadyTensor tensor(const std::string& name) {
  return ReadyTensor{name, wire::CollectiveKind::kAllreduce, DType::kF32, ReduceOp::kSum, 10, 0};
}
}  // namespace

TEST_CASE("bit history: a lagging node's bit means the occupant of its time") {
  BitHistory history(2);
  history.record(0, 1, tensor("a"));
  history.record(0, 1, tensor("a"));  // unchanged: no new entry
  history.record(0, 5, tensor("b"));  // plan 5 gave bit 0 to b
  CHECK(history.resolve(0, 1)->name == "a");
  CHECK(history.resolve(0, 4)->name == "a");
  CHECK(history.resolve(0, 5)->name == "b");
  CHECK(history.resolve(0, 9)->name == "b");
  CHECK_FALSE(history.resolve(0, 0));  // before anyone held it
  CHECK_FALSE(history.resolve(1, 9));  // never held
  CHECK_FALSE(history.resolve(7, 9));  // out of range
}

TEST_CASE("bit history: only the last kDepth occupants are remembered") {
  BitHistory history(1);
  for (std::uint64_t cycle = 1; cycle <= BitHistory::kDepth + 2; ++cycle)
    history.record(0, cycle, tensor(std::string("t").append(std::to_string(cycle))));
  CHECK_FALSE(history.resolve(0, 2));  // forgotten: the ring re-forms in this case
  CHECK(history.resolve(0, 3)->name == "t3");
  CHECK(history.resolve(0, 100)->name == std::string("t").append(std::to_string(BitHistory::kDepth + 2)));
}

TEST_CASE("bit history follows a thrashing cache: every node's bits resolve to what they meant") {
  // Capacity 2, three tensors in rotation: every plan evicts one. A node one
  // plan behind still gets its tensors back.
  ResponseCache coordinator(2);
  BitHistory history(2);
  std::vector<std::pair<std::uint64_t, std::map<std::uint32_t, std::string>>> node_views;
  for (std::uint64_t cycle = 1; cycle <= 12; ++cycle) {
    const auto t = tensor(std::string("t").append(std::to_string(cycle % 3)));
    coordinator.record(t);
    history.record(*coordinator.lookup(t), cycle, t);
    std::map<std::uint32_t, std::string> view;
    for (std::uint32_t bit = 0; bit < 2; ++bit)
      if (const auto* tensor = coordinator.find(bit)) view[bit] = tensor->name;
    node_views.push_back({cycle, view});
  }
  // Nodes up to 3 plans behind the coordinator (cycle 12).
  for (const auto& [cycle, view] : node_views) {
    if (cycle < 9) continue;
    for (const auto& [bit, name] : view) {
      auto resolved = history.resolve(bit, cycle);
      REQUIRE(resolved);
      CHECK(resolved->name == name);
    }
  }
}

}  // namespace test_service_negotiation_bit_history
