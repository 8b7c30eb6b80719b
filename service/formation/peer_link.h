// One control-plane connection between two daemons: verified peer frames in,
// ordered frames out, heartbeats both ways, and a watchdog that declares the
// peer lost when it has been silent for too long (a killed, stopped or cut-off
// daemon looks the same from here). Plain TCP or TLS (control_stream.h).
// Runs on the daemon's control thread.
#pragma once

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "common/peer_wire.h"
#include "common/status.h"
#include "service/formation/control_stream.h"
#include "service/transport/frame_queue.h"

namespace ringsync::service::formation {

class PeerLink : public std::enable_shared_from_this<PeerLink> {
 public:
  using OnMessage = std::function<void(peer_wire::Message)>;
  using OnClosed = std::function<void(const Status&)>;

  // `stream`: connected, and past its TLS handshake when the daemon runs with TLS.
  PeerLink(ControlStream stream, std::string peer_name);

  // Starts reading. on_message runs for every frame except heartbeats;
  // on_closed runs once, with why the link ended.
  void start(OnMessage on_message, OnClosed on_closed);
  // Sends a heartbeat every `interval`; declares the peer lost when nothing
  // (heartbeat or other frame) arrived for `timeout`.
  void start_heartbeats(std::chrono::nanoseconds interval, std::chrono::nanoseconds timeout);
  void send(const peer_wire::Message& message);
  // Closes at once; on_closed runs with `why` unless it already ran.
  void close(const Status& why);
  // Leaves on purpose: sends Goodbye{why}, runs on_closed(why) now, and closes
  // once the goodbye is written (or after a short deadline if the peer does not
  // read). Nothing more is delivered from the peer. finished: the job ended
  // everywhere, nothing is lost (the peer closes quietly).
  void goodbye(const Status& why, bool finished = false, std::int32_t lost_node = -1);
  // Replaces the handlers (e.g. when bootstrap hands the link to the ring).
  // Empty handlers are allowed: messages are then dropped.
  void set_handlers(OnMessage on_message, OnClosed on_closed);

  const std::string& peer_name() const { return peer_name_; }
  bool closed() const { return closed_; }
  // How long this process itself did not run, when the heartbeat watchdog
  // found it woke far too late (the daemon was stopped or starved): then the
  // silence it saw was its own, not the peer's. Zero otherwise.
  std::chrono::milliseconds own_stall() const { return own_stall_; }
  // The address this end of the connection uses ("" when closed).
  std::string local_address() const;
  // Bytes of whole frames written to and read from the peer (heartbeats and
  // bootstrap included), for the link metrics.
  std::uint64_t bytes_sent() const { return bytes_sent_; }
  std::uint64_t bytes_received() const { return bytes_received_; }

 private:
  // Each loop holds the link alive through `self` from the moment it is created.
  boost::asio::awaitable<void> read_loop(std::shared_ptr<PeerLink> self);
  boost::asio::awaitable<void> write_loop(std::shared_ptr<PeerLink> self);
  boost::asio::awaitable<void> heartbeat_loop(std::shared_ptr<PeerLink> self,
                                              std::chrono::nanoseconds interval,
                                              std::chrono::nanoseconds timeout);

  ControlStream stream_;
  std::string peer_name_;
  OnMessage on_message_;
  OnClosed on_closed_;
  transport::FrameQueue<std::vector<std::uint8_t>> queue_;
  boost::asio::steady_timer heartbeat_timer_;
  boost::asio::steady_timer leave_deadline_;
  std::optional<Status> leaving_;
  std::chrono::steady_clock::time_point last_heard_;
  std::uint64_t heartbeats_sent_ = 0;
  std::uint64_t bytes_sent_ = 0;
  std::uint64_t bytes_received_ = 0;
  std::chrono::milliseconds own_stall_{0};
  std::string local_address_;
  bool closed_ = false;
};

}  // namespace ringsync::service::formation
