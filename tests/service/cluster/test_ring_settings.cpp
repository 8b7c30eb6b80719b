// service/cluster/ring_settings.h: the settings every node of a ring shares,
// compared whole.
#include <doctest/doctest.h>

#include "service/cluster/ring_settings.h"

namespace test_service_cluster_ring_settings {

using namespace ringsync;
using namespace ringsync::service;
using namespace ringsync::service::cluster;

namespace {

RingSettings node0() {
  return RingSettings{512 * 1024, 1024, 256 * 1024, route::DataRoutes{256 * 1024, 1 << 20, false},
                      integrity::VerifyResults::kSample};
}

}  // namespace

TEST_CASE("ring settings: alike is no difference; each difference names its flag and both values") {
  CHECK(difference(node0(), node0(), "node 2").empty());
  RingSettings s = node0();
  s.chunk_bytes = 1 << 20;
  CHECK(difference(node0(), s, "node 2") ==
        "node 2 runs --ring-chunk-bytes 1048576, node 0 524288; every node must use the same");
  s = node0();
  s.response_cache = 0;
  CHECK(difference(node0(), s, "node 1").find("--response-cache 0, node 0 1024") != std::string::npos);
  s = node0();
  s.inline_bytes = 0;
  CHECK(difference(node0(), s, "node 1").find("--inline-bytes 0, node 0 262144") != std::string::npos);
  s = node0();
  s.routes = route::DataRoutes{};
  CHECK(difference(node0(), s, "node 1") ==
        "node 1 runs --algorithm ring, node 0 auto (allreduces by direct up to 256KiB, halving-doubling up to 1MiB "
        "(direct where the node count is not a power of two), ring above); every node must use the same "
        "(--algorithm, --direct-max-bytes, --rhd-max-bytes)");
  s = node0();
  s.verify_results = integrity::VerifyResults::kAll;
  CHECK(difference(node0(), s, "node 1") ==
        "node 1 runs --verify-results all, node 0 sample; every node must use the same");
}

TEST_CASE("ring settings: a peer's hello carries them whole") {
  peer_wire::PeerHello hello;
  put(node0(), hello);
  CHECK(settings_of(hello) == node0());
  CHECK(hello.ring_chunk_bytes == 512 * 1024);
  CHECK(hello.halving_doubling_folds == false);
  // A field the hello forgot to carry would show here.
  RingSettings other = node0();
  other.routes.fold = true;
  put(other, hello);
  CHECK_FALSE(settings_of(hello) == node0());
}

}  // namespace test_service_cluster_ring_settings
