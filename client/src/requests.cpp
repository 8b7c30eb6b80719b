#include "client/src/requests.h"

namespace ringsync::client {

bool RequestState::done() {
  std::lock_guard lock(mu_);
  return done_;
}

std::optional<Status> RequestState::wait(std::optional<std::chrono::milliseconds> timeout) {
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> deadline;
  if (timeout) deadline = Clock::now() + *timeout;
  if (progress_) {
    switch (progress_->drive([this] { return done(); }, deadline, soon_, request_id_)) {
      case Progress::Outcome::kDone: break;
      case Progress::Outcome::kTimeout: return test();
      // Nobody reads any more: the context completes everything pending with
      // the reason (now or as it closes).
      case Progress::Outcome::kUnavailable: break;
    }
  }
  std::unique_lock lock(mu_);
  if (deadline) {
    if (!done_cv_.wait_until(lock, *deadline, [&] { return done_; })) return std::nullopt;
  } else {
    done_cv_.wait(lock, [&] { return done_; });
  }
  return status_;
}

std::optional<Status> RequestState::test() {
  if (progress_ && !done()) progress_->poll();
  std::lock_guard lock(mu_);
  if (!done_) return std::nullopt;
  return status_;
}

void RequestState::abandon() {
  std::lock_guard lock(mu_);
  abandoned_ = true;
}

void RequestState::complete(Status status, const std::function<void(bool deliver)>& finish) {
  {
    // `finish` runs under the lock so that abandon() cannot return while it still
    // writes into the caller's memory.
    std::lock_guard lock(mu_);
    if (done_) return;
    if (finish) finish(status.ok() && !abandoned_);
    done_ = true;
    status_ = std::move(status);
  }
  done_cv_.notify_all();
}

}  // namespace ringsync::client
