#include "client/src/progress.h"

#include <poll.h>

#include <exception>
#include <thread>

#include "common/log.h"

namespace ringsync::client {

Progress::Progress(Connection& connection, std::chrono::microseconds busy_poll, Dispatch dispatch, Broken broken)
    : connection_(connection), busy_poll_(busy_poll), dispatch_(std::move(dispatch)), broken_(std::move(broken)) {}

Progress::Outcome Progress::drive(const std::function<bool()>& done, std::optional<Clock::time_point> deadline,
                                  bool soon, std::uint64_t waiting_for) {
  std::unique_lock lock(mu_);
  const bool beating = waiting_for != 0 && heartbeat_.count() > 0;
  // No clock read on a wait that sends no heartbeats (the small-collective path).
  Clock::time_point next_beat = beating ? Clock::now() + heartbeat_ : Clock::time_point::max();
  bool beat = false;  // the daemon was told this thread waits
  for (;;) {
    if (done()) return Outcome::kDone;
    if (detached_ || broken_flag_) return Outcome::kUnavailable;
    if (deadline && Clock::now() >= *deadline) {
      if (beat) (void)connection_.send(wire::Heartbeat{0});  // no longer waiting
      return Outcome::kTimeout;
    }
    if (!reading_) {
      reading_ = true;
      lock.unlock();
      std::optional<Clock::time_point> until = deadline;
      if (beating) until = until ? std::min(*until, next_beat) : next_beat;
      read_one(until, true, soon);
      if (beating && Clock::now() >= next_beat) {
        (void)connection_.send(wire::Heartbeat{waiting_for});
        beat = true;
        next_beat = Clock::now() + heartbeat_;
      }
      lock.lock();
      reading_ = false;
      changed_.notify_all();
      continue;
    }
    if (deadline) {
      changed_.wait_until(lock, *deadline);
    } else {
      changed_.wait(lock);
    }
  }
}

void Progress::poll() {
  {
    std::lock_guard lock(mu_);
    if (reading_ || detached_ || broken_flag_) return;
    reading_ = true;
  }
  bool any = false;
  while (read_one(Clock::now(), false)) any = true;
  std::lock_guard lock(mu_);
  reading_ = false;
  if (any || broken_flag_) changed_.notify_all();
}

void Progress::detach() {
  std::unique_lock lock(mu_);
  changed_.wait(lock, [&] { return !reading_; });
  detached_ = true;
  changed_.notify_all();
}

bool Progress::read_one(std::optional<Clock::time_point> deadline, bool wait, bool soon) {
  // Poll first: the answer of a small collective is usually microseconds away.
  const auto window = poll_window(busy_poll_, soon);
  if (wait && window.count() > 0 && !connection_.buffered()) {
    const Clock::time_point until = Clock::now() + window;
    while (Clock::now() < until && !connection_.readable()) std::this_thread::yield();
  }
  int timeout_ms = -1;
  if (!wait) {
    if (!connection_.buffered() && !connection_.readable()) return false;
    timeout_ms = 0;
  } else if (deadline) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now());
    timeout_ms = static_cast<int>(std::max<std::chrono::milliseconds::rep>(left.count(), 0));
  }
  auto message = connection_.receive(timeout_ms);
  if (!message.ok()) {
    if (message.status().code() == StatusCode::kTimeout) return false;
    fail(message.status());
    return false;
  }
  Status handled;
  try {
    handled = dispatch_(*message);
  } catch (const std::exception& e) {
    handled = Status::Internal(std::string("the client failed to handle a message: ") + e.what());
  }
  if (!handled.ok()) {
    RS_LOG(warn, "client") << "closing the connection to " << connection_.path() << ": " << handled.to_string();
    connection_.shutdown();
    fail(handled);
    return false;
  }
  return true;
}

void Progress::fail(const Status& why) {
  broken_(why);
  std::lock_guard lock(mu_);
  broken_flag_ = true;
}

}  // namespace ringsync::client
