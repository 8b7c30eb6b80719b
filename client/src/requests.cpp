#include "client/src/requests.h"

namespace ringsync::client {

std::optional<Status> RequestState::wait(std::optional<std::chrono::milliseconds> timeout) {
  std::unique_lock lock(mu_);
  if (timeout) {
    if (!done_cv_.wait_for(lock, *timeout, [&] { return done_; })) return std::nullopt;
  } else {
    done_cv_.wait(lock, [&] { return done_; });
  }
  return status_;
}

std::optional<Status> RequestState::test() {
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
