#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "common/reduce.h"
#include "service/ring/allreduce.h"
#include "service/ring/partition.h"
#include "service/test_allreduce_runner.h"
#include "service/test_ring_data.h"
#include "service/test_ring_harness.h"
#include "service/transport/in_process.h"

namespace test_service_ring_allreduce {

using namespace ringsync;
using namespace ringsync::service::ring;
using namespace ringsync::service::ring::testing;
using ringsync::service::transport::InProcessFabric;

namespace {

// One allreduce over `n` nodes as threads, each starting from inputs[rank].
Outcome allreduce(int n, const std::vector<Bytes>& inputs, std::size_t count, DType dtype,
                  ReduceOp op, std::size_t divisor, const RingOptions& options,
                  InProcessFabric* shared_fabric = nullptr) {
  return run_allreduce<Allreduce>(n, inputs, count, dtype, op, divisor, options, shared_fabric);
}

}  // namespace

TEST_CASE("ring allreduce: every dtype and op, bit for bit against the reference") {
  for (int n : {1, 2, 3, 4, 7, 11}) {
    for (std::size_t count :
         {std::size_t{0}, std::size_t{1}, static_cast<std::size_t>(n - 1), std::size_t{37}}) {
      for (DType dtype : kAllDTypes) {
        for (ReduceOp op : kAllOps) {
          CAPTURE(n);
          CAPTURE(count);
          CAPTURE(dtype_name(dtype));
          CAPTURE(reduce_op_name(op));
          std::vector<Bytes> inputs;
          for (int r = 0; r < n; ++r) inputs.push_back(ring_input(dtype, op, count, r));
          // Two-element chunks and a window of 2: many chunks, each step pipelined.
          RingOptions options;
          options.sequence = 3;
          options.chunk_bytes = 2 * dtype_size(dtype);
          options.window = 2;
          const Outcome out =
              allreduce(n, inputs, count, dtype, op, static_cast<std::size_t>(n), options);
          check_all_equal(out, reference(inputs, count, dtype, op));
        }
      }
    }
  }
}

TEST_CASE("ring allreduce: a large odd count, every dtype and op") {
  constexpr std::size_t kCount = 100003;
  for (int n : {1, 2, 3, 4, 7, 11}) {
    for (DType dtype : kAllDTypes) {
      for (ReduceOp op : kAllOps) {
        CAPTURE(n);
        CAPTURE(dtype_name(dtype));
        CAPTURE(reduce_op_name(op));
        std::vector<Bytes> inputs;
        for (int r = 0; r < n; ++r) inputs.push_back(ring_input(dtype, op, kCount, r));
        RingOptions options;
        options.chunk_bytes = 16 * 1024;
        const Outcome out =
            allreduce(n, inputs, kCount, dtype, op, static_cast<std::size_t>(n), options);
        check_all_equal(out, reference(inputs, kCount, dtype, op));
      }
    }
  }
}

TEST_CASE("ring allreduce: a large odd count on 11 nodes with small chunks and window 1") {
  constexpr std::size_t kCount = 100003;
  for (DType dtype : {DType::kF32, DType::kI64, DType::kBF16}) {
    CAPTURE(dtype_name(dtype));
    std::vector<Bytes> inputs;
    for (int r = 0; r < 11; ++r) inputs.push_back(ring_input(dtype, ReduceOp::kSum, kCount, r));
    RingOptions options;
    options.chunk_bytes = 1000;  // not a multiple of every element size
    options.window = 1;
    const Outcome out = allreduce(11, inputs, kCount, dtype, ReduceOp::kSum, 11, options);
    check_all_equal(out, reference(inputs, kCount, dtype, ReduceOp::kSum));
  }
}

TEST_CASE("ring allreduce: avg divides by the number of contributions, not of nodes") {
  // Each node's buffer already sums L = 4 local ranks: the job has 3 * 4 contributions.
  constexpr int kNodes = 3;
  constexpr std::size_t kDivisor = 12;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kI32}) {
    CAPTURE(dtype_name(dtype));
    std::vector<Bytes> inputs;
    for (int r = 0; r < kNodes; ++r) inputs.push_back(ring_input(dtype, ReduceOp::kSum, 101, r));
    Bytes expected = reference(inputs, 101, dtype, ReduceOp::kSum);
    reduce::divide_reference(expected.data(), 101, dtype, kDivisor);
    RingOptions options;
    options.chunk_bytes = 12;
    const Outcome out = allreduce(kNodes, inputs, 101, dtype, ReduceOp::kAvg, kDivisor, options);
    check_all_equal(out, expected);
  }
  // One node: no messages, but still the division.
  const std::vector<Bytes> one{ring_input(DType::kF64, ReduceOp::kSum, 9, 0)};
  Bytes expected = one[0];
  reduce::divide_reference(expected.data(), 9, DType::kF64, 8);
  check_all_equal(allreduce(1, one, 9, DType::kF64, ReduceOp::kAvg, 8, RingOptions{}), expected);
}

TEST_CASE("ring allreduce: each node sends 2(N-1)/N of the buffer, in chunk-sized messages") {
  constexpr std::size_t kCount = 1003;
  for (int n : {2, 3, 4, 7}) {
    CAPTURE(n);
    InProcessFabric fabric(n);
    std::vector<Bytes> inputs;
    for (int r = 0; r < n; ++r)
      inputs.push_back(ring_input(DType::kI32, ReduceOp::kSum, kCount, r));
    RingOptions options;
    options.chunk_bytes = 40;  // 10 elements
    options.window = std::numeric_limits<std::size_t>::max();  // everything posted at once
    const Outcome out = allreduce(n, inputs, kCount, DType::kI32, ReduceOp::kSum,
                                  static_cast<std::size_t>(n), options, &fabric);
    check_all_equal(out, reference(inputs, kCount, DType::kI32, ReduceOp::kSum));
    const Partition p(kCount, n, 10);
    for (int r = 0; r < n; ++r) {
      CAPTURE(r);
      // Reduce-scatter sends every segment but its own, allgather every
      // segment but its right neighbour's.
      const std::size_t elements = 2 * kCount - p.segment(r).count - p.segment((r + 1) % n).count;
      CHECK(fabric.bytes_sent(r) == elements * sizeof(std::int32_t));
      std::size_t messages = 0;
      for (int s = 0; s < n; ++s) {
        if (s != r) messages += p.chunks(s);
        if (s != (r + 1) % n) messages += p.chunks(s);
      }
      CHECK(fabric.messages_sent(r) == messages);
    }
  }
}

TEST_CASE("ring allreduce: one node completes at once without messages") {
  InProcessFabric fabric(1);
  std::vector<float> data{1.5f, -2.0f, 3.25f};
  Allreduce task(fabric.endpoint(0), data.data(), data.size(), DType::kF32, ReduceOp::kSum, 1,
                 RingOptions{});
  REQUIRE(task.post().ok());
  CHECK(task.progress() == TaskState::kDone);
  CHECK(data == std::vector<float>{1.5f, -2.0f, 3.25f});
  CHECK(fabric.messages_sent(0) == 0);
  CHECK_FALSE(fabric.endpoint(0).progress());
}

TEST_CASE("ring allreduce: two collectives in flight on the same endpoints never mix") {
  for (int n : {2, 3, 4, 7}) {
    CAPTURE(n);
    constexpr std::size_t kCountA = 517, kCountB = 300;
    InProcessFabric fabric(n);
    std::vector<Bytes> a_in, b_in;
    for (int r = 0; r < n; ++r) {
      a_in.push_back(ring_input(DType::kI32, ReduceOp::kSum, kCountA, r, 1));
      b_in.push_back(ring_input(DType::kF64, ReduceOp::kMax, kCountB, r, 2));
    }
    std::vector<Bytes> a = a_in, b = b_in;
    std::vector<std::vector<TaskState>> states(static_cast<std::size_t>(n));
    spawn(n, [&](int r) {
      const auto i = static_cast<std::size_t>(r);
      RingOptions first, second;
      first.sequence = 1;
      second.sequence = 2;
      // Same chunk size: the two collectives' messages have the same sizes
      // and steps, so only the sequence in the tag keeps them apart.
      first.chunk_bytes = second.chunk_bytes = 64;
      Allreduce task_a(fabric.endpoint(r), a[i].data(), kCountA, DType::kI32, ReduceOp::kSum,
                       static_cast<std::size_t>(n), first);
      Allreduce task_b(fabric.endpoint(r), b[i].data(), kCountB, DType::kF64, ReduceOp::kMax,
                       static_cast<std::size_t>(n), second);
      // Half the nodes start the second collective first.
      Task* order[2] = {&task_a, &task_b};
      if (r % 2 == 1) std::swap(order[0], order[1]);
      const bool posted = order[0]->post().ok() && order[1]->post().ok();
      states[i] = posted ? drive(fabric.endpoint(r), {&task_a, &task_b})
                         : std::vector<TaskState>{TaskState::kError, TaskState::kError};
    });
    const Bytes expected_a = reference(a_in, kCountA, DType::kI32, ReduceOp::kSum);
    const Bytes expected_b = reference(b_in, kCountB, DType::kF64, ReduceOp::kMax);
    for (std::size_t r = 0; r < static_cast<std::size_t>(n); ++r) {
      CAPTURE(r);
      CHECK(states[r] == std::vector<TaskState>{TaskState::kDone, TaskState::kDone});
      CHECK(a[r] == expected_a);
      CHECK(b[r] == expected_b);
    }
  }
}

}  // namespace test_service_ring_allreduce
