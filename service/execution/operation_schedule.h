// One planned operation's steps on this node, in order, as UCC's
// ucc_schedule_t chains its tasks: each step starts when the one before it
// reported success, and the first failure ends the schedule with that failure.
// A step runs where it likes (inline, on the work pool, on the ring's thread)
// and reports through its Done on the control thread; a step that hands the
// operation on (a ring failure held for the loss verdict) never calls Done, and
// then the schedule ends without finishing.
//
//   schedule.then(gather).then(ring).then(scatter).start(complete);
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "service/observe/error_kind.h"

namespace ringsync::service::execution {

class OperationSchedule : public std::enable_shared_from_this<OperationSchedule> {
 public:
  // error_kind: the ringsync_errors_total kind of a failure (kFromStatus:
  // the status's own).
  using Done = std::function<void(const Status&, observe::ErrorKind error_kind)>;
  using Step = std::function<void(Done)>;

  static std::shared_ptr<OperationSchedule> create() {
    return std::shared_ptr<OperationSchedule>(new OperationSchedule());
  }

  OperationSchedule& then(Step step) {
    steps_.push_back(std::move(step));
    return *this;
  }

  // Runs the steps; `finished` gets the first failure, or Ok after the last step.
  void start(Done finished) {
    finished_ = std::move(finished);
    next(0);
  }

 private:
  OperationSchedule() = default;

  void next(std::size_t at) {
    if (at == steps_.size()) return finished_(Status::Ok(), observe::ErrorKind::kFromStatus);
    // Each step's Done holds the schedule, so it lives until its last step reports.
    steps_[at]([self = shared_from_this(), at](const Status& status, observe::ErrorKind error_kind) {
      if (!status.ok()) return self->finished_(status, error_kind);
      self->next(at + 1);
    });
  }

  std::vector<Step> steps_;
  Done finished_;
};

}  // namespace ringsync::service::execution
