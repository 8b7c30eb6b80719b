#include "service/threads/busy_poll.h"

#include <thread>

namespace ringsync::service::threads {

std::size_t BusyPoll::run(boost::asio::io_context& io) {
  std::size_t handlers = 0;
  while (!io.stopped()) {
    if (window_.count() > 0 && Clock::now() < until_) {
      std::size_t n = io.poll();
      if (hooks_.poll) n += hooks_.poll();
      handlers += n;
      polled_handlers_ += n;
      if (n == 0) {
        ++empty_polls_;
        // Let the trainers and the other threads of this core run: they are
        // the ones about to produce the event polled for.
        std::this_thread::yield();
      }
      continue;
    }
    if (hooks_.may_sleep && !hooks_.may_sleep()) {
      // Frames arrived: handle them, and what is ready besides (writers,
      // timers, doorbells), so a busy trainer starves nothing.
      handlers += io.poll() + hooks_.poll();
      continue;
    }
    const std::size_t n = io.run_one();
    if (hooks_.woke) hooks_.woke();
    if (n == 0) break;  // stopped, or out of work
    handlers += n;
  }
  return handlers;
}

}  // namespace ringsync::service::threads
