// The frames waiting for a stream's one writer coroutine, and that writer's
// pause. The daemon's two streams write this way: a client session (local/
// session.cpp: Unix socket with fd passing, or the shared-memory reply ring)
// and a peer daemon's control connection (formation/peer_link.cpp); how a frame
// is written, and when the writer stops, stays with each.
//
//   while (!closed) {
//     if (queue.empty()) { co_await queue.wait(); continue; }
//     write(queue.front()); queue.pop();
//   }
//
// One thread: push() and wake() run on the writer's executor, so a wake-up
// cannot fall between the writer's empty() and its wait().
#pragma once

#include <cstddef>
#include <deque>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/error_code.hpp>

namespace ringsync::service::transport {

template <class Frame>
class FrameQueue {
 public:
  explicit FrameQueue(const boost::asio::any_io_executor& executor) : wake_(executor) {}

  // Queues a frame and wakes the writer.
  void push(Frame frame) {
    frames_.push_back(std::move(frame));
    wake_.cancel();
  }
  // Wakes the writer with nothing new queued: the stream is closing, or room
  // appeared where the front frame waits to go.
  void wake() { wake_.cancel(); }

  bool empty() const { return frames_.empty(); }
  std::size_t size() const { return frames_.size(); }
  Frame& front() { return frames_.front(); }
  void pop() { frames_.pop_front(); }

  // The writer's pause: until the next push() or wake().
  boost::asio::awaitable<void> wait() {
    boost::system::error_code woken;  // operation_aborted: the wake-up itself
    wake_.expires_at(boost::asio::steady_timer::time_point::max());
    co_await wake_.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, woken));
  }

 private:
  std::deque<Frame> frames_;
  boost::asio::steady_timer wake_;
};

}  // namespace ringsync::service::transport
