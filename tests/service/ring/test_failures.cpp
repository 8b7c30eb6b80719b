#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "service/ring/allgather.h"
#include "service/ring/allreduce.h"
#include "service/ring/broadcast.h"
#include "service/ring/reduce_scatter.h"
#include "service/test_ring_data.h"
#include "service/test_ring_harness.h"
#include "service/transport/in_process.h"

namespace test_service_ring_failures {

using namespace ringsync;
using namespace ringsync::service::ring;
using namespace ringsync::service::ring::testing;
using ringsync::service::transport::InProcessFabric;
using ringsync::service::transport::Transport;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE(
    "ring failures: a node killed mid-allreduce fails every other node's task with PeerLost") {
  for (int n : {2, 3, 4, 7}) {
    for (int victim : {0, n - 1}) {
      CAPTURE(n);
      CAPTURE(victim);
      constexpr std::size_t kCount = 100003;
      const int right_of_victim = (victim + 1) % n;
      InProcessFabric fabric(n);
      std::vector<Bytes> buffers;
      for (int r = 0; r < n; ++r)
        buffers.push_back(ring_input(DType::kF32, ReduceOp::kSum, kCount, r));
      std::vector<TaskState> states(static_cast<std::size_t>(n), TaskState::kInProgress);
      std::vector<Status> statuses(static_cast<std::size_t>(n));
      // Failure detection: the victim's right neighbour, which waits on it,
      // notices on its own; then the other survivors are told (cancel_all).
      std::atomic<bool> ring_broken{false};
      spawn(n, [&](int r) {
        const auto i = static_cast<std::size_t>(r);
        Transport& endpoint = fabric.endpoint(r);
        RingOptions options;
        options.chunk_bytes = 256;  // hundreds of chunks per segment
        options.window = 1;         // one send posted per progress round
        Allreduce task(endpoint, buffers[i].data(), kCount, DType::kF32, ReduceOp::kSum,
                       static_cast<std::size_t>(n), options);
        if (!task.post().ok()) return;
        if (r == victim) {
          // A few rounds, far fewer than its hundreds of sends, then it dies.
          for (int round = 0; round < 5; ++round) {
            endpoint.progress();
            task.progress();
          }
          fabric.kill(r);
          states[i] = drive_one(endpoint, task);  // its own operations fail (kClosed)
          statuses[i] = task.status();
          return;
        }
        states[i] = drive_one(endpoint, task, r == right_of_victim ? nullptr : &ring_broken);
        statuses[i] = task.status();
        if (r == right_of_victim) ring_broken = true;
      });
      for (int r = 0; r < n; ++r) {
        CAPTURE(r);
        const auto i = static_cast<std::size_t>(r);
        CHECK(states[i] == TaskState::kError);
        if (r == victim) {
          CHECK(statuses[i].code() == StatusCode::kClosed);
          continue;
        }
        CHECK(statuses[i].code() == StatusCode::kPeerLost);
        CHECK(contains(statuses[i].message(), "ring reduce-scatter"));
        if (r == right_of_victim) {
          // Found by the transport itself, naming the lost node.
          CHECK(contains(statuses[i].message(), "node " + std::to_string(victim) + " is lost"));
        } else if ((r + 1) % n != victim) {
          // Told by failure detection.
          CHECK(contains(statuses[i].message(), "aborted: the ring lost a node"));
        }
      }
    }
  }
}

TEST_CASE("ring failures: a failed task posts nothing more and finishes once its operations have") {
  // Node 1 never takes part; node 0's broadcast to it waits. cancel_all then
  // completes its operations and the task reports the cancel's status.
  InProcessFabric fabric(2);
  std::vector<std::int32_t> data(100, 7);
  RingOptions options;
  options.chunk_bytes = 8;  // 50 chunks
  options.window = 3;
  Broadcast task(fabric.endpoint(1), data.data(), data.size(), DType::kI32, 0, options);
  REQUIRE(task.post().ok());
  fabric.endpoint(1).progress();
  CHECK(task.progress() == TaskState::kInProgress);
  fabric.endpoint(1).cancel_all(Status::Timeout("node 0 sent nothing for 30 s"));
  // The failure is known at once; with nothing outstanding the task is finished.
  CHECK(task.progress() == TaskState::kError);
  CHECK(task.status().code() == StatusCode::kTimeout);
  CHECK(contains(task.status().message(), "ring broadcast: receive from node 0"));
  CHECK(contains(task.status().message(), "node 0 sent nothing for 30 s"));
  CHECK(task.progress() == TaskState::kError);
  // Nothing more was posted: a later message from node 0 finds no receive.
  const std::int32_t value = 1;
  fabric.endpoint(0).send(1, 0, &value, sizeof value, [](const Status&) {});
  CHECK_FALSE(fabric.endpoint(1).progress());
}

TEST_CASE("ring failures: nodes that disagree on the count fail with a protocol error") {
  InProcessFabric fabric(2);
  std::vector<Bytes> buffers{Bytes(40 * 4), Bytes(41 * 4)};
  std::vector<Status> statuses(2);
  std::atomic<bool> ring_broken{false};
  spawn(2, [&](int r) {
    const auto i = static_cast<std::size_t>(r);
    RingOptions options;
    options.chunk_bytes = 1 << 20;
    Allreduce task(fabric.endpoint(r), buffers[i].data(), 40 + i, DType::kI32, ReduceOp::kSum, 2,
                   options);
    if (!task.post().ok()) return;
    drive_one(fabric.endpoint(r), task, &ring_broken);
    statuses[i] = task.status();
    ring_broken = true;  // whoever fails first tells the other
  });
  // 40 elements split 20/20, 41 split 21/20: node 0's first receive expects
  // segment 0 as 20 elements where node 1 sends 21.
  CHECK(statuses[0].code() == StatusCode::kProtocolError);
  CHECK(contains(statuses[0].message(), "84 bytes but the receive expects 80"));
  CHECK(contains(statuses[0].message(), "same count and dtype"));
  CHECK_FALSE(statuses[1].ok());
}

TEST_CASE("ring failures: bad arguments are refused by post() with what to pass") {
  InProcessFabric fabric(3);
  Transport& t = fabric.endpoint(0);
  std::vector<float> data(10);
  RingOptions options;

  Allreduce null_buffer(t, nullptr, 10, DType::kF32, ReduceOp::kSum, 3, options);
  Status s = null_buffer.post();
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(contains(s.message(), "buffer is null"));
  CHECK(null_buffer.progress() == TaskState::kError);
  CHECK(null_buffer.status().code() == StatusCode::kInvalidArgument);

  Allreduce zero_divisor(t, data.data(), 10, DType::kF32, ReduceOp::kAvg, 0, options);
  CHECK(contains(zero_divisor.post().message(), "divisor 0"));

  Allreduce bad_dtype(t, data.data(), 10, static_cast<DType>(42), ReduceOp::kSum, 3, options);
  CHECK(contains(bad_dtype.post().message(), "unknown dtype"));

  Allreduce bad_op(t, data.data(), 10, DType::kF32, static_cast<ReduceOp>(9), 3, options);
  CHECK(contains(bad_op.post().message(), "unknown reduction op"));

  RingOptions no_chunk = options;
  no_chunk.chunk_bytes = 0;
  ReduceScatter zero_chunk(t, data.data(), 10, DType::kF32, ReduceOp::kSum, 1, no_chunk);
  CHECK(contains(zero_chunk.post().message(), "chunk_bytes is 0"));

  RingOptions no_window = options;
  no_window.window = 0;
  Allgather zero_window(t, data.data(), 10, DType::kF32, no_window);
  CHECK(contains(zero_window.post().message(), "window is 0"));

  RingOptions late_steps = options;
  late_steps.first_step = 65534;  // an allreduce of 3 nodes needs 4 steps
  Allreduce too_many_steps(t, data.data(), 10, DType::kF32, ReduceOp::kSum, 3, late_steps);
  CHECK(contains(too_many_steps.post().message(), "steps 65534..65537"));

  Broadcast bad_root(t, data.data(), 10, DType::kF32, 3, options);
  s = bad_root.post();
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(contains(s.message(), "root 3 is not a node"));

  // Nothing was sent by any refused task.
  CHECK(fabric.messages_sent(0) == 0);
  CHECK_FALSE(t.progress());
}

TEST_CASE("ring failures: progress() before post() is an error, not a hang") {
  InProcessFabric fabric(2);
  std::vector<float> data(4);
  Allgather task(fabric.endpoint(0), data.data(), 4, DType::kF32, RingOptions{});
  CHECK(task.progress() == TaskState::kError);
  CHECK(contains(task.status().message(), "before post()"));
}

TEST_CASE(
    "ring failures: abort stops posting; the task finishes once cancel_all completed the rest") {
  // Only node 0 takes part, so its receives from node 2 stay pending.
  InProcessFabric fabric(3);
  Transport& t = fabric.endpoint(0);
  std::vector<std::int32_t> data(300, 1);
  RingOptions options;
  options.chunk_bytes = 8;
  options.window = 4;
  Allreduce task(t, data.data(), data.size(), DType::kI32, ReduceOp::kSum, 3, options);
  REQUIRE(task.post().ok());
  t.progress();
  CHECK(task.progress() == TaskState::kInProgress);
  const std::uint64_t sent = fabric.messages_sent(0);
  CHECK(sent == 8);  // two windows of step-0 sends: posted, completed, posted again

  task.abort(Status::PeerLost("node 2 missed its heartbeats"));
  CHECK(task.status().code() == StatusCode::kPeerLost);
  for (int round = 0; round < 3; ++round) {
    t.progress();
    CHECK(task.progress() == TaskState::kInProgress);  // receives still posted
  }
  CHECK(fabric.messages_sent(0) == sent);  // nothing more went out

  t.cancel_all(Status::PeerLost("ring torn down"));
  CHECK(task.progress() == TaskState::kError);
  CHECK(task.status().code() == StatusCode::kPeerLost);
  CHECK(contains(task.status().message(),
                 "ring reduce-scatter: aborted: node 2 missed its heartbeats"));
  task.abort(Status::Timeout("late"));  // finished: nothing changes
  CHECK(task.status().code() == StatusCode::kPeerLost);
}

TEST_CASE("ring failures: a task aborted before post() never posts; post() twice is refused") {
  InProcessFabric fabric(2);
  std::vector<float> data(8, 1.0f);
  Allgather aborted(fabric.endpoint(0), data.data(), data.size(), DType::kF32, RingOptions{});
  aborted.abort(Status::Closed("the job ended"));
  CHECK(aborted.post().code() == StatusCode::kClosed);
  CHECK(aborted.progress() == TaskState::kError);
  CHECK(fabric.messages_sent(0) == 0);

  Broadcast twice(fabric.endpoint(0), data.data(), data.size(), DType::kF32, 0, RingOptions{});
  REQUIRE(twice.post().ok());
  const Status again = twice.post();
  CHECK(again.code() == StatusCode::kInvalidArgument);
  CHECK(contains(again.message(), "post() was called twice"));
  CHECK(twice.status().ok());  // the running task is unharmed
  CHECK(fabric.messages_sent(0) == 1);
}

}  // namespace test_service_ring_failures
