#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/reduce.h"
#include "service/ring/allreduce.h"
#include "service/ring/halving_doubling.h"
#include "service/ring/partition.h"
#include "service/test_allreduce_cases.h"
#include "service/test_allreduce_runner.h"
#include "service/test_ring_data.h"
#include "service/test_ring_harness.h"
#include "service/transport/in_process.h"

namespace test_service_ring_halving_doubling {

using namespace ringsync;
using namespace ringsync::service::ring;
using namespace ringsync::service::ring::testing;
using ringsync::service::transport::InProcessFabric;
using ringsync::service::transport::Transport;

namespace {

constexpr int kNodeCounts[] = {1, 2, 3, 4, 5, 7, 8, 11};

// One allreduce over `n` nodes as threads, each starting from inputs[rank].
Outcome allreduce(int n, const std::vector<Bytes>& inputs, std::size_t count, DType dtype,
                  ReduceOp op, std::size_t divisor, const RingOptions& options,
                  InProcessFabric* shared_fabric = nullptr) {
  return run_allreduce<HalvingDoublingAllreduce>(n, inputs, count, dtype, op, divisor, options, shared_fabric);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The largest power of two <= n.
int power_of_two_below(int n) {
  int p = 1;
  while (2 * p <= n) p *= 2;
  return p;
}

}  // namespace

TEST_CASE("halving-doubling allreduce: every dtype and op, bit for bit against the reference") {
  for (int n : kNodeCounts) {
    for (std::size_t count :
         {std::size_t{0}, std::size_t{1}, static_cast<std::size_t>(n - 1), std::size_t{1001}}) {
      for (DType dtype : kAllDTypes) {
        for (ReduceOp op : kAllOps) {
          CAPTURE(n);
          CAPTURE(count);
          CAPTURE(dtype_name(dtype));
          CAPTURE(reduce_op_name(op));
          std::vector<Bytes> inputs;
          for (int r = 0; r < n; ++r) inputs.push_back(ring_input(dtype, op, count, r));
          // Three-element chunks and a window of 2: every message is several
          // chunks, pipelined.
          RingOptions options;
          options.sequence = 5;
          options.chunk_bytes = 3 * dtype_size(dtype);
          options.window = 2;
          const Outcome out =
              allreduce(n, inputs, count, dtype, op, static_cast<std::size_t>(n), options);
          check_all_equal(out, reference(inputs, count, dtype, op));
        }
      }
    }
  }
}

TEST_CASE("halving-doubling allreduce: a large odd count") {
  constexpr std::size_t kCount = 65537;
  for (int n : kNodeCounts) {
    for (DType dtype : {DType::kF32, DType::kF64, DType::kI32, DType::kBF16, DType::kF16}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProd}) {
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

TEST_CASE("halving-doubling allreduce: one-element chunks raised to fit 16-bit chunk numbers") {
  // 200003 one-byte chunks would need more chunk numbers than a tag holds.
  constexpr std::size_t kCount = 200003;
  for (int n : {3, 4}) {
    CAPTURE(n);
    std::vector<Bytes> inputs;
    for (int r = 0; r < n; ++r) inputs.push_back(ring_input(DType::kU8, ReduceOp::kSum, kCount, r));
    RingOptions options;
    options.chunk_bytes = 1;
    options.window = 64;
    const Outcome out = allreduce(n, inputs, kCount, DType::kU8, ReduceOp::kSum,
                                  static_cast<std::size_t>(n), options);
    check_all_equal(out, reference(inputs, kCount, DType::kU8, ReduceOp::kSum));
  }
}

TEST_CASE("halving-doubling allreduce: avg divides once by the number of contributions") {
  // Each node's buffer already sums L = 4 local ranks: the job has N * 4 contributions.
  for (int n : {3, 5, 8}) {
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
  // One node: no messages, but still the division.
  const std::vector<Bytes> one{ring_input(DType::kF64, ReduceOp::kSum, 9, 0)};
  Bytes expected = one[0];
  reduce::divide_reference(expected.data(), 9, DType::kF64, 8);
  check_all_equal(allreduce(1, one, 9, DType::kF64, ReduceOp::kAvg, 8, RingOptions{}), expected);
}

TEST_CASE(
    "halving-doubling allreduce: 2 log2(p) messages per node, folding nodes one buffer more") {
  constexpr std::size_t kCount = 1001;
  for (int n : {2, 3, 4, 5, 7, 8, 11}) {
    CAPTURE(n);
    InProcessFabric fabric(n);
    std::vector<Bytes> inputs;
    for (int r = 0; r < n; ++r)
      inputs.push_back(ring_input(DType::kI32, ReduceOp::kSum, kCount, r));
    RingOptions options;  // 512 KiB chunks: one message per step
    const Outcome out = allreduce(n, inputs, kCount, DType::kI32, ReduceOp::kSum,
                                  static_cast<std::size_t>(n), options, &fabric);
    check_all_equal(out, reference(inputs, kCount, DType::kI32, ReduceOp::kSum));

    const int p = power_of_two_below(n);
    const int rem = n - p;
    int log_p = 0;
    while ((1 << log_p) < p) ++log_p;
    const Partition blocks(kCount, p, kCount);
    const std::size_t whole = kCount * sizeof(std::int32_t);
    for (int r = 0; r < n; ++r) {
      CAPTURE(r);
      if (r < 2 * rem && r % 2 == 1) {
        // Hands its buffer to the node below, gets the result back.
        CHECK(fabric.messages_sent(r) == 1);
        CHECK(fabric.bytes_sent(r) == whole);
        continue;
      }
      const int me = r < 2 * rem ? r / 2 : r - rem;
      // Halving sends everything but block `me`; doubling sends, at distance
      // d, the d blocks aligned to d that hold block `me`.
      std::size_t elements = kCount - blocks.segment(me).count;
      for (int d = 1; d < p; d *= 2) {
        const int own = me & ~(d - 1);
        elements += blocks.segment(own + d - 1).begin + blocks.segment(own + d - 1).count -
                    blocks.segment(own).begin;
      }
      const bool folds = r < 2 * rem;
      CHECK(fabric.messages_sent(r) == static_cast<std::uint64_t>(2 * log_p + (folds ? 1 : 0)));
      CHECK(fabric.bytes_sent(r) == elements * sizeof(std::int32_t) + (folds ? whole : 0));
    }
  }
}

TEST_CASE("halving-doubling allreduce: one node completes at once without messages") {
  InProcessFabric fabric(1);
  std::vector<float> data{1.5f, -2.0f, 3.25f};
  HalvingDoublingAllreduce task(fabric.endpoint(0), data.data(), data.size(), DType::kF32,
                                ReduceOp::kSum, 1, RingOptions{});
  REQUIRE(task.post().ok());
  CHECK(task.progress() == TaskState::kDone);
  CHECK(data == std::vector<float>{1.5f, -2.0f, 3.25f});
  CHECK(fabric.messages_sent(0) == 0);
  CHECK_FALSE(fabric.endpoint(0).progress());
}

TEST_CASE("halving-doubling allreduce: tag steps: fold, 2 log2(p) steps, unfold") {
  CHECK(HalvingDoublingAllreduce::tag_steps(1) == 2);
  CHECK(HalvingDoublingAllreduce::tag_steps(2) == 4);
  CHECK(HalvingDoublingAllreduce::tag_steps(3) == 4);
  CHECK(HalvingDoublingAllreduce::tag_steps(8) == 8);
  CHECK(HalvingDoublingAllreduce::tag_steps(11) == 8);
}

TEST_CASE("halving-doubling allreduce: in flight with a ring allreduce and another of its kind") {
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
      // Same sizes, chunks and first steps: only the sequence in the tag
      // keeps the three collectives apart.
      RingOptions first, second, third;
      first.sequence = 1;
      second.sequence = 2;
      third.sequence = 3;
      first.chunk_bytes = second.chunk_bytes = third.chunk_bytes = 64;
      const auto divisor = static_cast<std::size_t>(n);
      HalvingDoublingAllreduce task_a(fabric.endpoint(r), a[i].data(), kCount, DType::kI32,
                                      ReduceOp::kSum, divisor, first);
      HalvingDoublingAllreduce task_b(fabric.endpoint(r), b[i].data(), kCount, DType::kI32,
                                      ReduceOp::kSum, divisor, second);
      Allreduce task_c(fabric.endpoint(r), c[i].data(), kCount, DType::kI32, ReduceOp::kSum,
                       divisor, third);
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

TEST_CASE("halving-doubling allreduce: with a stage gate every byte is reported final once") {
  check_gate_hears_every_byte_once<HalvingDoublingAllreduce>({1, 2, 3, 4, 5, 7, 8, 11});
}

TEST_CASE("halving-doubling allreduce: a node killed mid-way fails every other node, no hang") {
  check_node_killed_midway<HalvingDoublingAllreduce>("ring halving-doubling allreduce");
}

TEST_CASE("halving-doubling allreduce: bad arguments are refused by post() with what to pass") {
  InProcessFabric fabric(3);
  Transport& t = fabric.endpoint(0);
  std::vector<float> data(10);
  RingOptions options;

  HalvingDoublingAllreduce null_buffer(t, nullptr, 10, DType::kF32, ReduceOp::kSum, 3, options);
  Status s = null_buffer.post();
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(contains(s.message(), "buffer is null"));
  CHECK(null_buffer.progress() == TaskState::kError);

  HalvingDoublingAllreduce zero_divisor(t, data.data(), 10, DType::kF32, ReduceOp::kAvg, 0,
                                        options);
  CHECK(contains(zero_divisor.post().message(), "divisor 0"));

  HalvingDoublingAllreduce bad_dtype(t, data.data(), 10, static_cast<DType>(42), ReduceOp::kSum, 3,
                                     options);
  CHECK(contains(bad_dtype.post().message(), "unknown dtype"));

  RingOptions late_steps = options;
  late_steps.first_step = 65534;  // 3 nodes need 4 steps
  HalvingDoublingAllreduce too_many_steps(t, data.data(), 10, DType::kF32, ReduceOp::kSum, 3,
                                          late_steps);
  CHECK(contains(too_many_steps.post().message(), "steps 65534..65537"));

  RingOptions no_window = options;
  no_window.window = 0;
  HalvingDoublingAllreduce zero_window(t, data.data(), 10, DType::kF32, ReduceOp::kSum, 3,
                                       no_window);
  CHECK(contains(zero_window.post().message(), "window is 0"));

  CHECK(fabric.messages_sent(0) == 0);
  CHECK_FALSE(t.progress());
}

}  // namespace test_service_ring_halving_doubling
