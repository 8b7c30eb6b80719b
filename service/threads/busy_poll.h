// The control loop's run: blocking (epoll) normally, busy polling for a short
// window after small-collective activity. A small allreduce's next event (the
// other local ranks' submissions, node 0's plan, the trainer's next request)
// is due within tens of microseconds; sleeping in epoll and being woken costs
// a scheduler wake-up each time, the largest part of small-message latency on
// a busy host. The window is short and only small collectives open it, so an
// idle daemon, or one moving large buffers, sleeps as before.
//
// Shared-memory channels are not in epoll: Hooks let the loop drain them on
// every polling turn, and mark them before it sleeps (a trainer then rings
// the socket) and after it woke.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>

#include "service/route/route.h"

namespace ringsync::service::threads {

class BusyPoll {
 public:
  using Clock = std::chrono::steady_clock;

  // window 0 turns busy polling off.
  explicit BusyPoll(std::chrono::nanoseconds window) : window_(window) {}

  struct Hooks {
    std::function<std::size_t()> poll;  // handle what has arrived; how much
    std::function<bool()> may_sleep;    // about to sleep: false when something arrived after all
    std::function<void()> woke;         // the sleep ended
  };
  void set_hooks(Hooks hooks) { hooks_ = std::move(hooks); }

  // Something small happened: poll instead of sleeping for the next window.
  void extend() {
    if (window_.count() > 0) until_ = Clock::now() + window_;
  }
  // extend() if `bytes` is a small collective's payload.
  void extend_for(std::uint64_t bytes) {
    if (bytes <= route::kBusyPollBytes) extend();
  }

  // Runs `io` until it stops (io_context::run with the polling window).
  // Returns the handlers run, like run().
  std::size_t run(boost::asio::io_context& io);

  // Handlers run while polling, and polls that found nothing (for tests).
  std::uint64_t polled_handlers() const { return polled_handlers_; }
  std::uint64_t empty_polls() const { return empty_polls_; }

 private:
  std::chrono::nanoseconds window_;
  Hooks hooks_;
  Clock::time_point until_{};
  std::uint64_t polled_handlers_ = 0;
  std::uint64_t empty_polls_ = 0;
};

}  // namespace ringsync::service::threads
