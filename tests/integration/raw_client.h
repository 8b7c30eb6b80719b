// A trainer speaking raw frames to ringsyncd's Unix socket, for tests that send
// what the client library never would (malformed, out of order, hostile). Every
// read gives up after a receive timeout: a test fails, it never hangs.
#pragma once

#include <doctest/doctest.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "common/wire.h"

namespace ringsync::test {

class RawClient {
 public:
  explicit RawClient(const std::string& path, int timeout_seconds = 10) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    timeval tv{timeout_seconds, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~RawClient() { ::close(fd_); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  void send_bytes(const std::vector<std::uint8_t>& bytes) {
    ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
  void send(const wire::Message& m) { send_bytes(wire::encode(m)); }

  // The next message (descriptors that come with it are dropped), or nullopt when
  // the daemon closed the connection or the timeout passed.
  std::optional<wire::Message> receive() {
    std::uint8_t header[4];
    if (!read_exact(header, 4)) return std::nullopt;
    auto len =
        wire::frame_length(std::span<const std::uint8_t, 4>(header, 4), wire::kMaxFrameBytes);
    if (!len.ok()) return std::nullopt;
    std::vector<std::uint8_t> body(*len);
    if (!read_exact(body.data(), body.size())) return std::nullopt;
    auto m = wire::decode(body);
    if (!m.ok()) return std::nullopt;
    return *m;
  }
  // The next message, which must be a T.
  template <typename T>
  T expect() {
    auto m = receive();
    REQUIRE(m.has_value());
    REQUIRE(std::holds_alternative<T>(*m));
    return std::get<T>(*m);
  }
  // Joins `job` as local rank `rank` of `size`; the daemon must accept.
  void hello(const std::string& job, std::uint32_t rank = 0, std::uint32_t size = 1) {
    send(wire::Hello{wire::kProtocolVersion, job, rank, size, static_cast<std::int32_t>(getpid())});
    CHECK(expect<wire::HelloReply>().status.ok());
  }
  // A barrier of a one-rank job completes: the connection serves.
  void expect_serves(std::uint64_t id) {
    wire::Collective barrier;
    barrier.request_id = id;
    barrier.kind = wire::CollectiveKind::kBarrier;
    barrier.name = "still-there-" + std::to_string(id);
    send(barrier);
    auto done = expect<wire::Completion>();
    CHECK(done.request_id == id);
    CHECK(done.status.ok());
  }
  // True when the daemon closed the connection (EOF) before the timeout.
  bool closed_by_peer() {
    for (;;) {
      char c;
      const ssize_t n = ::recv(fd_, &c, 1, 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
  }

 private:
  bool read_exact(std::uint8_t* p, std::size_t n) {
    while (n > 0) {
      // recv() without a control buffer drops any SCM_RIGHTS descriptor (AllocReply).
      const ssize_t got = ::recv(fd_, p, n, 0);
      if (got <= 0) return false;
      p += got;
      n -= static_cast<std::size_t>(got);
    }
    return true;
  }
  int fd_ = -1;
  bool connected_ = false;
};

}  // namespace ringsync::test
