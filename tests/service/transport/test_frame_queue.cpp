// The writer's queue of the daemon's streams (service/transport/frame_queue.h):
// frames come out in order, push() and wake() end the writer's pause.
#include <doctest/doctest.h>

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <string>
#include <vector>

#include "service/transport/frame_queue.h"

namespace test_service_transport_frame_queue {

using ringsync::service::transport::FrameQueue;
namespace asio = boost::asio;

namespace {

// A writer as the streams write: takes what is queued, pauses when nothing is,
// and stops once `stop` is set (after a wake-up).
struct Writer {
  FrameQueue<std::string>& queue;
  std::vector<std::string> written;
  int pauses = 0;
  bool stop = false;
  bool stopped = false;

  asio::awaitable<void> run() {
    while (!stop) {
      if (queue.empty()) {
        ++pauses;
        co_await queue.wait();
        continue;
      }
      written.push_back(std::move(queue.front()));
      queue.pop();
    }
    stopped = true;
  }
};

}  // namespace

TEST_CASE("frame queue: the writer takes frames in order and pauses while nothing is queued") {
  asio::io_context io;
  FrameQueue<std::string> queue(io.get_executor());
  Writer writer{queue};
  queue.push("a");
  queue.push("b");
  asio::co_spawn(io, writer.run(), asio::detached);
  io.poll();
  CHECK(writer.written == std::vector<std::string>{"a", "b"});
  CHECK(writer.pauses == 1);  // waiting now
  CHECK(queue.empty());

  // Nothing more happens until something is queued.
  io.poll();
  CHECK(writer.pauses == 1);
  queue.push("c");
  io.poll();
  CHECK(writer.written == std::vector<std::string>{"a", "b", "c"});
  CHECK(writer.pauses == 2);

  // wake() ends the pause with nothing queued: the writer looks again and, told to, stops.
  writer.stop = true;
  queue.wake();
  io.poll();
  CHECK(writer.stopped);
  CHECK(writer.written.size() == 3);
}

TEST_CASE("frame queue: a frame pushed while the writer runs is not missed") {
  asio::io_context io;
  FrameQueue<std::string> queue(io.get_executor());
  Writer writer{queue};
  asio::co_spawn(io, writer.run(), asio::detached);
  io.poll();
  REQUIRE(writer.pauses == 1);
  // Several pushes before the writer runs again: one wake-up, every frame taken.
  for (int i = 0; i < 5; ++i) queue.push(std::to_string(i));
  CHECK(queue.size() == 5);
  io.poll();
  CHECK(writer.written == std::vector<std::string>{"0", "1", "2", "3", "4"});
  writer.stop = true;
  queue.wake();
  io.poll();
  CHECK(writer.stopped);
}

}  // namespace test_service_transport_frame_queue
