// GPU registration against a real ringsyncd on a machine where it cannot use
// a GPU (CI: no GPU; builds without CUDA): clear refusals, protocol checks,
// malformed frames; the daemon never crashes and keeps serving.
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "cluster_fixture.h"
#include "common/wire.h"
#include "daemon_fixture.h"
#include "raw_client.h"

namespace test_integration_device_registration {

using namespace ringsync;
using namespace ringsync::test;

namespace {

// Raw frames; a slow first GPU registration may take a while to be answered.
class Raw : public RawClient {
 public:
  explicit Raw(const std::string& path) : RawClient(path, 20) { REQUIRE(connected()); }
};

wire::RegisterDevice registration(std::uint64_t request_id, std::uint32_t id,
                                  std::uint64_t bytes = 1 << 20) {
  wire::RegisterDevice r;
  r.request_id = request_id;
  r.allocation_id = id;
  r.bytes = bytes;
  r.ipc_handle[0] = std::byte{1};
  return r;
}

wire::Collective device_allreduce(std::uint64_t id, const std::string& name, std::uint64_t count,
                                  std::uint32_t allocation) {
  wire::Collective c;
  c.request_id = id;
  c.kind = wire::CollectiveKind::kAllreduce;
  c.name = name;
  c.count = count;
  c.memory = wire::Memory::kDevice;
  c.send = {allocation, 0};
  c.recv = {allocation, 0};
  return c;
}

}  // namespace

TEST_CASE("registering GPU memory on a daemon without a usable GPU fails with the reason; the "
          "connection keeps working") {
  DaemonFixture daemon;
  Raw client(daemon.socket());
  client.hello("nogpu");
  client.send(registration(11, 1));
  auto reply = client.expect<wire::RegisterDeviceReply>();
  CHECK(reply.request_id == 11);
  CHECK(reply.allocation_id == 1);
  CHECK(reply.status.code() == StatusCode::kInvalidArgument);
  CHECK(reply.status.message().find("ringsyncd cannot use GPU memory: ") == 0);
  MESSAGE("refusal: " << reply.status.message());

  // Nothing was kept: the same id is refused for the same reason, not as a duplicate.
  client.send(registration(12, 1));
  auto again = client.expect<wire::RegisterDeviceReply>();
  CHECK(again.status.message() == reply.status.message());

  client.expect_serves(13);
  client.send(wire::AllocBuffer{14, 4096});
  auto alloc = client.expect<wire::AllocReply>();
  CHECK(alloc.status.ok());
  client.expect_serves(15);
  CHECK(daemon.running());
}

TEST_CASE("bad registrations, unknown allocations and unregistering the unknown get clear errors") {
  DaemonFixture daemon;
  Raw client(daemon.socket());
  client.hello("checks");

  client.send(registration(1, 0));
  auto zero = client.expect<wire::RegisterDeviceReply>();
  CHECK(zero.status.code() == StatusCode::kInvalidArgument);
  CHECK(zero.status.message().find("id 0 is reserved") != std::string::npos);
  client.send(registration(2, 5, 0));
  CHECK(client.expect<wire::RegisterDeviceReply>().status.message().find("0 bytes") !=
        std::string::npos);
  auto negative = registration(3, 6);
  negative.device = -2;
  client.send(negative);
  CHECK(client.expect<wire::RegisterDeviceReply>().status.message().find("device -2") !=
        std::string::npos);

  client.send(device_allreduce(4, "unknown", 16, 7));
  auto unknown = client.expect<wire::Completion>();
  CHECK(unknown.request_id == 4);
  CHECK(unknown.status.code() == StatusCode::kInvalidArgument);
  CHECK(unknown.status.message().find("GPU allocation 7 is unknown") != std::string::npos);

  client.send(device_allreduce(5, "missing", 16, 0));
  CHECK(client.expect<wire::Completion>().status.message().find("GPU buffer is missing") !=
        std::string::npos);

  client.send(wire::UnregisterDevice{9});  // no reply; a warning in the log
  client.expect_serves(6);
  CHECK(daemon.log().find("unregistered GPU allocation 9, which is unknown") != std::string::npos);
  CHECK(daemon.running());
}

TEST_CASE("local ranks passing host and GPU memory for one tensor get a mismatch") {
  DaemonFixture daemon;
  Raw rank0(daemon.socket()), rank1(daemon.socket());
  rank0.hello("mixed", 0, 2);
  rank1.hello("mixed", 1, 2);
  // Zero elements: no buffers to resolve, so the memory kinds meet in the agreement check.
  rank0.send(device_allreduce(1, "t", 0, 0));
  wire::Collective host = device_allreduce(1, "t", 0, 0);
  host.memory = wire::Memory::kHost;
  rank1.send(host);
  for (Raw* r : {&rank0, &rank1}) {
    auto done = r->expect<wire::Completion>();
    CHECK(done.status.code() == StatusCode::kMismatch);
    CHECK(done.status.message().find("memory: local rank 0 says device, local rank 1 says host") !=
          std::string::npos);
  }
  // Both on the GPU with zero elements: nothing to move, success.
  rank0.send(device_allreduce(2, "u", 0, 0));
  rank1.send(device_allreduce(2, "u", 0, 0));
  CHECK(rank0.expect<wire::Completion>().status.ok());
  CHECK(rank1.expect<wire::Completion>().status.ok());
}

TEST_CASE("malformed, oversized and out-of-order registration frames close only that connection") {
  DaemonFixture daemon;
  {  // Before the hello.
    Raw raw(daemon.socket());
    raw.send(registration(1, 1));
    auto error = raw.expect<wire::Completion>();
    CHECK(error.request_id == 0);
    CHECK(error.status.message().find("first message") != std::string::npos);
    CHECK(raw.closed_by_peer());
  }
  {  // A reply message from a client.
    Raw raw(daemon.socket());
    raw.hello("replies");
    raw.send(wire::RegisterDeviceReply{1, Status::Ok(), 1});
    CHECK(raw.expect<wire::Completion>().status.code() == StatusCode::kProtocolError);
    CHECK(raw.closed_by_peer());
  }
  {  // An IPC handle of the wrong size.
    Raw raw(daemon.socket());
    raw.hello("short-handle");
    auto frame = wire::encode(registration(1, 1));
    // Patch the handle's length prefix (64, little endian) to 10: the verifier
    // still accepts the frame, the decoder must not.
    bool patched = false;
    for (std::size_t i = wire::kFrameHeaderBytes; i + 4 <= frame.size() && !patched; ++i)
      if (frame[i] == 64 && frame[i + 1] == 0 && frame[i + 2] == 0 && frame[i + 3] == 0 &&
          i + 4 < frame.size() && frame[i + 4] == 1) {
        frame[i] = 10;
        patched = true;
      }
    REQUIRE(patched);
    raw.send_bytes(frame);
    auto error = raw.expect<wire::Completion>();
    CHECK(error.status.code() == StatusCode::kProtocolError);
    CHECK(error.status.message().find("IPC handle of 10 bytes") != std::string::npos);
    CHECK(raw.closed_by_peer());
  }
  {  // Oversized: a length prefix far above the frame limit.
    Raw raw(daemon.socket());
    raw.hello("huge");
    auto frame = wire::encode(registration(1, 1));
    frame[0] = 0xff;
    frame[1] = 0xff;
    frame[2] = 0xff;
    frame[3] = 0x0f;
    raw.send_bytes(frame);
    CHECK(raw.expect<wire::Completion>().status.message().find("exceeds the limit") !=
          std::string::npos);
    CHECK(raw.closed_by_peer());
  }
  std::mt19937 rng(4242);
  const auto good = wire::encode(registration(1, 1));
  for (int round = 0; round < 30; ++round) {  // Mutated registrations.
    Raw raw(daemon.socket());
    raw.hello("mutant-" + std::to_string(round));
    auto frame = good;
    for (int flips = 1 + static_cast<int>(rng() % 6); flips > 0; --flips)
      frame[wire::kFrameHeaderBytes + rng() % (frame.size() - wire::kFrameHeaderBytes)] =
          static_cast<std::uint8_t>(rng());
    raw.send_bytes(frame);
    // Whatever the daemon made of it (a reply, an error, a close), it must still serve.
    raw.send(wire::Collective{});  // an unnamed collective: closes if still open
  }
  Raw healthy(daemon.socket());
  healthy.hello("after");
  healthy.expect_serves(1);
  CHECK(daemon.running());
}

TEST_CASE("an empty GPU allreduce of a two-node job completes on daemons without a GPU") {
  // Nothing to stage, so it goes around the ring as host data; GPU-less daemons serve it.
  ClusterFixture cluster(ClusterOptions{.nodes = 2, .local_size = 1});
  Raw node0(cluster.socket(0)), node1(cluster.socket(1));
  node0.hello(cluster.job_id(), 0, 1);
  node1.hello(cluster.job_id(), 0, 1);
  node0.send(device_allreduce(1, "empty", 0, 0));
  node1.send(device_allreduce(1, "empty", 0, 0));
  for (Raw* r : {&node0, &node1}) {
    auto done = r->expect<wire::Completion>();
    CHECK(done.request_id == 1);
    CHECK_MESSAGE(done.status.ok(), done.status.to_string(), "\n", cluster.logs());
  }
}

}  // namespace test_integration_device_registration
