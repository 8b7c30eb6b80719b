// Cases every in-place allreduce task over a ChunkPipeline must pass (the
// halving-doubling and direct algorithms' tests share them): a stage gate
// hears of every byte once, and a node killed mid-way fails the others without
// a hang. Include after doctest.
#pragma once

#include <atomic>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <vector>

#include "service/ring/stage_gate.h"
#include "service/ring/task.h"
#include "service/test_ring_data.h"
#include "service/test_ring_harness.h"
#include "service/transport/in_process.h"

namespace ringsync::service::ring::testing {

// With an always-filled gate, every byte of every node's buffer is reported
// final exactly once, and the result is the reference.
template <class AllreduceTask>
void check_gate_hears_every_byte_once(std::initializer_list<int> node_counts) {
  using transport::InProcessFabric;
  // A gate that is always filled and counts how often each byte was finished.
  struct CountingGate : StageGate {
    const std::byte* base = nullptr;
    std::vector<int> finished_times;
    bool filled(const std::byte*, std::size_t) override { return true; }
    void finished(const std::byte* at, std::size_t bytes) override {
      for (std::size_t b = 0; b < bytes; ++b)
        ++finished_times[static_cast<std::size_t>(at - base) + b];
    }
  };
  constexpr std::size_t kCount = 103;
  for (int n : node_counts) {
    CAPTURE(n);
    InProcessFabric fabric(n);
    std::vector<Bytes> inputs;
    for (int r = 0; r < n; ++r)
      inputs.push_back(ring_input(DType::kF32, ReduceOp::kAvg, kCount, r));
    std::vector<Bytes> buffers = inputs;
    std::vector<std::vector<int>> finished(static_cast<std::size_t>(n));
    std::vector<TaskState> states(static_cast<std::size_t>(n));
    spawn(n, [&](int r) {
      const auto i = static_cast<std::size_t>(r);
      CountingGate gate;
      gate.base = buffers[i].data();
      gate.finished_times.assign(buffers[i].size(), 0);
      RingOptions options;
      options.chunk_bytes = 16;
      options.gate = &gate;
      AllreduceTask task(fabric.endpoint(r), buffers[i].data(), kCount, DType::kF32, ReduceOp::kAvg,
                         static_cast<std::size_t>(n), options);
      states[i] = task.post().ok() ? drive_one(fabric.endpoint(r), task) : TaskState::kError;
      finished[i] = gate.finished_times;
    });
    const Bytes expected = reference(inputs, kCount, DType::kF32, ReduceOp::kAvg);
    for (std::size_t r = 0; r < static_cast<std::size_t>(n); ++r) {
      CAPTURE(r);
      CHECK(states[r] == TaskState::kDone);
      CHECK(buffers[r] == expected);
      CHECK(finished[r] == std::vector<int>(kCount * sizeof(float), 1));
    }
  }
}

// A node killed mid-way: every node's task ends in kError, the victim's with
// kClosed, the others' with kPeerLost naming `algorithm` ("ring direct
// allreduce") and either the lost node or the abort.
template <class AllreduceTask>
void check_node_killed_midway(const std::string& algorithm) {
  using transport::InProcessFabric;
  using transport::Transport;
  for (int n : {2, 3, 4, 5, 8, 11}) {
    for (int victim : {0, 1, n - 1}) {
      if (victim == 1 && n == 2) continue;  // the same as n - 1
      CAPTURE(n);
      CAPTURE(victim);
      constexpr std::size_t kCount = 20011;
      InProcessFabric fabric(n);
      std::vector<Bytes> buffers;
      for (int r = 0; r < n; ++r)
        buffers.push_back(ring_input(DType::kF32, ReduceOp::kSum, kCount, r));
      std::vector<TaskState> states(static_cast<std::size_t>(n), TaskState::kInProgress);
      std::vector<Status> statuses(static_cast<std::size_t>(n));
      // Failure detection: a node that waits on the victim notices on its own
      // (its receive fails); once one survivor has failed, the others are told.
      std::atomic<bool> broken{false};
      spawn(n, [&](int r) {
        const auto i = static_cast<std::size_t>(r);
        Transport& endpoint = fabric.endpoint(r);
        RingOptions options;
        options.chunk_bytes = 64;  // hundreds of chunks per message
        options.window = 1;
        AllreduceTask task(endpoint, buffers[i].data(), kCount, DType::kF32, ReduceOp::kSum,
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
        states[i] = drive_one(endpoint, task, &broken);
        statuses[i] = task.status();
        broken = true;
      });
      int noticed_by_transport = 0;
      for (int r = 0; r < n; ++r) {
        CAPTURE(r);
        const auto i = static_cast<std::size_t>(r);
        CHECK(states[i] == TaskState::kError);
        if (r == victim) {
          CHECK(statuses[i].code() == StatusCode::kClosed);
          continue;
        }
        CHECK(statuses[i].code() == StatusCode::kPeerLost);
        CHECK(statuses[i].message().find(algorithm) != std::string::npos);
        if (statuses[i].message().find("node " + std::to_string(victim) + " is lost") != std::string::npos) {
          ++noticed_by_transport;
        } else {
          CHECK(statuses[i].message().find("aborted: the ring lost a node") != std::string::npos);
        }
      }
      CHECK(noticed_by_transport >= 1);
    }
  }
}

}  // namespace ringsync::service::ring::testing
