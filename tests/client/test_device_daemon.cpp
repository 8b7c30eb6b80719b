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
#include "ringsync/ringsync.h"

using ringsync::Child;
using ringsync::Status;
using ringsync::StatusCode;
using ringsync::client::CollectiveCall;
using ringsync::client::Context;
using ringsync::testing::f32_allreduce;
using ringsync::testing::FakeDeviceMemory;
namespace wire = ringsync::wire;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A ringsyncd on a private socket, for one test.
class RealDaemon {
 public:
  RealDaemon() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp ? tmp : "/tmp") + "/ringsync-device-XXXXXX";
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    dir_ = pattern;
    socket_ = dir_ + "/d.sock";
    log_ = dir_ + "/d.log";
    const std::string ready = dir_ + "/ready";
    auto child = Child::start({std::string(RINGSYNC_BIN_DIR) + "/ringsyncd", "--socket", socket_,
                               "--metrics-address", "off", "--ready-file", ready, "--log-level",
                               "debug"},
                              {}, log_);
    REQUIRE(child.ok());
    child_ = std::move(child).value();
    for (int i = 0; i < 3000 && slurp(ready).find("socket=") == std::string::npos; ++i) {
      REQUIRE(child_.running());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    REQUIRE(slurp(ready).find("socket=") != std::string::npos);
  }
  ~RealDaemon() {
    child_.signal(SIGTERM);
    child_.wait(std::chrono::seconds(20));
    std::remove(log_.c_str());
    std::remove((dir_ + "/ready").c_str());
    std::remove(socket_.c_str());
    ::rmdir(dir_.c_str());
  }
  bool running() { return child_.running(); }
  std::string log() const { return slurp(log_); }

  rs_config_t config() const {
    rs_config_t c;
    rs_config_init(&c);
    c.socket_path = socket_.c_str();
    c.job_id = "device-test";
    c.local_rank = 0;
    c.local_size = 1;
    c.connect_timeout_ms = 10000;
    return c;
  }

 private:
  std::string dir_, socket_, log_;
  Child child_;
};


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
