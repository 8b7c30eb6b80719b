// The completion state of one submitted collective, shared by the context that
// completes it and the rs_request_t handle that waits for it. It outlives the
// context: a handle can still be waited on after rs_disconnect().
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "client/src/progress.h"
#include "common/status.h"

namespace ringsync::client {

class RequestState {
 public:
  // progress: reads the daemon's answers while waiting (nullptr: only wait).
  // soon: the answer is expected within microseconds (a small collective):
  // a waiting thread polls for it longer (progress.h).
  explicit RequestState(std::uint64_t request_id, std::shared_ptr<Progress> progress = nullptr, bool soon = true)
      : request_id_(request_id), progress_(std::move(progress)), soon_(soon) {}

  std::uint64_t request_id() const { return request_id_; }

  // Blocks until complete, or until `timeout` passes when one is given,
  // reading the daemon's answers meanwhile (progress.h: it polls the socket for
  // a moment first). The final status, or nullopt on timeout.
  std::optional<Status> wait(std::optional<std::chrono::milliseconds> timeout);

  // The final status if complete, else nullopt; never blocks (it dispatches
  // what the daemon has already sent).
  std::optional<Status> test();

  // The handle is gone: nobody reads the result, so complete() skips delivery.
  // Once this returns, delivery is over or will never start.
  void abandon();

  // Completes the request: runs `finish(deliver)` and then marks it done, so a
  // waiter that wakes sees everything `finish` did. `deliver` is true when the
  // status is ok and the request was not abandoned: then the result should be
  // copied out. Later calls are ignored.
  void complete(Status status, const std::function<void(bool deliver)>& finish);

 private:
  bool done();

  const std::uint64_t request_id_;
  const std::shared_ptr<Progress> progress_;
  const bool soon_;
  std::mutex mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
  bool abandoned_ = false;
  Status status_;
};

}  // namespace ringsync::client
