#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "client/src/placement.h"
#include "ringsync/ringsync.h"

namespace test_client_placement {

using ringsync::Result;
using ringsync::Status;
using ringsync::client::CollectiveCall;
using ringsync::client::Location;
using ringsync::client::Placement;
using ringsync::wire::BufferRef;
using ringsync::wire::CollectiveKind;
using Where = Location::Where;

namespace {

// One pretend shared buffer (id 9); everything else is plain memory.
struct World {
  std::vector<std::int32_t> shared = std::vector<std::int32_t>(64, 0);
  std::vector<std::int32_t> plain = std::vector<std::int32_t>(64, 0);
  std::vector<std::int32_t> other = std::vector<std::int32_t>(64, 0);

  Result<std::optional<BufferRef>> find(const void* p, std::size_t bytes) const {
    const auto* base = reinterpret_cast<const std::byte*>(shared.data());
    const auto* b = static_cast<const std::byte*>(p);
    const std::size_t size = shared.size() * sizeof(std::int32_t);
    if (b < base || b >= base + size) return std::optional<BufferRef>();
    const auto offset = static_cast<std::size_t>(b - base);
    if (bytes > size - offset) return Status::InvalidArgument("runs past the end");
    return std::optional<BufferRef>(BufferRef{9, offset});
  }

  Placement place(CollectiveKind kind, const void* send, void* recv, std::size_t count, int rank,
                  int size, int root = 0) const {
    CollectiveCall c;
    c.kind = kind;
    c.name = "t";
    c.send = send;
    c.recv = recv;
    c.count = count;
    c.dtype = RS_I32;
    c.root = root;
    auto bytes = ringsync::client::validate(c, rank, size);
    REQUIRE(bytes.ok());
    auto p = ringsync::client::place(c, *bytes, rank,
                                     [this](const void* q, std::size_t n) { return find(q, n); });
    REQUIRE(p.ok());
    return std::move(*p);
  }
};

}  // namespace

TEST_CASE("shared send and recv go straight to the daemon") {
  World w;
  auto p = w.place(CollectiveKind::kAllreduce, w.shared.data(), w.shared.data() + 16, 8, 0, 2);
  CHECK(p.send.where == Where::kShared);
  CHECK(p.send.shared.buffer_id == 9);
  CHECK(p.send.shared.offset == 0);
  CHECK(p.recv.where == Where::kShared);
  CHECK(p.recv.shared.offset == 64);
  CHECK(p.bounce_bytes == 0);
  CHECK_FALSE(p.bounced());
}

TEST_CASE("plain memory is bounced in place: one buffer, copied in and out") {
  World w;
  for (int i = 0; i < 8; ++i) w.plain[i] = i + 1;
  auto p = w.place(CollectiveKind::kAllreduce, w.plain.data(), w.other.data(), 8, 0, 2);
  CHECK(p.bounce_bytes == 32);
  CHECK(p.send.where == Where::kBounce);
  CHECK(p.recv.where == Where::kBounce);
  CHECK(p.send.bounce_offset == 0);
  CHECK(p.recv.bounce_offset == 0);
  CHECK(ringsync::client::buffer_ref(p.send, 5).buffer_id == 5);

  std::vector<std::int32_t> bounce(8, 0);
  auto* s = reinterpret_cast<std::byte*>(bounce.data());
  ringsync::client::apply_copy_in(p, s);
  CHECK(bounce[7] == 8);
  for (auto& v : bounce) v *= 10;  // what the daemon would write
  ringsync::client::apply_copy_out(p, s);
  CHECK(w.other[0] == 10);
  CHECK(w.other[7] == 80);
  CHECK(w.plain[7] == 8);  // sendbuf untouched
}

TEST_CASE("a plain sendbuf with a shared recvbuf is copied into recvbuf and runs in place") {
  World w;
  for (int i = 0; i < 4; ++i) w.plain[i] = 7 * i;
  auto p = w.place(CollectiveKind::kAllreduce, w.plain.data(), w.shared.data() + 4, 4, 0, 2);
  CHECK(p.bounce_bytes == 0);
  CHECK(p.send.where == Where::kShared);
  CHECK(p.send.shared.offset == 16);
  CHECK(p.recv.shared.offset == 16);
  ringsync::client::apply_copy_in(p, nullptr);
  CHECK(w.shared[4 + 3] == 21);
  CHECK_FALSE(p.copy_out.has_value());
  CHECK(p.bounced());
}

TEST_CASE("a shared sendbuf with a plain recvbuf stages only the result") {
  World w;
  auto p = w.place(CollectiveKind::kAllreduce, w.shared.data(), w.plain.data(), 4, 0, 2);
  CHECK(p.send.where == Where::kShared);
  CHECK(p.recv.where == Where::kBounce);
  CHECK(p.bounce_bytes == 16);
  CHECK_FALSE(p.copy_in.has_value());
  REQUIRE(p.copy_out.has_value());
  CHECK(p.copy_out->bytes == 16);
}

TEST_CASE("allgather in place stays in place: the slot of this rank") {
  World w;
  const int rank = 2, size = 3, n = 4;
  SUBCASE("shared") {
    auto p = w.place(CollectiveKind::kAllgather, w.shared.data() + rank * n, w.shared.data(), n,
                     rank, size);
    CHECK(p.send.shared.offset == rank * n * 4);
    CHECK(p.recv.shared.offset == 0);
    CHECK_FALSE(p.bounced());
  }
  SUBCASE("plain") {
    for (int i = 0; i < n; ++i) w.plain[rank * n + i] = 100 + i;
    auto p = w.place(CollectiveKind::kAllgather, w.plain.data() + rank * n, w.plain.data(), n, rank,
                     size);
    CHECK(p.bounce_bytes == static_cast<std::size_t>(size * n * 4));
    CHECK(p.send.where == Where::kBounce);
    CHECK(p.send.bounce_offset == static_cast<std::uint64_t>(rank * n * 4));
    CHECK(p.recv.bounce_offset == 0);
    std::vector<std::int32_t> bounce(size * n, -1);
    auto* s = reinterpret_cast<std::byte*>(bounce.data());
    ringsync::client::apply_copy_in(p, s);
    CHECK(bounce[rank * n + 3] == 103);
    CHECK(bounce[0] == -1);
    for (int j = 0; j < rank * n; ++j) bounce[j] = j;  // the other ranks' slots
    ringsync::client::apply_copy_out(p, s);
    CHECK(w.plain[0] == 0);
    CHECK(w.plain[5] == 5);
    CHECK(w.plain[rank * n] == 100);
  }
  SUBCASE("plain send into shared recv copies into the slot") {
    for (int i = 0; i < n; ++i) w.plain[i] = 50 + i;
    auto p = w.place(CollectiveKind::kAllgather, w.plain.data(), w.shared.data(), n, rank, size);
    CHECK(p.send.where == Where::kShared);
    CHECK(p.send.shared.offset == rank * n * 4);
    ringsync::client::apply_copy_in(p, nullptr);
    CHECK(w.shared[rank * n + 1] == 51);
  }
}

TEST_CASE("broadcast: only the root sends; a root in place needs no copy-out") {
  World w;
  auto leaf = w.place(CollectiveKind::kBroadcast, nullptr, w.plain.data(), 4, 1, 3, 0);
  CHECK(leaf.send.where == Where::kNone);
  CHECK(ringsync::client::buffer_ref(leaf.send, 5).buffer_id == 0);
  CHECK(leaf.recv.where == Where::kBounce);
  CHECK(leaf.copy_out.has_value());
  CHECK_FALSE(leaf.copy_in.has_value());

  auto root = w.place(CollectiveKind::kBroadcast, w.plain.data(), w.plain.data(), 4, 0, 3, 0);
  CHECK(root.send.where == Where::kBounce);
  CHECK(root.copy_in.has_value());
  CHECK_FALSE(root.copy_out.has_value());

  auto shared_leaf = w.place(CollectiveKind::kBroadcast, nullptr, w.shared.data(), 4, 2, 3, 0);
  CHECK(shared_leaf.send.where == Where::kNone);
  CHECK(shared_leaf.recv.where == Where::kShared);
  CHECK_FALSE(shared_leaf.bounced());
}

TEST_CASE("zero elements and barriers need no buffers at all") {
  World w;
  auto p = w.place(CollectiveKind::kAllreduce, nullptr, nullptr, 0, 0, 2);
  CHECK(p.send.where == Where::kNone);
  CHECK(p.recv.where == Where::kNone);
  CHECK(p.bounce_bytes == 0);
  auto b = w.place(CollectiveKind::kBarrier, nullptr, nullptr, 0, 0, 2);
  CHECK(b.bounce_bytes == 0);
  CHECK_FALSE(b.bounced());
}

TEST_CASE("a range running past the end of a shared buffer is an error") {
  World w;
  CollectiveCall c;
  c.kind = CollectiveKind::kAllreduce;
  c.name = "t";
  c.send = w.shared.data() + 60;
  c.recv = w.plain.data();
  c.count = 8;
  c.dtype = RS_I32;
  auto bytes = ringsync::client::validate(c, 0, 1);
  REQUIRE(bytes.ok());
  auto p = ringsync::client::place(c, *bytes, 0,
                                   [&](const void* q, std::size_t n) { return w.find(q, n); });
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().message() == "runs past the end");
}

TEST_CASE("reduce-scatter from plain memory: the input is bounced and the result stays in its slot") {
  World w;
  // Rank 1 of 3, 4 elements each: a 12-element input, the result in slot 1.
  auto p = w.place(CollectiveKind::kReduceScatter, w.plain.data(), w.other.data(), 4, 1, 3);
  CHECK(p.bounce_bytes == 48);
  CHECK(p.send.where == Where::kBounce);
  CHECK(p.send.bounce_offset == 0);
  CHECK(p.recv.where == Where::kBounce);
  CHECK(p.recv.bounce_offset == 16);
  REQUIRE(p.copy_out.has_value());
  CHECK(p.copy_out->bounce_offset == 16);
  CHECK(p.copy_out->bytes == 16);
  // A shared input and a plain output: only the output is bounced.
  auto q = w.place(CollectiveKind::kReduceScatter, w.shared.data(), w.other.data(), 4, 1, 3);
  CHECK(q.send.where == Where::kShared);
  CHECK(q.bounce_bytes == 16);
  CHECK(q.recv.bounce_offset == 0);
  CHECK_FALSE(q.copy_in.has_value());
}

TEST_CASE("alltoall from and to plain memory: input and output apart in one bounce buffer") {
  World w;
  for (int i = 0; i < 6; ++i) w.plain[i] = i + 1;
  auto p = w.place(CollectiveKind::kAlltoall, w.plain.data(), w.other.data(), 2, 0, 3);
  CHECK(p.bounce_bytes == 48);
  CHECK(p.send.bounce_offset == 0);
  CHECK(p.recv.bounce_offset == 24);
  std::vector<std::int32_t> bounce(12, 0);
  auto* s = reinterpret_cast<std::byte*>(bounce.data());
  ringsync::client::apply_copy_in(p, s);
  CHECK(bounce[5] == 6);
  for (int i = 6; i < 12; ++i) bounce[i] = 100 + i;  // what the daemon would write
  ringsync::client::apply_copy_out(p, s);
  CHECK(w.other[0] == 106);
  CHECK(w.other[5] == 111);
  // Both shared: no copies at all.
  auto q = w.place(CollectiveKind::kAlltoall, w.shared.data(), w.shared.data() + 8, 2, 0, 3);
  CHECK(q.bounce_bytes == 0);
  CHECK_FALSE(q.bounced());
}

TEST_CASE("rooted kinds: a non-root's reduce or gather places its input alone; a scatter's its output alone") {
  World w;
  for (int i = 0; i < 4; ++i) w.plain[i] = 10 + i;
  auto leaf = w.place(CollectiveKind::kReduce, w.plain.data(), nullptr, 4, 1, 3, 0);
  CHECK(leaf.recv.where == Where::kNone);
  CHECK(leaf.send.where == Where::kBounce);
  CHECK(leaf.bounce_bytes == 16);
  CHECK_FALSE(leaf.copy_out.has_value());
  std::vector<std::int32_t> bounce(4, 0);
  ringsync::client::apply_copy_in(leaf, reinterpret_cast<std::byte*>(bounce.data()));
  CHECK(bounce[3] == 13);
  auto shared_leaf = w.place(CollectiveKind::kGather, w.shared.data(), nullptr, 4, 2, 3, 0);
  CHECK(shared_leaf.send.where == Where::kShared);
  CHECK(shared_leaf.recv.where == Where::kNone);
  CHECK(shared_leaf.bounce_bytes == 0);
  // The gather's root: the whole result, its own input in its slot.
  auto root = w.place(CollectiveKind::kGather, w.plain.data(), w.other.data(), 4, 1, 3, 1);
  CHECK(root.bounce_bytes == 48);
  CHECK(root.send.bounce_offset == 16);
  REQUIRE(root.copy_out.has_value());
  CHECK(root.copy_out->bytes == 48);
  // A scatter's non-root: no input, its block of the result bounced.
  auto scattered = w.place(CollectiveKind::kScatter, nullptr, w.other.data(), 4, 2, 3, 0);
  CHECK(scattered.send.where == Where::kNone);
  CHECK_FALSE(scattered.copy_in.has_value());
  CHECK(scattered.recv.where == Where::kBounce);
  CHECK(scattered.bounce_bytes == 16);
  // Its root: the whole input bounced, its own block left in its slot (in place).
  auto from = w.place(CollectiveKind::kScatter, w.plain.data(), w.other.data(), 4, 0, 3, 0);
  CHECK(from.bounce_bytes == 48);
  CHECK(from.recv.bounce_offset == 0);
  REQUIRE(from.copy_out.has_value());
  CHECK(from.copy_out->bytes == 16);
}

}  // namespace test_client_placement
