// service/route/route.h: the one place that decides how a collective travels.
#include <doctest/doctest.h>

#include "service/route/route.h"

namespace test_service_route_route {

using namespace ringsync;
using namespace ringsync::service::route;
using wire::CollectiveKind;

namespace {

// The path a planned operation of `bytes` takes among `nodes` nodes.
Path running(const DataRoutes& routes, CollectiveKind kind, std::uint64_t bytes, std::uint32_t nodes) {
  Query q;
  q.kind = kind;
  q.bytes = bytes;
  q.alone = false;
  q.nodes = nodes;
  return choose(Stage::kRunning, q, Limits{0, routes}).path;
}

Query on_node(CollectiveKind kind, std::uint64_t bytes, std::uint32_t nodes) {
  Query q;
  q.kind = kind;
  q.bytes = bytes;
  q.alone = nodes == 1;
  q.nodes = nodes;
  return q;
}

}  // namespace

TEST_CASE("route: allreduces between nodes go direct, then by halving-doubling, then by the ring") {
  const DataRoutes routes{64 * 1024, 1024 * 1024};
  CHECK(running(routes, CollectiveKind::kAllreduce, 8, 2) == Path::kDirect);
  CHECK(running(routes, CollectiveKind::kAllreduce, 64 * 1024, 5) == Path::kDirect);
  CHECK(running(routes, CollectiveKind::kAllreduce, 64 * 1024 + 1, 5) == Path::kHalvingDoubling);
  CHECK(running(routes, CollectiveKind::kAllreduce, 1024 * 1024, 3) == Path::kHalvingDoubling);
  CHECK(running(routes, CollectiveKind::kAllreduce, 1024 * 1024 + 1, 3) == Path::kRing);
  // One node has no data plane; other collectives take the ring, a barrier none.
  CHECK(running(routes, CollectiveKind::kAllreduce, 8, 1) == Path::kRing);
  for (auto kind : {CollectiveKind::kAllgather, CollectiveKind::kBroadcast, CollectiveKind::kReduceScatter,
                    CollectiveKind::kAlltoall})
    CHECK(running(routes, kind, 8, 4) == Path::kRing);
  CHECK(running(routes, CollectiveKind::kBarrier, 0, 4) == Path::kPlanOnly);
  // Without the direct limit, halving-doubling starts at the smallest.
  CHECK(running(DataRoutes{0, 1024}, CollectiveKind::kAllreduce, 8, 4) == Path::kHalvingDoubling);
  // auto: halving-doubling needs a power of two; elsewhere the direct
  // algorithm takes its sizes (halving-doubling would fold).
  const DataRoutes automatic{0, 1024 * 1024, /*fold=*/false};
  for (std::uint32_t nodes : {2u, 4u, 8u, 16u})
    CHECK(running(automatic, CollectiveKind::kAllreduce, 4096, nodes) == Path::kHalvingDoubling);
  for (std::uint32_t nodes : {3u, 5u, 6u, 7u, 11u}) {
    CHECK(running(automatic, CollectiveKind::kAllreduce, 4096, nodes) == Path::kDirect);
    CHECK(running(automatic, CollectiveKind::kAllreduce, 2 * 1024 * 1024, nodes) == Path::kRing);
    // --algorithm rhd folds.
    CHECK(running(DataRoutes{0, kAlways}, CollectiveKind::kAllreduce, 4096, nodes) == Path::kHalvingDoubling);
  }
  // --algorithm ring / rhd / direct.
  CHECK(running(DataRoutes{}, CollectiveKind::kAllreduce, 0, 3) == Path::kRing);
  CHECK(running(DataRoutes{0, kAlways}, CollectiveKind::kAllreduce, std::uint64_t{1} << 40, 3) ==
        Path::kHalvingDoubling);
  CHECK(running(DataRoutes{kAlways, 0}, CollectiveKind::kAllreduce, std::uint64_t{1} << 40, 11) == Path::kDirect);
  CHECK(std::string(path_name(Path::kHalvingDoubling)) == "halving-doubling");
  CHECK(std::string(path_name(Path::kDirect)) == "direct");
  CHECK(std::string(path_name(Path::kRing)) == "ring");
  CHECK(std::string(path_name(Path::kStagedRing)) == "staged ring");
}

TEST_CASE("route: one GPU allreduce staged chunk by chunk takes the staged ring, before any algorithm") {
  Query q;
  q.kind = CollectiveKind::kAllreduce;
  q.bytes = 8;
  q.alone = false;
  q.nodes = 2;
  q.staged_chunk_by_chunk = true;
  CHECK(choose(Stage::kRunning, q, Limits{0, DataRoutes{kAlways, 0}}).path == Path::kStagedRing);
  CHECK(staged_chunk_by_chunk(CollectiveKind::kAllreduce, kStagedRingBytes, 2));
  CHECK_FALSE(staged_chunk_by_chunk(CollectiveKind::kAllreduce, kStagedRingBytes - 1, 2));
  CHECK_FALSE(staged_chunk_by_chunk(CollectiveKind::kAllreduce, kStagedRingBytes, 1));
  CHECK_FALSE(staged_chunk_by_chunk(CollectiveKind::kAllgather, kStagedRingBytes, 2));
}

TEST_CASE("route: a job of one node runs on the GPU, at once, on the control thread or on the pool") {
  const Limits limits{256 * 1024, {}};
  Query q = on_node(CollectiveKind::kAllreduce, 4096, 1);
  q.local_work_bytes = 4096 * 4;
  CHECK(choose(Stage::kOnNode, q, limits).path == Path::kLocalInline);
  q.local_work_bytes = kInlineWorkBytes + 1;
  CHECK(choose(Stage::kOnNode, q, limits).path == Path::kLocalPool);
  q.device = true;
  CHECK(choose(Stage::kOnNode, q, limits).path == Path::kLocalDevice);
  q.bytes = 0;  // nothing to move, on the GPU too
  CHECK(choose(Stage::kOnNode, q, limits).path == Path::kLocalNothing);
  CHECK(choose(Stage::kOnNode, on_node(CollectiveKind::kBarrier, 0, 1), limits).path == Path::kLocalNothing);
  CHECK_FALSE(choose(Stage::kOnNode, q, limits).why.empty());
}

TEST_CASE("route: small allreduces between nodes are exchanged directly, the limit shrinking with N(N-1)/2") {
  CHECK(direct_limit(32 * 1024, 1) == 0);
  CHECK(direct_limit(32 * 1024, 2) == 32 * 1024);
  CHECK(direct_limit(32 * 1024, 3) == 32 * 1024 / 3);
  CHECK(direct_limit(32 * 1024, 4) == 32 * 1024 / 6);
  CHECK(direct_limit(32 * 1024, 8) == 32 * 1024 / 28);
  CHECK(direct_limit(0, 2) == 0);
  const Limits limits{32, {}};
  auto path = [&](CollectiveKind kind, std::uint64_t bytes) {
    return choose(Stage::kOnNode, on_node(kind, bytes, 2), limits).path;
  };
  CHECK(path(CollectiveKind::kAllreduce, 32) == Path::kDirectExchange);
  CHECK(path(CollectiveKind::kAllreduce, 33) == Path::kNegotiation);
  CHECK(path(CollectiveKind::kAllreduce, 0) == Path::kNegotiation);
  CHECK(path(CollectiveKind::kBroadcast, 32) == Path::kNegotiation);
  CHECK(choose(Stage::kOnNode, on_node(CollectiveKind::kAllreduce, 1, 2), Limits{0, {}}).path == Path::kNegotiation);
  // GPU tensors take part too (with no data: they are then negotiated).
  Query gpu = on_node(CollectiveKind::kAllreduce, 8, 2);
  gpu.device = true;
  CHECK(choose(Stage::kOnNode, gpu, limits).path == Path::kDirectExchange);
}

TEST_CASE("route: node 0 answers small allreduces with the plan when every node sent its reduction") {
  CHECK(inline_limit(64 * 1024, 1) == 64 * 1024);
  CHECK(inline_limit(64 * 1024, 2) == 64 * 1024);
  CHECK(inline_limit(64 * 1024, 4) == 32 * 1024);
  CHECK(inline_limit(64 * 1024, 8) == 16 * 1024);
  CHECK(inline_limit(0, 8) == 0);
  const Limits limits{64, {}};
  Query q = on_node(CollectiveKind::kAllreduce, 32, 4);
  CHECK(offers_local_reduction(q, limits));
  q.every_node_sent_data = true;
  CHECK(choose(Stage::kPlanning, q, limits).path == Path::kInline);
  q.bytes = 33;  // past 64 x 2/4
  CHECK_FALSE(offers_local_reduction(q, limits));
  CHECK(choose(Stage::kPlanning, q, limits).path == Path::kPlanned);
  q.bytes = 32;
  q.every_node_sent_data = false;
  CHECK(choose(Stage::kPlanning, q, limits).path == Path::kPlanned);
  q.device = true;  // GPU buffers: no local reduction in host memory
  CHECK_FALSE(offers_local_reduction(q, limits));
  CHECK_FALSE(offers_local_reduction(on_node(CollectiveKind::kAllgather, 8, 4), limits));
  // GPU buffers of several nodes go through host memory, when there is data.
  Query staged = on_node(CollectiveKind::kAllgather, 8, 2);
  staged.device = true;
  CHECK(stages_through_host(staged));
  staged.bytes = 0;
  CHECK_FALSE(stages_through_host(staged));
  CHECK_FALSE(stages_through_host(on_node(CollectiveKind::kAllgather, 8, 2)));
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

}  // namespace test_service_route_route
