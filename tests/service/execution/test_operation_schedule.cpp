#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "service/execution/operation_schedule.h"

namespace test_service_execution_operation_schedule {

using ringsync::Status;
using ringsync::StatusCode;
using ringsync::service::execution::OperationSchedule;
using ringsync::service::observe::ErrorKind;

TEST_CASE("an operation's steps run in order, each after the one before reported success") {
  std::vector<std::string> ran;
  OperationSchedule::Done later;  // the second step reports later, as the pool or the ring's thread does
  bool finished = false;
  auto schedule = OperationSchedule::create();
  schedule->then([&](OperationSchedule::Done done) { ran.push_back("gather"); done(Status::Ok(), ErrorKind::kFromStatus); })
      .then([&](OperationSchedule::Done done) { ran.push_back("ring"); later = std::move(done); })
      .then([&](OperationSchedule::Done done) { ran.push_back("scatter"); done(Status::Ok(), ErrorKind::kFromStatus); })
      .start([&](const Status& status, ErrorKind) {
        CHECK(status.ok());
        finished = true;
      });
  schedule.reset();  // the pending step's Done keeps the schedule
  CHECK(ran == std::vector<std::string>{"gather", "ring"});
  CHECK_FALSE(finished);
  later(Status::Ok(), ErrorKind::kFromStatus);
  CHECK(ran == std::vector<std::string>{"gather", "ring", "scatter"});
  CHECK(finished);
}

TEST_CASE("the first failure ends an operation's schedule with its status and error kind") {
  std::vector<std::string> ran;
  Status got = Status::Ok();
  ErrorKind kind = ErrorKind::kFromStatus;
  int finished = 0;
  auto schedule = OperationSchedule::create();
  schedule->then([&](OperationSchedule::Done done) { ran.push_back("gather"); done(Status::Ok(), ErrorKind::kFromStatus); })
      .then([&](OperationSchedule::Done done) {
        ran.push_back("ring");
        done(Status::PeerLost("node 1 went away"), ErrorKind::kIntegrity);
      })
      .then([&](OperationSchedule::Done done) { ran.push_back("scatter"); done(Status::Ok(), ErrorKind::kFromStatus); })
      .start([&](const Status& status, ErrorKind error_kind) {
        got = status;
        kind = error_kind;
        ++finished;
      });
  CHECK(ran == std::vector<std::string>{"gather", "ring"});
  CHECK(finished == 1);
  CHECK(got.code() == StatusCode::kPeerLost);
  CHECK(got.message() == "node 1 went away");
  CHECK(kind == ErrorKind::kIntegrity);
}

TEST_CASE("a step that hands its operation on ends the schedule without finishing it") {
  bool finished = false;
  std::weak_ptr<OperationSchedule> watch;
  {
    auto schedule = OperationSchedule::create();
    watch = schedule;
    schedule->then([](OperationSchedule::Done) { /* held elsewhere: never reports */ })
        .then([](OperationSchedule::Done done) { done(Status::Ok(), ErrorKind::kFromStatus); })
        .start([&](const Status&, ErrorKind) { finished = true; });
  }
  CHECK_FALSE(finished);
  CHECK(watch.expired());  // nothing keeps it: no leak
}

TEST_CASE("an empty schedule finishes at once") {
  bool finished = false;
  OperationSchedule::create()->start([&](const Status& status, ErrorKind) { finished = status.ok(); });
  CHECK(finished);
}

}  // namespace test_service_execution_operation_schedule
