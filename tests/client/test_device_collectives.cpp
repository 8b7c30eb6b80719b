// Collectives on GPU memory as the client sends them, with a fake CUDA driver
// (plain memory declared to be GPU allocations) and a fake daemon: one
// registration per allocation, device references by id and offset, the
// synchronization before submitting, refusals that leave host memory working.
#include <doctest/doctest.h>

#include <unistd.h>

#include <future>
#include <memory>
#include <numeric>
#include <vector>

#include "client/src/context.h"
#include "client/src/env.h"
#include "fake_daemon.h"
#include "fake_device_memory.h"

namespace test_client_device_collectives {

using ringsync::Status;
using ringsync::StatusCode;
using ringsync::client::CollectiveCall;
using ringsync::client::Context;
using ringsync::testing::FakeDaemon;
using ringsync::testing::f32_allreduce;
using ringsync::testing::FakeDeviceMemory;
namespace wire = ringsync::wire;

namespace {

struct Connected {
  explicit Connected(int rank = 0, int size = 1) {
    const rs_config_t c = daemon.config(rank, size);
    auto settings = ringsync::client::resolve_settings(&c, {}, getuid());
    REQUIRE(settings.ok());
    auto connected = Context::connect(*settings, device);
    REQUIRE(connected.ok());
    ctx = std::move(connected).value();
  }
  FakeDaemon daemon;
  std::shared_ptr<FakeDeviceMemory> device = std::make_shared<FakeDeviceMemory>();
  std::unique_ptr<Context> ctx;
};


using Submitted = ringsync::Result<std::shared_ptr<ringsync::client::RequestState>>;

// Submits on another thread: a registration waits for the daemon's reply.
std::future<Submitted> submit_async(Context& ctx, CollectiveCall call) {
  return std::async(std::launch::async, [&ctx, call] { return ctx.submit(call); });
}

Status wait(const Submitted& submitted) {
  REQUIRE(submitted.ok());
  auto status = (*submitted)->wait(std::chrono::seconds(10));
  REQUIRE(status.has_value());
  return *status;
}

}  // namespace

TEST_CASE("an allocation is registered once; collectives name it by id and offset") {
  Connected c;
  std::vector<float> gpu(256);  // "device memory"
  c.device->declare(gpu.data(), gpu.size() * sizeof(float), 3);

  auto first = submit_async(*c.ctx, f32_allreduce(gpu.data() + 16, gpu.data() + 64, 32));
  auto reg = c.daemon.expect<wire::RegisterDevice>();
  CHECK(reg.allocation_id != 0);
  CHECK(reg.bytes == gpu.size() * sizeof(float));
  CHECK(reg.device == 3);
  CHECK(reg.device_uuid[0] == std::byte{0xab});
  std::uint64_t driver_id = 0;
  std::memcpy(&driver_id, reg.ipc_handle.data(), sizeof(driver_id));
  CHECK(driver_id == 1);
  c.daemon.send(wire::RegisterDeviceReply{reg.request_id, Status::Ok(), reg.allocation_id});

  auto m = c.daemon.expect<wire::Collective>();
  CHECK(m.memory == wire::Memory::kDevice);
  CHECK_FALSE(m.bounced);
  CHECK(m.send.buffer_id == reg.allocation_id);
  CHECK(m.send.offset == 16 * sizeof(float));
  CHECK(m.recv.buffer_id == reg.allocation_id);
  CHECK(m.recv.offset == 64 * sizeof(float));
  CHECK(m.count == 32);
  CHECK(c.device->synchronizations == 1);
  CHECK(c.device->last_stream == nullptr);
  auto submitted = first.get();
  c.daemon.complete(m.request_id);
  CHECK(wait(submitted).ok());

  // Again, in place and from a chosen stream: no second registration.
  int stream_tag = 0;
  c.ctx->set_device_stream(&stream_tag);
  auto again = c.ctx->submit(f32_allreduce(gpu.data(), gpu.data(), 256));
  auto m2 = c.daemon.expect<wire::Collective>();
  CHECK(m2.memory == wire::Memory::kDevice);
  CHECK(m2.send.buffer_id == reg.allocation_id);
  CHECK(m2.send.offset == 0);
  CHECK(m2.recv.offset == 0);
  CHECK(c.device->last_stream == &stream_tag);
  CHECK(c.device->exports == 1);
  c.daemon.complete(m2.request_id);
  CHECK(wait(again).ok());
}

TEST_CASE("a refused registration fails the collective with the daemon's words; host memory "
          "still works") {
  Connected c;
  std::vector<float> gpu(64);
  c.device->declare(gpu.data(), gpu.size() * sizeof(float));
  auto pending = submit_async(*c.ctx, f32_allreduce(gpu.data(), gpu.data(), 64));
  auto reg = c.daemon.expect<wire::RegisterDevice>();
  c.daemon.send(wire::RegisterDeviceReply{
      reg.request_id,
      Status::InvalidArgument("ringsyncd cannot use GPU memory: built without CUDA"),
      reg.allocation_id});
  auto refused = pending.get();
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK(refused.status().message().find("built without CUDA") != std::string::npos);
  CHECK(c.device->synchronizations == 0);

  std::vector<float> host(64, 1.0f), out(64);
  auto staged = c.ctx->submit(f32_allreduce(host.data(), out.data(), 64));
  auto m = c.daemon.expect<wire::Collective>();
  CHECK(m.memory == wire::Memory::kHost);
  CHECK(m.bounced);
  c.daemon.complete(m.request_id);
  CHECK(wait(staged).ok());

  // The next GPU collective asks again (the daemon may have been restarted with CUDA).
  auto retry = submit_async(*c.ctx, f32_allreduce(gpu.data(), gpu.data(), 64));
  auto reg2 = c.daemon.expect<wire::RegisterDevice>();
  c.daemon.send(wire::RegisterDeviceReply{reg2.request_id, Status::InvalidArgument("still no"),
                                          reg2.allocation_id});
  CHECK(retry.get().status().message() == "still no");
}

TEST_CASE("host and GPU buffers in one call, or a range past the allocation, are refused "
          "before anything is sent") {
  Connected c;
  std::vector<float> gpu(64), host(64);
  c.device->declare(gpu.data(), gpu.size() * sizeof(float));
  auto mixed = c.ctx->submit(f32_allreduce(host.data(), gpu.data(), 64));
  REQUIRE_FALSE(mixed.ok());
  CHECK(mixed.status().code() == StatusCode::kInvalidArgument);
  CHECK(mixed.status().message().find("recvbuf is GPU memory but sendbuf is host memory") !=
        std::string::npos);
  auto mixed2 = c.ctx->submit(f32_allreduce(gpu.data(), host.data(), 64));
  CHECK(mixed2.status().message().find("sendbuf is GPU memory but recvbuf is host memory") !=
        std::string::npos);
  auto past = c.ctx->submit(f32_allreduce(gpu.data() + 32, gpu.data() + 32, 64));
  REQUIRE_FALSE(past.ok());
  CHECK(past.status().message().find("run past the end of their GPU allocation") !=
        std::string::npos);
  c.device->fail_locate_with(Status::InvalidArgument("VMM memory"));
  auto vmm = c.ctx->submit(f32_allreduce(gpu.data(), gpu.data(), 8));
  CHECK(vmm.status().message().find("VMM memory") != std::string::npos);
  CHECK_FALSE(c.daemon.next(std::chrono::milliseconds(200)).has_value());
}

TEST_CASE("a non-root broadcast registers only its receive buffer") {
  Connected c(1, 2);
  std::vector<double> gpu(10);
  c.device->declare(gpu.data(), gpu.size() * sizeof(double));
  CollectiveCall call;
  call.kind = wire::CollectiveKind::kBroadcast;
  call.name = "weights";
  call.send = nullptr;
  call.recv = gpu.data() + 2;
  call.count = 8;
  call.dtype = RS_F64;
  call.root = 0;
  auto pending = submit_async(*c.ctx, call);
  auto reg = c.daemon.expect<wire::RegisterDevice>();
  c.daemon.send(wire::RegisterDeviceReply{reg.request_id, Status::Ok(), reg.allocation_id});
  auto m = c.daemon.expect<wire::Collective>();
  CHECK(m.memory == wire::Memory::kDevice);
  CHECK(m.send.buffer_id == 0);
  CHECK(m.recv.buffer_id == reg.allocation_id);
  CHECK(m.recv.offset == 2 * sizeof(double));
  auto submitted = pending.get();
  c.daemon.complete(m.request_id, Status::PeerLost("gone"));
  CHECK(wait(submitted).code() == StatusCode::kPeerLost);
}

TEST_CASE("memory freed and allocated again at the same address is registered anew") {
  Connected c;
  std::vector<float> gpu(64);
  c.device->declare(gpu.data(), gpu.size() * sizeof(float));
  auto first = submit_async(*c.ctx, f32_allreduce(gpu.data(), gpu.data(), 64));
  auto reg = c.daemon.expect<wire::RegisterDevice>();
  c.daemon.send(wire::RegisterDeviceReply{reg.request_id, Status::Ok(), reg.allocation_id});
  auto m = c.daemon.expect<wire::Collective>();
  auto submitted = first.get();
  c.daemon.complete(m.request_id);
  CHECK(wait(submitted).ok());

  c.device->declare(gpu.data(), gpu.size() * sizeof(float));  // a new driver id
  auto second = submit_async(*c.ctx, f32_allreduce(gpu.data(), gpu.data(), 64));
  auto gone = c.daemon.expect<wire::UnregisterDevice>();
  CHECK(gone.allocation_id == reg.allocation_id);
  auto reg2 = c.daemon.expect<wire::RegisterDevice>();
  CHECK(reg2.allocation_id != reg.allocation_id);
  c.daemon.send(wire::RegisterDeviceReply{reg2.request_id, Status::Ok(), reg2.allocation_id});
  auto m2 = c.daemon.expect<wire::Collective>();
  CHECK(m2.recv.buffer_id == reg2.allocation_id);
  auto submitted2 = second.get();
  c.daemon.complete(m2.request_id);
  CHECK(wait(submitted2).ok());
}

TEST_CASE("explicit registration and unregistration") {
  Connected c;
  std::vector<float> gpu(32), host(32);
  c.device->declare(gpu.data(), gpu.size() * sizeof(float));

  auto not_gpu = c.ctx->register_device(host.data(), 4);
  CHECK(not_gpu.code() == StatusCode::kInvalidArgument);
  CHECK(not_gpu.message().find("not GPU memory") != std::string::npos);
  CHECK(c.ctx->register_device(nullptr, 4).code() == StatusCode::kInvalidArgument);
  CHECK(c.ctx->register_device(gpu.data() + 8, 1000).code() == StatusCode::kInvalidArgument);

  auto registering = std::async(std::launch::async,
                                [&] { return c.ctx->register_device(gpu.data() + 8, 16); });
  auto reg = c.daemon.expect<wire::RegisterDevice>();
  c.daemon.send(wire::RegisterDeviceReply{reg.request_id, Status::Ok(), reg.allocation_id});
  CHECK(registering.get().ok());
  CHECK(c.ctx->register_device(gpu.data(), 4).ok());  // registered already: no round trip

  // A pending request keeps it registered.
  auto pending = c.ctx->submit(f32_allreduce(gpu.data(), gpu.data(), 32));
  auto m = c.daemon.expect<wire::Collective>();
  CHECK(c.ctx->unregister_device(gpu.data()).message().find("pending") != std::string::npos);
  c.daemon.complete(m.request_id);
  CHECK(wait(pending).ok());
  CHECK(c.ctx->unregister_device(gpu.data() + 5).ok());
  CHECK(c.daemon.expect<wire::UnregisterDevice>().allocation_id == reg.allocation_id);
  CHECK(c.ctx->unregister_device(gpu.data()).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("a registration cut off by the daemon going away fails with the connection") {
  Connected c;
  std::vector<float> gpu(16);
  c.device->declare(gpu.data(), gpu.size() * sizeof(float));
  auto pending = submit_async(*c.ctx, f32_allreduce(gpu.data(), gpu.data(), 16));
  c.daemon.expect<wire::RegisterDevice>();
  c.daemon.drop_client();
  auto failed = pending.get();
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().code() == StatusCode::kClosed);
}

TEST_CASE("an answer to a registration never sent closes the connection at the client's next call") {
  Connected c;
  // Written into the client's socket before send() returns: the next call reads it.
  c.daemon.send(wire::RegisterDeviceReply{12345, Status::Ok(), 1});
  std::vector<float> host(4, 1.0f);
  auto next = c.ctx->submit(f32_allreduce(host.data(), host.data(), 4));
  REQUIRE_FALSE(next.ok());
  CHECK(next.status().code() == StatusCode::kProtocolError);
  CHECK(next.status().message().find("registration") != std::string::npos);
  CHECK(c.daemon.client_gone(std::chrono::seconds(10)));
}

}  // namespace test_client_device_collectives
