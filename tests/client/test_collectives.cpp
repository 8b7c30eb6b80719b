// What the client sends for each kind of buffer, and what the caller sees after
// the (fake) daemon answers: zero copy, bounce, in place, out-of-order completions.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "fake_daemon.h"
#include "ringsync/ringsync.h"

namespace test_client_collectives {

using ringsync::Status;
using ringsync::testing::FakeDaemon;
namespace wire = ringsync::wire;

namespace {

struct Connected {
  explicit Connected(int rank = 0, int size = 1) {
    const rs_config_t c = daemon.config(rank, size);
    REQUIRE(rs_connect(&c, &ctx) == RS_SUCCESS);
  }
  ~Connected() { rs_disconnect(ctx); }
  FakeDaemon daemon;
  rs_context_t* ctx = nullptr;
};

// The daemon's view of the bytes a BufferRef names.
template <typename T>
T* daemon_view(FakeDaemon& d, const wire::BufferRef& ref) {
  std::byte* base = d.buffer(ref.buffer_id);
  REQUIRE(base != nullptr);
  return reinterpret_cast<T*>(base + ref.offset);
}

}  // namespace

TEST_CASE("a shared buffer goes to the daemon by reference, with zero copies") {
  Connected c;
  void* mem = nullptr;
  REQUIRE(rs_alloc(c.ctx, 64 * sizeof(float), &mem) == RS_SUCCESS);
  auto* data = static_cast<float*>(mem);
  for (int i = 0; i < 64; ++i) data[i] = static_cast<float>(i);

  rs_request_t* r = nullptr;
  REQUIRE(rs_allreduce_async(c.ctx, "grad", data + 8, data + 8, 16, RS_F32, RS_AVG, &r) ==
          RS_SUCCESS);
  auto m = c.daemon.expect<wire::Collective>();
  CHECK(m.kind == wire::CollectiveKind::kAllreduce);
  CHECK(m.name == "grad");
  CHECK(m.dtype == ringsync::DType::kF32);
  CHECK(m.op == ringsync::ReduceOp::kAvg);
  CHECK(m.count == 16);
  CHECK_FALSE(m.bounced);
  CHECK(m.send.offset == 8 * sizeof(float));
  CHECK(m.recv.buffer_id == m.send.buffer_id);
  CHECK(m.recv.offset == m.send.offset);
  // The daemon sees the caller's data in place and writes the result there.
  float* seen = daemon_view<float>(c.daemon, m.send);
  CHECK(seen[0] == 8.0f);
  seen[0] = -1.0f;
  c.daemon.complete(m.request_id);
  CHECK(rs_wait(r) == RS_SUCCESS);
  CHECK(data[8] == -1.0f);
  CHECK(rs_free(c.ctx, mem) == RS_SUCCESS);
  auto freed = c.daemon.expect<wire::FreeBuffer>();
  CHECK(freed.buffer_id == m.send.buffer_id);
}

TEST_CASE("plain memory is bounced: copied in before, copied out before completion shows") {
  Connected c;
  std::vector<double> in(1000), out(1000, 0.0);
  std::iota(in.begin(), in.end(), 1.0);
  rs_request_t* r = nullptr;
  REQUIRE(rs_allreduce_async(c.ctx, "loss", in.data(), out.data(), in.size(), RS_F64, RS_SUM, &r) ==
          RS_SUCCESS);
  auto m = c.daemon.expect<wire::Collective>();
  CHECK(m.bounced);
  CHECK(m.send.buffer_id != 0);
  CHECK(m.send.buffer_id == m.recv.buffer_id);  // bounced in place
  double* bounce = daemon_view<double>(c.daemon, m.send);
  CHECK(bounce[999] == 1000.0);
  for (int i = 0; i < 1000; ++i) bounce[i] *= 2;

  CHECK(rs_test(r) == RS_IN_PROGRESS);
  CHECK(rs_wait_timeout(r, 1) == RS_IN_PROGRESS);
  CHECK(out[0] == 0.0);  // nothing copied out before completion
  c.daemon.complete(m.request_id);
  CHECK(rs_wait_timeout(r, -1) == RS_SUCCESS);
  CHECK(out[0] == 2.0);
  CHECK(out[999] == 2000.0);
  CHECK(in[999] == 1000.0);
}

TEST_CASE("bounce buffers are reused across requests of one size class") {
  Connected c;
  std::vector<float> v(100, 1.0f), w(20000, 2.0f);
  for (int round = 0; round < 3; ++round) {
    rs_request_t* r = nullptr;
    REQUIRE(rs_allreduce_async(c.ctx, "v", v.data(), v.data(), v.size(), RS_F32, RS_SUM, &r) ==
            RS_SUCCESS);
    auto m = c.daemon.expect<wire::Collective>();
    c.daemon.complete(m.request_id);
    REQUIRE(rs_wait(r) == RS_SUCCESS);
  }
  CHECK(c.daemon.allocations() == 1);
  rs_request_t* r = nullptr;  // 80 KB: the next class up
  REQUIRE(rs_allreduce_async(c.ctx, "w", w.data(), w.data(), w.size(), RS_F32, RS_SUM, &r) ==
          RS_SUCCESS);
  c.daemon.complete(c.daemon.expect<wire::Collective>().request_id);
  REQUIRE(rs_wait(r) == RS_SUCCESS);
  CHECK(c.daemon.allocations() == 2);
}

TEST_CASE("allgather in place in plain memory: the rank's slot goes in, all slots come out") {
  Connected c(1, 3);
  std::vector<std::int32_t> all(3 * 4, -1);
  for (int i = 0; i < 4; ++i) all[4 + i] = 10 + i;
  rs_request_t* r = nullptr;
  REQUIRE(rs_allgather_async(c.ctx, "ids", all.data() + 4, all.data(), 4, RS_I32, &r) ==
          RS_SUCCESS);
  auto m = c.daemon.expect<wire::Collective>();
  CHECK(m.kind == wire::CollectiveKind::kAllgather);
  CHECK(m.count == 4);
  CHECK(m.send.buffer_id == m.recv.buffer_id);
  CHECK(m.send.offset == m.recv.offset + 4 * sizeof(std::int32_t));
  auto* gathered = daemon_view<std::int32_t>(c.daemon, m.recv);
  CHECK(gathered[4] == 10);
  CHECK(gathered[7] == 13);
  for (int i = 0; i < 4; ++i) {
    gathered[i] = i;
    gathered[8 + i] = 20 + i;
  }
  c.daemon.complete(m.request_id);
  REQUIRE(rs_wait(r) == RS_SUCCESS);
  CHECK(all == std::vector<std::int32_t>{0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23});
}

TEST_CASE("broadcast: a non-root sends nothing and receives into its recvbuf") {
  Connected c(2, 3);
  std::vector<std::int64_t> v(5, 0);
  rs_request_t* r = nullptr;
  REQUIRE(rs_broadcast_async(c.ctx, "params", nullptr, v.data(), v.size(), RS_I64, 0, &r) ==
          RS_SUCCESS);
  auto m = c.daemon.expect<wire::Collective>();
  CHECK(m.kind == wire::CollectiveKind::kBroadcast);
  CHECK(m.root == 0);
  CHECK(m.send.buffer_id == 0);
  CHECK(m.recv.buffer_id != 0);
  auto* result = daemon_view<std::int64_t>(c.daemon, m.recv);
  for (int i = 0; i < 5; ++i) result[i] = 1000 + i;
  c.daemon.complete(m.request_id);
  REQUIRE(rs_wait(r) == RS_SUCCESS);
  CHECK(v == std::vector<std::int64_t>{1000, 1001, 1002, 1003, 1004});
}

TEST_CASE("zero elements send no buffers and allocate nothing") {
  Connected c;
  rs_request_t* r = nullptr;
  REQUIRE(rs_allreduce_async(c.ctx, "empty", nullptr, nullptr, 0, RS_F32, RS_SUM, &r) ==
          RS_SUCCESS);
  auto m = c.daemon.expect<wire::Collective>();
  CHECK(m.count == 0);
  CHECK(m.send.buffer_id == 0);
  CHECK(m.recv.buffer_id == 0);
  c.daemon.complete(m.request_id);
  CHECK(rs_wait(r) == RS_SUCCESS);
  CHECK(c.daemon.allocations() == 0);
}

TEST_CASE("completions in any order complete the right requests") {
  Connected c;
  std::vector<float> a(10, 1.0f), b(10, 2.0f);
  rs_request_t* ra = nullptr;
  rs_request_t* rb = nullptr;
  REQUIRE(rs_allreduce_async(c.ctx, "a", a.data(), a.data(), 10, RS_F32, RS_SUM, &ra) ==
          RS_SUCCESS);
  REQUIRE(rs_allreduce_async(c.ctx, "b", b.data(), b.data(), 10, RS_F32, RS_SUM, &rb) ==
          RS_SUCCESS);
  auto ma = c.daemon.expect<wire::Collective>();
  auto mb = c.daemon.expect<wire::Collective>();
  CHECK(ma.name == "a");
  CHECK(mb.name == "b");
  daemon_view<float>(c.daemon, mb.recv)[0] = 20.0f;
  c.daemon.complete(mb.request_id);
  CHECK(rs_wait(rb) == RS_SUCCESS);
  CHECK(b[0] == 20.0f);
  CHECK(rs_test(ra) == RS_IN_PROGRESS);
  daemon_view<float>(c.daemon, ma.recv)[0] = 10.0f;
  c.daemon.complete(ma.request_id);
  CHECK(rs_wait(ra) == RS_SUCCESS);
  CHECK(a[0] == 10.0f);
}

TEST_CASE("a failed collective reports the daemon's status and leaves recvbuf alone") {
  Connected c;
  std::vector<float> v(10, 3.0f);
  rs_request_t* r = nullptr;
  REQUIRE(rs_allreduce_async(c.ctx, "w", v.data(), v.data(), 10, RS_F32, RS_SUM, &r) == RS_SUCCESS);
  auto m = c.daemon.expect<wire::Collective>();
  daemon_view<float>(c.daemon, m.recv)[0] = 99.0f;
  c.daemon.complete(m.request_id,
                    Status::Mismatch("rank 1 sent 12 elements of 'w', rank 0 sent 10"));
  CHECK(rs_wait(r) == RS_MISMATCH);
  CHECK(std::string(rs_last_error()) == "rank 1 sent 12 elements of 'w', rank 0 sent 10");
  CHECK(v[0] == 3.0f);
}

TEST_CASE("an allocation the daemon refuses is rs_alloc's error") {
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
    if (!alloc) return daemon.drop_client();  // fails rs_alloc instead of hanging it
    CHECK(alloc->bytes == 1 << 20);
    daemon.send(wire::AllocReply{
        alloc->request_id, Status::OutOfMemory("the job's limit of 64 MiB is reached"), 0, 0});
  });
  void* p = nullptr;
  CHECK(rs_alloc(ctx, 1 << 20, &p) == RS_OUT_OF_MEMORY);
  answer.join();
  CHECK(p == nullptr);
  CHECK(std::string(rs_last_error()) == "the job's limit of 64 MiB is reached");
  rs_disconnect(ctx);
}

TEST_CASE("a thread that waits long tells the daemon it is alive, then that it stopped waiting; disconnect says Leave") {
  FakeDaemon::Options options;
  options.heartbeat_ms = 50;
  FakeDaemon daemon(options);
  const rs_config_t c = daemon.config();
  rs_context_t* ctx = nullptr;
  REQUIRE(rs_connect(&c, &ctx) == RS_SUCCESS);
  std::vector<float> data(16, 1.0f);
  rs_request_t* req = nullptr;
  REQUIRE(rs_allreduce_async(ctx, "slow", data.data(), data.data(), data.size(), RS_F32, RS_SUM, &req) ==
          RS_SUCCESS);
  const auto submitted = daemon.expect<wire::Collective>();
  // Nobody answers for 400 ms: the waiting thread sends heartbeats naming
  // the request, and one saying it stopped waiting when its wait ran out.
  std::thread waiter([&] { CHECK(rs_wait_timeout(req, 400) == RS_IN_PROGRESS); });
  int beats = 0;
  bool stopped = false;
  while (auto m = daemon.next(std::chrono::milliseconds(1000))) {
    const auto* beat = std::get_if<wire::Heartbeat>(&*m);
    REQUIRE(beat != nullptr);
    if (beat->waiting_for == 0) {
      stopped = true;
      break;
    }
    CHECK(beat->waiting_for == submitted.request_id);
    ++beats;
  }
  waiter.join();
  CHECK(beats >= 3);
  CHECK(stopped);
  daemon.complete(submitted.request_id);
  CHECK(rs_wait(req) == RS_SUCCESS);
  rs_disconnect(ctx);
  CHECK(std::holds_alternative<wire::Leave>(*daemon.next()));
}

TEST_CASE("a daemon that asks for no heartbeats gets none, however long a thread waits") {
  Connected c;
  std::vector<float> data(16, 1.0f);
  rs_request_t* req = nullptr;
  REQUIRE(rs_allreduce_async(c.ctx, "quiet", data.data(), data.data(), data.size(), RS_F32, RS_SUM, &req) ==
          RS_SUCCESS);
  const auto submitted = c.daemon.expect<wire::Collective>();
  CHECK(rs_wait_timeout(req, 300) == RS_IN_PROGRESS);
  CHECK_FALSE(c.daemon.next(std::chrono::milliseconds(100)).has_value());
  c.daemon.complete(submitted.request_id);
  CHECK(rs_wait(req) == RS_SUCCESS);
}

}  // namespace test_client_collectives
