// The C++ wrapper: RAII, typed ranges, exceptions.
#include <doctest/doctest.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fake_daemon.h"
#include "ringsync/ringsync.hpp"

namespace test_client_wrapper {

using ringsync::Status;
using ringsync::testing::FakeDaemon;
namespace wire = ringsync::wire;

namespace {

ringsync::Config config_for(const FakeDaemon& daemon, int rank = 0, int size = 1) {
  ringsync::Config c;
  c.socket_path = daemon.path();
  c.job_id = "test";
  c.local_rank = rank;
  c.local_size = size;
  c.connect_timeout = std::chrono::milliseconds(2000);
  return c;
}

// Answers the next collective after writing `value` into the first element it receives.
template <typename T>
void answer(FakeDaemon& daemon, T value, Status status = Status::Ok()) {
  auto m = daemon.expect<wire::Collective>();
  if (m.recv.buffer_id != 0)
    reinterpret_cast<T*>(daemon.buffer(m.recv.buffer_id) + m.recv.offset)[0] = value;
  daemon.complete(m.request_id, std::move(status));
}

}  // namespace

static_assert(ringsync::dtype_of<float>::value == RS_F32);
static_assert(ringsync::dtype_of<ringsync::bfloat16>::value == RS_BF16);
static_assert(ringsync::Tensor<std::vector<std::int64_t>>);
static_assert(ringsync::Tensor<ringsync::SharedBuffer<double>>);
static_assert(!ringsync::Tensor<std::vector<char>>);

TEST_CASE("a failed connect throws ringsync::Error with the status") {
  ringsync::Config c;
  c.socket_path = ringsync::testing::temp_socket_path("nowhere");
  c.local_rank = 0;
  c.local_size = 1;
  c.connect_timeout = std::chrono::milliseconds(20);
  try {
    ringsync::Context ctx(c);
    FAIL("connected to nothing");
  } catch (const ringsync::Error& e) {
    CHECK(e.status() == RS_CLOSED);
    CHECK(std::string(e.what()).find("ringsync: closed: cannot connect") == 0);
  }
}

TEST_CASE("typed collectives on vectors, arrays and shared buffers") {
  FakeDaemon daemon;
  ringsync::Context ctx(config_for(daemon, 1, 2));
  CHECK(ctx.local_rank() == 1);
  CHECK(ctx.local_size() == 2);

  std::vector<float> in(4, 1.0f), out(4, 0.0f);
  std::thread t([&] { answer<float>(daemon, 8.0f); });
  ctx.allreduce("v", in, out, RS_SUM);
  t.join();
  CHECK(out[0] == 8.0f);

  auto shared = ctx.alloc<std::int64_t>(6);
  CHECK(shared.size() == 6);
  shared[0] = 5;
  t = std::thread([&] {
    auto m = daemon.expect<wire::Collective>();
    CHECK_FALSE(m.bounced);
    CHECK(m.dtype == ringsync::DType::kI64);
    CHECK(m.op == ringsync::ReduceOp::kMax);
    daemon.complete(m.request_id);
  });
  ctx.allreduce("s", shared, RS_MAX);
  t.join();

  std::array<std::int32_t, 2> mine{1, 2};
  std::vector<std::int32_t> all(4);
  t = std::thread([&] {
    auto m = daemon.expect<wire::Collective>();
    CHECK(m.kind == wire::CollectiveKind::kAllgather);
    CHECK(m.count == 2);
    daemon.complete(m.request_id);
  });
  ctx.allgather("g", mine, all);
  t.join();

  std::vector<std::int32_t> wrong(3);
  CHECK_THROWS_AS(ctx.allgather("g", mine, wrong), ringsync::Error);
  std::vector<float> three(3);
  CHECK_THROWS_AS(ctx.allreduce("v", in, three), ringsync::Error);
}

TEST_CASE("a failed collective throws from wait() with the daemon's status") {
  FakeDaemon daemon;
  ringsync::Context ctx(config_for(daemon));
  std::vector<double> v(3, 1.0);
  ringsync::Request r = ctx.allreduce_async("v", v);
  CHECK(r.pending());
  CHECK_FALSE(r.test());
  answer<double>(daemon, 0.0, Status::Timeout("rank 1 never submitted 'v'"));
  try {
    r.wait();
    FAIL("no error");
  } catch (const ringsync::Error& e) {
    CHECK(e.status() == RS_TIMEOUT);
    CHECK(std::string(e.what()) == "ringsync: timeout: rank 1 never submitted 'v'");
  }
  CHECK_FALSE(r.pending());
}

TEST_CASE("a Request destroyed while pending waits, so the result has landed afterwards") {
  FakeDaemon daemon;
  ringsync::Context ctx(config_for(daemon, 1, 2));
  std::vector<float> v(3, 1.0f);
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    answer<float>(daemon, 42.0f);
  });
  { ringsync::Request r = ctx.broadcast_async("b", v, 0); }
  CHECK(v[0] == 42.0f);
  t.join();
}

TEST_CASE("shared buffers keep the connection open after the Context is gone") {
  FakeDaemon daemon;
  std::optional<ringsync::SharedBuffer<float>> buffer;
  {
    ringsync::Context ctx(config_for(daemon));
    buffer = ctx.alloc<float>(16);
  }
  (*buffer)[3] = 1.5f;
  CHECK_FALSE(daemon.client_gone(std::chrono::milliseconds(0)));
  buffer.reset();  // frees the buffer over the still open connection, then closes it
  CHECK(daemon.expect<wire::FreeBuffer>().buffer_id != 0);
  CHECK(daemon.client_gone(std::chrono::seconds(5)));
}

}  // namespace test_client_wrapper
