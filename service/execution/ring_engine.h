// The data-plane thread of a formed ring: owns the node's Transport and drives
// every ring task in flight (UCC's progress queue), so the control thread never
// touches bulk data or UCX. The control thread hands it tasks; each task's
// outcome comes back to the control thread through `deliver`.
//
// Progress without burning a core: while tasks are in flight the thread polls
// the transport, a bounded number of idle rounds, then arms the transport and
// sleeps on its event fd (and a wake-up fd for new work). After its last task
// it keeps polling (and yielding) for `idle_poll`, since a training step's
// next operation usually follows within it and a sleeping engine costs a
// wake-up to start it. An idle engine sleeps.
//
// No sleep is without a bound while tasks are in flight: the thread looks at
// its transport every kInFlightSleep even when nothing woke it. Work found
// then is a wake-up the transport failed to give (missed_wakeups()): the
// operation goes on, slowly, instead of hanging, and the daemon says so. UCX's
// shared memory loses every wake-up between network namespaces
// (transport/locality.h); the data plane avoids it there, this is the net.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "common/status.h"
#include "service/ring/task.h"
#include "service/transport/transport.h"

namespace ringsync::service::execution {

class RingEngine {
 public:
  using MakeTask = std::function<std::unique_ptr<ring::Task>(transport::Transport&)>;
  using Done = std::function<void(const Status&)>;
  // Runs a completion on the owner's thread (e.g. asio::post to the control loop).
  using Deliver = std::function<void(std::function<void()>)>;

  // Starts the thread. The transport is used only on that thread from now on.
  RingEngine(std::unique_ptr<transport::Transport> transport, Deliver deliver,
             std::chrono::nanoseconds idle_poll = std::chrono::nanoseconds(0));
  // Aborts what is in flight (its Done callbacks are delivered with Closed),
  // joins the thread and destroys the transport.
  ~RingEngine();
  RingEngine(const RingEngine&) = delete;
  RingEngine& operator=(const RingEngine&) = delete;

  // Builds the task on the engine thread, posts and drives it; `done` is
  // delivered once with its outcome. Thread safe.
  void run(MakeTask make, Done done);
  // Fails every task in flight and every later one with `why`, and cancels the
  // transport's outstanding operations (a peer was lost). Thread safe.
  void abort(const Status& why);

  // Wakes the engine's thread when called from any thread, e.g. by a copy engine
  // whose copy a task waits for (its completions make no transport progress).
  // Safe to call after the engine is gone: it then does nothing.
  std::function<void()> waker() const;

  // Tasks handed to run() whose outcome has not been delivered yet.
  std::size_t outstanding() const { return outstanding_.load(std::memory_order_acquire); }
  // Times the thread, sleeping with tasks in flight and woken by nothing but
  // its bound, found completions waiting: wake-ups the transport lost.
  std::uint64_t missed_wakeups() const { return missed_wakeups_.load(std::memory_order_relaxed); }

  // The longest the thread sleeps while tasks are in flight.
  static constexpr std::chrono::milliseconds kInFlightSleep{100};

  int nodes() const { return nodes_; }
  int rank() const { return rank_; }

 private:
  struct Item {
    std::unique_ptr<ring::Task> task;
    Done done;
  };
  struct Command {
    MakeTask make;
    Done done;
  };

  void loop();
  void take_commands();
  bool progress_tasks();
  void fail_all(const Status& why);
  void wake();

  // The eventfd the thread sleeps on besides the transport's; shared with waker()s.
  struct WakeFd {
    std::mutex mu;
    int fd = -1;
    void wake();
  };

  std::unique_ptr<transport::Transport> transport_;
  Deliver deliver_;
  int nodes_;
  int rank_;
  std::shared_ptr<WakeFd> wake_fd_ = std::make_shared<WakeFd>();
  const std::chrono::nanoseconds idle_poll_;

  std::mutex mu_;
  std::deque<Command> commands_;     // guarded by mu_
  std::optional<Status> aborted_;    // guarded by mu_
  bool stopping_ = false;            // guarded by mu_

  // Engine thread only.
  std::vector<Item> items_;
  std::atomic<std::size_t> outstanding_{0};
  std::atomic<std::uint64_t> missed_wakeups_{0};
  bool cancelled_transport_ = false;
  std::thread thread_;
};

}  // namespace ringsync::service::execution
