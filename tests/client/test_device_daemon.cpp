// GPU buffers against a real ringsyncd that cannot use a GPU (built without
// CUDA, or no device): the client, with a fake driver calling some memory GPU
// memory, gets the daemon's reason; the connection keeps serving host memory.
// And the real driver lookup in a process without libcuda: all host memory.
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "client/src/context.h"
#include "client/src/env.h"
#include "common/subprocess.h"
#include "fake_device_memory.h"
#include "real_daemon.h"
#include "ringsync/ringsync.h"

namespace test_client_device_daemon {

using ringsync::Child;
using ringsync::Status;
using ringsync::StatusCode;
using ringsync::client::CollectiveCall;
using ringsync::client::Context;
using ringsync::testing::f32_allreduce;
using ringsync::testing::FakeDeviceMemory;
using ringsync::testing::RealDaemon;
namespace wire = ringsync::wire;

namespace {

Status run(Context& ctx, const CollectiveCall& call) {
  auto submitted = ctx.submit(call);
  if (!submitted.ok()) return submitted.status();
  auto status = (*submitted)->wait(std::chrono::seconds(30));
  REQUIRE(status.has_value());
  return *status;
}

}  // namespace

TEST_CASE("a daemon without GPU support refuses GPU memory with its reason and keeps serving "
          "host memory") {
  RealDaemon daemon;
  const rs_config_t c = daemon.config();
  auto settings = ringsync::client::resolve_settings(&c, {}, getuid());
  REQUIRE(settings.ok());
  auto device = std::make_shared<FakeDeviceMemory>();
  auto connected = Context::connect(*settings, device);
  REQUIRE(connected.ok());
  Context& ctx = **connected;

  std::vector<float> gpu(128, 1.0f);
  device->declare(gpu.data(), gpu.size() * sizeof(float));
  for (int attempt = 0; attempt < 2; ++attempt) {
    Status refused = run(ctx, f32_allreduce(gpu.data(), gpu.data(), gpu.size(), "grad"));
    CHECK(refused.code() == StatusCode::kInvalidArgument);
    CHECK(refused.message().find("ringsyncd cannot use GPU memory") != std::string::npos);
    MESSAGE("refused with: " << refused.message());
  }
  Status explicit_refusal = ctx.register_device(gpu.data(), 16);
  CHECK(explicit_refusal.message().find("ringsyncd cannot use GPU memory") != std::string::npos);

  std::vector<float> host(1000), out(1000);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i);
  CHECK(run(ctx, f32_allreduce(host.data(), out.data(), host.size(), "host")).ok());
  CHECK(out[999] == 999.0f);
  CHECK(daemon.running());
}

TEST_CASE("without a CUDA driver in the process every pointer is host memory") {
  RealDaemon daemon;
  std::vector<float> data(256, 2.0f), out(256);
  CHECK(rs_is_device_pointer(data.data()) == 0);
  CHECK(rs_is_device_pointer(nullptr) == 0);

  const rs_config_t c = daemon.config();
  rs_context_t* ctx = nullptr;
  REQUIRE(rs_connect(&c, &ctx) == RS_SUCCESS);
  CHECK(rs_allreduce(ctx, "plain", data.data(), out.data(), data.size(), RS_F32, RS_SUM) ==
        RS_SUCCESS);
  CHECK(out[0] == 2.0f);
  CHECK(rs_register_device(ctx, data.data(), 16) == RS_INVALID_ARGUMENT);
  CHECK(std::string(rs_last_error()).find("not GPU memory") != std::string::npos);
  CHECK(rs_unregister_device(ctx, data.data()) == RS_INVALID_ARGUMENT);
  CHECK(rs_set_device_stream(ctx, nullptr) == RS_SUCCESS);
  CHECK(rs_set_device_stream(nullptr, nullptr) == RS_INVALID_ARGUMENT);
  CHECK(rs_register_device(nullptr, data.data(), 16) == RS_INVALID_ARGUMENT);
  rs_disconnect(ctx);
}

}  // namespace test_client_device_daemon
