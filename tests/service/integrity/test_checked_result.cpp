#include <doctest/doctest.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "service/integrity/checked_result.h"
#include "service/ring/allgather.h"
#include "service/ring/allreduce.h"
#include "service/test_ring_data.h"
#include "service/test_ring_harness.h"
#include "service/transport/in_process.h"

namespace test_service_integrity_checked_result {

using namespace ringsync;
using namespace ringsync::service::integrity;
using namespace ringsync::service::ring;
using namespace ringsync::service::ring::testing;
using ringsync::service::transport::InProcessFabric;

namespace {

struct NodeRun {
  TaskState state = TaskState::kInProgress;
  Status status = Status::Ok();
  bool mismatch = false;
  Bytes result;
};

// An f32 sum allreduce of `count` elements on `n` nodes (threads), checked
// with `mode`; node `corrupt` (-1: none) flips a bit of its result before the check.
std::vector<NodeRun> checked_allreduce(int n, std::size_t count, VerifyResults mode, int corrupt) {
  InProcessFabric fabric(n);
  std::vector<NodeRun> runs(static_cast<std::size_t>(n));
  spawn(n, [&](int r) {
    NodeRun& run = runs[static_cast<std::size_t>(r)];
    run.result = ring_input(DType::kF32, ReduceOp::kSum, count, r);
    RingOptions options;
    options.sequence = 41;
    options.chunk_bytes = 64 * 1024;
    auto data = std::make_unique<Allreduce>(fabric.endpoint(r), run.result.data(), count, DType::kF32, ReduceOp::kSum,
                                            1, options);
    auto outcome = std::make_shared<CheckOutcome>();
    CheckedResult task(fabric.endpoint(r), std::move(data), run.result.data(), run.result.size(), options,
                       CheckSpec{mode, "allreduce 'grad' (sequence 41)", r == corrupt}, outcome);
    run.state = task.post().ok() ? drive_one(fabric.endpoint(r), task) : TaskState::kError;
    run.status = task.status();
    run.mismatch = outcome->mismatch;
  });
  return runs;
}

}  // namespace

TEST_CASE("integrity: a checked allreduce passes and leaves the same result as an unchecked one") {
  for (int n : {1, 2, 3, 7}) {
    for (VerifyResults mode : {VerifyResults::kSample, VerifyResults::kAll}) {
      CAPTURE(n);
      CAPTURE(verify_results_name(mode));
      const std::size_t count = 300001;  // 1.2 MB: the sample reads windows, not everything
      const auto runs = checked_allreduce(n, count, mode, -1);
      Bytes expected;
      {
        InProcessFabric fabric(n);
        std::vector<Bytes> plain(static_cast<std::size_t>(n));
        spawn(n, [&](int r) {
          auto& buffer = plain[static_cast<std::size_t>(r)];
          buffer = ring_input(DType::kF32, ReduceOp::kSum, count, r);
          RingOptions options;
          options.sequence = 41;
          options.chunk_bytes = 64 * 1024;
          Allreduce task(fabric.endpoint(r), buffer.data(), count, DType::kF32, ReduceOp::kSum, 1, options);
          REQUIRE(task.post().ok());
          drive_one(fabric.endpoint(r), task);
        });
        expected = plain[0];
      }
      for (const NodeRun& run : runs) {
        CHECK(run.state == TaskState::kDone);
        CHECK(run.status.ok());
        CHECK_FALSE(run.mismatch);
        CHECK(run.result == expected);
      }
    }
  }
}

TEST_CASE("integrity: a corrupted copy fails the collective on every node, naming that node") {
  for (VerifyResults mode : {VerifyResults::kSample, VerifyResults::kAll}) {
    CAPTURE(verify_results_name(mode));
    const auto runs = checked_allreduce(3, 300001, mode, 1);
    for (const NodeRun& run : runs) {
      CHECK(run.state == TaskState::kError);
      CHECK(run.mismatch);
      CHECK(run.status.code() == StatusCode::kMismatch);
      CHECK(run.status.message().starts_with("result check failed for allreduce 'grad' (sequence 41): node 1 holds 0x"));
      CHECK(run.status.message().find("memory or the network corrupted data") != std::string::npos);
    }
    CHECK(runs[0].status.message() == runs[2].status.message());
  }
  // Two nodes: no majority, both are named.
  for (const NodeRun& run : checked_allreduce(2, 1000, VerifyResults::kAll, 0)) {
    CHECK(run.mismatch);
    CHECK(run.status.message().find("error counters of nodes 0,1") != std::string::npos);
  }
}

TEST_CASE("integrity: a checked allgather of many chunks passes when every node gathered the same bytes") {
  // The data task's steps (0 .. N-2) and the check's (kCheckFirstStep on)
  // share the sequence: they must not collide.
  static_assert(kCheckFirstStep >= 2 * 16384);
  const int n = 5;
  InProcessFabric fabric(n);
  std::vector<TaskState> states(n);
  std::vector<Bytes> buffers(n);
  spawn(n, [&](int r) {
    auto& buffer = buffers[static_cast<std::size_t>(r)];
    buffer = ring_input(DType::kU8, ReduceOp::kMax, 5 * 8, 3);  // the same gathered data on every node
    RingOptions options;
    options.sequence = 9;
    options.chunk_bytes = 8;
    auto data = std::make_unique<Allgather>(fabric.endpoint(r), buffer.data(), buffer.size(), DType::kU8, options);
    CheckedResult task(fabric.endpoint(r), std::move(data), buffer.data(), buffer.size(), options,
                       CheckSpec{VerifyResults::kAll, "allgather 'x'", false}, std::make_shared<CheckOutcome>());
    states[static_cast<std::size_t>(r)] = task.post().ok() ? drive_one(fabric.endpoint(r), task) : TaskState::kError;
  });
  for (int r = 0; r < n; ++r) {
    CHECK(states[static_cast<std::size_t>(r)] == TaskState::kDone);
    CHECK(buffers[static_cast<std::size_t>(r)] == buffers[0]);
  }
}

TEST_CASE("integrity: an i32 sum that every node received wrong alike fails the linear check on every node") {
  const int n = 3;
  const std::size_t count = 100003;
  for (bool corrupt : {false, true}) {
    CAPTURE(corrupt);
    InProcessFabric fabric(n);
    std::vector<NodeRun> runs(n);
    spawn(n, [&](int r) {
      NodeRun& run = runs[static_cast<std::size_t>(r)];
      run.result = ring_input(DType::kI32, ReduceOp::kSum, count, r);
      RingOptions options;
      options.sequence = 8;
      options.chunk_bytes = 64 * 1024;
      auto data = std::make_unique<Allreduce>(fabric.endpoint(r), run.result.data(), count, DType::kI32,
                                              ReduceOp::kSum, 1, options);
      auto outcome = std::make_shared<CheckOutcome>();
      // Every node flips the same bit: the copies agree, as after a wrong reduction by a segment's owner.
      CheckSpec spec{VerifyResults::kAll, "allreduce 'steps' (sequence 8)", corrupt};
      spec.linear = true;
      spec.dtype = DType::kI32;
      CheckedResult task(fabric.endpoint(r), std::move(data), run.result.data(), run.result.size(), options, spec,
                         outcome);
      run.state = task.post().ok() ? drive_one(fabric.endpoint(r), task) : TaskState::kError;
      run.status = task.status();
      run.mismatch = outcome->mismatch;
    });
    for (const NodeRun& run : runs) {
      CHECK(run.mismatch == corrupt);
      if (!corrupt) {
        CHECK(run.state == TaskState::kDone);
        continue;
      }
      CHECK(run.status.code() == StatusCode::kMismatch);
      CHECK(run.status.message().starts_with("result check failed for allreduce 'steps' (sequence 8): every node "
                                             "holds the same result, but it is not the sum of the nodes' inputs"));
      CHECK(run.status.message().find("memory test) and the CPUs of nodes 0,1,2, then retry") != std::string::npos);
    }
  }
}

}  // namespace test_service_integrity_checked_result
