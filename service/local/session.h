// One trainer connection: reads verified frames and hands them to the daemon,
// writes replies in order (passing memfds with SCM_RIGHTS), and tells the
// daemon when the trainer is gone. Runs on the daemon's control thread.
//
// After a hello that asked for it, frames travel through a shared-memory
// channel (common/shm_channel.h) both ways: the daemon drains the trainer's
// ring when its doorbell rings on the socket and, while busy polling, on every
// turn of the control loop (the daemon's poll_channels); replies go straight
// into the other ring. The socket then carries doorbells, memfds and the end.
//
// The daemon is a SessionHost to its sessions: what a session hands up and
// what it counts.
#pragma once

#include <utility>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/repeat_limiter.h"
#include "common/shm.h"
#include "common/shm_channel.h"
#include "common/status.h"
#include "common/wire.h"
#include "service/device/table.h"
#include "service/local/buffer_table.h"
#include "service/local/client_access.h"
#include "service/observe/daemon_metrics.h"
#include "service/transport/frame_queue.h"

namespace ringsync::service::local {

class ClientSession;

// What a session hands up, and where it counts what it sees (the daemon).
class SessionHost {
 public:
  virtual ~SessionHost() = default;
  // A verified message from the client. A non-ok Status means the client
  // broke the protocol: the session sends it and closes.
  virtual Status on_message(const std::shared_ptr<ClientSession>& session, wire::Message message) = 0;
  virtual void on_disconnect(const std::shared_ptr<ClientSession>& session) = 0;
  virtual observe::DaemonMetrics& metrics() = 0;
  // Warnings about misbehaving clients, at most one per client process a minute.
  virtual RepeatLimiter& client_warnings() = 0;
};

// A session's bounds (--handshake-timeout, --max-frame-bytes).
struct SessionLimits {
  std::chrono::nanoseconds handshake_timeout{0};
  std::uint64_t max_frame_bytes = 0;
};

class ClientSession : public std::enable_shared_from_this<ClientSession> {
 public:
  using Socket = boost::asio::local::stream_protocol::socket;
  // Replies queued for a client that does not read, before it is disconnected.
  static constexpr std::size_t kMaxQueuedFrames = 65536;

  ClientSession(SessionHost& host, SessionLimits limits, Socket socket, std::uint64_t id);

  // Starts the reader and writer coroutines.
  void start();
  // Queues a frame; `fd_of` (optional) travels with it as SCM_RIGHTS.
  void send(const wire::Message& message, std::shared_ptr<shm::Region> fd_of = nullptr);
  // Sends what is queued, then closes. Safe to call more than once.
  void close_after_flush();
  // Closes at once.
  void close();

  std::uint64_t id() const { return id_; }
  bool closed() const { return closed_; }

  // Shared-memory channel (the hello asked for one). open_channel() creates
  // it; send_channel_offer() queues the hello reply with its memfd, and every
  // frame after it goes through the channel.
  Status open_channel();
  void send_channel_offer(wire::HelloReply reply);
  bool channel_active() const { return channel_active_; }
  // The hello was answered (accepted or refused). Until then the session
  // reads nothing more: the reply decides whether later frames come through
  // a channel. A daemon that answers later (a rendezvous) calls this then.
  void hello_answered();
  // Handles the frames in the trainer's ring (at most a batch); returns how
  // many. Also restarts a writer waiting for room in the other ring.
  std::size_t drain();
  // The control loop is about to sleep (true) or woke (false); with true,
  // whether the trainer's ring holds a frame after all (do not sleep).
  bool set_sleeping(bool sleeping);

  // Set once the hello was accepted.
  struct Membership {
    std::string job_id;
    std::uint32_t local_rank = 0;
    std::int32_t pid = 0;
  };
  std::optional<Membership> membership;
  // Whether the trainer is alive (the daemon's check_liveness): when it was last
  // heard, which request it said it waits for, what it has submitted and
  // not had answered, and since when its process is seen stopped.
  struct Liveness {
    std::chrono::steady_clock::time_point heard;
    std::uint64_t waiting_for = 0;
    std::set<std::uint64_t> outstanding;
    std::optional<std::chrono::steady_clock::time_point> stopped_since;
    bool reported = false;  // its job was failed for it already
    bool left = false;      // it said Leave (rs_disconnect) before going
  } liveness;
  // The trainer's pid as the kernel says (SO_PEERCRED); 0 when it is not
  // visible from the daemon's pid namespace.
  std::int32_t peer_pid() const { return peer_pid_; }
  // Who connected, as the kernel says (SO_PEERCRED).
  const Credentials& credentials() const { return credentials_; }
  BufferTable buffers;
  device::DeviceTable devices;  // GPU allocations (DeviceService)

 private:
  struct Outgoing {
    std::vector<std::uint8_t> bytes;
    std::shared_ptr<shm::Region> fd_of;
    bool via_channel = false;
  };
  static constexpr std::size_t kDrainBatch = 64;
  // A closing connection's last replies are checked for progress this often;
  // one with none in a whole period (its trainer reads nothing more, or waits
  // itself with its request ring full) is cut off, 2-4 s after it stalled,
  // instead of keeping the session forever.
  static constexpr std::chrono::seconds kFlushTimeout{2};

  // Each loop holds the session alive through `self` from the moment it is created.
  boost::asio::awaitable<void> read_loop(std::shared_ptr<ClientSession> self);
  boost::asio::awaitable<void> write_loop(std::shared_ptr<ClientSession> self);
  boost::asio::awaitable<bool> write_one(Outgoing& frame);
  boost::asio::awaitable<bool> write_channel(Outgoing& frame);
  boost::asio::awaitable<void> serve_channel();
  // Puts a frame into the trainer's ring now; false when full (queue it).
  bool push_now(const std::vector<std::uint8_t>& bytes);
  void ring_doorbell();
  void ring_doorbell_soon();  // after the handlers already queued
  void channel_corrupt(const Status& why);
  void protocol_error(const Status& status);
  // Logs a warning about this client, rate-limited per process (SessionHost::client_warnings).
  void warn_limited(const std::string& what);
  void arm_flush_deadline();

  SessionHost& host_;
  SessionLimits limits_;
  Socket socket_;
  std::uint64_t id_;
  std::int32_t peer_pid_ = 0;
  Credentials credentials_;
  transport::FrameQueue<Outgoing> queue_;
  boost::asio::steady_timer handshake_deadline_;
  boost::asio::steady_timer flush_deadline_;
  boost::asio::steady_timer hello_wait_;
  bool hello_answered_ = false;
  bool flush_then_close_ = false;
  std::uint64_t frames_written_ = 0;  // progress, for the flush deadline
  bool closed_ = false;
  std::optional<shm::Channel> channel_;
  bool channel_active_ = false;
  bool doorbell_posted_ = false;
  std::vector<std::uint8_t> body_;  // a frame copied out of the channel before decoding
};

}  // namespace ringsync::service::local
