// The C ABI's small functions and its argument checks, which never reach the daemon.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <variant>

#include "fake_daemon.h"
#include "ringsync/ringsync.h"

namespace test_client_c_api {

using ringsync::testing::FakeDaemon;
namespace wire = ringsync::wire;

namespace {
bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}
}  // namespace

TEST_CASE("every status has a name") {
  CHECK(std::string(rs_status_string(RS_SUCCESS)) == "success");
  CHECK(std::string(rs_status_string(RS_INVALID_ARGUMENT)) == "invalid argument");
  CHECK(std::string(rs_status_string(RS_MISMATCH)) == "mismatch");
  CHECK(std::string(rs_status_string(RS_PEER_LOST)) == "peer lost");
  CHECK(std::string(rs_status_string(RS_TIMEOUT)) == "timeout");
  CHECK(std::string(rs_status_string(RS_PROTOCOL_ERROR)) == "protocol error");
  CHECK(std::string(rs_status_string(RS_OUT_OF_MEMORY)) == "out of memory");
  CHECK(std::string(rs_status_string(RS_CLOSED)) == "closed");
  CHECK(std::string(rs_status_string(RS_INTERNAL)) == "internal error");
  CHECK(std::string(rs_status_string(RS_IN_PROGRESS)) == "in progress");
  CHECK(std::string(rs_status_string(static_cast<rs_status_t>(77))) == "unknown status");
}

TEST_CASE("dtype sizes, and 0 for an invalid dtype") {
  CHECK(rs_dtype_size(RS_F32) == 4);
  CHECK(rs_dtype_size(RS_F64) == 8);
  CHECK(rs_dtype_size(RS_F16) == 2);
  CHECK(rs_dtype_size(RS_BF16) == 2);
  CHECK(rs_dtype_size(RS_I32) == 4);
  CHECK(rs_dtype_size(RS_I64) == 8);
  CHECK(rs_dtype_size(RS_U8) == 1);
  CHECK(rs_dtype_size(static_cast<rs_dtype_t>(7)) == 0);
  CHECK(rs_dtype_size(static_cast<rs_dtype_t>(-1)) == 0);
}

TEST_CASE("rs_config_init sets the documented defaults") {
  rs_config_t c;
  c.socket_path = "x";
  c.job_id = "y";
  c.local_rank = 3;
  c.local_size = 4;
  c.connect_timeout_ms = 5;
  rs_config_init(&c);
  CHECK(c.socket_path == nullptr);
  CHECK(c.job_id == nullptr);
  CHECK(c.local_rank == -1);
  CHECK(c.local_size == -1);
  CHECK(c.connect_timeout_ms == 0);
  rs_config_init(nullptr);  // harmless
}

TEST_CASE("NULL handles are refused, not dereferenced") {
  rs_request_t* r = nullptr;
  void* p = nullptr;
  CHECK(rs_connect(nullptr, nullptr) == RS_INVALID_ARGUMENT);
  CHECK(contains(rs_last_error(), "rs_connect: out is NULL"));
  CHECK(rs_allreduce_async(nullptr, "w", &p, &p, 1, RS_F32, RS_SUM, &r) == RS_INVALID_ARGUMENT);
  CHECK(contains(rs_last_error(), "rs_allreduce_async: ctx is NULL"));
  CHECK(rs_alloc(nullptr, 8, &p) == RS_INVALID_ARGUMENT);
  CHECK(rs_wait(nullptr) == RS_INVALID_ARGUMENT);
  CHECK(rs_wait_timeout(nullptr, 5) == RS_INVALID_ARGUMENT);
  CHECK(rs_test(nullptr) == RS_INVALID_ARGUMENT);
  CHECK(rs_barrier(nullptr, "b") == RS_INVALID_ARGUMENT);
  CHECK(rs_local_rank(nullptr) == -1);
  CHECK(rs_local_size(nullptr) == -1);
  CHECK(rs_free(nullptr, nullptr) == RS_SUCCESS);
  rs_request_free(nullptr);
  rs_disconnect(nullptr);
}

TEST_CASE("bad collective arguments fail without contacting the daemon") {
  FakeDaemon daemon;
  const rs_config_t c = daemon.config(1, 3);
  rs_context_t* ctx = nullptr;
  REQUIRE(rs_connect(&c, &ctx) == RS_SUCCESS);
  float buf[16] = {};
  rs_request_t* r = nullptr;

  CHECK(rs_allreduce_async(ctx, nullptr, buf, buf, 4, RS_F32, RS_SUM, &r) == RS_INVALID_ARGUMENT);
  CHECK(contains(rs_last_error(), "the tensor name is NULL"));
  CHECK(r == nullptr);
  CHECK(rs_allreduce(ctx, "w", buf, buf, 4, static_cast<rs_dtype_t>(9), RS_SUM) ==
        RS_INVALID_ARGUMENT);
  CHECK(contains(rs_last_error(), "unknown dtype 9"));
  CHECK(rs_allreduce(ctx, "w", buf, buf, 4, RS_F32, static_cast<rs_op_t>(-3)) ==
        RS_INVALID_ARGUMENT);
  CHECK(contains(rs_last_error(), "unknown reduce op -3"));
  CHECK(rs_broadcast(ctx, "w", buf, buf, 4, RS_F32, 3) == RS_INVALID_ARGUMENT);
  CHECK(contains(rs_last_error(), "root 3 is not a local rank; ranks are 0..2"));
  CHECK(rs_allreduce(ctx, "w", nullptr, buf, 4, RS_F32, RS_SUM) == RS_INVALID_ARGUMENT);
  CHECK(contains(rs_last_error(), "sendbuf is NULL but count is 4"));
  CHECK(rs_allgather(ctx, "w", buf, nullptr, 4, RS_F32) == RS_INVALID_ARGUMENT);
  CHECK(contains(rs_last_error(), "recvbuf is NULL but count is 4"));
  CHECK(rs_allreduce(ctx, "w", buf, buf, std::numeric_limits<size_t>::max() / 2, RS_F64, RS_SUM) ==
        RS_INVALID_ARGUMENT);
  CHECK(contains(rs_last_error(), "overflow the address space"));
  CHECK(rs_allreduce_async(ctx, "w", buf, buf, 4, RS_F32, RS_SUM, nullptr) == RS_INVALID_ARGUMENT);
  CHECK(rs_alloc(ctx, 0, reinterpret_cast<void**>(&r)) == RS_INVALID_ARGUMENT);
  CHECK(contains(rs_last_error(), "0 bytes requested"));
  CHECK(rs_free(ctx, buf) == RS_INVALID_ARGUMENT);
  CHECK(contains(rs_last_error(), "is not a buffer from rs_alloc()"));

  // The first thing the daemon hears is this barrier.
  REQUIRE(rs_barrier_async(ctx, "after", &r) == RS_SUCCESS);
  auto barrier = daemon.expect<wire::Collective>();
  CHECK(barrier.kind == wire::CollectiveKind::kBarrier);
  CHECK(barrier.name == "after");
  CHECK(barrier.send.buffer_id == 0);
  CHECK(barrier.recv.buffer_id == 0);
  daemon.complete(barrier.request_id);
  CHECK(rs_wait(r) == RS_SUCCESS);
  rs_disconnect(ctx);
}

TEST_CASE("rs_last_error is per thread") {
  CHECK(rs_wait(nullptr) == RS_INVALID_ARGUMENT);
  std::string other;
  std::thread t([&] {
    other = rs_last_error();
    CHECK(rs_alloc(nullptr, 1, nullptr) == RS_INVALID_ARGUMENT);
  });
  t.join();
  CHECK(other.empty());
  CHECK(contains(rs_last_error(), "rs_wait: request is NULL"));
}

}  // namespace test_client_c_api
