// Connection over the shared-memory channel (connection.h).
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "client/src/connection.h"
#include "common/fd_passing.h"

namespace ringsync::client {
namespace {

using Clock = std::chrono::steady_clock;

// A full ring: yield this often before sleeping between looks.
constexpr int kFullYields = 64;
constexpr int kFullSleepMs = 1;

}  // namespace

Status Connection::attach_channel(int fd, std::size_t bytes) {
  auto channel = shm::Channel::map(fd, bytes);
  if (!channel.ok()) return channel.status();
  channel_.emplace(std::move(channel).value());
  // Anything read past the hello reply can only be doorbells.
  in_begin_ = in_end_ = 0;
  return Status::Ok();
}

Status Connection::closed_by_daemon() const {
  return Status::Closed("ringsyncd at " + path_ +
                        " closed the connection (it stopped or dropped this client; see its log)");
}

Status Connection::ring_daemon() {
  const char bell = 0;
  const ssize_t n = ::send(fd_, &bell, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n >= 0 || errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Status::Ok();
  return Status::Closed("cannot reach ringsyncd at " + path_ + ": " + std::strerror(errno));
}

Status Connection::send_channel(const std::vector<std::uint8_t>& frame) {
  shm::ShmRing& ring = channel_->to_daemon();
  for (int turn = 0;; ++turn) {
    switch (ring.push(frame)) {
      case shm::ShmRing::Push::kDone:
        return ring.consumer_sleeping() ? ring_daemon() : Status::Ok();
      case shm::ShmRing::Push::kTooLarge:
        return Status::InvalidArgument("a frame of " + std::to_string(frame.size()) +
                                       " bytes is larger than the channel to ringsyncd takes (" +
                                       std::to_string(wire::kMaxFrameBytes) + ")");
      case shm::ShmRing::Push::kCorrupt:
        return Status::ProtocolError("the shared-memory channel to ringsyncd at " + path_ + " is corrupt");
      case shm::ShmRing::Push::kFull: break;
    }
    // The daemon drains the ring whenever it is awake, and it never sleeps
    // with frames in it; a sleeping one is rung once more to be sure.
    if (ring.consumer_sleeping()) RINGSYNC_RETURN_IF_ERROR(ring_daemon());
    if (turn < kFullYields) {
      std::this_thread::yield();
      continue;
    }
    pollfd p{fd_, 0, 0};  // only an error or the end wakes this
    if (::poll(&p, 1, kFullSleepMs) > 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL)))
      return closed_by_daemon();
  }
}

void Connection::drain_socket() {
  std::uint8_t bells[256];
  for (;;) {
    std::vector<int> fds;
    const ssize_t n = recv_with_fds(fd_, bells, sizeof bells, fds, MSG_DONTWAIT);
    fds_.insert(fds_.end(), fds.begin(), fds.end());
    if (n > 0) continue;
    if (n == 0 || (n != -EAGAIN && n != -EWOULDBLOCK)) ended_ = true;
    return;
  }
}

Result<wire::Message> Connection::receive_channel(int timeout_ms) {
  shm::ShmRing& ring = channel_->to_client();
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  for (;;) {
    auto frame = ring.peek(wire::kMaxFrameBytes);
    if (!frame.ok())
      return Status::ProtocolError("bad frame from " + path_ + ": " + frame.status().message());
    if (!frame->empty()) {
      const std::size_t length = frame->size() - wire::kFrameHeaderBytes;
      aligned_.resize((length + sizeof(std::uint64_t) - 1) / sizeof(std::uint64_t));
      std::memcpy(aligned_.data(), frame->data() + wire::kFrameHeaderBytes, length);
      // The daemon waits for room. A failed doorbell means it is gone; the
      // socket's end says so after this frame (maybe its last words).
      if (ring.pop()) (void)ring_daemon();
      auto message = wire::decode(
          std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(aligned_.data()), length));
      if (!message.ok())
        return Status::ProtocolError("bad frame from " + path_ + ": " + message.status().message());
      return message;
    }
    // Only when the ring is empty: the daemon's last words come before its end.
    if (ended_) return closed_by_daemon();
    int wait_ms = -1;
    if (timeout_ms >= 0) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      wait_ms = static_cast<int>(std::max<std::chrono::milliseconds::rep>(left.count(), 0));
    }
    if (wait_ms == 0) {
      drain_socket();
      if (ended_ && !ring.readable()) return closed_by_daemon();
      if (ring.readable()) continue;
      return Status::Timeout("ringsyncd at " + path_ + " did not answer within " +
                             std::to_string(timeout_ms) + " ms");
    }
    ring.set_sleeping(true);
    if (ring.readable()) {
      ring.set_sleeping(false);
      continue;
    }
    pollfd p{fd_, POLLIN, 0};
    int rc;
    do {
      rc = ::poll(&p, 1, wait_ms);
    } while (rc < 0 && errno == EINTR);
    ring.set_sleeping(false);
    if (rc < 0) return Status::Internal("poll on the daemon socket failed: " + std::string(std::strerror(errno)));
    if (rc > 0) drain_socket();
  }
}

}  // namespace ringsync::client
