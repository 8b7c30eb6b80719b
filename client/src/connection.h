// The trainer's end of the Unix socket to ringsyncd: connect with retry, send
// frames, read frames together with the file descriptors that come with them.
// After the hello, frames may go through a shared-memory channel instead
// (attach_channel, common/shm_channel.h): sending then writes to one ring and
// rings the daemon's doorbell only when it sleeps; receiving reads the other
// ring and sleeps in poll() on the socket, which still brings descriptors,
// doorbells and the daemon's end.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/shm_channel.h"
#include "common/status.h"
#include "common/wire.h"

namespace ringsync::client {

class Connection {
 public:
  // Connects to the socket at `path`, retrying with a short backoff while it does
  // not exist yet or refuses, for up to `timeout`. Fails with kClosed, naming the
  // path and what to do.
  static Result<std::unique_ptr<Connection>> open(const std::string& path,
                                                  std::chrono::milliseconds timeout);

  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();  // closes the socket and every descriptor nobody took

  // Sends one frame; safe from several threads at once (frames never interleave).
  Status send(const wire::Message& message);

  // Reads the next message. timeout_ms < 0 blocks; otherwise kTimeout when
  // nothing complete arrives in time. kClosed at end of stream or after shutdown(),
  // kProtocolError for a malformed frame. One reader at a time.
  Result<wire::Message> receive(int timeout_ms = -1);

  // From now on frames go through the channel whose memfd came with the
  // hello reply (`fd`, owned from here on). Before any other thread uses this.
  Status attach_channel(int fd, std::size_t bytes);
  bool has_channel() const { return channel_.has_value(); }

  // Whether something not yet consumed is here already (maybe a whole frame).
  bool buffered() const;
  // Whether there is something to read now (data, or the end); never blocks.
  // With a channel it looks at the socket only every few calls.
  bool readable() const;

  // The oldest descriptor that arrived with the frames read so far and was not
  // taken yet (the caller owns it), or -1. For the reader only.
  int take_fd();

  // Unblocks a receive() in another thread and makes later sends fail.
  void shutdown();

  const std::string& path() const { return path_; }

 private:
  Connection(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  // Reads more bytes into in_, waiting at most timeout_ms when it is >= 0.
  Status read_more(int timeout_ms);
  // The channel's receive(): the next frame of the daemon's ring.
  Result<wire::Message> receive_channel(int timeout_ms);
  Status send_channel(const std::vector<std::uint8_t>& frame);
  // Reads what the socket holds now (doorbells, descriptors, the end) without waiting.
  void drain_socket();
  Status closed_by_daemon() const;
  Status ring_daemon();

  int fd_;
  std::string path_;
  std::mutex send_mu_;
  std::vector<std::uint8_t> in_;  // receive buffer; [in_begin_, in_end_) is not consumed yet
  std::size_t in_begin_ = 0;
  std::size_t in_end_ = 0;
  std::vector<std::uint64_t> aligned_;  // the body being decoded, 8-byte aligned
  std::deque<int> fds_;
  std::optional<shm::Channel> channel_;
  bool ended_ = false;  // the socket reached its end (channel mode)
  mutable unsigned socket_checks_ = 0;
};

}  // namespace ringsync::client
