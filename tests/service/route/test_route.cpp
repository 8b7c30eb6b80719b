// service/route/route.h: the one place that decides how a collective travels.
#include <doctest/doctest.h>

#include "service/route/route.h"

using namespace ringsync;
using namespace ringsync::service::route;
using wire::CollectiveKind;

TEST_CASE("route: allreduces between nodes go by halving-doubling up to the limit, the ring above") {
  const std::uint64_t limit = 256 * 1024;
  CHECK(data_algorithm(limit, CollectiveKind::kAllreduce, 8, 2) == Algorithm::kHalvingDoubling);
  CHECK(data_algorithm(limit, CollectiveKind::kAllreduce, limit, 5) == Algorithm::kHalvingDoubling);
  CHECK(data_algorithm(limit, CollectiveKind::kAllreduce, limit + 1, 5) == Algorithm::kRing);
  // One node has no data plane; other collectives take the ring.
  CHECK(data_algorithm(limit, CollectiveKind::kAllreduce, 8, 1) == Algorithm::kRing);
  for (auto kind : {CollectiveKind::kAllgather, CollectiveKind::kBroadcast, CollectiveKind::kBarrier})
    CHECK(data_algorithm(limit, kind, 8, 4) == Algorithm::kRing);
  // --algorithm ring / rhd.
  CHECK(data_algorithm(0, CollectiveKind::kAllreduce, 0, 3) == Algorithm::kRing);
  CHECK(data_algorithm(kAlways, CollectiveKind::kAllreduce, std::uint64_t{1} << 40, 3) ==
        Algorithm::kHalvingDoubling);
  CHECK(std::string(algorithm_name(Algorithm::kHalvingDoubling)) == "halving-doubling");
}

TEST_CASE("route: --algorithm and --rhd-max-bytes give the limit, and a clear error otherwise") {
  CHECK(*halving_doubling_limit("auto", 1000) == 1000);
  CHECK(*halving_doubling_limit("ring", 1000) == 0);
  CHECK(*halving_doubling_limit("rhd", 1000) == kAlways);
  auto bad = halving_doubling_limit("fastest", 1000);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "algorithm must be auto, ring or rhd, got 'fastest'");
  CHECK(describe_limit(0) == "ring");
  CHECK(describe_limit(kAlways) == "rhd");
  CHECK(describe_limit(256 * 1024) == "auto (halving-doubling allreduces up to 256KiB, ring above)");
}

TEST_CASE("route: a local collective's memory work counts every rank's result once per rank") {
  // 1024 f32 allreduced by 4 ranks: 4 KiB results, written to 4 ranks.
  CHECK(local_work_bytes(CollectiveKind::kAllreduce, 1024, DType::kF32, 4) == 16 * 1024);
  // An allgather's result is every rank's piece: 4 x 4 KiB, written to 4 ranks.
  CHECK(local_work_bytes(CollectiveKind::kAllgather, 1024, DType::kF32, 4) == 64 * 1024);
  CHECK(local_work_bytes(CollectiveKind::kAllgather, 1024, DType::kF32, 4) <= kInlineWorkBytes);
  CHECK(local_work_bytes(CollectiveKind::kAllgather, 1025, DType::kF32, 4) > kInlineWorkBytes);
  CHECK(local_work_bytes(CollectiveKind::kBarrier, 0, DType::kF32, 8) == 0);
}
