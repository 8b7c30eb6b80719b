// GatherGate: a ring allreduce that starts while the work pool still gathers
// the local ranks into its buffer (service/execution/gather_gate.h).
#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

#include "service/execution/gather_gate.h"
#include "service/collective/node_operation.h"
#include "service/ring/allreduce.h"
#include "service/test_ring_harness.h"
#include "service/transport/in_process.h"

namespace test_service_execution_gather_gate {

using namespace ringsync;
using namespace ringsync::service;
using namespace ringsync::service::ring::testing;
using ringsync::service::execution::GatherGate;
using ringsync::service::collective::NodeOperation;
using ringsync::service::collective::OperationShape;
using ringsync::service::transport::InProcessFabric;

TEST_CASE("gather gate: a range is filled once every piece under it is marked; each mark wakes") {
  std::vector<std::byte> buffer(100);
  int wakes = 0;
  GatherGate gate(buffer.data(), {{0, 40}, {40, 40}, {80, 20}}, [&] { ++wakes; });
  REQUIRE(gate.valid());
  CHECK_FALSE(gate.filled(buffer.data(), 10));
  gate.mark(0);
  CHECK(wakes == 1);
  CHECK(gate.filled(buffer.data(), 40));
  CHECK(gate.filled(buffer.data() + 39, 1));
  CHECK_FALSE(gate.filled(buffer.data() + 39, 2));  // reaches piece 1
  gate.mark(2);
  CHECK_FALSE(gate.filled(buffer.data(), 100));
  CHECK(gate.filled(buffer.data() + 80, 20));
  gate.mark(1);
  CHECK(gate.filled(buffer.data(), 100));
  CHECK(wakes == 3);
}

TEST_CASE("gather gate: bytes no piece writes count as filled; overlapping pieces are refused") {
  std::vector<std::byte> buffer(100);
  GatherGate gaps(buffer.data(), {{10, 10}, {50, 10}}, nullptr);
  REQUIRE(gaps.valid());
  CHECK(gaps.filled(buffer.data(), 10));
  CHECK(gaps.filled(buffer.data() + 20, 30));
  CHECK_FALSE(gaps.filled(buffer.data() + 15, 40));
  GatherGate overlapping(buffer.data(), {{0, 50}, {40, 20}}, nullptr);
  CHECK_FALSE(overlapping.valid());
}

TEST_CASE("gather gate: pieces in the order the ring reads this node's segments") {
  // 4 nodes, 16 floats: segment s is bytes [16 s, 16 s + 16); pieces of 8 bytes.
  std::vector<std::byte> buffer(64);
  std::vector<GatherGate::Span> pieces;
  for (std::size_t b = 0; b < 64; b += 8) pieces.push_back({b, 8});
  GatherGate gate(buffer.data(), pieces, nullptr);
  // Node 1 sends segment 0 at step 0, then reduces into 3, 2 and its own, 1.
  CHECK(gate.ring_order(64, 4, 4, 1) == std::vector<std::size_t>{0, 1, 6, 7, 4, 5, 2, 3});
  // Node 0: segment 3 first, then 2, 1, 0.
  CHECK(gate.ring_order(64, 4, 4, 0) == std::vector<std::size_t>{6, 7, 4, 5, 2, 3, 0, 1});
}

namespace {

float input(std::size_t g, std::size_t e) { return static_cast<float>((g * 7 + e * 3) % 13) - 6.0f; }

// Asks GatherGate, and lets the gathering thread start only once the ring has
// been told "not yet" at least once: the ring demonstrably ran ahead of the gather.
class WatchedGate final : public ring::StageGate {
 public:
  explicit WatchedGate(GatherGate& gate) : gate_(gate) {}
  bool filled(const std::byte* at, std::size_t bytes) override {
    const bool in = gate_.filled(at, bytes);
    if (!in) refused.store(true);
    return in;
  }
  void finished(const std::byte* at, std::size_t bytes) override { gate_.finished(at, bytes); }
  std::atomic<bool> refused{false};

 private:
  GatherGate& gate_;
};

}  // namespace

TEST_CASE("gather gate: a ring allreduce run while its gather is still going gives the full sum") {
  for (int nodes : {2, 3, 5}) {
    for (std::size_t local : {1u, 2u}) {
      const std::size_t count = 37;
      const std::size_t ranks = static_cast<std::size_t>(nodes) * local;
      std::vector<std::vector<float>> send(ranks, std::vector<float>(count)), recv(ranks);
      for (std::size_t g = 0; g < ranks; ++g) {
        for (std::size_t e = 0; e < count; ++e) send[g][e] = input(g, e);
        recv[g].assign(count, -99.0f);
      }
      InProcessFabric fabric(nodes);
      std::vector<ring::TaskState> states(static_cast<std::size_t>(nodes));
      std::vector<int> refused(static_cast<std::size_t>(nodes));
      spawn(nodes, [&](int n) {
        std::vector<std::vector<collective::Contribution>> tensors(1);
        for (std::size_t l = 0; l < local; ++l) {
          const std::size_t g = static_cast<std::size_t>(n) * local + l;
          tensors[0].push_back({reinterpret_cast<const std::byte*>(send[g].data()),
                                reinterpret_cast<std::byte*>(recv[g].data())});
        }
        const OperationShape shape{wire::CollectiveKind::kAllreduce, DType::kF32, ReduceOp::kSum, 0,
                                   static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(nodes),
                                   static_cast<std::uint32_t>(local)};
        NodeOperation work(shape, {count}, tensors, 12);  // 3-element pieces
        std::vector<GatherGate::Span> spans;
        for (std::size_t i = 0; i < work.gather_pieces(); ++i)
          spans.push_back({work.gather_span(i).begin, work.gather_span(i).bytes});
        GatherGate gate(work.buffer(), spans, nullptr);
        REQUIRE(gate.valid());
        WatchedGate watched(gate);
        ring::RingOptions options;
        options.chunk_bytes = 8;
        options.window = 2;
        options.gate = &watched;
        ring::Allreduce task(fabric.endpoint(n), work.buffer(), work.buffer_count(), DType::kF32, ReduceOp::kSum,
                             ranks, options);
        const auto order = gate.ring_order(work.buffer_bytes(), 4, nodes, n);
        std::atomic<bool> ring_over{false};  // a gate that never refuses must not hang the test
        std::thread gatherer([&] {
          while (!watched.refused.load() && !ring_over.load()) std::this_thread::yield();
          for (std::size_t i : order) {
            work.gather_piece(i);
            gate.mark(i);
          }
        });
        const auto i = static_cast<std::size_t>(n);
        states[i] = task.post().ok() ? drive_one(fabric.endpoint(n), task) : ring::TaskState::kError;
        ring_over.store(true);
        gatherer.join();
        refused[i] = watched.refused.load();
        if (states[i] == ring::TaskState::kDone)
          for (std::size_t p = 0; p < work.scatter_pieces(); ++p) work.scatter_piece(p);
      });
      CAPTURE(nodes);
      CAPTURE(local);
      for (auto s : states) CHECK(s == ring::TaskState::kDone);
      for (int r : refused) CHECK(r == 1);
      for (std::size_t g = 0; g < ranks; ++g)
        for (std::size_t e = 0; e < count; ++e) {
          float sum = 0;
          for (std::size_t h = 0; h < ranks; ++h) sum += input(h, e);
          CHECK(recv[g][e] == sum);  // small integers: exact
        }
    }
  }
}

}  // namespace test_service_execution_gather_gate
