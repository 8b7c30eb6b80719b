// How requests end when the connection does: the daemon leaves, the trainer
// disconnects, the daemon misbehaves; and buffers in use cannot be freed.
#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

#include "fake_daemon.h"
#include "ringsync/ringsync.h"

namespace test_client_lifecycle {

using ringsync::Status;
using ringsync::testing::FakeDaemon;
namespace wire = ringsync::wire;

namespace {
bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}
}  // namespace

TEST_CASE("when the daemon goes away, pending requests end with RS_CLOSED and so does all else") {
  FakeDaemon daemon;
  const rs_config_t c = daemon.config();
  rs_context_t* ctx = nullptr;
  REQUIRE(rs_connect(&c, &ctx) == RS_SUCCESS);
  std::vector<float> v(10, 1.0f);
  rs_request_t* r = nullptr;
  REQUIRE(rs_allreduce_async(ctx, "w", v.data(), v.data(), 10, RS_F32, RS_SUM, &r) == RS_SUCCESS);
  daemon.expect<wire::Collective>();
  daemon.drop_client();
  CHECK(rs_wait(r) == RS_CLOSED);
  CHECK(contains(rs_last_error(), "closed the connection"));
  CHECK(v[0] == 1.0f);

  CHECK(rs_allreduce(ctx, "w", v.data(), v.data(), 10, RS_F32, RS_SUM) == RS_CLOSED);
  void* p = nullptr;
  CHECK(rs_alloc(ctx, 100, &p) == RS_CLOSED);
  rs_disconnect(ctx);
}

TEST_CASE("rs_disconnect completes pending requests with RS_CLOSED; their handles stay valid") {
  FakeDaemon daemon;
  const rs_config_t c = daemon.config();
  rs_context_t* ctx = nullptr;
  REQUIRE(rs_connect(&c, &ctx) == RS_SUCCESS);
  std::vector<float> v(10, 1.0f);
  rs_request_t* waited = nullptr;
  rs_request_t* tested = nullptr;
  rs_request_t* dropped = nullptr;
  REQUIRE(rs_allreduce_async(ctx, "a", v.data(), v.data(), 10, RS_F32, RS_SUM, &waited) ==
          RS_SUCCESS);
  REQUIRE(rs_barrier_async(ctx, "b", &tested) == RS_SUCCESS);
  REQUIRE(rs_barrier_async(ctx, "c", &dropped) == RS_SUCCESS);
  rs_disconnect(ctx);
  CHECK(rs_wait(waited) == RS_CLOSED);
  CHECK(contains(rs_last_error(), "rs_disconnect"));
  CHECK(rs_test(tested) == RS_CLOSED);
  rs_request_free(dropped);
}

TEST_CASE("a buffer used by a pending request cannot be freed until it completes") {
  FakeDaemon daemon;
  const rs_config_t c = daemon.config();
  rs_context_t* ctx = nullptr;
  REQUIRE(rs_connect(&c, &ctx) == RS_SUCCESS);
  void* mem = nullptr;
  REQUIRE(rs_alloc(ctx, 4096, &mem) == RS_SUCCESS);
  rs_request_t* r = nullptr;
  REQUIRE(rs_allreduce_async(ctx, "w", mem, mem, 16, RS_I32, RS_MAX, &r) == RS_SUCCESS);
  auto m = daemon.expect<wire::Collective>();
  CHECK(rs_free(ctx, mem) == RS_INVALID_ARGUMENT);
  CHECK(contains(rs_last_error(), "used by 1 pending request(s)"));
  CHECK(rs_free(ctx, static_cast<char*>(mem) + 4) == RS_INVALID_ARGUMENT);
  CHECK(contains(rs_last_error(), "points inside the shared buffer"));
  daemon.complete(m.request_id);
  REQUIRE(rs_wait(r) == RS_SUCCESS);
  CHECK(rs_free(ctx, mem) == RS_SUCCESS);
  CHECK(daemon.expect<wire::FreeBuffer>().buffer_id == m.send.buffer_id);
  rs_disconnect(ctx);
}

TEST_CASE("an abandoned staged request does not write into the caller's memory") {
  FakeDaemon daemon;
  const rs_config_t c = daemon.config();
  rs_context_t* ctx = nullptr;
  REQUIRE(rs_connect(&c, &ctx) == RS_SUCCESS);
  std::vector<float> v(10, 1.0f);
  rs_request_t* r = nullptr;
  REQUIRE(rs_allreduce_async(ctx, "w", v.data(), v.data(), 10, RS_F32, RS_SUM, &r) == RS_SUCCESS);
  auto m = daemon.expect<wire::Collective>();
  rs_request_free(r);
  reinterpret_cast<float*>(daemon.buffer(m.recv.buffer_id))[0] = 5.0f;
  daemon.complete(m.request_id);
  // A later collective completes only after the abandoned one was handled.
  REQUIRE(rs_barrier_async(ctx, "after", &r) == RS_SUCCESS);
  daemon.complete(daemon.expect<wire::Collective>().request_id);
  REQUIRE(rs_wait(r) == RS_SUCCESS);
  CHECK(v[0] == 1.0f);
  rs_disconnect(ctx);
}

TEST_CASE("a completion for a request never made is a protocol error that ends the connection") {
  FakeDaemon daemon;
  const rs_config_t c = daemon.config();
  rs_context_t* ctx = nullptr;
  REQUIRE(rs_connect(&c, &ctx) == RS_SUCCESS);
  rs_request_t* r = nullptr;
  REQUIRE(rs_barrier_async(ctx, "b", &r) == RS_SUCCESS);
  auto m = daemon.expect<wire::Collective>();
  daemon.complete(m.request_id + 1000);
  CHECK(rs_wait(r) == RS_PROTOCOL_ERROR);
  CHECK(contains(rs_last_error(), "that was never submitted"));
  CHECK(rs_barrier(ctx, "again") == RS_PROTOCOL_ERROR);
  rs_disconnect(ctx);
}

TEST_CASE("a granted buffer without its memory is a protocol error") {
  FakeDaemon::Options options;
  options.answer_allocs = false;
  FakeDaemon daemon(options);
  const rs_config_t c = daemon.config();
  rs_context_t* ctx = nullptr;
  REQUIRE(rs_connect(&c, &ctx) == RS_SUCCESS);
  std::thread answer([&] {
    auto m = daemon.next();
    auto* alloc = m ? std::get_if<wire::AllocBuffer>(&*m) : nullptr;
    CHECK(alloc != nullptr);
    if (!alloc) return daemon.drop_client();
    daemon.send(wire::AllocReply{alloc->request_id, Status::Ok(), 1, alloc->bytes});  // no fd
  });
  void* p = nullptr;
  CHECK(rs_alloc(ctx, 4096, &p) == RS_PROTOCOL_ERROR);
  CHECK(contains(rs_last_error(), "without passing its memory"));
  answer.join();
  rs_disconnect(ctx);
}

}  // namespace test_client_lifecycle
