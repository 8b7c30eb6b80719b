// Ranks as threads over the in-process fabric (Gloo's BaseTest::spawn), and
// the loop that drives ring tasks the way the daemon's event loop does.
// Threads only record results; the test thread checks them after the join.
#pragma once

#include <poll.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

#include "service/ring/task.h"
#include "service/transport/in_process.h"

namespace ringsync::service::ring::testing {

// Runs fn(rank) on one thread per node and joins them all.
inline void spawn(int size, const std::function<void(int rank)>& fn) {
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) threads.emplace_back(fn, r);
  for (std::thread& t : threads) t.join();
}

// How long drive() waits while nothing at all happens before it decides the
// tasks hang and returns with them unfinished (so the test fails instead of
// hanging). Not a performance bound: a healthy run never idles this long.
inline constexpr std::chrono::seconds kHangLimit{30};

// Drives `tasks` (already posted) on `transport` until every one is done or
// failed: transport progress, task progress, then arm + wait on the event fd.
// When `ring_broken` becomes true, aborts the tasks and cancels everything
// outstanding with kPeerLost, as the daemon's failure detection does. Returns the tasks' final
// states (kInProgress only for tasks that hung).
inline std::vector<TaskState> drive(transport::Transport& transport,
                                    const std::vector<Task*>& tasks,
                                    const std::atomic<bool>* ring_broken = nullptr) {
  std::vector<TaskState> states(tasks.size(), TaskState::kInProgress);
  bool cancelled = false;
  auto last_event = std::chrono::steady_clock::now();
  for (;;) {
    bool busy = transport.progress();
    if (ring_broken != nullptr && !cancelled && ring_broken->load()) {
      const Status lost = Status::PeerLost("the ring lost a node (failure detection)");
      for (Task* task : tasks) task->abort(lost);
      transport.cancel_all(lost);
      cancelled = true;
      busy = true;
    }
    bool running = false;
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      if (states[i] != TaskState::kInProgress) continue;
      states[i] = tasks[i]->progress();
      if (states[i] != TaskState::kInProgress) busy = true;
      running = running || states[i] == TaskState::kInProgress;
    }
    if (!running) return states;
    const auto now = std::chrono::steady_clock::now();
    if (busy) {
      last_event = now;
      continue;
    }
    if (now - last_event > kHangLimit) return states;
    if (transport.arm()) {
      // Short waits, so a ring_broken flag set by another thread is seen.
      pollfd p{transport.event_fd(), POLLIN, 0};
      poll(&p, 1, 10);
    }
  }
}

inline TaskState drive_one(transport::Transport& transport, Task& task,
                           const std::atomic<bool>* ring_broken = nullptr) {
  return drive(transport, {&task}, ring_broken).front();
}

}  // namespace ringsync::service::ring::testing
