// One trainer connection: reads verified frames and hands them to the daemon,
// writes replies in order (passing memfds with SCM_RIGHTS), and tells the
// daemon when the trainer is gone. Runs on the daemon's control thread.
#pragma once

#include <utility>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/shm.h"
#include "common/status.h"
#include "common/wire.h"
#include "service/buffer_table.h"
#include "service/device_table.h"

namespace ringsync::service {

class Daemon;

class ClientSession : public std::enable_shared_from_this<ClientSession> {
 public:
  using Socket = boost::asio::local::stream_protocol::socket;
  // Replies queued for a client that does not read, before it is disconnected.
  static constexpr std::size_t kMaxQueuedFrames = 65536;

  ClientSession(Daemon& daemon, Socket socket, std::uint64_t id);

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

  // Set once the hello was accepted.
  struct Membership {
    std::string job_id;
    std::uint32_t local_rank = 0;
    std::int32_t pid = 0;
  };
  std::optional<Membership> membership;
  BufferTable buffers;
  DeviceTable devices;  // GPU allocations (DeviceService)

 private:
  struct Outgoing {
    std::vector<std::uint8_t> bytes;
    std::shared_ptr<shm::Region> fd_of;
  };

  // Each loop holds the session alive through `self` from the moment it is created.
  boost::asio::awaitable<void> read_loop(std::shared_ptr<ClientSession> self);
  boost::asio::awaitable<void> write_loop(std::shared_ptr<ClientSession> self);
  boost::asio::awaitable<bool> write_one(Outgoing& frame);
  void protocol_error(const Status& status);

  Daemon& daemon_;
  Socket socket_;
  std::uint64_t id_;
  std::deque<Outgoing> queue_;
  boost::asio::steady_timer wake_writer_;
  boost::asio::steady_timer handshake_deadline_;
  bool flush_then_close_ = false;
  bool closed_ = false;
};

}  // namespace ringsync::service
