// Who reads the daemon's socket: the threads that wait. There is no receiver
// thread: a thread waiting for a reply (rs_wait, an allocation, a
// registration) takes the reader role if it is free, reads and dispatches
// messages until its own reply is in, then hands the role on; the others
// sleep until a message was dispatched or the role is free. The reader polls
// the socket for a window (RINGSYNC_BUSY_POLL_US) before it sleeps in the
// kernel, so a small allreduce's answer costs no thread hand-off and, usually,
// no wake-up. Only a thread whose answer is due soon (a small collective, a
// buffer request) polls the whole window; one waiting for a large collective
// polls at most kLongWaitPoll, leaving the CPU to the daemon that works on it.
// rs_test and every submission read what has already arrived, without
// waiting, so completions of requests nobody waits for (abandoned handles)
// still release their buffers.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>

#include "client/src/connection.h"
#include "common/status.h"

namespace ringsync::client {

class Progress {
 public:
  using Clock = std::chrono::steady_clock;
  // Handles one message; a non-ok Status breaks the connection (the context
  // fails everything pending).
  using Dispatch = std::function<Status(wire::Message&)>;
  // The connection ended with `why`: complete everything pending.
  using Broken = std::function<void(const Status& why)>;

  Progress(Connection& connection, std::chrono::microseconds busy_poll, Dispatch dispatch, Broken broken);

  // The polling window of a wait whose answer is not due soon.
  static constexpr std::chrono::microseconds kLongWaitPoll{50};
  // How long a waiting thread polls: all of busy_poll when its answer is due
  // soon, else at most kLongWaitPoll.
  static std::chrono::microseconds poll_window(std::chrono::microseconds busy_poll, bool soon) {
    return soon ? busy_poll : std::min(busy_poll, kLongWaitPoll);
  }

  enum class Outcome {
    kDone,         // done() became true
    kTimeout,      // the deadline passed first
    kUnavailable,  // nobody can read any more (connection broken or detached):
                   // everything pending was or will be completed with the reason
  };
  // Reads and dispatches (or sleeps while another thread does) until `done()`,
  // checked under this object's lock, is true, or `deadline` passes. soon: the
  // answer is expected within microseconds (polls the whole window).
  // waiting_for: the request waited for; while this thread reads, it tells
  // the daemon every heartbeat interval that it is alive and waits for it
  // (and, when it gives up at the deadline, that it no longer waits).
  Outcome drive(const std::function<bool()>& done, std::optional<Clock::time_point> deadline,
                bool soon = true, std::uint64_t waiting_for = 0);

  // The daemon's heartbeat interval (its hello reply); 0: no heartbeats.
  // Before any thread drives.
  void set_heartbeat(std::chrono::milliseconds interval) { heartbeat_ = interval; }

  // Dispatches the messages that have arrived, without waiting; nothing when
  // another thread is reading.
  void poll();

  // The context is going away: waits for a reader to leave (the caller has shut
  // the connection down, which unblocks it); from now on nothing is read or
  // dispatched and drive() answers kUnavailable.
  void detach();

 private:
  // With the role held and mu_ not: reads one message (waiting up to
  // `deadline`; none: forever; now or earlier: only what has arrived) and
  // dispatches it. False when nothing came in time.
  bool read_one(std::optional<Clock::time_point> deadline, bool wait, bool soon = true);
  void fail(const Status& why);  // role held

  Connection& connection_;
  const std::chrono::microseconds busy_poll_;
  std::chrono::milliseconds heartbeat_{0};
  const Dispatch dispatch_;
  const Broken broken_;

  std::mutex mu_;
  std::condition_variable changed_;  // a message was dispatched, or the role freed
  bool reading_ = false;             // a thread holds the reader role
  bool detached_ = false;
  bool broken_flag_ = false;
};

}  // namespace ringsync::client
