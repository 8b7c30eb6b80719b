#include <doctest/doctest.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "service/threads/busy_poll.h"

namespace test_service_threads_busy_poll {

using namespace std::chrono_literals;
using ringsync::service::threads::BusyPoll;
namespace asio = boost::asio;

namespace {

// Posts a handler that extends (or not) and arms a timer whose handler stops
// the loop: with busy polling on, the loop polls until the timer fires.
void run_once(BusyPoll& busy, std::uint64_t bytes, int& handlers) {
  asio::io_context io;
  asio::steady_timer timer(io);
  asio::post(io, [&] {
    ++handlers;
    busy.extend_for(bytes);
    timer.expires_after(5ms);
    timer.async_wait([&](boost::system::error_code) {
      ++handlers;
      io.stop();
    });
  });
  busy.run(io);
}

}  // namespace

TEST_CASE("after a small collective's event the loop polls; until then and for large ones it sleeps") {
  int handlers = 0;
  BusyPoll busy(10s);  // the loop ends as soon as the timer stops it
  run_once(busy, 1024, handlers);
  CHECK(handlers == 2);
  CHECK(busy.polled_handlers() == 1);  // the timer's handler ran from a poll
  CHECK(busy.empty_polls() > 0);

  BusyPoll limit(10s);  // a collective at the limit (test_cluster_config: the default --inline-bytes is within it)
  run_once(limit, ringsync::service::route::kBusyPollBytes, handlers);
  CHECK(handlers == 4);
  CHECK(limit.polled_handlers() == 1);

  BusyPoll large(10s);
  run_once(large, ringsync::service::route::kBusyPollBytes + 1, handlers);
  CHECK(handlers == 6);
  CHECK(large.polled_handlers() == 0);
  CHECK(large.empty_polls() == 0);
}

TEST_CASE("busy polling off: the loop only blocks") {
  int handlers = 0;
  BusyPoll off(0s);
  run_once(off, 8, handlers);
  CHECK(handlers == 2);
  CHECK(off.polled_handlers() == 0);
  CHECK(off.empty_polls() == 0);
}

TEST_CASE("a loop that runs out of work returns, polling or not") {
  BusyPoll busy(10s);
  asio::io_context io;
  int ran = 0;
  asio::post(io, [&] {
    ++ran;
    busy.extend();
  });
  asio::post(io, [&] { ++ran; });
  CHECK(busy.run(io) == 2);
  CHECK(ran == 2);
  CHECK(io.stopped());
}

}  // namespace test_service_threads_busy_poll
