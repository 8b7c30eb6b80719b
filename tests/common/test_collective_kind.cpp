// common/collective_kind.h: the one table of what each collective kind means.
#include <doctest/doctest.h>

#include <string>

#include "common/collective_kind.h"

namespace test_common_collective_kind {

using namespace ringsync::wire;

TEST_CASE("collective kinds: names, and a row for every kind the wire carries") {
  CHECK(std::string(collective_kind_name(CollectiveKind::kAllreduce)) == "allreduce");
  CHECK(std::string(collective_kind_name(CollectiveKind::kBroadcast)) == "broadcast");
  CHECK(std::string(collective_kind_name(CollectiveKind::kAllgather)) == "allgather");
  CHECK(std::string(collective_kind_name(CollectiveKind::kBarrier)) == "barrier");
  CHECK(std::string(collective_kind_name(CollectiveKind::kReduceScatter)) == "reduce_scatter");
  CHECK(std::string(collective_kind_name(CollectiveKind::kAlltoall)) == "alltoall");
  CHECK(std::string(collective_kind_name(CollectiveKind::kReduce)) == "reduce");
  CHECK(std::string(collective_kind_name(CollectiveKind::kGather)) == "gather");
  CHECK(std::string(collective_kind_name(CollectiveKind::kScatter)) == "scatter");
  for (std::uint8_t raw = 0; raw <= static_cast<std::uint8_t>(kLastCollectiveKind); ++raw) {
    CHECK(is_collective_kind(raw));
    CHECK(std::string(collective_kind_name(static_cast<CollectiveKind>(raw))) != "invalid");
  }
  CHECK_FALSE(is_collective_kind(static_cast<std::uint8_t>(kLastCollectiveKind) + 1));
  CHECK(std::string(collective_kind_name(static_cast<CollectiveKind>(200))) == "invalid");
}

TEST_CASE("collective kinds: each rank's send and receive extent among n ranks") {
  const std::uint64_t count = 7, ranks = 3;
  auto is = [](Extent e, std::uint64_t send, std::uint64_t recv) { return e.send == send && e.recv == recv; };
  CHECK(is(extent(CollectiveKind::kAllreduce, count, ranks), 7, 7));
  CHECK(is(extent(CollectiveKind::kBroadcast, count, ranks), 7, 7));
  CHECK(is(extent(CollectiveKind::kAllgather, count, ranks), 7, 21));
  CHECK(is(extent(CollectiveKind::kReduceScatter, count, ranks), 21, 7));
  CHECK(is(extent(CollectiveKind::kAlltoall, count, ranks), 21, 21));
  CHECK(is(extent(CollectiveKind::kBarrier, count, ranks), 0, 0));
  // The rooted kinds' figures are the root's.
  CHECK(is(extent(CollectiveKind::kReduce, count, ranks), 7, 7));
  CHECK(is(extent(CollectiveKind::kGather, count, ranks), 7, 21));
  CHECK(is(extent(CollectiveKind::kScatter, count, ranks), 21, 7));
  CHECK(extent(CollectiveKind::kAllgather, count, ranks).payload() == 21);
}

TEST_CASE("collective kinds: whose inputs are read, which arguments matter, what in place means") {
  CHECK(reads_send(CollectiveKind::kAllreduce, 2, 0));
  CHECK(reads_send(CollectiveKind::kBroadcast, 2, 2));
  CHECK_FALSE(reads_send(CollectiveKind::kBroadcast, 1, 2));
  CHECK_FALSE(reads_send(CollectiveKind::kBarrier, 0, 0));
  CHECK(reads_send(CollectiveKind::kScatter, 1, 1));
  CHECK_FALSE(reads_send(CollectiveKind::kScatter, 0, 1));
  CHECK(reads_send(CollectiveKind::kReduce, 0, 1));
  // Whose outputs are written: a reduce's and a gather's root alone.
  CHECK(writes_recv(CollectiveKind::kAllreduce, 2, 0));
  CHECK(writes_recv(CollectiveKind::kBroadcast, 1, 2));
  CHECK(writes_recv(CollectiveKind::kReduce, 2, 2));
  CHECK_FALSE(writes_recv(CollectiveKind::kReduce, 1, 2));
  CHECK(writes_recv(CollectiveKind::kGather, 0, 0));
  CHECK_FALSE(writes_recv(CollectiveKind::kGather, 3, 0));
  CHECK(writes_recv(CollectiveKind::kScatter, 3, 0));
  CHECK_FALSE(writes_recv(CollectiveKind::kBarrier, 0, 0));
  CHECK(reduces(CollectiveKind::kAllreduce));
  CHECK(reduces(CollectiveKind::kReduceScatter));
  CHECK(reduces(CollectiveKind::kReduce));
  CHECK_FALSE(reduces_to_all(CollectiveKind::kReduce));  // the root's alone
  CHECK_FALSE(reduces(CollectiveKind::kAllgather));
  CHECK(reduces_to_all(CollectiveKind::kAllreduce));
  CHECK_FALSE(reduces_to_all(CollectiveKind::kReduceScatter));  // each rank a different block
  CHECK(traits(CollectiveKind::kBroadcast).rooted);
  CHECK_FALSE(traits(CollectiveKind::kAllreduce).rooted);
  for (CollectiveKind k : {CollectiveKind::kReduce, CollectiveKind::kGather, CollectiveKind::kScatter}) {
    CHECK(traits(k).rooted);
    CHECK_FALSE(traits(k).shared_result);
    CHECK_FALSE(traits(k).fuses);
  }
  CHECK(traits(CollectiveKind::kGather).in_place == InPlace::kSendIsOwnSlot);
  CHECK(traits(CollectiveKind::kScatter).in_place == InPlace::kRecvIsOwnSlot);
  CHECK_FALSE(moves_data(CollectiveKind::kBarrier));
  CHECK(moves_data(CollectiveKind::kAlltoall));
  CHECK(traits(CollectiveKind::kAllgather).in_place == InPlace::kSendIsOwnSlot);
  CHECK(traits(CollectiveKind::kReduceScatter).in_place == InPlace::kRecvIsOwnSlot);
  CHECK(traits(CollectiveKind::kAlltoall).in_place == InPlace::kNever);
  CHECK(traits(CollectiveKind::kAllreduce).in_place == InPlace::kSame);
  // Only results every node holds alike can be compared between nodes.
  CHECK(traits(CollectiveKind::kAllgather).shared_result);
  CHECK_FALSE(traits(CollectiveKind::kAlltoall).shared_result);
  // Fusion packs allreduces only.
  CHECK(traits(CollectiveKind::kAllreduce).fuses);
  CHECK_FALSE(traits(CollectiveKind::kBroadcast).fuses);
}

TEST_CASE("collective kinds: nccl-tests' bus-bandwidth factors") {
  CHECK(traits(CollectiveKind::kAllreduce).bus_factor(4) == doctest::Approx(1.5));
  CHECK(traits(CollectiveKind::kAllgather).bus_factor(4) == doctest::Approx(0.75));
  CHECK(traits(CollectiveKind::kReduceScatter).bus_factor(4) == doctest::Approx(0.75));
  CHECK(traits(CollectiveKind::kAlltoall).bus_factor(4) == doctest::Approx(0.75));
  CHECK(traits(CollectiveKind::kBroadcast).bus_factor(4) == doctest::Approx(1.0));
  CHECK(traits(CollectiveKind::kReduce).bus_factor(4) == doctest::Approx(1.0));
  CHECK(traits(CollectiveKind::kGather).bus_factor(4) == doctest::Approx(0.75));
  CHECK(traits(CollectiveKind::kScatter).bus_factor(4) == doctest::Approx(0.75));
  CHECK(traits(CollectiveKind::kBarrier).bus_factor(4) == doctest::Approx(0.0));
  // One rank: the payload itself.
  CHECK(traits(CollectiveKind::kAllreduce).bus_factor(1) == doctest::Approx(1.0));
  CHECK(traits(CollectiveKind::kAlltoall).bus_factor(1) == doctest::Approx(1.0));
}

}  // namespace test_common_collective_kind
