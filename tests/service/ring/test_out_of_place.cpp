// RingOptions::input: the ring allreduce and reduce-scatter read a node's
// input beside the buffer, write every byte of the buffer and never the input;
// the other tasks, and inputs that overlap the buffer, are refused.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/reduce.h"
#include "service/ring/allgather.h"
#include "service/ring/allreduce.h"
#include "service/ring/direct_allreduce.h"
#include "service/ring/halving_doubling.h"
#include "service/ring/partition.h"
#include "service/ring/reduce_scatter.h"
#include "service/test_allreduce_runner.h"
#include "service/test_ring_data.h"
#include "service/test_ring_harness.h"
#include "service/transport/in_process.h"

namespace test_service_ring_out_of_place {

using namespace ringsync;
using namespace ringsync::service::ring;
using namespace ringsync::service::ring::testing;
using ringsync::service::transport::InProcessFabric;

namespace {

constexpr std::byte kStale{0xA5};  // what the buffers hold before: must all be overwritten

struct OutOfPlace {
  std::vector<Bytes> inputs;   // afterwards: must equal what was passed
  std::vector<Bytes> outputs;  // every node's buffer afterwards
  std::vector<TaskState> states;
  std::vector<Status> statuses;
};

// One Task over `n` nodes as threads, each reading inputs[rank] through
// RingOptions::input into a buffer of stale bytes.
template <class Task>
OutOfPlace run_out_of_place(int n, const std::vector<Bytes>& inputs, std::size_t count, DType dtype, ReduceOp op,
                            std::size_t divisor, RingOptions options) {
  InProcessFabric fabric(n);
  const auto nodes = static_cast<std::size_t>(n);
  OutOfPlace out{inputs, std::vector<Bytes>(nodes, Bytes(count * dtype_size(dtype), kStale)),
                 std::vector<TaskState>(nodes), std::vector<Status>(nodes)};
  spawn(n, [&](int r) {
    const auto i = static_cast<std::size_t>(r);
    RingOptions mine = options;
    mine.input = out.inputs[i].data();
    Task task(fabric.endpoint(r), out.outputs[i].data(), count, dtype, op, divisor, mine);
    const Status posted = task.post();
    out.states[i] = posted.ok() ? drive_one(fabric.endpoint(r), task) : TaskState::kError;
    out.statuses[i] = task.status();
  });
  return out;
}

std::vector<Bytes> inputs_for(int n, DType dtype, ReduceOp op, std::size_t count) {
  std::vector<Bytes> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(ring_input(dtype, op, count, r));
  return inputs;
}

// A task of `n` nodes that must refuse `options` before sending anything.
template <class Task>
void check_refused(int n, std::size_t count, const RingOptions& options, const char* words) {
  InProcessFabric fabric(n);
  Bytes buffer(count * sizeof(float));
  Task task(fabric.endpoint(0), buffer.data(), count, DType::kF32, ReduceOp::kSum, 1, options);
  const Status posted = task.post();
  CHECK(posted.code() == StatusCode::kInvalidArgument);
  CHECK(posted.message().find(words) != std::string::npos);
  CHECK(task.progress() == TaskState::kError);
}

}  // namespace

TEST_CASE("out-of-place ring allreduce: every node count, dtype and op, input untouched") {
  for (int n : {1, 2, 3, 4, 5, 7, 8, 11}) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, static_cast<std::size_t>(n - 1), std::size_t{37}}) {
      for (DType dtype : kAllDTypes) {
        for (ReduceOp op : kAllOps) {
          CAPTURE(n);
          CAPTURE(count);
          CAPTURE(dtype_name(dtype));
          CAPTURE(reduce_op_name(op));
          const std::vector<Bytes> inputs = inputs_for(n, dtype, op, count);
          RingOptions options;
          options.sequence = 5;
          options.chunk_bytes = 2 * dtype_size(dtype);
          options.window = 2;
          const OutOfPlace out =
              run_out_of_place<Allreduce>(n, inputs, count, dtype, op, static_cast<std::size_t>(n), options);
          const Bytes expected = reference(inputs, count, dtype, op);
          for (std::size_t r = 0; r < out.outputs.size(); ++r) {
            CAPTURE(r);
            CHECK(out.states[r] == TaskState::kDone);
            CHECK(out.statuses[r].ok());
            CHECK(out.outputs[r] == expected);
            CHECK(out.inputs[r] == inputs[r]);
          }
        }
      }
    }
  }
}

TEST_CASE("out-of-place ring allreduce: a large odd count in pipelined chunks") {
  constexpr std::size_t kCount = 100003;
  for (int n : {2, 3, 8}) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kI64}) {
      CAPTURE(n);
      CAPTURE(dtype_name(dtype));
      const std::vector<Bytes> inputs = inputs_for(n, dtype, ReduceOp::kSum, kCount);
      RingOptions options;
      options.chunk_bytes = 4096;
      options.window = 3;
      const OutOfPlace out = run_out_of_place<Allreduce>(n, inputs, kCount, dtype, ReduceOp::kSum, 1, options);
      const Bytes expected = reference(inputs, kCount, dtype, ReduceOp::kSum);
      for (std::size_t r = 0; r < out.outputs.size(); ++r) {
        CAPTURE(r);
        CHECK(out.states[r] == TaskState::kDone);
        CHECK(out.outputs[r] == expected);
        CHECK(out.inputs[r] == inputs[r]);
      }
    }
  }
}

TEST_CASE("out-of-place ring reduce-scatter: each node's own segment reduced, input untouched") {
  for (int n : {1, 2, 3, 4, 5, 7, 8, 11}) {
    for (std::size_t count : {std::size_t{1}, std::size_t{53}, std::size_t{10007}}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
        CAPTURE(n);
        CAPTURE(count);
        CAPTURE(reduce_op_name(op));
        const DType dtype = DType::kF32;
        const std::vector<Bytes> inputs = inputs_for(n, dtype, op, count);
        RingOptions options;
        options.chunk_bytes = 64;
        options.window = 2;
        const OutOfPlace out =
            run_out_of_place<ReduceScatter>(n, inputs, count, dtype, op, static_cast<std::size_t>(n), options);
        const Bytes expected = reference(inputs, count, dtype, op);
        const Partition partition(count, n, chunk_elements(options.chunk_bytes, dtype));
        for (int r = 0; r < n; ++r) {
          CAPTURE(r);
          const auto i = static_cast<std::size_t>(r);
          CHECK(out.states[i] == TaskState::kDone);
          CHECK(out.inputs[i] == inputs[i]);
          const Range own = partition.segment(r);
          const std::size_t first = own.begin * sizeof(float), bytes = own.count * sizeof(float);
          CHECK(std::memcmp(out.outputs[i].data() + first, expected.data() + first, bytes) == 0);
        }
      }
    }
  }
}

TEST_CASE("out-of-place input: an input that overlaps the buffer, or comes with a gate, is refused") {
  constexpr std::size_t kCount = 64;
  Bytes shared((kCount + 8) * sizeof(float));
  InProcessFabric fabric(2);
  RingOptions options;
  options.input = shared.data() + 8 * sizeof(float);  // the buffer starts 8 elements earlier
  for (bool scatter_only : {false, true}) {
    CAPTURE(scatter_only);
    std::unique_ptr<Task> task;
    if (scatter_only)
      task = std::make_unique<ReduceScatter>(fabric.endpoint(0), shared.data(), kCount, DType::kF32, ReduceOp::kSum,
                                             1, options);
    else
      task = std::make_unique<Allreduce>(fabric.endpoint(0), shared.data(), kCount, DType::kF32, ReduceOp::kSum, 1,
                                         options);
    const Status posted = task->post();
    CHECK(posted.code() == StatusCode::kInvalidArgument);
    CHECK(posted.message().find("overlaps the buffer") != std::string::npos);
    CHECK(task->progress() == TaskState::kError);
  }

  // The buffer itself is in place: accepted (one node: done at once).
  InProcessFabric alone(1);
  RingOptions in_place;
  in_place.input = shared.data();
  Allreduce same(alone.endpoint(0), shared.data(), kCount, DType::kF32, ReduceOp::kSum, 1, in_place);
  CHECK(same.post().ok());

  struct OpenGate final : StageGate {
    bool filled(const std::byte*, std::size_t) override { return true; }
    void finished(const std::byte*, std::size_t) override {}
  } gate;
  Bytes input(kCount * sizeof(float));
  RingOptions gated;
  gated.input = input.data();
  gated.gate = &gate;
  check_refused<ReduceScatter>(2, kCount, gated, "stage gate");
}

TEST_CASE("out-of-place input: the tasks that read only their buffer refuse one") {
  Bytes input(64 * sizeof(float));
  RingOptions options;
  options.input = input.data();
  check_refused<HalvingDoublingAllreduce>(4, 64, options, "gather the input there");
  check_refused<DirectAllreduce>(3, 64, options, "gather the input there");
  InProcessFabric fabric(2);
  Bytes buffer(64 * sizeof(float));
  Allgather allgather(fabric.endpoint(0), buffer.data(), 64, DType::kF32, options);
  const Status posted = allgather.post();
  CHECK(posted.code() == StatusCode::kInvalidArgument);
  CHECK(posted.message().find("gather the input there") != std::string::npos);
}

}  // namespace test_service_ring_out_of_place
