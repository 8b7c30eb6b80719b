// Hostile or broken clients on the raw socket: the daemon answers or closes
// that one connection and keeps serving everybody else.
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "common/wire.h"
#include "daemon_fixture.h"
#include "raw_client.h"

namespace test_integration_robustness {

using namespace ringsync;
using namespace ringsync::test;
using namespace std::chrono_literals;

namespace {

// A healthy exchange: hello accepted, a one-rank barrier completes.
void expect_daemon_serves(DaemonFixture& daemon, const std::string& job) {
  RawClient client(daemon.socket());
  REQUIRE(client.connected());
  client.send(wire::Hello{wire::kProtocolVersion, job, 0, 1, 1});
  auto reply = client.receive();
  REQUIRE(reply.has_value());
  REQUIRE(std::holds_alternative<wire::HelloReply>(*reply));
  CHECK(std::get<wire::HelloReply>(*reply).status.ok());
  wire::Collective barrier;
  barrier.request_id = 9;
  barrier.kind = wire::CollectiveKind::kBarrier;
  barrier.name = "b";
  client.send(barrier);
  auto done = client.receive();
  REQUIRE(done.has_value());
  REQUIRE(std::holds_alternative<wire::Completion>(*done));
  CHECK(std::get<wire::Completion>(*done).request_id == 9);
  CHECK(std::get<wire::Completion>(*done).status.ok());
}

std::optional<Status> connection_error(RawClient& client) {
  auto m = client.receive();
  if (!m || !std::holds_alternative<wire::Completion>(*m)) return std::nullopt;
  const auto& c = std::get<wire::Completion>(*m);
  if (c.request_id != 0) return std::nullopt;
  return c.status;
}

}  // namespace

TEST_CASE("random bytes, truncated and oversized frames do not hurt the daemon") {
  DaemonFixture daemon;
  std::mt19937 rng(1234);
  for (int round = 0; round < 20; ++round) {
    RawClient client(daemon.socket());
    REQUIRE(client.connected());
    std::vector<std::uint8_t> junk(8 + rng() % 300);
    for (auto& b : junk) b = static_cast<std::uint8_t>(rng());
    junk[0] = static_cast<std::uint8_t>(junk.size() - 4);  // plausible length prefix, garbage body
    junk[1] = junk[2] = junk[3] = 0;
    client.send_bytes(junk);
    CHECK(client.closed_by_peer());
  }
  {  // Truncated: a header promising more than ever arrives, then the client leaves.
    RawClient client(daemon.socket());
    auto frame = wire::encode(wire::Hello{wire::kProtocolVersion, "t", 0, 1, 1});
    frame.resize(frame.size() / 2);
    client.send_bytes(frame);
  }
  {  // Oversized length prefix: an error reply, then the connection closes.
    RawClient client(daemon.socket());
    client.send_bytes({0xff, 0xff, 0xff, 0x7f, 1, 2, 3});
    auto error = connection_error(client);
    REQUIRE(error.has_value());
    CHECK(error->code() == StatusCode::kProtocolError);
    CHECK(error->message().find("exceeds the limit") != std::string::npos);
    CHECK(client.closed_by_peer());
  }
  {  // A valid frame of the wrong kind before the hello.
    RawClient client(daemon.socket());
    client.send(wire::AllocBuffer{1, 4096});
    auto error = connection_error(client);
    REQUIRE(error.has_value());
    CHECK(error->message().find("first message on a connection must be a hello") != std::string::npos);
  }
  {  // A client that never says hello is dropped after the handshake timeout.
    DaemonFixture quick({"--handshake-timeout", "300ms"});
    RawClient silent(quick.socket());
    CHECK(silent.closed_by_peer());
    expect_daemon_serves(quick, "after-silence");
    CHECK(quick.stop());
  }
  CHECK(daemon.running());
  expect_daemon_serves(daemon, "after-junk");
  CHECK(daemon.stop());
}

TEST_CASE("hello is checked: protocol version, sizes, taken slots") {
  DaemonFixture daemon;
  auto hello_status = [&](wire::Hello hello) {
    RawClient client(daemon.socket());
    client.send(hello);
    auto reply = client.receive();
    REQUIRE(reply.has_value());
    REQUIRE(std::holds_alternative<wire::HelloReply>(*reply));
    return std::get<wire::HelloReply>(*reply).status;
  };
  CHECK(hello_status({99, "j", 0, 1, 1}).message().find("protocol version 99") != std::string::npos);
  CHECK(hello_status({wire::kProtocolVersion, "j", 0, 0, 1}).code() == StatusCode::kInvalidArgument);
  CHECK(hello_status({wire::kProtocolVersion, "j", 5, 2, 1}).message().find("out of range") !=
        std::string::npos);

  RawClient first(daemon.socket());
  first.send(wire::Hello{wire::kProtocolVersion, "shared", 0, 2, 111});
  REQUIRE(first.receive().has_value());
  CHECK(hello_status({wire::kProtocolVersion, "shared", 0, 2, 222}).message().find(
            "already connected (pid 111)") != std::string::npos);
  CHECK(hello_status({wire::kProtocolVersion, "shared", 1, 3, 333}).message().find("local size 2") !=
        std::string::npos);
  CHECK(daemon.stop());
}

TEST_CASE("bad collective requests fail alone; the connection stays usable") {
  DaemonFixture daemon;
  RawClient client(daemon.socket());
  client.send(wire::Hello{wire::kProtocolVersion, "bad", 0, 1, 1});
  REQUIRE(client.receive().has_value());
  client.send(wire::AllocBuffer{7, 4096});
  auto alloc = client.receive();
  REQUIRE(alloc.has_value());
  const auto buffer_id = std::get<wire::AllocReply>(*alloc).buffer_id;

  auto completion_of = [&](wire::Collective c) {
    client.send(c);
    auto m = client.receive();
    REQUIRE(m.has_value());
    REQUIRE(std::holds_alternative<wire::Completion>(*m));
    return std::get<wire::Completion>(*m).status;
  };
  wire::Collective c;
  c.request_id = 1;
  c.name = "t";
  c.count = 2048;  // 8 KiB of f32 in a 4 KiB buffer
  c.send = c.recv = {buffer_id, 0};
  CHECK(completion_of(c).message().find("outside buffer") != std::string::npos);
  c.count = 16;
  c.send = {buffer_id + 100, 0};
  CHECK(completion_of(c).message().find("unknown or was freed") != std::string::npos);
  c.send = {buffer_id, 0};
  c.recv = {buffer_id, 8};
  CHECK(completion_of(c).message().find("overlap") != std::string::npos);
  c.kind = wire::CollectiveKind::kBroadcast;
  c.root = 3;
  CHECK(completion_of(c).message().find("broadcast root 3") != std::string::npos);
  c.kind = wire::CollectiveKind::kAllreduce;
  c.recv = c.send;
  CHECK(completion_of(c).ok());  // and the connection still works
  client.send(wire::FreeBuffer{buffer_id});
  c.request_id = 2;
  CHECK(completion_of(c).message().find("unknown or was freed") != std::string::npos);
  CHECK(daemon.stop());
}

TEST_CASE("an allgather is in place only when send is the rank's own slot") {
  DaemonFixture daemon;
  RawClient client(daemon.socket());
  client.send(wire::Hello{wire::kProtocolVersion, "gather", 1, 2, 1});  // local rank 1 of 2
  REQUIRE(client.receive().has_value());
  client.send(wire::AllocBuffer{1, 4096});
  auto alloc = client.receive();
  REQUIRE(alloc.has_value());
  const auto id = std::get<wire::AllocReply>(*alloc).buffer_id;
  wire::Collective c;
  c.kind = wire::CollectiveKind::kAllgather;
  c.name = "g";
  c.dtype = DType::kF32;
  c.count = 4;
  c.send = c.recv = {id, 0};  // slot 0 belongs to rank 0: would be overwritten while read
  client.send(c);
  auto m = client.receive();
  REQUIRE(m.has_value());
  CHECK(std::get<wire::Completion>(*m).status.message().find("overlap") != std::string::npos);
  CHECK(daemon.stop());
}

TEST_CASE("the daemon keeps no descriptor per shared buffer") {
  DaemonFixture daemon;
  const std::string fd_dir = "/proc/" + std::to_string(daemon.pid()) + "/fd";
  auto count_fds = [&] {
    auto [rc, out] = run_command("ls " + fd_dir + " | wc -l");
    return rc == 0 ? std::stoi(out) : -1;
  };
  RawClient client(daemon.socket());
  client.send(wire::Hello{wire::kProtocolVersion, "fds", 0, 1, 1});
  REQUIRE(client.receive().has_value());
  const int before = count_fds();
  for (std::uint64_t i = 1; i <= 200; ++i) {
    client.send(wire::AllocBuffer{i, 4096});
    auto reply = client.receive();
    REQUIRE(reply.has_value());
    REQUIRE(std::get<wire::AllocReply>(*reply).status.ok());
  }
  CHECK(count_fds() < before + 10);
  CHECK(daemon.stop());
}

}  // namespace test_integration_robustness
