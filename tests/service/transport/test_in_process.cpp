#include <doctest/doctest.h>
#include <poll.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "service/transport/in_process.h"

namespace test_service_transport_in_process {

using namespace ringsync;
using ringsync::service::transport::InProcessFabric;
using ringsync::service::transport::make_tag;
using ringsync::service::transport::Transport;

namespace {

// Records the status a callback was called with.
struct Outcome {
  std::optional<Status> status;
  Transport::Callback callback() {
    return [this](const Status& s) { status = s; };
  }
};

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1;
}

// Runs progress() until nothing more completes.
void drain(Transport& t) {
  while (t.progress()) {
  }
}

}  // namespace

TEST_CASE("in-process transport: make_tag packs sequence, step and chunk") {
  CHECK(make_tag(0, 0, 0) == 0);
  CHECK(make_tag(1, 0, 0) == 0x0000000100000000ull);
  CHECK(make_tag(0xFFFFFFFFu, 0xFFFF, 0xFFFF) == 0xFFFFFFFFFFFFFFFFull);
  CHECK(make_tag(7, 3, 2) == 0x0000000700030002ull);
  CHECK(make_tag(1, 0, 1) != make_tag(0, 1, 1));
}

TEST_CASE("in-process transport: endpoints know their rank and the job size") {
  InProcessFabric fabric(3);
  CHECK(fabric.size() == 3);
  for (int r = 0; r < 3; ++r) {
    CHECK(fabric.endpoint(r).rank() == r);
    CHECK(fabric.endpoint(r).size() == 3);
    CHECK(fabric.endpoint(r).event_fd() >= 0);
  }
  CHECK_THROWS_AS(InProcessFabric(0), std::invalid_argument);
}

TEST_CASE("in-process transport: a receive posted first gets the message") {
  InProcessFabric fabric(2);
  Transport& a = fabric.endpoint(0);
  Transport& b = fabric.endpoint(1);
  std::vector<int> in{1, 2, 3, 4}, out(4, 0);
  Outcome sent, received;
  b.recv(0, 42, out.data(), out.size() * sizeof(int), received.callback());
  a.send(1, 42, in.data(), in.size() * sizeof(int), sent.callback());
  // Callbacks wait for progress() on the owner's endpoint.
  CHECK_FALSE(sent.status.has_value());
  CHECK_FALSE(received.status.has_value());
  CHECK(a.progress());
  CHECK_FALSE(a.progress());
  CHECK(b.progress());
  REQUIRE(sent.status.has_value());
  REQUIRE(received.status.has_value());
  CHECK(sent.status->ok());
  CHECK(received.status->ok());
  CHECK(out == in);
  CHECK(fabric.bytes_sent(0) == 16);
  CHECK(fabric.messages_sent(0) == 1);
  CHECK(fabric.bytes_sent(1) == 0);
}

TEST_CASE("in-process transport: an unexpected message is a copy kept until its receive") {
  InProcessFabric fabric(2);
  Transport& a = fabric.endpoint(0);
  Transport& b = fabric.endpoint(1);
  std::vector<int> in{5, 6, 7}, out(3, 0);
  Outcome sent, received;
  a.send(1, 9, in.data(), 12, sent.callback());
  drain(a);
  REQUIRE(sent.status.has_value());
  CHECK(sent.status->ok());
  in.assign(3, -1);  // the send completed: the buffer is the sender's again
  b.recv(0, 9, out.data(), 12, received.callback());
  drain(b);
  REQUIRE(received.status.has_value());
  CHECK(received.status->ok());
  CHECK(out == std::vector<int>{5, 6, 7});
}

TEST_CASE("in-process transport: matching is by sending node and tag, in order among equals") {
  InProcessFabric fabric(3);
  Transport& zero = fabric.endpoint(0);
  Transport& one = fabric.endpoint(1);
  Transport& two = fabric.endpoint(2);
  const int a = 10, b = 20, c = 30, d = 40;
  zero.send(2, make_tag(1, 0, 0), &a, sizeof a, [](const Status&) {});
  zero.send(2, make_tag(1, 0, 1), &b, sizeof b, [](const Status&) {});
  zero.send(2, make_tag(1, 0, 1), &c, sizeof c, [](const Status&) {});
  one.send(2, make_tag(1, 0, 0), &d, sizeof d, [](const Status&) {});
  drain(zero);
  drain(one);
  int got[4] = {0, 0, 0, 0};
  // Received in another order than sent: the tag and sender pick the message.
  two.recv(0, make_tag(1, 0, 1), &got[0], sizeof(int), [](const Status&) {});
  two.recv(1, make_tag(1, 0, 0), &got[1], sizeof(int), [](const Status&) {});
  two.recv(0, make_tag(1, 0, 1), &got[2], sizeof(int), [](const Status&) {});
  two.recv(0, make_tag(1, 0, 0), &got[3], sizeof(int), [](const Status&) {});
  drain(two);
  CHECK(got[0] == 20);
  CHECK(got[1] == 40);
  CHECK(got[2] == 30);
  CHECK(got[3] == 10);
}

TEST_CASE("in-process transport: a message of another size fails the receive") {
  InProcessFabric fabric(2);
  Transport& a = fabric.endpoint(0);
  Transport& b = fabric.endpoint(1);
  const std::uint64_t big = 1;
  std::uint32_t small = 0;
  Outcome sent, received;
  b.recv(0, 3, &small, sizeof small, received.callback());
  a.send(1, 3, &big, sizeof big, sent.callback());
  drain(a);
  drain(b);
  REQUIRE(sent.status.has_value());
  REQUIRE(received.status.has_value());
  CHECK(sent.status->ok());
  CHECK(received.status->code() == StatusCode::kProtocolError);
  CHECK(received.status->message().find("8 bytes") != std::string::npos);
  CHECK(received.status->message().find("expects 4") != std::string::npos);
}

TEST_CASE("in-process transport: empty messages and bad peers") {
  InProcessFabric fabric(2);
  Transport& a = fabric.endpoint(0);
  Transport& b = fabric.endpoint(1);
  Outcome empty_sent, empty_received, bad_send, bad_recv;
  a.send(1, 0, nullptr, 0, empty_sent.callback());
  b.recv(0, 0, nullptr, 0, empty_received.callback());
  a.send(2, 0, nullptr, 0, bad_send.callback());
  a.recv(-1, 0, nullptr, 0, bad_recv.callback());
  drain(a);
  drain(b);
  REQUIRE(empty_sent.status.has_value());
  REQUIRE(empty_received.status.has_value());
  CHECK(empty_sent.status->ok());
  CHECK(empty_received.status->ok());
  REQUIRE(bad_send.status.has_value());
  REQUIRE(bad_recv.status.has_value());
  CHECK(bad_send.status->code() == StatusCode::kInvalidArgument);
  CHECK(bad_recv.status->code() == StatusCode::kInvalidArgument);
  CHECK(fabric.messages_sent(0) == 1);
}

TEST_CASE("in-process transport: the event fd wakes the owner when work completes") {
  InProcessFabric fabric(2);
  Transport& a = fabric.endpoint(0);
  Transport& b = fabric.endpoint(1);
  int value = 0;
  const int sent_value = 77;
  Outcome received;
  b.recv(0, 1, &value, sizeof value, received.callback());
  CHECK(b.arm());  // nothing queued: safe to wait
  CHECK_FALSE(readable(b.event_fd()));
  // The sender runs on another thread, as in the daemon.
  std::thread sender([&] { a.send(1, 1, &sent_value, sizeof sent_value, [](const Status&) {}); });
  sender.join();
  CHECK(readable(b.event_fd()));
  CHECK_FALSE(b.arm());  // a completion is queued: progress instead of waiting
  CHECK(b.progress());
  CHECK(b.arm());
  CHECK_FALSE(readable(b.event_fd()));
  REQUIRE(received.status.has_value());
  CHECK(value == 77);
}

TEST_CASE("in-process transport: cancel_all completes everything outstanding before it returns") {
  InProcessFabric fabric(2);
  Transport& a = fabric.endpoint(0);
  Transport& b = fabric.endpoint(1);
  int x = 0, y = 0;
  const int one = 1;
  Outcome pending1, pending2, queued;
  b.recv(0, 1, &x, sizeof x, pending1.callback());
  b.recv(0, 2, &y, sizeof y, pending2.callback());
  b.send(0, 5, &one, sizeof one, queued.callback());  // completed, callback not yet run
  b.cancel_all(Status::PeerLost("node 0 stopped answering"));
  REQUIRE(pending1.status.has_value());
  REQUIRE(pending2.status.has_value());
  REQUIRE(queued.status.has_value());
  CHECK(pending1.status->code() == StatusCode::kPeerLost);
  CHECK(pending2.status->code() == StatusCode::kPeerLost);
  CHECK(queued.status->code() == StatusCode::kPeerLost);
  CHECK(pending1.status->message() == "node 0 stopped answering");
  CHECK_FALSE(b.progress());
  // The endpoint keeps working: a later message reaches a later receive.
  Outcome later;
  b.recv(0, 1, &x, sizeof x, later.callback());
  const int two = 2;
  a.send(1, 1, &two, sizeof two, [](const Status&) {});
  drain(b);
  REQUIRE(later.status.has_value());
  CHECK(later.status->ok());
  CHECK(x == 2);
}

TEST_CASE("in-process transport: a killed node's peers get PeerLost, it gets Closed") {
  InProcessFabric fabric(3);
  Transport& zero = fabric.endpoint(0);
  Transport& one = fabric.endpoint(1);
  Transport& two = fabric.endpoint(2);
  int before = 0, pending_value = 0, after = 0, own = 0;
  const int value = 5;
  // Sent before the kill: still delivered afterwards.
  one.send(0, 1, &value, sizeof value, [](const Status&) {});
  Outcome pending, from_other, own_pending;
  zero.recv(1, 2, &pending_value, sizeof pending_value, pending.callback());
  zero.recv(2, 2, &pending_value, sizeof pending_value, from_other.callback());
  one.recv(2, 7, &own, sizeof own, own_pending.callback());
  CHECK(zero.arm());
  CHECK(two.arm());

  fabric.kill(1);
  CHECK(fabric.killed(1));
  CHECK_FALSE(fabric.killed(0));
  CHECK(readable(zero.event_fd()));
  CHECK(readable(two.event_fd()));  // woken although it had nothing pending with node 1

  drain(zero);
  REQUIRE(pending.status.has_value());
  CHECK(pending.status->code() == StatusCode::kPeerLost);
  CHECK(pending.status->message().find("node 1") != std::string::npos);
  CHECK_FALSE(from_other.status.has_value());  // node 2 is alive: still waiting

  Outcome early, late, to_dead, dead_send, dead_recv;
  zero.recv(1, 1, &before, sizeof before, early.callback());
  zero.recv(1, 3, &after, sizeof after, late.callback());
  zero.send(1, 4, &value, sizeof value, to_dead.callback());
  one.send(0, 5, &value, sizeof value, dead_send.callback());
  one.recv(0, 6, &own, sizeof own, dead_recv.callback());
  drain(zero);
  drain(one);
  REQUIRE(early.status.has_value());
  CHECK(early.status->ok());
  CHECK(before == 5);
  REQUIRE(late.status.has_value());
  CHECK(late.status->code() == StatusCode::kPeerLost);
  REQUIRE(to_dead.status.has_value());
  CHECK(to_dead.status->code() == StatusCode::kPeerLost);
  REQUIRE(own_pending.status.has_value());
  CHECK(own_pending.status->code() == StatusCode::kClosed);
  REQUIRE(dead_send.status.has_value());
  CHECK(dead_send.status->code() == StatusCode::kClosed);
  REQUIRE(dead_recv.status.has_value());
  CHECK(dead_recv.status->code() == StatusCode::kClosed);
  CHECK(fabric.messages_sent(0) == 0);  // the send to the dead node moved nothing
}

TEST_CASE("in-process transport: endpoints on different threads exchange many messages") {
  constexpr int kNodes = 4;
  constexpr int kMessages = 300;
  InProcessFabric fabric(kNodes);
  std::vector<int> errors(kNodes, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < kNodes; ++r) {
    threads.emplace_back([&, r] {
      Transport& t = fabric.endpoint(r);
      // received[peer][i] must become peer * 100000 + i.
      std::vector<std::vector<int>> received(kNodes, std::vector<int>(kMessages, -1));
      std::vector<std::vector<int>> sent(kNodes, std::vector<int>(kMessages));
      int outstanding = 0;
      auto count_down = [&](const Status& s) {
        --outstanding;
        if (!s.ok()) ++errors[static_cast<std::size_t>(r)];
      };
      for (int i = 0; i < kMessages; ++i) {
        for (int peer = 0; peer < kNodes; ++peer) {
          if (peer == r) continue;
          // Receive before or after the peer probably sent: both paths run.
          auto tag = make_tag(0, 0, static_cast<std::uint16_t>(i));
          ++outstanding;
          t.recv(peer, tag, &received[static_cast<std::size_t>(peer)][static_cast<std::size_t>(i)],
                 sizeof(int), count_down);
          int& value = sent[static_cast<std::size_t>(peer)][static_cast<std::size_t>(i)];
          value = r * 100000 + i;
          ++outstanding;
          t.send(peer, tag, &value, sizeof value, count_down);
        }
        t.progress();
      }
      // Bounded: a lost message ends the wait (and fails below) instead of hanging.
      for (int idle_waits = 0; outstanding > 0 && idle_waits < 300;) {
        if (!t.progress() && t.arm()) {
          pollfd p{t.event_fd(), POLLIN, 0};
          if (poll(&p, 1, 100) == 0) ++idle_waits;
        }
      }
      if (outstanding != 0) ++errors[static_cast<std::size_t>(r)];
      for (int peer = 0; peer < kNodes; ++peer) {
        if (peer == r) continue;
        for (int i = 0; i < kMessages; ++i) {
          if (received[static_cast<std::size_t>(peer)][static_cast<std::size_t>(i)] !=
              peer * 100000 + i) {
            ++errors[static_cast<std::size_t>(r)];
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kNodes; ++r) {
    CAPTURE(r);
    CHECK(errors[static_cast<std::size_t>(r)] == 0);
    CHECK(fabric.messages_sent(r) == (kNodes - 1) * kMessages);
  }
}

}  // namespace test_service_transport_in_process
