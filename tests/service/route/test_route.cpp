// service/route/route.h: the one place that decides how a collective travels.
#include <doctest/doctest.h>

#include "service/route/route.h"

using namespace ringsync;
using namespace ringsync::service::route;
using wire::CollectiveKind;

TEST_CASE("route: allreduces between nodes go direct, then by halving-doubling, then by the ring") {
  const DataRoutes routes{64 * 1024, 1024 * 1024};
  CHECK(data_algorithm(routes, CollectiveKind::kAllreduce, 8, 2) == Algorithm::kDirect);
  CHECK(data_algorithm(routes, CollectiveKind::kAllreduce, 64 * 1024, 5) == Algorithm::kDirect);
  CHECK(data_algorithm(routes, CollectiveKind::kAllreduce, 64 * 1024 + 1, 5) == Algorithm::kHalvingDoubling);
  CHECK(data_algorithm(routes, CollectiveKind::kAllreduce, 1024 * 1024, 3) == Algorithm::kHalvingDoubling);
  CHECK(data_algorithm(routes, CollectiveKind::kAllreduce, 1024 * 1024 + 1, 3) == Algorithm::kRing);
  // One node has no data plane; other collectives take the ring.
  CHECK(data_algorithm(routes, CollectiveKind::kAllreduce, 8, 1) == Algorithm::kRing);
  for (auto kind : {CollectiveKind::kAllgather, CollectiveKind::kBroadcast, CollectiveKind::kBarrier})
    CHECK(data_algorithm(routes, kind, 8, 4) == Algorithm::kRing);
  // Without the direct limit, halving-doubling starts at the smallest.
  CHECK(data_algorithm(DataRoutes{0, 1024}, CollectiveKind::kAllreduce, 8, 4) == Algorithm::kHalvingDoubling);
  // auto: halving-doubling needs a power of two; elsewhere the direct
  // algorithm takes its sizes (halving-doubling would fold).
  const DataRoutes automatic{0, 1024 * 1024, /*fold=*/false};
  for (std::uint32_t nodes : {2u, 4u, 8u, 16u})
    CHECK(data_algorithm(automatic, CollectiveKind::kAllreduce, 4096, nodes) == Algorithm::kHalvingDoubling);
  for (std::uint32_t nodes : {3u, 5u, 6u, 7u, 11u}) {
    CHECK(data_algorithm(automatic, CollectiveKind::kAllreduce, 4096, nodes) == Algorithm::kDirect);
    CHECK(data_algorithm(automatic, CollectiveKind::kAllreduce, 2 * 1024 * 1024, nodes) == Algorithm::kRing);
    // --algorithm rhd folds.
    CHECK(data_algorithm(DataRoutes{0, kAlways}, CollectiveKind::kAllreduce, 4096, nodes) ==
          Algorithm::kHalvingDoubling);
  }
  // --algorithm ring / rhd / direct.
  CHECK(data_algorithm(DataRoutes{}, CollectiveKind::kAllreduce, 0, 3) == Algorithm::kRing);
  CHECK(data_algorithm(DataRoutes{0, kAlways}, CollectiveKind::kAllreduce, std::uint64_t{1} << 40, 3) ==
        Algorithm::kHalvingDoubling);
  CHECK(data_algorithm(DataRoutes{kAlways, 0}, CollectiveKind::kAllreduce, std::uint64_t{1} << 40, 11) ==
        Algorithm::kDirect);
  CHECK(std::string(algorithm_name(Algorithm::kHalvingDoubling)) == "halving-doubling");
  CHECK(std::string(algorithm_name(Algorithm::kDirect)) == "direct");
  CHECK(std::string(algorithm_name(Algorithm::kRing)) == "ring");
}

TEST_CASE("route: --algorithm, --direct-max-bytes and --rhd-max-bytes give the routes, and a clear error otherwise") {
  CHECK(*data_routes("auto", 100, 1000) == DataRoutes{100, 1000, /*fold=*/false});
  CHECK(*data_routes("ring", 100, 1000) == DataRoutes{});
  CHECK(*data_routes("rhd", 100, 1000) == DataRoutes{0, kAlways});
  CHECK(*data_routes("direct", 100, 1000) == DataRoutes{kAlways, 0});
  auto bad = data_routes("fastest", 100, 1000);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "algorithm must be auto, ring, rhd or direct, got 'fastest'");
  CHECK(describe(DataRoutes{}) == "ring");
  CHECK(describe(DataRoutes{0, kAlways}) == "rhd");
  CHECK(describe(DataRoutes{kAlways, 0}) == "direct");
  CHECK(describe(DataRoutes{0, 256 * 1024}) == "auto (allreduces by halving-doubling up to 256KiB, ring above)");
  CHECK(describe(DataRoutes{256 * 1024, 1024 * 1024}) ==
        "auto (allreduces by direct up to 256KiB, halving-doubling up to 1MiB, ring above)");
  CHECK(describe(*data_routes("auto", 0, 1024 * 1024)) ==
        "auto (allreduces by halving-doubling up to 1MiB (direct where the node count is not a power of two), ring "
        "above)");
  // A halving-doubling limit under the direct one never applies.
  CHECK(describe(DataRoutes{2 * 1024 * 1024, 1024 * 1024}) == "auto (allreduces by direct up to 2MiB, ring above)");
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
