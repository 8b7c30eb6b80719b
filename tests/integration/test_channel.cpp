// The shared-memory channel between a trainer and ringsyncd, spoken raw:
// frames both ways through the rings, replies that wait for room, and
// trainers that scribble over the channel (dropped alone).
#include <doctest/doctest.h>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "common/fd_passing.h"
#include "common/shm_channel.h"
#include "common/wire.h"
#include "daemon_fixture.h"
#include "raw_client.h"

namespace test_integration_channel {

using namespace ringsync;
using namespace ringsync::test;
using namespace std::chrono_literals;

namespace {

using Clock = std::chrono::steady_clock;

// A trainer that asked for the channel: hello on the socket, then frames
// through the rings. Every wait ends at a deadline.
class ChannelClient {
 public:
  ChannelClient(const std::string& path, const std::string& job, std::uint32_t rank = 0, std::uint32_t size = 1) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    wire::Hello hello{wire::kProtocolVersion, job, rank, size, static_cast<std::int32_t>(getpid())};
    hello.shm_channel = true;
    const auto frame = wire::encode(hello);
    REQUIRE(::send(fd_, frame.data(), frame.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(frame.size()));
    // The reply and the channel's memfd, on the socket.
    std::vector<std::uint8_t> bytes;
    std::vector<int> fds;
    const auto deadline = Clock::now() + 10s;
    std::optional<wire::Message> reply;
    while (!reply && Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      std::uint8_t chunk[4096];
      const ssize_t n = recv_with_fds(fd_, chunk, sizeof chunk, fds);
      REQUIRE(n > 0);
      bytes.insert(bytes.end(), chunk, chunk + n);
      if (bytes.size() < 4) continue;
      auto length = wire::frame_length(std::span<const std::uint8_t, 4>(bytes.data(), 4), wire::kMaxFrameBytes);
      REQUIRE(length.ok());
      if (bytes.size() < 4 + *length) continue;
      auto m = wire::decode(std::span<const std::uint8_t>(bytes.data() + 4, *length));
      REQUIRE(m.ok());
      reply = *m;
    }
    REQUIRE(reply.has_value());
    REQUIRE(std::holds_alternative<wire::HelloReply>(*reply));
    const auto& hr = std::get<wire::HelloReply>(*reply);
    REQUIRE(hr.status.ok());
    REQUIRE(hr.channel_bytes == shm::Channel::kBytes);
    REQUIRE(fds.size() == 1);
    auto channel = shm::Channel::map(fds[0], hr.channel_bytes);
    REQUIRE(channel.ok());
    channel_.emplace(std::move(channel).value());
  }
  ~ChannelClient() { ::close(fd_); }

  shm::Channel& channel() { return *channel_; }
  shm::RingControl* controls() { return reinterpret_cast<shm::RingControl*>(channel_->region()->data()); }
  // Whether the daemon waits for room in the reply ring.
  bool daemon_waiting() { return std::atomic_ref<std::uint32_t>(controls()[1].waiting).load() != 0; }
  void doorbell() {
    const char bell = 0;
    ::send(fd_, &bell, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  // Pushes a frame, waiting (bounded) while the ring is full.
  bool push(const std::vector<std::uint8_t>& frame) {
    const auto deadline = Clock::now() + 20s;
    while (Clock::now() < deadline) {
      const auto pushed = channel_->to_daemon().push(frame);
      if (pushed == shm::ShmRing::Push::kCorrupt) return false;
      doorbell();  // always: simpler than watching the daemon's sleep
      if (pushed == shm::ShmRing::Push::kDone) return true;
      std::this_thread::sleep_for(100us);
    }
    return false;
  }
  bool send(const wire::Message& m) { return push(wire::encode(m)); }
  // Requests the daemon refuses (one reply each, ids 1..n), none read, until
  // its writer waits for room in the reply ring. Returns n.
  std::uint64_t fill_reply_ring() {
    std::uint64_t sent = 0;
    const auto deadline = Clock::now() + 60s;
    while (!daemon_waiting() && Clock::now() < deadline) {
      REQUIRE(send(wire::AllocBuffer{++sent, std::uint64_t{1} << 62}));
      if (sent % 1000 == 0) std::this_thread::sleep_for(10ms);  // let the daemon catch up
    }
    REQUIRE(daemon_waiting());
    return sent;
  }
  // The next frame of the reply ring, or nullopt after 20 s.
  std::optional<wire::Message> receive() {
    const auto deadline = Clock::now() + 20s;
    auto& ring = channel_->to_client();
    while (Clock::now() < deadline) {
      auto frame = ring.peek(wire::kMaxFrameBytes);
      REQUIRE(frame.ok());
      if (frame->empty()) {
        std::this_thread::sleep_for(50us);
        continue;
      }
      std::vector<std::uint8_t> body(frame->begin() + 4, frame->end());
      if (ring.pop()) doorbell();  // the daemon waits for room
      auto m = wire::decode(body);
      REQUIRE(m.ok());
      return *m;
    }
    return std::nullopt;
  }
  // True when the daemon closed the socket before the timeout.
  bool closed_by_daemon() {
    const auto deadline = Clock::now() + 20s;
    while (Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char bells[256];
      const ssize_t n = ::recv(fd_, bells, sizeof bells, 0);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    }
    return false;
  }

 private:
  int fd_ = -1;
  std::optional<shm::Channel> channel_;
};

wire::Collective barrier(std::uint64_t id) {
  wire::Collective b;
  b.request_id = id;
  b.kind = wire::CollectiveKind::kBarrier;
  b.name = std::string("b").append(std::to_string(id));  // not "b" + ...: GCC 12 -Wrestrict false positive
  return b;
}

void expect_daemon_serves(DaemonFixture& daemon) {
  RawClient client(daemon.socket());
  REQUIRE(client.connected());
  client.hello("bystander");
  client.expect_serves(77);
}

}  // namespace

TEST_CASE("the channel: requests and replies travel through the rings") {
  DaemonFixture daemon;
  ChannelClient client(daemon.socket(), "ch");
  for (std::uint64_t id = 1; id <= 100; ++id) {
    REQUIRE(client.send(barrier(id)));
    auto reply = client.receive();
    REQUIRE(reply.has_value());
    REQUIRE(std::holds_alternative<wire::Completion>(*reply));
    CHECK(std::get<wire::Completion>(*reply).request_id == id);
    CHECK(std::get<wire::Completion>(*reply).status.ok());
  }
  // A buffer's memfd comes on the socket ahead of the reply naming it.
  REQUIRE(client.send(wire::AllocBuffer{500, 4096}));
  auto alloc = client.receive();
  REQUIRE(alloc.has_value());
  REQUIRE(std::holds_alternative<wire::AllocReply>(*alloc));
  CHECK(std::get<wire::AllocReply>(*alloc).status.ok());
  CHECK(std::get<wire::AllocReply>(*alloc).request_id == 500);
  CHECK(daemon.stop());
}

TEST_CASE("replies nobody reads wait for room in the ring, then all arrive in order") {
  DaemonFixture daemon;
  ChannelClient client(daemon.socket(), "unread");
  // More completions than the reply ring holds (~48 bytes each in 2 MiB).
  const std::uint64_t requests =
      shm::ShmRing::kCapacity / wire::encode(wire::Completion{1, Status::Ok()}).size() + 5000;
  for (std::uint64_t id = 1; id <= requests; ++id) REQUIRE(client.send(barrier(id)));
  for (std::uint64_t id = 1; id <= requests; ++id) {
    auto reply = client.receive();
    REQUIRE(reply.has_value());
    REQUIRE(std::holds_alternative<wire::Completion>(*reply));
    REQUIRE(std::get<wire::Completion>(*reply).request_id == id);
  }
  expect_daemon_serves(daemon);
  CHECK(daemon.stop());
}

TEST_CASE("a frame that does not decode ends that connection with an error, through the ring") {
  DaemonFixture daemon;
  ChannelClient client(daemon.socket(), "garbage");
  std::vector<std::uint8_t> frame = {8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
  REQUIRE(client.push(frame));
  auto error = client.receive();
  REQUIRE(error.has_value());
  REQUIRE(std::holds_alternative<wire::Completion>(*error));
  CHECK(std::get<wire::Completion>(*error).request_id == 0);
  CHECK(std::get<wire::Completion>(*error).status.code() == StatusCode::kProtocolError);
  CHECK(client.closed_by_daemon());
  expect_daemon_serves(daemon);
  CHECK(daemon.stop());
}

TEST_CASE("a bad frame with more behind it: error, end, and the daemon serves on (busy polling or not)") {
  for (const char* busy_poll : {"100us", "0"}) {
    CAPTURE(busy_poll);
    DaemonFixture daemon({"--busy-poll", busy_poll});
    ChannelClient client(daemon.socket(), "bad-then-more");
    const std::vector<std::uint8_t> bad = {8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
    // Both in the ring before the daemon looks: the second is never drained.
    REQUIRE(client.channel().to_daemon().push(bad) == shm::ShmRing::Push::kDone);
    REQUIRE(client.channel().to_daemon().push(bad) == shm::ShmRing::Push::kDone);
    client.doorbell();
    auto error = client.receive();
    REQUIRE(error.has_value());
    REQUIRE(std::holds_alternative<wire::Completion>(*error));
    CHECK(std::get<wire::Completion>(*error).request_id == 0);
    CHECK(client.closed_by_daemon());
    expect_daemon_serves(daemon);
    CHECK(daemon.stop());
  }
}

TEST_CASE("a frame above --max-frame-bytes in the ring is answered like one on the socket") {
  DaemonFixture daemon({"--max-frame-bytes", "4KiB"});
  ChannelClient client(daemon.socket(), "large");
  wire::Collective big = barrier(1);
  big.name = std::string(8000, 'n');
  REQUIRE(client.send(big));
  auto error = client.receive();
  REQUIRE(error.has_value());
  REQUIRE(std::holds_alternative<wire::Completion>(*error));
  CHECK(std::get<wire::Completion>(*error).request_id == 0);
  CHECK(std::get<wire::Completion>(*error).status.message().find("exceeds") != std::string::npos);
  CHECK(client.closed_by_daemon());
  CHECK(daemon.log().find("corrupt") == std::string::npos);
  CHECK(daemon.stop());
}

TEST_CASE("a protocol error while replies wait for room: every reply, the error, then the end") {
  DaemonFixture daemon;
  ChannelClient client(daemon.socket(), "full-then-bad");
  std::uint64_t sent = client.fill_reply_ring();
  // More than another ring's worth queued in the daemon, then the error.
  const std::uint64_t total = 2 * sent + 1000;
  while (sent < total) REQUIRE(client.send(wire::AllocBuffer{++sent, std::uint64_t{1} << 62}));
  std::this_thread::sleep_for(100ms);
  REQUIRE(client.push({8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}));
  std::this_thread::sleep_for(300ms);  // the daemon handles it while its writer waits
  std::uint64_t replies = 0;
  bool error_seen = false;
  while (!error_seen) {
    auto m = client.receive();
    REQUIRE(m.has_value());
    if (const auto* reply = std::get_if<wire::AllocReply>(&*m)) {
      CHECK(reply->request_id == ++replies);
    } else {
      REQUIRE(std::holds_alternative<wire::Completion>(*m));
      CHECK(std::get<wire::Completion>(*m).request_id == 0);
      error_seen = true;
    }
  }
  CHECK(replies == sent);
  CHECK(client.closed_by_daemon());
  expect_daemon_serves(daemon);
  CHECK(daemon.stop());
}

TEST_CASE("a closing connection whose trainer takes no replies, its request ring full too, is cut off") {
  DaemonFixture daemon;
  ChannelClient client(daemon.socket(), "stuck");
  // The reply ring full (the daemon's writer waits for room), then the error.
  std::uint64_t sent = client.fill_reply_ring();
  REQUIRE(client.push({8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}));
  // The closing daemon drains no more requests: fill that ring as well, as a
  // trainer blocked in a send would have. Nobody makes room on either side.
  const auto frame = wire::encode(wire::AllocBuffer{++sent, std::uint64_t{1} << 62});
  int full = 0;
  for (int i = 0; i < 1'000'000 && full == 0; ++i) {
    const auto pushed = client.channel().to_daemon().push(frame);
    REQUIRE(pushed != shm::ShmRing::Push::kCorrupt);
    if (pushed == shm::ShmRing::Push::kFull) full = 1;
  }
  REQUIRE(full == 1);
  client.doorbell();
  // The daemon gives up on the flush and closes (2-4 s, ClientSession::kFlushTimeout).
  CHECK(client.closed_by_daemon());
  CHECK(http_get(daemon.metrics_host_port(), "/metrics").find("ringsync_errors_total{kind=\"flush_timeout\"} 1") !=
        std::string::npos);
  expect_daemon_serves(daemon);
  CHECK(daemon.stop());
}

TEST_CASE("a trainer ended by a protocol error leaves its job at once, even with replies still queued") {
  DaemonFixture daemon;
  ChannelClient broken(daemon.socket(), "pair", 0, 2);
  RawClient other(daemon.socket());
  REQUIRE(other.connected());
  other.hello("pair", 1, 2);
  // The broken rank's reply ring full, its replies queued behind it.
  broken.fill_reply_ring();
  other.send(barrier(7));  // waits for rank 0
  REQUIRE(broken.push({8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}));
  // Well before --collective-timeout (300 s); RawClient gives up after 10 s.
  auto done = other.expect<wire::Completion>();
  CHECK(done.request_id == 7);
  CHECK(done.status.code() == StatusCode::kPeerLost);
  CHECK(daemon.stop());
}

TEST_CASE("a trainer that scribbles over the channel is dropped; the daemon serves on") {
  DaemonFixture daemon;
  SUBCASE("its write position") {
    ChannelClient client(daemon.socket(), "scribble");
    auto* controls = reinterpret_cast<shm::RingControl*>(client.channel().region()->data());
    controls[0].tail = 12345;  // not a record boundary, past the capacity
    client.doorbell();
    CHECK(client.closed_by_daemon());
  }
  SUBCASE("a frame length past what was written") {
    ChannelClient client(daemon.socket(), "scribble");
    REQUIRE(client.send(barrier(1)));
    REQUIRE(client.receive().has_value());
    // The next record claims 60000 bytes where 8 were written.
    auto* controls = reinterpret_cast<shm::RingControl*>(client.channel().region()->data());
    std::byte* data = client.channel().region()->data() + shm::Channel::kControlBytes;
    const std::uint64_t at = controls[0].tail;
    const std::uint32_t length = 60000;
    std::memcpy(data + at, &length, sizeof length);
    controls[0].tail = at + 8;
    client.doorbell();
    CHECK(client.closed_by_daemon());
  }
  SUBCASE("the reply ring's read position") {
    ChannelClient client(daemon.socket(), "scribble");
    auto* controls = reinterpret_cast<shm::RingControl*>(client.channel().region()->data());
    controls[1].head = 1ull << 40;
    REQUIRE(client.send(barrier(1)));
    CHECK(client.closed_by_daemon());
  }
  expect_daemon_serves(daemon);
  CHECK(daemon.log().find("corrupt") != std::string::npos);
  CHECK(daemon.stop());
}

TEST_CASE("--client-channel socket: a trainer that asks gets no channel") {
  DaemonFixture daemon({"--client-channel", "socket"});
  RawClient client(daemon.socket());
  REQUIRE(client.connected());
  wire::Hello hello{wire::kProtocolVersion, "plain", 0, 1, 1};
  hello.shm_channel = true;
  client.send(hello);
  auto reply = client.expect<wire::HelloReply>();
  CHECK(reply.status.ok());
  CHECK(reply.channel_bytes == 0);
  client.expect_serves(5);
  CHECK(daemon.stop());
}

}  // namespace test_integration_channel
