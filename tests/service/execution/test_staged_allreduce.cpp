// StagedAllreduce (service/execution/staged_allreduce.h): a ring allreduce of
// "device" buffers staged through host memory chunk by chunk, with host memory
// posing as the device behind the same copy-engine interface (HostChunkCopier: a
// thread doing memcpy; ManualCopier: copies the test completes by hand).
// Results for 1, 2, 3, 4, 5, 7 nodes and odd counts, in place and not; the
// overlap the staging exists for; a failed copy.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "cuda/host_chunk_copier.h"
#include "cuda/manual_copier.h"
#include "service/borrowed_transport.h"
#include "service/execution/staged_allreduce.h"
#include "service/test_ring_data.h"
#include "service/test_ring_harness.h"
#include "service/transport/counting.h"
#include "service/transport/in_process.h"

namespace test_service_execution_staged_allreduce {

using namespace ringsync;
using namespace ringsync::service;
using namespace ringsync::service::ring::testing;
using ringsync::service::execution::StagedAllreduce;
using ringsync::service::execution::StagedBuffers;
using ringsync::service::transport::InProcessFabric;

namespace {

struct Case {
  DType dtype;
  ReduceOp op;
};

ring::RingOptions small_chunks() {
  ring::RingOptions options;
  options.chunk_bytes = 256;  // many ring chunks...
  options.window = 3;
  return options;
}
constexpr std::size_t kStagingChunk = 1000;  // ...and staging chunks that do not line up with them

// One staged allreduce over `n` nodes as threads; returns every node's device
// output, or fails the test case.
std::vector<Bytes> staged(int n, const std::vector<Bytes>& inputs, std::size_t count, DType dtype,
                          ReduceOp op, bool in_place) {
  InProcessFabric fabric(n);
  std::vector<Bytes> device_in = inputs;
  std::vector<Bytes> device_out(static_cast<std::size_t>(n), Bytes(count * dtype_size(dtype), std::byte{0x77}));
  std::vector<ring::TaskState> states(static_cast<std::size_t>(n));
  std::vector<Status> statuses(static_cast<std::size_t>(n));
  spawn(n, [&](int r) {
    const auto i = static_cast<std::size_t>(r);
    cuda::HostChunkCopier copier;
    Bytes host(count * dtype_size(dtype), std::byte{0x55});  // what was there is overwritten
    StagedBuffers buffers{host.data(), device_in[i].data(), in_place ? device_in[i].data() : device_out[i].data()};
    StagedAllreduce task(fabric.endpoint(r), copier, buffers, count, dtype, op, static_cast<std::size_t>(n),
                         small_chunks(), kStagingChunk);
    const Status posted = task.post();
    states[i] = posted.ok() ? drive_one(fabric.endpoint(r), task) : ring::TaskState::kError;
    statuses[i] = task.status();
  });
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    CHECK(states[static_cast<std::size_t>(r)] == ring::TaskState::kDone);
    CHECK_MESSAGE(statuses[static_cast<std::size_t>(r)].ok(), statuses[static_cast<std::size_t>(r)].message());
  }
  return in_place ? device_in : device_out;
}

// What the plain ring gives for the same inputs (the same partition, so the same
// rounding of f16/bf16 partial sums).
Bytes plain_ring(int n, const std::vector<Bytes>& inputs, std::size_t count, DType dtype, ReduceOp op) {
  InProcessFabric fabric(n);
  std::vector<Bytes> buffers = inputs;
  spawn(n, [&](int r) {
    ring::Allreduce task(fabric.endpoint(r), buffers[static_cast<std::size_t>(r)].data(), count, dtype, op,
                         static_cast<std::size_t>(n), small_chunks());
    if (task.post().ok()) drive_one(fabric.endpoint(r), task);
  });
  return buffers.front();
}

}  // namespace

TEST_CASE("staged allreduce: every node's device output is the ring's result, for 1 to 7 nodes and odd counts") {
  const Case cases[] = {{DType::kF32, ReduceOp::kSum}, {DType::kI32, ReduceOp::kAvg}, {DType::kBF16, ReduceOp::kMax},
                        {DType::kF16, ReduceOp::kSum}, {DType::kU8, ReduceOp::kProd}};
  for (int n : {1, 2, 3, 4, 5, 7}) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{1001}, std::size_t{20011}}) {
      for (const Case& c : cases) {
        CAPTURE(n);
        CAPTURE(count);
        CAPTURE(dtype_name(c.dtype));
        CAPTURE(reduce_op_name(c.op));
        std::vector<Bytes> inputs;
        for (int r = 0; r < n; ++r) inputs.push_back(ring_input(c.dtype, c.op, count, r));
        const Bytes expected = plain_ring(n, inputs, count, c.dtype, c.op);
        if (c.op != ReduceOp::kAvg || !is_float(c.dtype)) {
          // Order-free inputs: the ring agrees with one reduction over all inputs.
          CHECK(expected == reference(inputs, count, c.dtype, c.op));
        }
        const bool in_place = count % 2 == 1;
        const auto outputs = staged(n, inputs, count, c.dtype, c.op, in_place);
        for (int r = 0; r < n; ++r) {
          CAPTURE(r);
          CHECK(outputs[static_cast<std::size_t>(r)] == expected);
        }
      }
    }
  }
}

namespace {

// Two nodes driven by this thread alone, each with a copy engine the test runs
// by hand, so the test decides what has been copied when.
struct HandDriven {
  static constexpr std::size_t kChunk = 4096;                // ring and staging chunk
  static constexpr std::size_t kCount = 6 * kChunk / 4;      // f32: 3 chunks per segment
  InProcessFabric fabric{2};
  std::shared_ptr<transport::LinkCounters> counted = std::make_shared<transport::LinkCounters>(2);
  transport::CountingTransport node0{std::make_unique<transport::Borrowed>(fabric.endpoint(0)), counted};
  cuda::test::ManualCopier copier[2];
  std::vector<Bytes> in, out, host;
  std::unique_ptr<StagedAllreduce> task[2];
  ring::TaskState state[2] = {ring::TaskState::kInProgress, ring::TaskState::kInProgress};

  HandDriven() {
    ring::RingOptions options;
    options.chunk_bytes = kChunk;
    options.window = 8;
    for (int r = 0; r < 2; ++r) {
      in.push_back(ring_input(DType::kF32, ReduceOp::kSum, kCount, r));
      out.emplace_back(kCount * 4);
      host.emplace_back(kCount * 4);
    }
    for (int r = 0; r < 2; ++r) {
      transport::Transport& t = r == 0 ? static_cast<transport::Transport&>(node0) : fabric.endpoint(1);
      task[r] = std::make_unique<StagedAllreduce>(t, copier[r], StagedBuffers{host[r].data(), in[r].data(), out[r].data()},
                                                  kCount, DType::kF32, ReduceOp::kSum, 2, options, kChunk);
      REQUIRE(task[r]->post().ok());
    }
  }
  // Rounds of progress on both nodes (no copies complete meanwhile).
  void turn(int rounds = 20) {
    for (int i = 0; i < rounds; ++i)
      for (int r = 0; r < 2; ++r) {
        (r == 0 ? static_cast<transport::Transport&>(node0) : fabric.endpoint(1)).progress();
        if (state[r] == ring::TaskState::kInProgress) state[r] = task[r]->progress();
      }
  }
  std::size_t pending(int r, cuda::ChunkCopier::Direction d) const {
    return static_cast<std::size_t>(std::count_if(copier[r].pending.begin(), copier[r].pending.end(),
                                                  [d](const auto& job) { return job.direction == d; }));
  }
};

}  // namespace

TEST_CASE("staged allreduce: the ring sends a chunk while later chunks are still being copied in") {
  HandDriven run;
  using D = cuda::ChunkCopier::Direction;
  // Every chunk of both nodes is queued for copying, nothing has landed.
  CHECK(run.pending(0, D::kToHost) == 6);
  run.turn();
  CHECK(run.fabric.messages_sent(0) == 0);  // nothing to send before the first chunk is in
  // Node 0 gets its first chunk: the one it sends at step 0 (segment 1's first).
  REQUIRE(run.copier[0].complete_next());
  run.turn();
  CHECK(run.fabric.messages_sent(0) == 1);
  CHECK(run.pending(0, D::kToHost) == 5);  // ...while the other five are still to come
  // Chunk by chunk: each landed chunk of segment 1 goes out at once.
  REQUIRE(run.copier[0].complete_next());
  run.turn();
  CHECK(run.fabric.messages_sent(0) == 2);
  while (run.copier[0].complete_next() || run.copier[1].complete_next()) run.turn(2);
  run.turn();
  CHECK(run.state[0] == ring::TaskState::kDone);
  CHECK(run.state[1] == ring::TaskState::kDone);
  const Bytes expected = reference(run.in, HandDriven::kCount, DType::kF32, ReduceOp::kSum);
  CHECK(run.out[0] == expected);
  CHECK(run.out[1] == expected);
}

TEST_CASE("staged allreduce: results go back to the device while the allgather still receives") {
  HandDriven run;
  using D = cuda::ChunkCopier::Direction;
  // Node 0's input all in; of node 1's, only segment 0 (which it sends at step 0).
  while (run.copier[0].complete_next()) run.turn(2);
  for (int i = 0; i < 3; ++i) {
    REQUIRE(run.copier[1].complete_next());
    run.turn(2);
  }
  run.turn();
  // Node 0's reduce-scatter is over, so its own segment is final: its 3 chunks are
  // on their way to the device while the allgather has yet to bring segment 1
  // (node 1 cannot finish its reduce-scatter before its segment 1 is in).
  CHECK(run.state[0] == ring::TaskState::kInProgress);
  CHECK(run.pending(0, D::kToDevice) == 3);
  CHECK(run.counted->received[1].load() == HandDriven::kCount * 4 / 2);  // the reduce-scatter's half
  while (run.copier[0].complete_next() || run.copier[1].complete_next()) run.turn(2);
  run.turn();
  CHECK(run.counted->received[1].load() == HandDriven::kCount * 4);
  CHECK(run.state[0] == ring::TaskState::kDone);
  CHECK(run.state[1] == ring::TaskState::kDone);
  const Bytes expected = reference(run.in, HandDriven::kCount, DType::kF32, ReduceOp::kSum);
  CHECK(run.out[0] == expected);
  CHECK(run.out[1] == expected);
}

TEST_CASE("staged allreduce: a failed copy fails the task with the chunk named, after the ring has quietened") {
  HandDriven run;
  // Node 0's third copy (segment 1, chunk 2) fails.
  run.copier[0].fail_copy = 2;
  for (int i = 0; i < 200 && run.state[0] == ring::TaskState::kInProgress; ++i) {
    run.copier[0].complete_next();
    run.copier[1].complete_next();
    run.turn(2);
  }
  CHECK(run.state[0] == ring::TaskState::kError);
  const Status& why = run.task[0]->status();
  CHECK(!why.ok());
  CHECK_MESSAGE(why.message().find("injected copy failure") != std::string::npos, why.message());
  CHECK_MESSAGE(why.message().find("device to host") != std::string::npos, why.message());
  // The other node is left waiting for node 0's chunks: the daemon's failure
  // detection ends it (ring_failures tests); here it is torn down.
  run.fabric.endpoint(1).cancel_all(Status::PeerLost("test over"));
  run.task[1]->abort(Status::PeerLost("test over"));
  run.turn();
  CHECK(run.state[1] == ring::TaskState::kError);
}

}  // namespace test_service_execution_staged_allreduce
