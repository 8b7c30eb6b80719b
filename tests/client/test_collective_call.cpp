#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "client/src/collective_call.h"
#include "ringsync/ringsync.h"

namespace test_client_collective_call {

using ringsync::StatusCode;
using ringsync::client::CollectiveCall;
using ringsync::client::validate;
using ringsync::wire::CollectiveKind;

namespace {

float g_send[8];
float g_recv[64];

CollectiveCall call(CollectiveKind kind, std::size_t count = 8) {
  CollectiveCall c;
  c.kind = kind;
  c.name = "w";
  c.send = g_send;
  c.recv = g_recv;
  c.count = count;
  c.dtype = RS_F32;
  c.op = RS_SUM;
  return c;
}

std::string error_of(const CollectiveCall& c, int rank = 0, int size = 4) {
  auto r = validate(c, rank, size);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  return r.status().message();
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("byte sizes of valid calls") {
  auto ar = validate(call(CollectiveKind::kAllreduce), 0, 4);
  REQUIRE(ar.ok());
  CHECK(ar->send == 32);
  CHECK(ar->recv == 32);
  auto ag = validate(call(CollectiveKind::kAllgather), 1, 4);
  REQUIRE(ag.ok());
  CHECK(ag->send == 32);
  CHECK(ag->recv == 128);
  auto barrier = validate(call(CollectiveKind::kBarrier), 0, 4);
  REQUIRE(barrier.ok());
  CHECK(barrier->recv == 0);
}

TEST_CASE("names must be present, non-empty and bounded") {
  auto c = call(CollectiveKind::kAllreduce);
  c.name = nullptr;
  CHECK(contains(error_of(c), "allreduce: the tensor name is NULL"));
  c.name = "";
  CHECK(contains(error_of(c), "the tensor name is empty"));
  const std::string long_name(ringsync::client::kMaxNameBytes + 1, 'n');
  c.name = long_name.c_str();
  CHECK(contains(error_of(c), "bytes long; the limit is"));
  auto b = call(CollectiveKind::kBarrier);
  b.name = nullptr;
  CHECK(contains(error_of(b), "barrier: the tensor name is NULL"));
}

TEST_CASE("dtype, op and root are checked against their ranges") {
  auto c = call(CollectiveKind::kAllreduce);
  c.dtype = 7;
  CHECK(contains(error_of(c), "allreduce 'w': unknown dtype 7"));
  c.dtype = -1;
  CHECK(contains(error_of(c), "unknown dtype -1"));
  c.dtype = 256 + RS_F32;  // would wrap to a valid value as a byte
  CHECK(contains(error_of(c), "unknown dtype 256"));
  c = call(CollectiveKind::kAllreduce);
  c.op = 5;
  CHECK(contains(error_of(c), "unknown reduce op 5"));
  auto g = call(CollectiveKind::kAllgather);
  g.op = 99;  // ignored outside allreduce
  CHECK(validate(g, 0, 4).ok());

  auto b = call(CollectiveKind::kBroadcast);
  b.root = 4;
  CHECK(contains(error_of(b), "root 4 is not a local rank; ranks are 0..3"));
  b.root = -1;
  CHECK(contains(error_of(b), "root -1 is not a local rank"));
}

TEST_CASE("NULL buffers are refused only when bytes would be read or written") {
  auto c = call(CollectiveKind::kAllreduce);
  c.send = nullptr;
  CHECK(contains(error_of(c), "sendbuf is NULL but count is 8"));
  c = call(CollectiveKind::kAllreduce);
  c.recv = nullptr;
  CHECK(contains(error_of(c), "recvbuf is NULL but count is 8"));

  auto empty = call(CollectiveKind::kAllreduce, 0);
  empty.send = nullptr;
  empty.recv = nullptr;
  CHECK(validate(empty, 0, 4).ok());

  auto b = call(CollectiveKind::kBroadcast);
  b.root = 2;
  b.send = nullptr;
  CHECK(validate(b, 1, 4).ok());  // only the root's sendbuf is read
  CHECK(contains(error_of(b, 2, 4), "sendbuf is NULL"));
}

TEST_CASE("element counts that overflow size_t are refused") {
  auto c = call(CollectiveKind::kAllreduce, std::numeric_limits<std::size_t>::max() / 2);
  CHECK(contains(error_of(c), "overflow the address space"));
  auto g = call(CollectiveKind::kAllgather, std::numeric_limits<std::size_t>::max() / 8);
  CHECK(contains(error_of(g), "elements for each of 4 ranks overflow the address space"));
  for (auto kind : {CollectiveKind::kReduceScatter, CollectiveKind::kAlltoall}) {
    auto r = call(kind, std::numeric_limits<std::size_t>::max() / 8);
    CHECK(contains(error_of(r), "elements for each of 4 ranks overflow the address space"));
  }
}

TEST_CASE("alltoall refuses overlapping buffers: it has no in-place form") {
  std::vector<float> data(16);
  auto a = call(CollectiveKind::kAlltoall, 2);
  a.send = data.data();
  a.recv = data.data();
  CHECK(contains(error_of(a), "alltoall cannot run in place"));
  a.recv = data.data() + 4;  // overlaps the 8 elements sent
  CHECK(contains(error_of(a), "overlap"));
  a.recv = data.data() + 8;
  CHECK(validate(a, 0, 4).ok());
}

TEST_CASE("rooted kinds: a buffer the rank's part does not use counts nothing and may be NULL") {
  // reduce: every rank's input is read, the root's output alone is written.
  auto r = call(CollectiveKind::kReduce);
  r.root = 2;
  r.recv = nullptr;
  auto leaf = validate(r, 1, 4);
  REQUIRE(leaf.ok());
  CHECK(leaf->send == 32);
  CHECK(leaf->recv == 0);
  CHECK(contains(error_of(r, 2, 4), "reduce 'w': recvbuf is NULL but count is 8"));
  r.send = nullptr;
  CHECK(contains(error_of(r, 1, 4), "sendbuf is NULL"));
  // gather: the root receives count per rank.
  auto g = call(CollectiveKind::kGather);
  g.root = 3;
  auto root = validate(g, 3, 4);
  REQUIRE(root.ok());
  CHECK(root->send == 32);
  CHECK(root->recv == 128);
  g.recv = nullptr;
  CHECK(validate(g, 0, 4)->recv == 0);
  // scatter: the root's input holds count per rank; only the root passes one.
  auto sc = call(CollectiveKind::kScatter);
  sc.root = 0;
  sc.send = nullptr;
  auto other = validate(sc, 1, 4);
  REQUIRE(other.ok());
  CHECK(other->send == 0);
  CHECK(other->recv == 32);
  CHECK(contains(error_of(sc, 0, 4), "scatter 'w': sendbuf is NULL"));
  sc.send = g_recv;
  CHECK(validate(sc, 0, 4)->send == 128);
  // Their roots are checked like a broadcast's.
  auto bad = call(CollectiveKind::kGather);
  bad.root = 4;
  CHECK(contains(error_of(bad), "gather 'w': root 4 is not a local rank"));
}

}  // namespace test_client_collective_call
