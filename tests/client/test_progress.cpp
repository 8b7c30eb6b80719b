// Waiting threads read the daemon's answers themselves (client/src/progress.h):
// several waiters, waits with and without timeouts, rs_test without a waiter,
// and a disconnect while a thread is reading.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "client/src/progress.h"
#include "fake_daemon.h"
#include "ringsync/ringsync.h"

namespace test_client_progress {

using ringsync::testing::FakeDaemon;
namespace wire = ringsync::wire;
using namespace std::chrono_literals;

namespace {

rs_context_t* connect(const FakeDaemon& daemon) {
  const rs_config_t c = daemon.config();
  rs_context_t* ctx = nullptr;
  REQUIRE(rs_connect(&c, &ctx) == RS_SUCCESS);
  return ctx;
}

}  // namespace

TEST_CASE("threads waiting on different requests each get their own answer, in any order") {
  FakeDaemon daemon;
  rs_context_t* ctx = connect(daemon);
  constexpr int kThreads = 4;
  std::vector<rs_request_t*> requests(kThreads, nullptr);
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < kThreads; ++i) {
    const std::string name = std::string("b").append(std::to_string(i));  // GCC 12 -Wrestrict false positive on "b" + ...
    REQUIRE(rs_barrier_async(ctx, name.c_str(), &requests[i]) == RS_SUCCESS);
    ids.push_back(daemon.expect<wire::Collective>().request_id);
  }
  std::vector<rs_status_t> results(kThreads, RS_INTERNAL);
  std::vector<std::thread> waiters;
  for (int i = 0; i < kThreads; ++i) waiters.emplace_back([&, i] { results[i] = rs_wait(requests[i]); });
  // Reverse order: the thread reading first gets the others' answers first.
  for (int i = kThreads - 1; i >= 0; --i) {
    daemon.complete(ids[i], i == 1 ? ringsync::Status::Timeout("rank 3 never came") : ringsync::Status::Ok());
    std::this_thread::sleep_for(2ms);
  }
  for (auto& t : waiters) t.join();
  for (int i = 0; i < kThreads; ++i) CHECK(results[i] == (i == 1 ? RS_TIMEOUT : RS_SUCCESS));
  rs_disconnect(ctx);
}

TEST_CASE("a timed wait gives up while another thread keeps reading; both get their answers") {
  FakeDaemon daemon;
  rs_context_t* ctx = connect(daemon);
  rs_request_t* slow = nullptr;
  rs_request_t* quick = nullptr;
  REQUIRE(rs_barrier_async(ctx, "slow", &slow) == RS_SUCCESS);
  const auto slow_id = daemon.expect<wire::Collective>().request_id;
  REQUIRE(rs_barrier_async(ctx, "quick", &quick) == RS_SUCCESS);
  const auto quick_id = daemon.expect<wire::Collective>().request_id;
  rs_status_t slow_result = RS_INTERNAL;
  std::thread waiter([&] { slow_result = rs_wait(slow); });
  CHECK(rs_wait_timeout(quick, 20) == RS_IN_PROGRESS);
  daemon.complete(quick_id);
  CHECK(rs_wait(quick) == RS_SUCCESS);
  daemon.complete(slow_id);
  waiter.join();
  CHECK(slow_result == RS_SUCCESS);
  rs_disconnect(ctx);
}

TEST_CASE("rs_test alone sees an answer: it reads what has arrived") {
  FakeDaemon daemon;
  rs_context_t* ctx = connect(daemon);
  rs_request_t* r = nullptr;
  REQUIRE(rs_barrier_async(ctx, "t", &r) == RS_SUCCESS);
  CHECK(rs_test(r) == RS_IN_PROGRESS);
  daemon.complete(daemon.expect<wire::Collective>().request_id);
  // Bounded: the answer is in the socket once complete() returned.
  rs_status_t s = RS_IN_PROGRESS;
  for (int i = 0; i < 5000 && s == RS_IN_PROGRESS; ++i) {
    s = rs_test(r);
    if (s == RS_IN_PROGRESS) std::this_thread::sleep_for(1ms);
  }
  CHECK(s == RS_SUCCESS);
  rs_disconnect(ctx);
}

TEST_CASE("rs_disconnect while another thread is reading: that wait ends with RS_CLOSED") {
  FakeDaemon daemon;
  rs_context_t* ctx = connect(daemon);
  rs_request_t* r = nullptr;
  REQUIRE(rs_barrier_async(ctx, "never", &r) == RS_SUCCESS);
  daemon.expect<wire::Collective>();
  rs_status_t result = RS_INTERNAL;
  std::thread waiter([&] { result = rs_wait(r); });
  std::this_thread::sleep_for(20ms);  // usually in the socket read by now; either way it must end
  rs_disconnect(ctx);
  waiter.join();
  CHECK(result == RS_CLOSED);  // rs_wait freed the request
}

TEST_CASE("a daemon that goes away while a thread reads ends every wait with RS_CLOSED") {
  FakeDaemon daemon;
  rs_context_t* ctx = connect(daemon);
  rs_request_t* a = nullptr;
  rs_request_t* b = nullptr;
  REQUIRE(rs_barrier_async(ctx, "a", &a) == RS_SUCCESS);
  REQUIRE(rs_barrier_async(ctx, "b", &b) == RS_SUCCESS);
  daemon.expect<wire::Collective>();
  daemon.expect<wire::Collective>();
  rs_status_t ra = RS_INTERNAL, rb = RS_INTERNAL;
  std::thread wa([&] { ra = rs_wait(a); });
  std::thread wb([&] { rb = rs_wait(b); });
  daemon.drop_client();
  wa.join();
  wb.join();
  CHECK(ra == RS_CLOSED);
  CHECK(rb == RS_CLOSED);
  rs_disconnect(ctx);
}

TEST_CASE("a thread waiting for a small collective polls the whole window, for a large one briefly") {
  using std::chrono::microseconds;
  using ringsync::client::Progress;
  CHECK(Progress::poll_window(microseconds(1000), true) == microseconds(1000));
  CHECK(Progress::poll_window(microseconds(1000), false) == Progress::kLongWaitPoll);
  CHECK(Progress::poll_window(microseconds(20), false) == microseconds(20));
  CHECK(Progress::poll_window(microseconds(0), true) == microseconds(0));
  CHECK(Progress::poll_window(microseconds(0), false) == microseconds(0));
}

}  // namespace test_client_progress
