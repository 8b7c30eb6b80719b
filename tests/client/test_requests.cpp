#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "client/src/requests.h"

namespace test_client_requests {

using namespace std::chrono_literals;
using ringsync::Status;
using ringsync::StatusCode;
using ringsync::client::RequestState;

TEST_CASE("a request completes once, delivering before waiters wake") {
  RequestState r(1);
  CHECK_FALSE(r.test().has_value());
  CHECK_FALSE(r.wait(0ms).has_value());

  int delivered = 0;
  std::thread completer(
      [&] { r.complete(Status::Ok(), [&](bool deliver) { delivered = deliver ? 42 : -1; }); });
  auto status = r.wait(std::nullopt);
  completer.join();
  REQUIRE(status.has_value());
  CHECK(status->ok());
  CHECK(delivered == 42);

  r.complete(Status::Closed("late"), nullptr);  // ignored
  CHECK(r.test()->ok());
}

TEST_CASE("failed and abandoned requests finish without delivery") {
  int finished = 0;
  bool delivered = false;
  RequestState failed(2);
  failed.complete(Status::Mismatch("dtype differs"), [&](bool deliver) {
    ++finished;
    delivered = deliver;
  });
  CHECK(finished == 1);
  CHECK_FALSE(delivered);
  REQUIRE(failed.test().has_value());
  CHECK(failed.test()->code() == StatusCode::kMismatch);
  CHECK(failed.test()->message() == "dtype differs");

  RequestState abandoned(3);
  abandoned.abandon();
  abandoned.complete(Status::Ok(), [&](bool deliver) {
    ++finished;
    delivered = deliver;
  });
  CHECK(finished == 2);
  CHECK_FALSE(delivered);
  CHECK(abandoned.test()->ok());
}

}  // namespace test_client_requests
