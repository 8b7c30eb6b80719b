#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/reduce.h"
#include "service/ring/allreduce.h"
#include "service/ring/direct_allreduce.h"
#include "service/ring/halving_doubling.h"
#include "service/ring/partition.h"
#include "service/test_allreduce_cases.h"
#include "service/test_allreduce_runner.h"
#include "service/test_ring_data.h"
#include "service/test_ring_harness.h"
#include "service/transport/in_process.h"

namespace test_service_ring_direct_allreduce {

using namespace ringsync;
using namespace ringsync::service::ring;
using namespace ringsync::service::ring::testing;
using ringsync::service::transport::InProcessFabric;
using ringsync::service::transport::Transport;

namespace {

constexpr int kNodeCounts[] = {1, 2, 3, 4, 5, 7, 8, 11};

Outcome allreduce(int n, const std::vector<Bytes>& inputs, std::size_t count, DType dtype, ReduceOp op,
                  std::size_t divisor, const RingOptions& options, InProcessFabric* shared_fabric = nullptr) {
  return run_allreduce<DirectAllreduce>(n, inputs, count, dtype, op, divisor, options, shared_fabric);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("direct allreduce: every dtype and op, bit for bit against the reference") {
  for (int n : kNodeCounts) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, static_cast<std::size_t>(n - 1), std::size_t{1001}}) {
      for (DType dtype : kAllDTypes) {
        for (ReduceOp op : kAllOps) {
          CAPTURE(n);
          CAPTURE(count);
          CAPTURE(dtype_name(dtype));
          CAPTURE(reduce_op_name(op));
          std::vector<Bytes> inputs;
          for (int r = 0; r < n; ++r) inputs.push_back(ring_input(dtype, op, count, r));
          // Three-element chunks and a window of 2: every block is several
          // chunks, pipelined, with messages to several peers in flight.
          RingOptions options;
          options.sequence = 9;
          options.chunk_bytes = 3 * dtype_size(dtype);
          options.window = 2;
          check_all_equal(allreduce(n, inputs, count, dtype, op, static_cast<std::size_t>(n), options),
                          reference(inputs, count, dtype, op));
        }
      }
    }
  }
}

TEST_CASE("direct allreduce: a large odd count, and one-byte chunks raised to fit 16-bit chunk numbers") {
  for (int n : kNodeCounts) {
    for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16, DType::kI64}) {
      CAPTURE(n);
      CAPTURE(dtype_name(dtype));
      constexpr std::size_t kCount = 65537;
      std::vector<Bytes> inputs;
      for (int r = 0; r < n; ++r) inputs.push_back(ring_input(dtype, ReduceOp::kSum, kCount, r));
      RingOptions options;
      options.chunk_bytes = 16 * 1024;
      check_all_equal(allreduce(n, inputs, kCount, dtype, ReduceOp::kSum, static_cast<std::size_t>(n), options),
                      reference(inputs, kCount, dtype, ReduceOp::kSum));
    }
  }
  // 200003 one-byte chunks in one block (two nodes) need more chunk numbers than a tag holds.
  constexpr std::size_t kBig = 200003;
  std::vector<Bytes> inputs;
  for (int r = 0; r < 2; ++r) inputs.push_back(ring_input(DType::kU8, ReduceOp::kSum, kBig, r));
  RingOptions options;
  options.chunk_bytes = 1;
  options.window = 64;
  check_all_equal(allreduce(2, inputs, kBig, DType::kU8, ReduceOp::kSum, 2, options),
                  reference(inputs, kBig, DType::kU8, ReduceOp::kSum));
}

TEST_CASE("direct allreduce: avg divides once by the number of contributions") {
  // Each node's buffer already sums 4 local ranks: the job has N * 4 contributions.
  for (int n : {2, 3, 5, 8}) {
    const std::size_t divisor = static_cast<std::size_t>(n) * 4;
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kI32}) {
      CAPTURE(n);
      CAPTURE(dtype_name(dtype));
      std::vector<Bytes> inputs;
      for (int r = 0; r < n; ++r) inputs.push_back(ring_input(dtype, ReduceOp::kSum, 101, r));
      Bytes expected = reference(inputs, 101, dtype, ReduceOp::kSum);
      reduce::divide_reference(expected.data(), 101, dtype, divisor);
      RingOptions options;
      options.chunk_bytes = 12;
      check_all_equal(allreduce(n, inputs, 101, dtype, ReduceOp::kAvg, divisor, options), expected);
    }
  }
  const std::vector<Bytes> one{ring_input(DType::kF64, ReduceOp::kSum, 9, 0)};
  Bytes expected = one[0];
  reduce::divide_reference(expected.data(), 9, DType::kF64, 8);
  check_all_equal(allreduce(1, one, 9, DType::kF64, ReduceOp::kAvg, 8, RingOptions{}), expected);
}

TEST_CASE("direct allreduce: inexact float sums end with the same bits on every node") {
  // Random floats: the sum depends on the order of additions, and each block
  // is summed on one node only, so every node still holds the same bits.
  for (int n : {3, 5, 8}) {
    CAPTURE(n);
    constexpr std::size_t kCount = 4099;
    std::mt19937 random(static_cast<unsigned>(n));
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::vector<Bytes> inputs;
    for (int r = 0; r < n; ++r) {
      std::vector<float> floats(kCount);
      for (float& f : floats) f = value(random) * 1e-3f + value(random) * 1e3f;
      Bytes bytes(kCount * sizeof(float));
      std::memcpy(bytes.data(), floats.data(), bytes.size());
      inputs.push_back(std::move(bytes));
    }
    RingOptions options;
    options.chunk_bytes = 256;
    const Outcome out = allreduce(n, inputs, kCount, DType::kF32, ReduceOp::kSum, static_cast<std::size_t>(n), options);
    for (std::size_t r = 0; r < out.buffers.size(); ++r) {
      CAPTURE(r);
      CHECK(out.states[r] == TaskState::kDone);
      CHECK(out.buffers[r] == out.buffers[0]);
    }
    CHECK(out.buffers[0] != inputs[0]);
  }
}

TEST_CASE("direct allreduce: 2(N-1) messages per node, the ring's bytes") {
  constexpr std::size_t kCount = 1001;
  for (int n : {2, 3, 4, 5, 7, 8, 11}) {
    CAPTURE(n);
    InProcessFabric fabric(n);
    std::vector<Bytes> inputs;
    for (int r = 0; r < n; ++r) inputs.push_back(ring_input(DType::kI32, ReduceOp::kSum, kCount, r));
    RingOptions options;  // 512 KiB chunks: one message per block
    check_all_equal(allreduce(n, inputs, kCount, DType::kI32, ReduceOp::kSum, static_cast<std::size_t>(n), options,
                              &fabric),
                    reference(inputs, kCount, DType::kI32, ReduceOp::kSum));
    const Partition blocks(kCount, n, kCount);
    for (int r = 0; r < n; ++r) {
      CAPTURE(r);
      // Every other block once, then its own block to every other node.
      const std::size_t own = blocks.segment(r).count;
      CHECK(fabric.messages_sent(r) == static_cast<std::uint64_t>(2 * (n - 1)));
      CHECK(fabric.bytes_sent(r) == ((kCount - own) + static_cast<std::size_t>(n - 1) * own) * sizeof(std::int32_t));
    }
  }
  // Fewer elements than nodes: empty blocks send nothing.
  InProcessFabric fabric(5);
  std::vector<Bytes> inputs;
  for (int r = 0; r < 5; ++r) inputs.push_back(ring_input(DType::kI32, ReduceOp::kSum, 2, r));
  check_all_equal(allreduce(5, inputs, 2, DType::kI32, ReduceOp::kSum, 5, RingOptions{}, &fabric),
                  reference(inputs, 2, DType::kI32, ReduceOp::kSum));
  CHECK(fabric.messages_sent(0) == 5);  // block 1 to node 1; block 0 to the four others
  CHECK(fabric.messages_sent(4) == 2);  // blocks 0 and 1 to their owners; its own is empty
}

TEST_CASE("direct allreduce: one node completes at once without messages") {
  InProcessFabric fabric(1);
  std::vector<float> data{1.5f, -2.0f, 3.25f};
  DirectAllreduce task(fabric.endpoint(0), data.data(), data.size(), DType::kF32, ReduceOp::kSum, 1, RingOptions{});
  REQUIRE(task.post().ok());
  CHECK(task.progress() == TaskState::kDone);
  CHECK(data == std::vector<float>{1.5f, -2.0f, 3.25f});
  CHECK(fabric.messages_sent(0) == 0);
  CHECK_FALSE(fabric.endpoint(0).progress());
}

TEST_CASE("direct allreduce: in flight with a ring and a halving-doubling allreduce") {
  for (int n : {2, 3, 5, 8}) {
    CAPTURE(n);
    constexpr std::size_t kCount = 517;
    InProcessFabric fabric(n);
    std::vector<Bytes> a_in, b_in, c_in;
    for (int r = 0; r < n; ++r) {
      a_in.push_back(ring_input(DType::kI32, ReduceOp::kSum, kCount, r, 1));
      b_in.push_back(ring_input(DType::kI32, ReduceOp::kSum, kCount, r, 2));
      c_in.push_back(ring_input(DType::kI32, ReduceOp::kSum, kCount, r, 3));
    }
    std::vector<Bytes> a = a_in, b = b_in, c = c_in;
    std::vector<std::vector<TaskState>> states(static_cast<std::size_t>(n));
    spawn(n, [&](int r) {
      const auto i = static_cast<std::size_t>(r);
      // Same chunks and first steps: only the sequence keeps them apart.
      RingOptions first, second, third;
      first.sequence = 1;
      second.sequence = 2;
      third.sequence = 3;
      first.chunk_bytes = second.chunk_bytes = third.chunk_bytes = 64;
      first.window = 1;
      const auto divisor = static_cast<std::size_t>(n);
      DirectAllreduce task_a(fabric.endpoint(r), a[i].data(), kCount, DType::kI32, ReduceOp::kSum, divisor, first);
      HalvingDoublingAllreduce task_b(fabric.endpoint(r), b[i].data(), kCount, DType::kI32, ReduceOp::kSum, divisor,
                                      second);
      Allreduce task_c(fabric.endpoint(r), c[i].data(), kCount, DType::kI32, ReduceOp::kSum, divisor, third);
      // Odd nodes start them in the opposite order.
      Task* order[3] = {&task_a, &task_b, &task_c};
      if (r % 2 == 1) std::swap(order[0], order[2]);
      const bool posted = order[0]->post().ok() && order[1]->post().ok() && order[2]->post().ok();
      states[i] = posted ? drive(fabric.endpoint(r), {&task_a, &task_b, &task_c})
                         : std::vector<TaskState>(3, TaskState::kError);
    });
    for (std::size_t r = 0; r < static_cast<std::size_t>(n); ++r) {
      CAPTURE(r);
      CHECK(states[r] == std::vector<TaskState>(3, TaskState::kDone));
      CHECK(a[r] == reference(a_in, kCount, DType::kI32, ReduceOp::kSum));
      CHECK(b[r] == reference(b_in, kCount, DType::kI32, ReduceOp::kSum));
      CHECK(c[r] == reference(c_in, kCount, DType::kI32, ReduceOp::kSum));
    }
  }
}

TEST_CASE("direct allreduce: with a stage gate every byte is reported final once") {
  check_gate_hears_every_byte_once<DirectAllreduce>({1, 2, 3, 4, 5, 7, 8, 11});
}

TEST_CASE("direct allreduce: a node killed mid-way fails every other node, no hang") {
  check_node_killed_midway<DirectAllreduce>("ring direct allreduce");
}

TEST_CASE("direct allreduce: bad arguments are refused by post() with what to pass") {
  InProcessFabric fabric(3);
  Transport& t = fabric.endpoint(0);
  std::vector<float> data(10);
  RingOptions options;

  DirectAllreduce null_buffer(t, nullptr, 10, DType::kF32, ReduceOp::kSum, 3, options);
  const Status s = null_buffer.post();
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(contains(s.message(), "buffer is null"));
  CHECK(null_buffer.progress() == TaskState::kError);

  DirectAllreduce zero_divisor(t, data.data(), 10, DType::kF32, ReduceOp::kAvg, 0, options);
  CHECK(contains(zero_divisor.post().message(), "divisor 0"));

  DirectAllreduce bad_dtype(t, data.data(), 10, static_cast<DType>(42), ReduceOp::kSum, 3, options);
  CHECK(contains(bad_dtype.post().message(), "unknown dtype"));

  RingOptions late_steps = options;
  late_steps.first_step = 65535;  // two steps do not fit
  DirectAllreduce too_many_steps(t, data.data(), 10, DType::kF32, ReduceOp::kSum, 3, late_steps);
  CHECK(contains(too_many_steps.post().message(), "steps 65535..65536"));

  RingOptions no_window = options;
  no_window.window = 0;
  DirectAllreduce zero_window(t, data.data(), 10, DType::kF32, ReduceOp::kSum, 3, no_window);
  CHECK(contains(zero_window.post().message(), "window is 0"));

  CHECK(fabric.messages_sent(0) == 0);
  CHECK_FALSE(t.progress());
}

}  // namespace test_service_ring_direct_allreduce
