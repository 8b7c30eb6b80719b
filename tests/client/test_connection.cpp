// Framing on the trainer's socket: partial and coalesced frames, descriptors in
// order, timeouts and shutdown.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "client/src/connection.h"
#include "common/fd_passing.h"
#include "common/shm.h"
#include "fake_daemon.h"

namespace test_client_connection {

using namespace std::chrono_literals;
using ringsync::Status;
using ringsync::StatusCode;
using ringsync::client::Connection;
namespace wire = ringsync::wire;

namespace {

// A connected pair: the client's Connection and the server's raw socket.
struct Pair {
  Pair() : path(ringsync::testing::temp_socket_path("conn")) {
    listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    REQUIRE(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    REQUIRE(listen(listener, 1) == 0);
    auto c = Connection::open(path, 1000ms);
    REQUIRE(c.ok());
    client = std::move(*c);
    server = accept(listener, nullptr, nullptr);
    REQUIRE(server >= 0);
  }
  ~Pair() {
    close(server);
    close(listener);
    unlink(path.c_str());
  }
  void write_all(const std::vector<std::uint8_t>& bytes) const {
    REQUIRE(write(server, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  }

  std::string path;
  int listener = -1;
  int server = -1;
  std::unique_ptr<Connection> client;
};

std::uint64_t completion_id(const ringsync::Result<wire::Message>& m) {
  REQUIRE(m.ok());
  REQUIRE(std::holds_alternative<wire::Completion>(m.value()));
  return std::get<wire::Completion>(m.value()).request_id;
}

}  // namespace

TEST_CASE("frames arriving together or byte by byte are all decoded in order") {
  Pair p;
  std::vector<std::uint8_t> three;
  for (std::uint64_t id : {1, 2, 3}) {
    auto f = wire::encode(wire::Completion{id, Status::Ok()});
    three.insert(three.end(), f.begin(), f.end());
  }
  p.write_all(three);
  std::thread slow([&] {
    for (std::uint8_t byte : wire::encode(wire::Completion{4, Status::Timeout("late")})) {
      CHECK(write(p.server, &byte, 1) == 1);
      std::this_thread::sleep_for(1ms);
    }
  });
  CHECK(completion_id(p.client->receive()) == 1);
  CHECK(completion_id(p.client->receive()) == 2);
  CHECK(completion_id(p.client->receive()) == 3);
  auto last = p.client->receive();
  slow.join();
  CHECK(completion_id(last) == 4);
  CHECK(std::get<wire::Completion>(*last).status.message() == "late");
}

TEST_CASE("descriptors are handed out in the order their frames arrived") {
  Pair p;
  std::vector<ringsync::shm::Region> regions;
  for (char tag : {'a', 'b'}) {
    auto r = ringsync::shm::Region::create(4096, "conn-test");
    REQUIRE(r.ok());
    r->data()[0] = std::byte(tag);
    auto frame = wire::encode(wire::AllocReply{1, Status::Ok(), 7, 4096});
    REQUIRE(ringsync::send_with_fd(p.server, frame.data(), frame.size(), r->fd()) ==
            static_cast<ssize_t>(frame.size()));
    regions.push_back(std::move(*r));
  }
  CHECK(p.client->take_fd() == -1);
  REQUIRE(p.client->receive().ok());
  REQUIRE(p.client->receive().ok());
  for (char tag : {'a', 'b'}) {
    const int fd = p.client->take_fd();
    REQUIRE(fd >= 0);
    auto mapped = ringsync::shm::Region::map(fd, 4096);
    REQUIRE(mapped.ok());
    CHECK(mapped->data()[0] == std::byte(tag));
  }
  CHECK(p.client->take_fd() == -1);
}

TEST_CASE("receive() times out, reports a closed peer, and wakes on shutdown()") {
  Pair p;
  auto nothing = p.client->receive(10);
  REQUIRE_FALSE(nothing.ok());
  CHECK(nothing.status().code() == StatusCode::kTimeout);

  std::thread closer([&] {
    std::this_thread::sleep_for(20ms);
    p.client->shutdown();
  });
  auto woken = p.client->receive();
  closer.join();
  REQUIRE_FALSE(woken.ok());
  CHECK(woken.status().code() == StatusCode::kClosed);
  CHECK_FALSE(p.client->send(wire::FreeBuffer{1}).ok());
}

TEST_CASE("an oversized frame header is a protocol error") {
  Pair p;
  p.write_all({0xff, 0xff, 0xff, 0x7f});
  auto m = p.client->receive();
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().code() == StatusCode::kProtocolError);
}

}  // namespace test_client_connection
