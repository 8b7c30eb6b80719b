#include "client/src/connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <span>
#include <thread>

#include "common/fd_passing.h"

namespace ringsync::client {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kReadChunk = 64 * 1024;
constexpr std::chrono::milliseconds kFirstBackoff{5};
constexpr std::chrono::milliseconds kMaxBackoff{200};
constexpr unsigned kSocketCheckEvery = 16;

std::string errno_text(int err) { return std::strerror(err); }

Status no_daemon(const std::string& path, int err, std::chrono::milliseconds waited) {
  return Status::Closed("cannot connect to ringsyncd at " + path + ": " + errno_text(err) +
                        " (waited " + std::to_string(waited.count()) +
                        " ms); start ringsyncd, or set RINGSYNC_SOCKET (or config.socket_path) "
                        "to the socket it listens on");
}

// Whether a failed connect() may succeed later: no socket yet, or nobody listening.
bool worth_retrying(int err) { return err == ENOENT || err == ECONNREFUSED || err == EAGAIN; }

}  // namespace

Result<std::unique_ptr<Connection>> Connection::open(const std::string& path,
                                                     std::chrono::milliseconds timeout) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path))
    return Status::InvalidArgument("socket path '" + path + "' is empty or too long");
  std::memcpy(addr.sun_path, path.data(), path.size());

  const auto start = Clock::now();
  const auto deadline = start + timeout;
  auto backoff = kFirstBackoff;
  for (;;) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Status::Internal("socket(AF_UNIX) failed: " + errno_text(errno));
    int rc;
    do {
      rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
    } while (rc != 0 && errno == EINTR);
    if (rc == 0) return std::unique_ptr<Connection>(new Connection(fd, path));
    const int err = errno;
    close(fd);
    const auto now = Clock::now();
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - start);
    if (!worth_retrying(err) || now >= deadline) return no_daemon(path, err, waited);
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

Connection::~Connection() {
  close(fd_);
  for (int fd : fds_) close(fd);
}

Status Connection::send(const wire::Message& message) {
  const std::vector<std::uint8_t> frame = wire::encode(message);
  std::lock_guard lock(send_mu_);
  if (channel_) return send_channel(frame);
  std::size_t sent = 0;
  while (sent < frame.size()) {
    const ssize_t n = ::send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Closed("cannot send to ringsyncd at " + path_ + ": " + errno_text(errno));
    }
    sent += static_cast<std::size_t>(n);
  }
  return Status::Ok();
}

Status Connection::read_more(int timeout_ms) {
  if (timeout_ms >= 0) {
    pollfd p{fd_, POLLIN, 0};
    int rc;
    do {
      rc = poll(&p, 1, timeout_ms);
    } while (rc < 0 && errno == EINTR);
    if (rc < 0) return Status::Internal("poll on the daemon socket failed: " + errno_text(errno));
    if (rc == 0)
      return Status::Timeout("ringsyncd at " + path_ + " did not answer within " +
                             std::to_string(timeout_ms) + " ms");
  }
  // Make room: drop what was consumed, then grow when still full.
  if (in_end_ == in_.size() && in_begin_ > 0) {
    std::memmove(in_.data(), in_.data() + in_begin_, in_end_ - in_begin_);
    in_end_ -= in_begin_;
    in_begin_ = 0;
  }
  if (in_end_ == in_.size()) in_.resize(std::max(kReadChunk, 2 * in_.size()));
  std::vector<int> fds;
  const ssize_t n = recv_with_fds(fd_, in_.data() + in_end_, in_.size() - in_end_, fds);
  if (n > 0) in_end_ += static_cast<std::size_t>(n);
  fds_.insert(fds_.end(), fds.begin(), fds.end());
  if (n == 0)
    return Status::Closed(
        "ringsyncd at " + path_ +
        " closed the connection (it stopped or dropped this client; see its log)");
  if (n < 0)
    return Status::Closed("lost the connection to ringsyncd at " + path_ + ": " +
                          errno_text(static_cast<int>(-n)) + " (did the daemon stop?)");
  return Status::Ok();
}

Result<wire::Message> Connection::receive(int timeout_ms) {
  if (channel_) return receive_channel(timeout_ms);
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  for (;;) {
    const std::size_t available = in_end_ - in_begin_;
    if (available >= wire::kFrameHeaderBytes) {
      std::span<const std::uint8_t, wire::kFrameHeaderBytes> header(in_.data() + in_begin_,
                                                                    wire::kFrameHeaderBytes);
      auto length = wire::frame_length(header, wire::kMaxFrameBytes);
      if (!length.ok())
        return Status::ProtocolError("bad frame from " + path_ + ": " + length.status().message());
      const std::size_t total = wire::kFrameHeaderBytes + *length;
      if (available >= total) {
        // FlatBuffers reads 8-byte fields in place: decode from an aligned copy.
        aligned_.resize((*length + sizeof(std::uint64_t) - 1) / sizeof(std::uint64_t));
        std::memcpy(aligned_.data(), in_.data() + in_begin_ + wire::kFrameHeaderBytes, *length);
        auto message = wire::decode(std::span<const std::uint8_t>(
            reinterpret_cast<const std::uint8_t*>(aligned_.data()), *length));
        in_begin_ += total;
        if (!message.ok())
          return Status::ProtocolError("bad frame from " + path_ + ": " +
                                       message.status().message());
        return message;
      }
    }
    int wait_ms = -1;
    if (timeout_ms >= 0) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      wait_ms = static_cast<int>(std::max<std::chrono::milliseconds::rep>(left.count(), 0));
    }
    RINGSYNC_RETURN_IF_ERROR(read_more(wait_ms));
  }
}

bool Connection::buffered() const {
  return channel_ ? channel_->to_client().readable() : in_end_ > in_begin_;
}

bool Connection::readable() const {
  if (channel_) {
    if (channel_->to_client().readable()) return true;
    // The socket brings only doorbells, descriptors and the end now: look at
    // it now and then, not on every turn of a polling loop.
    if (++socket_checks_ % kSocketCheckEvery != 0) return false;
  }
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

int Connection::take_fd() {
  // With a channel the descriptor was sent before the frame that names it.
  if (fds_.empty() && channel_) drain_socket();
  if (fds_.empty()) return -1;
  const int fd = fds_.front();
  fds_.pop_front();
  return fd;
}

void Connection::shutdown() { ::shutdown(fd_, SHUT_RDWR); }

}  // namespace ringsync::client
