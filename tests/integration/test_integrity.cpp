// The end-to-end result check (--verify-results) with real daemons on
// loopback: a node whose copy of a result is corrupted (the test-only hook
// RINGSYNC_TEST_CORRUPT_RESULT, service/integrity/test_corruption.h) makes the
// collective fail on every rank of every node, naming that node, and counts
// ringsync_integrity_failures_total; with the check off, or on without
// corruption (f32, and i32 sums, which `all` also checks against the inputs),
// results are right.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cluster_fixture.h"

namespace test_integration_integrity {

using namespace ringsync;
using namespace ringsync::test;
using namespace std::chrono_literals;

namespace {

// 3 nodes of 1 rank; every daemon gets `flags`, and `corrupt_node` (-1: none)
// flips a bit of its results.
ClusterOptions three_nodes(std::vector<std::string> flags, int corrupt_node) {
  ClusterOptions o;
  o.nodes = 3;
  o.local_size = 1;
  o.extra_flags = std::move(flags);
  if (corrupt_node >= 0) o.daemon_env["RINGSYNC_TEST_CORRUPT_RESULT"] = std::to_string(corrupt_node);
  return o;
}


}  // namespace

TEST_CASE("integrity: with --verify-results all a corrupted copy fails the allreduce on every rank, naming the node") {
  ClusterFixture cluster(three_nodes({"--verify-results=all"}, 1));
  // 1 MiB: past --inline-bytes, so it runs between the nodes (the direct
  // algorithm, on 3 nodes) and is checked. In place: the failed result never
  // reached the ranks' buffers.
  CHECK(run_job(cluster, "corrupt-all", {"expect-error", "mismatch", "node 1 holds 0x", "262144", "intact"}));
  for (int node = 0; node < cluster.nodes(); ++node) {
    CAPTURE(node);
    const std::string metrics = cluster.metrics(node);
    CHECK(metric_value(metrics, "ringsync_integrity_failures_total") == 1.0);
    // The ring itself is fine: nothing was declared lost.
    CHECK(metric_value(metrics, "ringsync_peers_lost_total").value_or(0) == 0.0);
  }
  CHECK(cluster.log(1).find("RINGSYNC_TEST_CORRUPT_RESULT is set") != std::string::npos);
  CHECK(cluster.stop_all() == "");
}

TEST_CASE("integrity: with --verify-results sample a corruption in a sampled window is caught") {
  ClusterFixture cluster(three_nodes({"--verify-results=sample"}, 2));
  // 4 MiB: larger than the windows together, so only the sample is read; the
  // hook flips a bit of the first window. In place, by the ring (past
  // --rhd-max-bytes), which reads each rank's input where it lies: the failed
  // result never reached the ranks' buffers.
  CHECK(run_job(cluster, "corrupt-sample", {"expect-error", "mismatch", "node 2 holds 0x", "1048576", "intact"}));
  for (int node = 0; node < cluster.nodes(); ++node)
    CHECK(metric_value(cluster.metrics(node), "ringsync_integrity_failures_total") == 1.0);
  CHECK(cluster.stop_all() == "");
}

TEST_CASE("integrity: results are right with the check off, and with it on when nothing is corrupted") {
  {
    // Off: the hook has nothing to aim at and the check adds nothing, not even its series.
    ClusterFixture cluster(three_nodes({"--verify-results=off"}, 1));
    CHECK(run_job(cluster, "off", {"verify-loop", "f32", "262144", "4"}));
    for (int node = 0; node < cluster.nodes(); ++node)
      CHECK_FALSE(metric_value(cluster.metrics(node), "ringsync_integrity_failures_total").has_value());
    CHECK(cluster.stop_all() == "");
  }
  for (const char* mode : {"sample", "all"}) {
    CAPTURE(mode);
    ClusterFixture cluster(three_nodes({std::string("--verify-results=") + mode}, -1));
    CHECK(run_job(cluster, std::string("clean-") + mode, {"verify-loop", "f32", "1048577", "4"}));
    // i32 sums: under all, also the inputs' linear checksums against the result's.
    CHECK(run_job(cluster, std::string("clean-i32-") + mode, {"verify-loop", "i32", "1048577", "4"}));
    for (int node = 0; node < cluster.nodes(); ++node)
      CHECK(metric_value(cluster.metrics(node), "ringsync_integrity_failures_total") == 0.0);
    CHECK(cluster.stop_all() == "");
  }
}

}  // namespace test_integration_integrity
