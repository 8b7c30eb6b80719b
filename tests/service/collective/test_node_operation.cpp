// NodeOperation: the memory work around the ring, with plain buffers.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "service/collective/node_operation.h"

namespace test_service_collective_node_operation {

using namespace ringsync;
using namespace ringsync::service;
using ringsync::service::collective::NodeOperation;
using ringsync::service::collective::OperationShape;

namespace {

void run_gather(NodeOperation& op) {
  for (std::size_t i = 0; i < op.gather_pieces(); ++i) op.gather_piece(i);
}
void run_scatter(NodeOperation& op) {
  for (std::size_t i = 0; i < op.scatter_pieces(); ++i) op.scatter_piece(i);
}
collective::Contribution of(std::vector<float>& send, std::vector<float>& recv) {
  return {reinterpret_cast<const std::byte*>(send.data()), reinterpret_cast<std::byte*>(recv.data())};
}
const float* as_floats(NodeOperation& op) { return reinterpret_cast<const float*>(op.buffer()); }

}  // namespace

TEST_CASE("node operation: fused allreduce sums local ranks back to back, avg sums here") {
  // Two tensors (5 and 3 elements) from 3 local ranks; chunks of 2 elements.
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
    std::vector<std::vector<float>> send_a(3), send_b(3), recv_a(3), recv_b(3);
    std::vector<std::vector<collective::Contribution>> tensors(2);
    for (int r = 0; r < 3; ++r) {
      send_a[r].assign(5, static_cast<float>(r + 1));
      send_b[r].assign(3, static_cast<float>(10 * (r + 1)));
      recv_a[r].assign(5, -1.0f);
      recv_b[r].assign(3, -1.0f);
      tensors[0].push_back(of(send_a[r], recv_a[r]));
      tensors[1].push_back(of(send_b[r], recv_b[r]));
    }
    OperationShape shape{wire::CollectiveKind::kAllreduce, DType::kF32, op, 0, 1, 2, 3};
    NodeOperation work(shape, {5, 3}, tensors, 8);
    CHECK(work.buffer_count() == 8);
    CHECK(work.gather_pieces() == 3 + 2);
    run_gather(work);
    const float a = op == ReduceOp::kMax ? 3.0f : 6.0f;
    const float b = op == ReduceOp::kMax ? 30.0f : 60.0f;
    for (int i = 0; i < 5; ++i) CHECK(as_floats(work)[i] == a);
    for (int i = 5; i < 8; ++i) CHECK(as_floats(work)[i] == b);
    run_scatter(work);
    for (int r = 0; r < 3; ++r) {
      CHECK(std::all_of(recv_a[r].begin(), recv_a[r].end(), [&](float v) { return v == a; }));
      CHECK(std::all_of(recv_b[r].begin(), recv_b[r].end(), [&](float v) { return v == b; }));
    }
  }
}

TEST_CASE("node operation: allgather places this node's ranks at their global slots") {
  // Node 1 of 3, 2 local ranks, 4 elements each: slots 2 and 3 of 6.
  std::vector<std::vector<float>> send(2), recv(2);
  std::vector<std::vector<collective::Contribution>> tensors(1);
  for (int r = 0; r < 2; ++r) {
    send[r].assign(4, static_cast<float>(r + 1));
    recv[r].assign(24, -1.0f);
    tensors[0].push_back(of(send[r], recv[r]));
  }
  OperationShape shape{wire::CollectiveKind::kAllgather, DType::kF32, ReduceOp::kSum, 0, 1, 3, 2};
  NodeOperation work(shape, {4}, tensors, 1 << 20);
  REQUIRE(work.buffer_count() == 24);
  run_gather(work);
  for (int i = 0; i < 4; ++i) {
    CHECK(as_floats(work)[8 + i] == 1.0f);
    CHECK(as_floats(work)[12 + i] == 2.0f);
  }
  // The ring would fill the other slots; pretend it did.
  float* buffer = reinterpret_cast<float*>(work.buffer());
  for (int i = 0; i < 8; ++i) buffer[i] = 7.0f;
  for (int i = 16; i < 24; ++i) buffer[i] = 9.0f;
  run_scatter(work);
  for (int r = 0; r < 2; ++r) CHECK(std::memcmp(recv[r].data(), buffer, 24 * sizeof(float)) == 0);
}

TEST_CASE("node operation: broadcast reads only the root's buffer, on the root's node") {
  std::vector<std::vector<float>> send(2), recv(2);
  std::vector<std::vector<collective::Contribution>> tensors(1);
  for (int r = 0; r < 2; ++r) {
    send[r].assign(6, static_cast<float>(r + 1));
    recv[r].assign(6, -1.0f);
    tensors[0].push_back(of(send[r], recv[r]));
  }
  // Global root 3 = node 1, local rank 1.
  OperationShape on_root{wire::CollectiveKind::kBroadcast, DType::kF32, ReduceOp::kSum, 3, 1, 2, 2};
  NodeOperation root_work(on_root, {6}, tensors, 1 << 20);
  CHECK(root_work.gather_pieces() == 1);
  run_gather(root_work);
  CHECK(as_floats(root_work)[5] == 2.0f);
  OperationShape elsewhere{wire::CollectiveKind::kBroadcast, DType::kF32, ReduceOp::kSum, 3, 0, 2, 2};
  NodeOperation other(elsewhere, {6}, tensors, 1 << 20);
  CHECK(other.gather_pieces() == 0);
  // The ring fills local rank 0's output; only rank 1 gets a copy.
  CHECK(other.zero_copy());
  CHECK(other.buffer() == reinterpret_cast<std::byte*>(recv[0].data()));
  CHECK(other.scatter_pieces() == 1);
}

TEST_CASE("node operation: barrier and zero-length tensors move nothing") {
  OperationShape barrier{wire::CollectiveKind::kBarrier, DType::kF32, ReduceOp::kSum, 0, 0, 2, 2};
  NodeOperation b(barrier, {0}, {{}}, 4096);
  CHECK(b.buffer_count() == 0);
  CHECK(b.gather_pieces() == 0);
  CHECK(b.scatter_pieces() == 0);
  std::vector<float> empty;
  OperationShape sum{wire::CollectiveKind::kAllreduce, DType::kF32, ReduceOp::kSum, 0, 0, 2, 1};
  NodeOperation z(sum, {0}, {{of(empty, empty)}}, 4096);
  CHECK(z.buffer_count() == 0);
  CHECK(z.gather_pieces() == 0);
}

TEST_CASE("node operation: one tensor out of place runs the ring in a rank's output") {
  std::vector<std::vector<float>> send(3), recv(3);
  std::vector<std::vector<collective::Contribution>> tensors(1);
  for (int r = 0; r < 3; ++r) {
    send[r].assign(10, static_cast<float>(r + 1));
    recv[r].assign(10, -1.0f);
    tensors[0].push_back(of(send[r], recv[r]));
  }
  // Rank 0 in place: its output holds its input, so rank 1's output carries the ring.
  tensors[0][0].send = reinterpret_cast<const std::byte*>(recv[0].data());
  recv[0].assign(10, 1.0f);
  OperationShape shape{wire::CollectiveKind::kAllreduce, DType::kF32, ReduceOp::kSum, 0, 0, 2, 3};
  NodeOperation work(shape, {10}, tensors, 16);
  REQUIRE(work.zero_copy());
  CHECK(work.buffer() == reinterpret_cast<std::byte*>(recv[1].data()));
  CHECK(work.scatter_pieces() == 2 * 3);  // ranks 0 and 2, 16-byte pieces of 40 bytes
  run_gather(work);
  CHECK(std::all_of(recv[0].begin(), recv[0].end(), [](float v) { return v == 1.0f; }));
  run_scatter(work);
  for (int r = 0; r < 3; ++r)
    CHECK(std::all_of(recv[r].begin(), recv[r].end(), [](float v) { return v == 6.0f; }));
}

TEST_CASE("node operation: in-place ranks keep their inputs until the ring has succeeded") {
  // Every rank in place: the ring needs a buffer of its own, from the pool, and
  // the inputs are untouched by gather (a failed ring loses nothing).
  auto pool = collective::RingBufferPool::create(64 << 20);
  const std::size_t n = (2 << 20) / sizeof(float);  // pooled size
  std::vector<std::vector<float>> data(2);
  std::vector<std::vector<collective::Contribution>> tensors(1);
  for (int r = 0; r < 2; ++r) {
    data[r].assign(n, static_cast<float>(r + 1));
    tensors[0].push_back(of(data[r], data[r]));
  }
  OperationShape shape{wire::CollectiveKind::kAllreduce, DType::kF32, ReduceOp::kSum, 0, 0, 2, 2};
  std::byte* first = nullptr;
  {
    NodeOperation work(shape, {n}, tensors, 1 << 20, pool.get());
    CHECK_FALSE(work.zero_copy());
    first = work.buffer();
    run_gather(work);
    CHECK(data[0][n - 1] == 1.0f);
    CHECK(data[1][0] == 2.0f);
    CHECK(as_floats(work)[n / 2] == 3.0f);
  }
  CHECK(pool->kept_buffers() == 1);
  NodeOperation again(shape, {n}, tensors, 1 << 20, pool.get());
  CHECK(again.buffer() == first);  // reused, not allocated again
  CHECK(pool->kept_buffers() == 0);
}

TEST_CASE("staging buffers: reuse within a byte budget; small ones are never kept") {
  using collective::RingBufferPool;
  auto pool = RingBufferPool::create(3 << 20);
  {
    auto a = pool->acquire(2 << 20);
    auto b = pool->acquire(2 << 20);
    auto tiny = pool->acquire(100);
    CHECK(a.get() != b.get());
  }
  // Both 2 MiB buffers came back; only one fits the 3 MiB budget.
  CHECK(pool->kept_buffers() == 1);
  CHECK(pool->kept_bytes() == std::size_t{2} << 20);
  {
    auto big = pool->acquire(5 << 20);  // more than twice smaller ones: fresh
    CHECK(pool->kept_buffers() == 1);
    auto fits = pool->acquire((1 << 20) + 1);  // takes the 2 MiB one
    CHECK(pool->kept_buffers() == 0);
  }
  // A buffer may outlive its pool.
  auto orphan = pool->acquire(2 << 20);
  pool.reset();
  orphan.get()[0] = std::byte{1};
  orphan.reset();
}

TEST_CASE("node operation: one local input is the ring's input where it lies, in place or not") {
  std::vector<float> send(10, 2.0f), recv(10, -1.0f), both(10, 3.0f);
  OperationShape shape{wire::CollectiveKind::kAllreduce, DType::kF32, ReduceOp::kSum, 0, 0, 2, 1};
  // Out of place: the ring runs in the output and reads the input beside it.
  NodeOperation apart(shape, {10}, {{of(send, recv)}}, 16);
  CHECK(apart.zero_copy());
  CHECK(apart.ring_input() == reinterpret_cast<const std::byte*>(send.data()));
  // In place: a buffer of its own, so a failed ring leaves the input as it was.
  NodeOperation same(shape, {10}, {{of(both, both)}}, 16);
  CHECK_FALSE(same.zero_copy());
  CHECK(same.ring_input() == reinterpret_cast<const std::byte*>(both.data()));
  CHECK(same.scatter_pieces() == 3);  // the result back into the rank's buffer

  // Two local inputs are reduced first; two tensors are fused first: nothing to read in place.
  std::vector<float> send2(10, 1.0f), recv2(10, 0.0f);
  shape.local_size = 2;
  NodeOperation two(shape, {10}, {{of(send, recv), of(send2, recv2)}}, 16);
  CHECK(two.ring_input() == nullptr);
  shape.local_size = 1;
  std::vector<float> small(4, 1.0f), small_out(4, 0.0f);
  NodeOperation fused(shape, {10, 4}, {{of(send, recv)}, {of(small, small_out)}}, 16);
  CHECK(fused.ring_input() == nullptr);
  // A rank without an input (a GPU job's non-carrier rank) beside the one with it.
  shape.local_size = 2;
  collective::Contribution receives_only{nullptr, reinterpret_cast<std::byte*>(recv2.data())};
  NodeOperation carrier(shape, {10}, {{of(send, recv), receives_only}}, 16);
  CHECK(carrier.ring_input() == reinterpret_cast<const std::byte*>(send.data()));
}

}  // namespace test_service_collective_node_operation
